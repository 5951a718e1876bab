//! The metrics endpoint (`--metrics-addr`) scraped by a real Prometheus: its rates, quantiles
//! and final counters agree with summary.json, and every metric the Grafana dashboard queries
//! is one a scrape serves. Prometheus is Debian's (`scripts/setup` installs it), found through
//! `$EMQ_PROMETHEUS` or PATH; without it the soak skips, and fails under `CI=true`.

mod support;

use std::collections::BTreeSet;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime};

use emq_bench::metrics::cumulative::BOUNDS_US;
use serde_json::Value;
use support::endpoint::http_get;

fn emq_bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_emq-bench")).args(args).output().expect("run emq-bench")
}

#[test]
fn a_malformed_metrics_address_exits_2_naming_the_flag() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let out = emq_bench(&["run", "smoke", "--metrics-addr", "9464", "--out", out.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--metrics-addr") && err.contains("HOST:PORT"), "{err}");
}

#[test]
fn a_metrics_port_in_use_exits_2_before_any_server_starts() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let out = emq_bench(&["run", "smoke", "--metrics-addr", &addr, "--out", out.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--metrics-addr") && err.contains(&addr), "{err}");
    let folders = std::fs::read_dir(tmp.path().join("out")).map_or(0, |entries| entries.count());
    assert_eq!(folders, 0, "no results folder: nothing ran");
}

/// Debian's prometheus (or `$EMQ_PROMETHEUS`); `None` when missing outside CI.
fn prometheus_bin() -> Option<PathBuf> {
    let found = match std::env::var_os("EMQ_PROMETHEUS") {
        Some(path) => Some(PathBuf::from(path)),
        None => std::env::var_os("PATH")
            .into_iter()
            .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
            .map(|dir| dir.join("prometheus"))
            .find(|p| p.is_file()),
    };
    if found.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "no prometheus on PATH nor $EMQ_PROMETHEUS (scripts/setup installs Debian's as root)"
        );
        eprintln!("skipped: no prometheus on PATH nor $EMQ_PROMETHEUS (scripts/setup installs Debian's)");
    }
    found
}

/// A free loopback port (released for the process that binds it next).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A Prometheus scraping `target` every second, its data in `dir`; killed on drop.
struct Prometheus {
    child: Child,
    addr: SocketAddr,
}

impl Prometheus {
    fn start(bin: &Path, dir: &Path, target: SocketAddr) -> Prometheus {
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: emq-bench\n    \
                 static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let child = Command::new(bin)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
            .spawn()
            .expect("start prometheus");
        let prometheus = Prometheus { child, addr };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !matches!(http_get(addr, "/-/ready"), Ok((200, _))) {
            assert!(Instant::now() < deadline, "prometheus not ready within 30 s: see {}", dir.display());
            std::thread::sleep(Duration::from_millis(200));
        }
        prometheus
    }

    /// An instant query's vector result at `at` (s since the Unix epoch).
    fn query(&self, promql: &str, at: f64) -> Vec<Value> {
        let q = percent_encoding::utf8_percent_encode(promql, percent_encoding::NON_ALPHANUMERIC);
        let (status, body) = http_get(self.addr, &format!("/api/v1/query?query={q}&time={at:.3}")).unwrap();
        assert_eq!(status, 200, "{promql}: {body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        v["data"]["result"].as_array().cloned().unwrap_or_default()
    }

    /// Each series' value of `promql` at `at`, by the value of `label`.
    fn by_label(&self, promql: &str, label: &str, at: f64) -> Vec<(String, f64)> {
        self.query(promql, at)
            .iter()
            .map(|s| {
                let value = s["value"][1].as_str().unwrap().parse::<f64>().unwrap();
                (s["metric"][label].as_str().unwrap_or_default().to_string(), value)
            })
            .collect()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn now_s() -> f64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs_f64()
}

/// The position in [`BOUNDS_US`] of the bucket holding `us` (`BOUNDS_US.len()` is `+Inf`).
fn bucket_of(us: f64) -> usize {
    BOUNDS_US.partition_point(|&b| (b as f64) < us)
}

/// Every `emq_*` name in the dashboard's queries (`expr` and the variables' `query`).
fn dashboard_metric_names() -> BTreeSet<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/grafana/emq-bench.json");
    let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut exprs = Vec::new();
    fn walk(v: &Value, exprs: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                for (key, value) in map {
                    match (key.as_str(), value) {
                        ("expr" | "query", Value::String(text)) => exprs.push(text.clone()),
                        _ => walk(value, exprs),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|item| walk(item, exprs)),
            _ => {}
        }
    }
    walk(&dashboard, &mut exprs);
    assert!(exprs.len() >= 10, "the dashboard's queries: {exprs:?}");
    let mut names = BTreeSet::new();
    for expr in exprs {
        let bytes = expr.as_bytes();
        let mut at = 0;
        while let Some(found) = expr[at..].find("emq_") {
            let start = at + found;
            let boundary = start == 0 || !(bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_');
            let end = start
                + expr[start..].find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(expr.len() - start);
            if boundary {
                names.insert(expr[start..end].to_string());
            }
            at = end;
        }
    }
    names
}

/// A soak of ~18 s at 300 jobs/s (the smoke scenario's every verb, open loop) served at
/// `--metrics-addr 127.0.0.1:0` and scraped every second by Prometheus.
#[test]
fn prometheus_sees_the_rates_quantiles_and_final_counts_summary_json_holds() {
    let Some(bin) = prometheus_bin() else { return };
    let server = support::server();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let launched = now_s();
    let mut run = Command::new(env!("CARGO_BIN_EXE_emq-bench"))
        .args(["run", "smoke", "--duration", "18s", "--quiet", "--metrics-addr", "127.0.0.1:0"])
        .args(["--metrics-linger", "4s", "--url", &server.url(), "--out", out.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The address bound is the first thing said on stderr.
    let (endpoint, said, rest) = support::endpoint::serving(&mut run);
    let prometheus = Prometheus::start(&bin, tmp.path(), endpoint);
    let status = run.wait().unwrap();
    let said = said + &rest.join().unwrap();
    assert!(status.success(), "emq-bench: {status}: {said}");
    let ended = now_s();

    let summary: Value = serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let scripts = summary["scripts"].as_array().unwrap();
    let script = |name: &str| scripts.iter().find(|s| s["script"] == name).unwrap_or_else(|| panic!("{name}"));

    // The final state was scraped (the linger holds it up for 4 scrapes), and the run's counts
    // are summary.json's exactly. Staleness markers end the series at the exit: read the last
    // sample before them.
    let finished = prometheus.by_label("max_over_time(emq_run_finished[2m])", "", ended);
    assert_eq!(finished.first().map(|(_, v)| *v), Some(1.0), "no scrape saw the end: {said}");
    let ok = prometheus.by_label(r#"last_over_time(emq_calls_total{outcome="ok"}[2m])"#, "script", ended);
    let errors = prometheus.by_label(r#"last_over_time(emq_calls_total{outcome="error"}[2m])"#, "script", ended);
    assert!(ok.len() >= 5, "scripts scraped: {ok:?}");
    for s in scripts {
        let name = s["script"].as_str().unwrap();
        let find = |series: &[(String, f64)]| series.iter().find(|(n, _)| n == name).map(|(_, v)| *v as u64);
        let error_calls = s["calls"].as_u64().unwrap() - s["ok"].as_u64().unwrap();
        assert_eq!(find(&ok), s["ok"].as_u64(), "{name}: ok calls");
        assert_eq!(find(&errors), Some(error_calls), "{name}: failed calls");
    }
    // The depths after the drain, not the last second's.
    let depths = prometheus.by_label("last_over_time(emq_queue_jobs[2m])", "state", ended);
    for state in ["pending", "active", "completed"] {
        let scraped = depths.iter().find(|(s, _)| s == state).map(|(_, v)| *v as u64);
        assert_eq!(scraped, summary["depths_end"][state].as_u64(), "{state} jobs: {depths:?}");
    }
    let fenced =
        prometheus.by_label(r#"sum(last_over_time(emq_errors_total{code=~"EMQFENCE|EMQSTATE"}[2m]))"#, "", ended);
    let fenced_in_summary: u64 = scripts
        .iter()
        .flat_map(|s| s["errors"].as_object().unwrap().iter())
        .filter(|(code, _)| *code == "EMQFENCE" || *code == "EMQSTATE")
        .map(|(_, n)| n.as_u64().unwrap())
        .sum();
    assert_eq!(fenced.first().map_or(0, |(_, v)| *v as u64), fenced_in_summary, "EMQFENCE and EMQSTATE refusals");

    // The busiest script's rate over the middle of the load agrees with its ops/s (loosely: a
    // loaded 2-core box), and its p99 falls within one bucket of summary.json's.
    let enqueue = script("enqueue");
    let ops = enqueue["ops_per_sec"].as_f64().unwrap();
    // [launch + 6 s, launch + 16 s]: the load's middle, before the final totals' step at its end.
    let middle = launched + 16.0;
    let rate = prometheus.by_label(r#"rate(emq_calls_total{script="enqueue",outcome="ok"}[10s])"#, "script", middle);
    let rate = rate.first().map(|(_, v)| *v).unwrap_or_else(|| panic!("no rate at launch + 16 s: {said}"));
    assert!((rate - ops).abs() <= 0.35 * ops, "rate() {rate:.1}/s against summary.json's {ops:.1}/s");
    let p99 = prometheus.by_label(
        r#"histogram_quantile(0.99, last_over_time(emq_latency_seconds_bucket{script="enqueue"}[2m]))"#,
        "script",
        ended,
    );
    let p99_us = p99.first().map(|(_, v)| v * 1e6).expect("a p99");
    let summary_p99 = enqueue["latency_us"]["p99"].as_f64().unwrap();
    let (a, b) = (bucket_of(p99_us), bucket_of(summary_p99));
    assert!(
        a.abs_diff(b) <= 1,
        "histogram_quantile p99 {p99_us:.0} µs (bucket {a}) against {summary_p99} µs (bucket {b})"
    );
    eprintln!(
        "enqueue: rate() {rate:.1}/s, summary.json {ops:.1}/s; p99 {p99_us:.0} µs, summary.json {summary_p99} µs"
    );

    // Every metric the dashboard asks for is one a real scrape served.
    let (status, body) = http_get(prometheus.addr, "/api/v1/label/__name__/values").unwrap();
    assert_eq!(status, 200);
    let served: BTreeSet<String> = serde_json::from_str::<Value>(&body).unwrap()["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str().map(str::to_string))
        .collect();
    let wanted = dashboard_metric_names();
    let missing: Vec<&String> = wanted.difference(&served).collect();
    assert!(missing.is_empty(), "the dashboard queries {missing:?}, which no scrape served ({served:?})");
}
