//! A run killed outright (SIGKILL: the OOM killer, `kubectl delete --grace-period=0`) mid-soak
//! leaves a folder that renders and checks: the per-second files hold every second up to
//! shortly before the kill, summary.json says the run was still running, history.bin holds
//! the events written before the kill, and `emq-bench check --history` reads it against the
//! server the run left behind.

mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SCENARIO: &str = r#"
name = "killed"
seed = 11
duration = "120s"
warmup = "1s"
drain = "10s"
queues = "killed"

[producers]
count = 2
pipeline = 4
rate = 1500.0

[consumers]
count = 2
pipeline = 2
batch = 8
lease = "5s"
"#;

/// The distinct seconds of intervals.csv, in file order.
fn seconds(path: &Path) -> Vec<u64> {
    let mut reader = csv::Reader::from_path(path).unwrap();
    let mut seen: Vec<u64> = Vec::new();
    for row in reader.deserialize::<std::collections::HashMap<String, String>>() {
        let t: u64 = row.unwrap()["t_s"].parse().unwrap();
        if seen.last() != Some(&t) {
            seen.push(t);
        }
    }
    seen
}

#[test]
fn a_run_killed_mid_soak_leaves_a_folder_that_renders_and_checks() {
    let server = support::server();
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("killed.toml");
    std::fs::write(&scenario, SCENARIO).unwrap();
    let out = tmp.path().join("run");
    let bin = env!("CARGO_BIN_EXE_emq-bench");
    let spawned = Instant::now();
    let mut child = Command::new(bin)
        .args(["run", scenario.to_str().unwrap(), "--url", &server.url(), "--quiet", "--out", out.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Killed once 6 measured seconds are on disk (and a running summary.json), well before
    // its 120 s end.
    let intervals = out.join("intervals.csv");
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        assert!(Instant::now() < deadline, "no 6 seconds in intervals.csv after 90 s");
        assert!(child.try_wait().unwrap().is_none(), "the run ended by itself");
        let written = intervals.is_file() && seconds(&intervals).len() >= 6;
        if written && out.join("summary.json").is_file() {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    child.kill().unwrap(); // SIGKILL
    let killed_after = spawned.elapsed().as_secs_f64();
    child.wait().unwrap();

    // Every second from the end of warmup up to the last one written has its rows, in order.
    let written = seconds(&intervals);
    assert_eq!(written.first(), Some(&1), "the first measured second: {written:?}");
    assert!(written.windows(2).all(|w| w[1] == w[0] + 1), "a gap in the seconds: {written:?}");
    let queue_rows = csv::Reader::from_path(out.join("queue.csv")).unwrap().records().count();
    assert!(queue_rows >= written.len().saturating_sub(1), "queue.csv: {queue_rows} rows, {written:?}");
    // The server's rows as the probe took them, its fixed columns, on the run's clock.
    let mut server_csv = csv::Reader::from_path(out.join("server.csv")).unwrap();
    assert_eq!(server_csv.headers().unwrap().iter().next(), Some("t_s"));
    let times: Vec<f64> = server_csv.records().map(|r| r.unwrap()[0].parse().unwrap()).collect();
    assert!(times.len() >= written.len().saturating_sub(2), "server.csv: {times:?}, seconds {written:?}");
    assert!(times.iter().all(|t| (0.0..130.0).contains(t)), "{times:?}");
    let hlog = std::fs::read(out.join("latency.hlog")).unwrap();
    let histograms = hdrhistogram::serialization::interval_log::IntervalLogIterator::new(&hlog)
        .filter(|e| matches!(e, Ok(hdrhistogram::serialization::interval_log::LogEntry::Interval(_))))
        .count();
    assert!(histograms >= written.len(), "latency.hlog: {histograms} histograms for {} seconds", written.len());
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["running"], true, "{summary}");
    assert!(summary["verdict"].is_null(), "no verdict without an end");
    let enqueued = summary["scripts"].as_array().unwrap().iter().find(|s| s["script"] == "enqueue").unwrap();
    assert!(enqueued["ok"].as_u64().unwrap() > 1000, "{enqueued}");

    // The history up to the kill: its start's header (incomplete), events in it.
    let (header, streams) = emq_bench::history::file::load(&out.join("history.bin")).unwrap();
    assert!(!header.complete && !header.drained, "{header:?}");
    let history = emq_bench::history::History::merge(header, &streams).unwrap();
    assert!(history.events.len() > 1000, "{} events", history.events.len());

    // It renders, marked as killed.
    let report = Command::new(bin).args(["report", out.to_str().unwrap()]).output().unwrap();
    assert!(report.status.success(), "report: {}", String::from_utf8_lossy(&report.stderr));
    let page = support::assert_offline_page(&out.join("report.html"));
    assert!(page.contains("ended without a summary: killed at about"), "the page does not say it was killed");
    // Its figures are the seconds on disk, which run past the last summary rewrite: the ok
    // calls those seconds hold, killed no earlier than the last server row.
    let view = emq_bench::html::model::RunView::load(&out).unwrap();
    let mut rows = csv::Reader::from_path(&intervals).unwrap();
    let ok_in_seconds: u64 = rows
        .deserialize::<std::collections::HashMap<String, String>>()
        .map(Result::unwrap)
        .filter(|r| r["script"] == "enqueue")
        .map(|r| r["ok"].parse::<u64>().unwrap())
        .sum();
    let enqueue = view.summary.scripts.iter().find(|s| s.script == "enqueue").unwrap();
    assert_eq!(enqueue.ok, ok_in_seconds, "the page's enqueue calls against intervals.csv's");
    assert!(enqueue.latency_us.intervals.samples > 0 && enqueue.service_us.intervals.samples == 0, "{enqueue:?}");
    // Dated on the run's clock (which starts after the process does), no earlier than the end
    // of the last second written (warmup 1 s).
    let killed_at = view.killed_at_s.unwrap();
    let last_written = 1.0 + written.len() as f64;
    assert!(
        (last_written..=killed_after + 0.5).contains(&killed_at),
        "killed at about {killed_at:.1} s: the last second written ends at {last_written}, the kill came {killed_after:.1} s after the spawn"
    );

    // `check --history` of the folder against the server at `url`.
    let history = out.join("history.bin");
    let check_against = |url: &str| {
        Command::new(bin).args(["check", "--url", url, "--history", history.to_str().unwrap()]).output().unwrap()
    };
    // It checks against the server the run left behind: nothing lost, nothing duplicated.
    let check = check_against(&server.url());
    let (stdout, stderr) = (String::from_utf8_lossy(&check.stdout), String::from_utf8_lossy(&check.stderr));
    assert_eq!(check.status.code(), Some(0), "check: {stdout}\n{stderr}");
    assert!(stdout.contains("no violations"), "{stdout}");
    assert!(stderr.contains("ended without its final header (killed)"), "{stderr}");

    // Against a server that holds none of its keys (not the run's) every job is missing, and
    // the check says what that most likely means.
    let other = support::server();
    let check = check_against(&other.url());
    let stdout = String::from_utf8_lossy(&check.stdout);
    assert_eq!(check.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("note: the server holds no key of the history's queues (emq:{killed}:*)"), "{stdout}");
    assert!(stdout.contains("more (--out DIR writes them all to invariants.json)"), "{stdout}");
    drop(other);

    // And it still finds what is wrong: one job's row deleted behind its back is a violation.
    let mut conn = redis::Client::open(server.url()).unwrap().get_connection().unwrap();
    let (_, rows): (u64, Vec<String>) = redis::cmd("SCAN")
        .arg(0)
        .arg("MATCH")
        .arg("emq:{killed}:job:*")
        .arg("COUNT")
        .arg(1000)
        .query(&mut conn)
        .unwrap();
    let row = rows.first().expect("a job row left by the run");
    let _: u64 = redis::cmd("DEL").arg(row).query(&mut conn).unwrap();
    let check = check_against(&server.url());
    let stdout = String::from_utf8_lossy(&check.stdout);
    assert_eq!(check.status.code(), Some(1), "a deleted row ({row}) not found: {stdout}");
}

/// A loopback proxy to `upstream` that forwards both ways until a client sends an UNLINK: that
/// request and everything after it on its connection are held (read, never forwarded), so a
/// deletion through the proxy stops at its first UNLINK and waits there. Returns the port and
/// the flag that says an UNLINK was held.
fn holding_proxy(upstream: u16) -> (u16, std::sync::Arc<std::sync::atomic::AtomicBool>) {
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicBool, Ordering};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let held = std::sync::Arc::new(AtomicBool::new(false));
    let flag = held.clone();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(mut client) = client else { continue };
            let Ok(mut server) = std::net::TcpStream::connect(("127.0.0.1", upstream)) else { continue };
            let (mut to_client, mut from_server) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            std::thread::spawn(move || std::io::copy(&mut from_server, &mut to_client));
            let held = flag.clone();
            std::thread::spawn(move || {
                // The command name as RESP frames it; the tail of the last read is kept so a
                // name split over two reads is still seen.
                const MARK: &[u8] = b"$6\r\nUNLINK\r\n";
                let (mut buf, mut tail, mut holding) = (vec![0u8; 64 * 1024], Vec::new(), false);
                loop {
                    let n = match client.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    tail.extend_from_slice(&buf[..n]);
                    if !holding && tail.windows(MARK.len()).any(|w| w == MARK) {
                        holding = true;
                        held.store(true, Ordering::SeqCst);
                    }
                    if !holding && server.write_all(&buf[..n]).is_err() {
                        return;
                    }
                    let keep = tail.len().saturating_sub(MARK.len());
                    tail.drain(..keep);
                }
            });
        }
    });
    (port, held)
}

#[test]
fn a_run_killed_during_its_cleanup_leaves_a_summary_that_does_not_say_deleted() {
    let server = support::server();
    let (port, held) = holding_proxy(server.port());
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("cleaned.toml");
    let text = SCENARIO.replace("\"killed\"", "\"cleaned\"").replace("120s", "2s").replace("1500.0", "300.0");
    std::fs::write(&scenario, text).unwrap();
    let out = tmp.path().join("run");
    let bin = env!("CARGO_BIN_EXE_emq-bench");
    let url = format!("redis://127.0.0.1:{port}");
    // A reply timeout longer than the test: the held UNLINK never fails on its own.
    let mut child = Command::new(bin)
        .args(["run", scenario.to_str().unwrap(), "--url", &url, "--timeout", "1h", "--quiet"])
        .args(["--out", out.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The deletion has sent its first UNLINK (held): the run is in its cleanup, and stays.
    let deadline = Instant::now() + Duration::from_secs(120);
    while !held.load(std::sync::atomic::Ordering::SeqCst) {
        assert!(Instant::now() < deadline, "no UNLINK after 120 s");
        assert!(child.try_wait().unwrap().is_none(), "the run ended without deleting its keys");
        std::thread::sleep(Duration::from_millis(50));
    }
    let read = || -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap()
    };
    assert_eq!(read()["keys"], "deleting", "before the kill: {}", read());
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    // The folder says the deletion did not finish, how far it got and which queue is left;
    // its verdict does not pass the run.
    let summary = read();
    assert_eq!(summary["keys"], "deleting", "{summary}");
    assert_eq!(summary["cleanup"]["deleted"], 0, "the first UNLINK was held: {summary}");
    assert_eq!(summary["cleanup"]["remaining"], serde_json::json!(["cleaned"]), "{summary}");
    assert_eq!(summary["verdict"]["passed"], false, "{summary}");
    let findings = summary["verdict"]["findings"].as_array().unwrap();
    assert!(findings.iter().any(|f| f["kind"] == "cleanup_failed"), "{findings:?}");
    // And it is so: the run's keys are on the server.
    let mut conn = redis::Client::open(server.url()).unwrap().get_connection().unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg("emq:{cleaned}:*").query(&mut conn).unwrap();
    assert!(!keys.is_empty(), "the run's keys are gone");
    // And the folder says how many: counted before the deletion (each row in one set, and
    // the sets), none deleted, so all of them left.
    let on_server = keys.len() as u64;
    assert_eq!(summary["cleanup"]["counted"]["cleaned"].as_u64(), Some(on_server), "{summary}");
    assert_eq!(summary["cleanup"]["remaining_keys"].as_u64(), Some(on_server), "{summary}");

    // `report` renders it, saying so.
    let report = Command::new(bin).args(["report", out.to_str().unwrap()]).output().unwrap();
    assert!(report.status.success(), "report: {}", String::from_utf8_lossy(&report.stderr));
    let page = support::assert_offline_page(&out.join("report.html"));
    assert!(page.contains("deleting, not finished"), "the page does not say the deletion did not finish");
    let left = format!("about {on_server} keys left of the {on_server} counted before");
    assert!(page.contains(&left), "the page does not say `{left}`");
}
