//! report.html and `emq-bench report DIR` against a real run of the smoke scenario: every
//! figure has data, the spectra put each script's p99 where summary.json says, server.csv has
//! one row per node per second, and a re-render gives the same page.

mod support;

use emq_bench::cmd::run::run;
use emq_bench::cmd::CommandOutcome;
use emq_bench::html::model::RunView;
use std::path::{Path, PathBuf};
use std::process::Command;

fn emq_bench(args: &[&Path]) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_emq-bench"));
    cmd.arg("report").args(args);
    cmd.output().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_smoke_report_shows_every_figure_and_re_renders_the_same() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/smoke.toml");
    let result = run(support::run_args(&scenario, tmp.path()), std::future::pending()).await.unwrap();
    assert_eq!(result.outcome, CommandOutcome::Success, "{:?}", result.failures);
    let dir = tmp.path();
    let html = support::assert_offline_page(&dir.join("report.html"));
    assert!(!html.contains("no data recorded"), "a figure of the smoke report is empty");
    // Per script: latency over time, throughput, spectrum; the queue: 2; the server: 3.
    let scripts = result.summary.scripts.len();
    assert_eq!(html.matches("<svg").count(), scripts * 3 + 5);
    for title in ["percentile spectrum", "depths (jobs", "reaps and stale", "server CPU", "server memory", "harness"] {
        assert!(html.contains(title), "no {title:?} figure");
    }

    // The spectrum of each script's recorded histogram (totals.hlog) puts p99 where the
    // summary says, read back from the folder as the page is.
    let view = RunView::load(dir).unwrap();
    for (s, page) in result.summary.scripts.iter().zip(&view.scripts) {
        assert_eq!(page.name, s.script);
        let p99_us = page.latency.mark("p99").expect("p99 mark") * 1000.0;
        assert_eq!(p99_us.round() as u64, s.latency_us.p99, "{} latency p99", s.script);
        let service_us = page.service.mark("p99").expect("p99 mark") * 1000.0;
        assert_eq!(service_us.round() as u64, s.service_us.p99, "{} service p99", s.script);
        // The curve itself passes the p99 at 1/(1-p) = 100: no point before it is higher,
        // none after it lower.
        let p99_ms = s.latency_us.p99 as f64 / 1000.0;
        assert!(page.latency.points.iter().filter(|p| p.0 < 100.0).all(|p| p.1 <= p99_ms), "{}", s.script);
        assert!(page.latency.points.iter().filter(|p| p.0 > 100.0).all(|p| p.1 >= p99_ms), "{}", s.script);
    }

    // server.csv: one row per node per second, about a second apart, every one with figures.
    let mut reader = csv::Reader::from_path(dir.join("server.csv")).unwrap();
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    let node = &result.summary.target.topology.nodes[0].address;
    assert!(rows.iter().all(|r| &r[1] == node && &r[2] == "1"), "{rows:?}");
    let times: Vec<f64> = rows.iter().map(|r| r[0].parse().unwrap()).collect();
    let run_secs = humantime::parse_rfc3339(&result.summary.ended)
        .unwrap()
        .duration_since(humantime::parse_rfc3339(&result.summary.started).unwrap())
        .unwrap()
        .as_secs_f64();
    assert!((times.len() as f64 - run_secs).abs() <= 1.5, "{} rows in a {run_secs:.1} s run", times.len());
    assert!(times.windows(2).all(|w| (w[1] - w[0] - 1.0).abs() < 0.25), "{times:?}");
    let samples = result.summary.server_samples.as_ref().unwrap();
    assert_eq!(samples.nodes[0].rows as usize, rows.len());
    assert!(samples.nodes[0].ops_per_sec_mean > 100.0, "{samples:?}");
    assert_eq!(samples.cost.call_sets as usize, rows.len() + 1, "one INFO per second, and the baseline");

    // `emq-bench report DIR` renders the same page from the same files.
    std::fs::remove_file(dir.join("report.html")).unwrap();
    let out = emq_bench(&[dir]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_to_string(dir.join("report.html")).unwrap(), html);
}

#[test]
fn report_refuses_a_folder_without_results_or_with_a_broken_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let out = emq_bench(&[tmp.path()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&tmp.path().display().to_string()) && err.contains("no results"), "{err}");
    std::fs::write(tmp.path().join("summary.json"), "{\"scripts\": 3}").unwrap();
    let out = emq_bench(&[tmp.path()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("summary.json") && err.contains("invalid type"), "{err}");
    assert!(!tmp.path().join("report.html").exists());
}
