//! The live check: a violation is found while the run goes (the metrics endpoint counts it
//! before the run ends), and `--fail-fast` stops the run at the first one, keeping the keys.
//! Both against a real server, with a `complete.lua` whose fence is removed.

mod support;

use emq_bench::cmd::run::run;
use emq_bench::cmd::CommandOutcome;
use emq_bench::verdict::{KeptBecause, KeysFate};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::endpoint::http_get;

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
    assert_eq!(result.outcome, CommandOutcome::Failed);
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
    let (endpoint, said, rest) = support::endpoint::serving(&mut run);
    let deadline = Instant::now() + Duration::from_secs(50);
    let counted = loop {
        let body = http_get(endpoint, "/metrics").map(|(_, body)| body).unwrap_or_default();
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
