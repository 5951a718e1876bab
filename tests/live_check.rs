//! The live check: a violation is found while the run goes (the metrics endpoint counts it
//! before the run ends), and `--fail-fast` stops the run at the first one, keeping the keys.
//! Both against a real server, with a `complete.lua` whose fence is removed.

mod support;

use emq_bench::cmd::run::run;
use emq_bench::cmd::Outcome;
use emq_bench::verdict::{KeptBecause, KeysFate};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_fast_stops_a_long_soak_at_its_first_violation_and_keeps_the_keys() {
    let tmp = tempfile::tempdir().unwrap();
    let lua = support::fenceless_lua(tmp.path(), "lua-broken");
    let server = support::server();
    let scenario = support::held_zombie_soak(tmp.path());
    let mut args = support::run_args(&scenario, &tmp.path().join("out"));
    args.url = Some(server.url());
    args.lua_dir = Some(lua);
    args.duration = Some(Duration::from_secs(120));
    args.fail_fast = true;
    let began = Instant::now();
    let result = run(args, std::future::pending()).await.unwrap();
    let took = began.elapsed();
    assert_eq!(result.outcome, Outcome::Failed);
    // The first stale complete lands within a second or two; its job is checked SETTLE (5 s)
    // after its history closed. A loaded box adds seconds, never the 120 s the run asked for.
    assert!(took < Duration::from_secs(60), "the run went on for {took:?}");
    let summary = &result.summary;
    assert_eq!(summary.interrupt_kind.as_deref(), Some("fail_fast"), "{summary:?}");
    let reason = summary.interrupt_reason.as_deref().unwrap_or_default();
    assert!(reason.contains("--fail-fast") && reason.contains("I6"), "{reason}");
    assert_eq!(summary.keys, Some(KeysFate::Kept(KeptBecause::Violation)));
    support::assert_verdict_in_summary(&result);
    // The end check ran over what the run did, and agrees.
    let check = summary.check.as_ref().expect("the end check ran");
    assert!(check.by_invariant.get("I6").is_some_and(|&n| n > 0), "{check:?}");
}

/// A plain HTTP/1.0 GET on loopback: the body.
fn get(addr: SocketAddr, path: &str) -> std::io::Result<String> {
    let mut conn = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    conn.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(conn, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut text = String::new();
    conn.read_to_string(&mut text)?;
    Ok(text.split_once("\r\n\r\n").map(|(_, body)| body.to_string()).unwrap_or_default())
}

#[test]
fn the_metrics_endpoint_counts_a_violation_before_the_run_ends() {
    let tmp = tempfile::tempdir().unwrap();
    let lua = support::fenceless_lua(tmp.path(), "lua-broken");
    let server = support::server();
    let scenario = support::held_zombie_soak(tmp.path());
    let out = tmp.path().join("out");
    let mut run = Command::new(env!("CARGO_BIN_EXE_emq-bench"))
        .args(["run", scenario.to_str().unwrap(), "--duration", "60s", "--quiet", "--metrics-addr", "127.0.0.1:0"])
        .args(["--url", &server.url(), "--lua-dir", lua.to_str().unwrap(), "--out", out.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(run.stderr.take().unwrap());
    let mut said = String::new();
    let endpoint: SocketAddr = loop {
        let mut line = String::new();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "emq-bench ended before serving: {said}");
        said.push_str(&line);
        if let Some(rest) = line.split("serving http://").nth(1) {
            break rest.trim().trim_end_matches("/metrics").parse().unwrap();
        }
    };
    let rest = std::thread::spawn(move || {
        let mut text = String::new();
        stderr.read_to_string(&mut text).unwrap();
        text
    });
    let deadline = Instant::now() + Duration::from_secs(50);
    let counted = loop {
        let body = get(endpoint, "/metrics").unwrap_or_default();
        let i6 = body
            .lines()
            .find(|l| l.starts_with("emq_violations_total{invariant=\"I6\"}"))
            .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok());
        if i6.is_some_and(|n| n > 0) {
            break i6;
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    // Still running: the count came from the live check, not from the end.
    let running = run.try_wait().unwrap().is_none();
    // SIGTERM: the run's first stop (it ends the load, checks, writes its folder).
    // SAFETY: a signal to the child this test spawned and has not reaped.
    unsafe { libc::kill(run.id() as i32, libc::SIGTERM) };
    let status = run.wait().unwrap();
    let said = said + &rest.join().unwrap();
    assert!(counted.is_some(), "no I6 counted on the endpoint within 50 s: {said}");
    assert!(running, "the run had ended when the count was read: {said}");
    assert!(said.contains("emq-bench: violation I6"), "no line on stderr as found: {said}");
    assert_eq!(status.code(), Some(1), "{said}");
}
