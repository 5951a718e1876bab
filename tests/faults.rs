//! Issue 10: faults on purpose (the `[[faults]]` nemesis), faults from outside that the run
//! rides through (faults seen, not an interruption), a second stop signal, and a results
//! folder that cannot be written completely. Every server is started here on a loopback port.

mod support;

use emq_bench::cmd::run::run;
use emq_bench::cmd::CommandOutcome;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A light fencing soak (stalls and zombies provoke refusals) of `secs`, plus `extra` TOML.
fn scenario(dir: &Path, secs: u32, extra: &str) -> PathBuf {
    let text = format!(
        "name = \"faults\"\nseed = 9\nduration = \"{secs}s\"\ndrain = \"15s\"\n\
         {extra_top}\
         [producers]\ncount = 2\npipeline = 2\nrate = 300.0\n\
         [consumers]\ncount = 2\npipeline = 2\nlease = \"100ms\"\nstall = 0.05\nzombie = 0.5\nzombie_delay = \"150ms\"\n\
         [maintenance]\nreap = \"20ms\"\n{faults}",
        extra_top = extra.split("[[faults]]").next().unwrap_or(""),
        faults = extra.find("[[faults]]").map_or("", |at| &extra[at..]),
    );
    let path = dir.join("faults.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Waits (at most 20 s) until the server at `url` serves a run's scripts: a client whose last
/// command was EVALSHA, so a test acts on a run that is under way, whatever its start-up took.
fn wait_for_load(url: &str) {
    let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut conn).unwrap();
        if list.contains("cmd=evalsha") {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("no load reached {url} within 20 s");
}

fn injected(result: &emq_bench::cmd::run::RepResult) -> Vec<(String, String)> {
    result.summary.faults.injected.iter().map(|f| (f.kind.to_string(), f.detail.clone())).collect()
}

fn violations(result: &emq_bench::cmd::run::RepResult) -> usize {
    result.summary.check.as_ref().expect("the run was checked").violations_total
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_kind_but_restart_leaves_no_violation_and_passes() {
    let tmp = tempfile::tempdir().unwrap();
    let faults = "[target.server]\n\"repl-diskless-sync-delay\" = \"0\"\n\
        [[faults]]\nkind = \"kill-connections\"\nat = \"1s\"\n\
        [[faults]]\nkind = \"pause\"\nat = \"1500ms\"\nduration = \"300ms\"\n\
        [[faults]]\nkind = \"pause\"\nat = \"2s\"\nduration = \"200ms\"\nmode = \"all\"\n\
        [[faults]]\nkind = \"script-flush\"\nat = \"2500ms\"\n\
        [[faults]]\nkind = \"maxmemory\"\nat = \"3s\"\nduration = \"300ms\"\n\
        [[faults]]\nkind = \"freeze\"\nat = \"3800ms\"\nduration = \"400ms\"\n\
        [[faults]]\nkind = \"failover\"\nat = \"4500ms\"\n";
    let path = scenario(tmp.path(), 7, faults);
    let result = run(support::run_args(&path, &tmp.path().join("out")), std::future::pending()).await.unwrap();
    let kinds = injected(&result);
    assert_eq!(
        kinds.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
        ["kill-connections", "pause", "pause", "script-flush", "maxmemory", "freeze", "failover"],
        "{kinds:?}"
    );
    assert!(kinds.iter().all(|(_, detail)| !detail.starts_with("failed")), "{kinds:?}");
    assert!(kinds[0].1.contains("CLIENT KILL") && result.summary.faults.injected[0].count > 0, "{kinds:?}");
    assert_eq!(violations(&result), 0, "{}", result.table);
    assert!(!result.summary.interrupted, "{:?}", result.summary.interrupt_reason);
    assert_eq!(result.outcome, CommandOutcome::Success, "{:?}\n{}", result.failures, result.table);
    assert!(result.summary.faults.reconnects > 0, "the killed connections were re-opened");
    // Each fault did what it says: maxmemory refused writes, the flushed scripts were loaded
    // again before any call failed on NOSCRIPT.
    let count =
        |code: &str| result.summary.scripts.iter().map(|s| s.errors.get(code).copied().unwrap_or(0)).sum::<u64>();
    assert!(count("OOM") > 0, "maxmemory took effect: {:?}", result.summary.scripts);
    assert_eq!(count("NOSCRIPT"), 0, "scripts are loaded again after a flush");
    // The windows are in intervals.csv and under the table.
    let csv = std::fs::read_to_string(tmp.path().join("out/intervals.csv")).unwrap();
    for kind in ["kill-connections", "pause", "maxmemory", "freeze", "failover"] {
        assert!(csv.contains(kind), "{kind} not in intervals.csv");
    }
    assert!(result.table.contains("fault injected: freeze"), "{}", result.table);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_with_an_fsync_always_aof_loses_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let faults = "[target.server]\nappendonly = \"yes\"\nappendfsync = \"always\"\n\
        [[faults]]\nkind = \"restart\"\nat = \"1500ms\"\nsignal = \"kill\"\n\
        [[faults]]\nkind = \"restart\"\nat = \"3s\"\n";
    let path = scenario(tmp.path(), 4, faults);
    let result = run(support::run_args(&path, &tmp.path().join("out")), std::future::pending()).await.unwrap();
    let kinds = injected(&result);
    assert_eq!(kinds.len(), 2, "{kinds:?}");
    assert!(kinds[0].1.starts_with("SIGKILL") && kinds[1].1.starts_with("SIGTERM"), "{kinds:?}");
    assert_eq!(violations(&result), 0, "{}", result.table);
    assert_eq!(result.outcome, CommandOutcome::Success, "{:?}\n{}", result.failures, result.table);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_without_persistence_is_reported_as_lost_jobs() {
    let tmp = tempfile::tempdir().unwrap();
    let faults = "[[faults]]\nkind = \"restart\"\nat = \"2s\"\nsignal = \"kill\"\n";
    let path = scenario(tmp.path(), 4, faults);
    let result = run(support::run_args(&path, &tmp.path().join("out")), std::future::pending()).await.unwrap();
    assert_eq!(injected(&result).len(), 1);
    assert_eq!(result.outcome, CommandOutcome::Failed);
    support::assert_verdict_in_summary(&result);
    assert!(!result.summary.interrupted, "a restart is a fault, not an interruption");
    let check = result.summary.check.as_ref().expect("checked");
    assert!(check.by_invariant.keys().any(|k| k.starts_with("I7")), "{:?}", check.by_invariant);
    assert!(result.failures.iter().any(|f| f.contains("invariant violations")), "{:?}", result.failures);
}

/// Issue 10 item 3: CLIENT KILL from outside (the server stayed up) is a fault the run rode
/// through: reported with its time, the verdict the checker's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_killed_from_outside_are_faults_seen_not_an_interruption() {
    let tmp = tempfile::tempdir().unwrap();
    let server = support::server();
    let path = scenario(tmp.path(), 4, "");
    let mut a = support::run_args(&path, &tmp.path().join("out"));
    a.url = Some(server.url());
    let url = server.url();
    let killer = std::thread::spawn(move || {
        wait_for_load(&url);
        std::thread::sleep(Duration::from_millis(500));
        let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
        let killed: u64 = redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("normal").query(&mut conn).unwrap();
        killed
    });
    let result = run(a, std::future::pending()).await.unwrap();
    assert!(killer.join().unwrap() > 0);
    assert!(!result.summary.interrupted, "{:?}", result.summary.interrupt_reason);
    assert_eq!(violations(&result), 0);
    assert_eq!(result.outcome, CommandOutcome::Success, "{:?}\n{}", result.failures, result.table);
    let faults = &result.summary.faults;
    assert!(faults.reconnects > 0, "{faults:?}");
    let reconnect = faults.seen.iter().find(|s| s.kind.name() == "reconnects").expect("a reconnects span");
    assert!(reconnect.count > 0 && reconnect.to_s > reconnect.from_s, "{reconnect:?}");
    assert!(result.table.contains("faults seen: "), "{}", result.table);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_on_the_server_process_need_the_embedded_server() {
    let tmp = tempfile::tempdir().unwrap();
    let server = support::server();
    let path = scenario(tmp.path(), 4, "[[faults]]\nkind = \"freeze\"\nat = \"1s\"\nduration = \"100ms\"\n");
    let mut a = support::run_args(&path, &tmp.path().join("out"));
    a.url = Some(server.url());
    let err = run(a, std::future::pending()).await.err().expect("refused");
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("a freeze fault needs the embedded server"), "{err}");
    assert!(!tmp.path().join("out/summary.json").exists(), "refused before anything ran");
}

/// Issue 10 item 5: a second SIGTERM stops at once (here the server is frozen, so anything
/// that waits on it would wait out the 20 s reply timeout), writes what it can, marks the
/// summary aborted and keeps the run's keys.
#[test]
fn a_second_stop_signal_aborts_at_once_and_keeps_the_keys() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().unwrap();
    let server = support::server();
    let out = tmp.path().join("out");
    let child = Command::new(env!("CARGO_BIN_EXE_emq-bench"))
        .args(["run", "scenarios/smoke.toml", "--quiet", "--duration", "60s", "--timeout", "20s", "--url"])
        .arg(server.url())
        .arg("--out")
        .arg(&out)
        .current_dir(root)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_load(&server.url());
    std::thread::sleep(Duration::from_millis(500));
    let pid = child.id() as libc::pid_t;
    server.freeze(true);
    // SAFETY: kill(2) on our own child's pid has no memory-safety preconditions.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    std::thread::sleep(Duration::from_millis(500));
    let second = Instant::now();
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    // Waited for on a thread: a broken abort fails the test after 60 s instead of hanging it.
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done_tx.send(child.wait_with_output().unwrap());
    });
    let finished = match done_rx.recv_timeout(Duration::from_secs(60)) {
        Ok(finished) => finished,
        Err(_) => {
            // SAFETY: as above.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            server.freeze(false);
            panic!("the run did not end within 60 s of a second SIGTERM");
        }
    };
    let took = second.elapsed();
    server.freeze(false);
    let err = String::from_utf8_lossy(&finished.stderr);
    assert_eq!(finished.status.code(), Some(1), "{err}");
    support::assert_fail_lines_match_summary(&err, &out);
    assert!(took < Duration::from_secs(10), "an abort must not wait out the 20 s reply timeout: {took:?}\n{err}");
    assert!(err.contains("aborting"), "{err}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["interrupt_kind"], "aborted");
    assert_eq!(summary["keys"], "kept: the run was aborted");
    for file in ["scripts.csv", "intervals.csv", "latency.hlog", "history.bin"] {
        assert!(out.join(file).is_file(), "{file} missing");
    }
    let mut conn = redis::Client::open(server.url()).unwrap().get_connection().unwrap();
    let left: Vec<String> = redis::cmd("KEYS").arg("emq:*").query(&mut conn).unwrap();
    assert!(!left.is_empty(), "the run's keys were kept for a later look");
}

/// The embedded server leads a process group of its own, outside the harness's (what a
/// terminal's Ctrl-C reaches; the run below shows what that buys).
#[test]
fn an_embedded_server_is_in_a_process_group_of_its_own() {
    let server = support::server();
    let pid = server.pid() as libc::pid_t;
    // SAFETY: getpgid(2) and getpgrp(2) only read the process table.
    let (its, ours) = unsafe { (libc::getpgid(pid), libc::getpgrp()) };
    assert_eq!(its, pid, "the server leads its own group");
    assert_ne!(its, ours);
}

/// A terminal's Ctrl-C (and timeout(1)) signals the whole foreground process group: the
/// embedded server must not be in it, or it shuts down under the run's check and cleanup.
#[test]
fn ctrl_c_to_the_process_group_stops_the_run_but_not_its_embedded_server() {
    use std::os::unix::process::CommandExt;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let mut child = Command::new(env!("CARGO_BIN_EXE_emq-bench"));
    child
        .args(["run", "scenarios/smoke.toml", "--quiet", "--duration", "60s", "--out"])
        .arg(&out)
        .current_dir(root)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        // A group of its own, led by the harness, as a shell gives a foreground job.
        .process_group(0);
    let child = child.spawn().unwrap();
    let pid = child.id() as libc::pid_t;
    // Until the run writes its history (its load is under way), at most 30 s.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !out.join("scenario.toml").is_file() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(2));
    // SAFETY: kill(2) on our own child's process group has no memory-safety preconditions.
    unsafe { libc::kill(-pid, libc::SIGINT) };
    let finished = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&finished.stderr);
    assert_eq!(finished.status.code(), Some(1), "{err}");
    support::assert_fail_lines_match_summary(&err, &out);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["interrupt_kind"], "stopped", "{err}");
    assert!(summary["check"].is_object(), "the check ran on the embedded server: {err}");
    assert_eq!(summary["keys"], "deleted", "{err}");
}

/// An abort's unlucky moment, provoked on purpose: the server freezes while the probe's thread
/// opens its own connections (a loaded machine starts it late). The probe's end must not wait
/// out the connect or the 20 s reply timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_opening_on_a_frozen_server_ends_at_once() {
    use emq_bench::net::ConnectOptions;
    let server = support::server();
    let connect = ConnectOptions { response_timeout: Duration::from_secs(20), ..ConnectOptions::default() };
    let plane = emq_bench::plane::Plane::open(&support::connector(&server.url()), connect).await.unwrap();
    server.freeze(true);
    let probe = emq_bench::probe::Probe::start(&plane, Duration::from_secs(1), None, None);
    // Long enough for the thread to be inside its connect, on any machine.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let asked = Instant::now();
    // A normal end (not an abort) does not wait for the open either.
    let series = probe.finish(false).await;
    let took = asked.elapsed();
    server.freeze(false);
    assert!(took < Duration::from_secs(2), "the probe's end waited on the frozen server: {took:?}");
    let notes = series.notes;
    assert!(notes.iter().any(|n| n.contains("before the probe's connections opened")), "{notes:?}");
}

/// Issue 10 item 6: a results folder that cannot be written completely (here: files over
/// 64 KiB fail with EFBIG, as on a full disk) still has summary.json, leaves no `.tmp` file,
/// and the run's keys are kept so `emq-bench check` can look at them.
#[test]
fn a_folder_that_cannot_be_completed_keeps_the_summary_and_the_keys() {
    use std::os::unix::process::CommandExt;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().unwrap();
    let server = support::server();
    // Closed loop, 20 000 jobs: a history of a few hundred KiB, a summary of ~15 KiB.
    let path = tmp.path().join("big.toml");
    std::fs::write(
        &path,
        "name = \"big\"\nseed = 5\njobs = 20000\n[producers]\ncount = 2\npipeline = 8\n\
         [consumers]\ncount = 2\npipeline = 4\nbatch = 8\n",
    )
    .unwrap();
    let out = tmp.path().join("out");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_emq-bench"));
    cmd.arg("run").arg(&path).args(["--quiet", "--url", &server.url(), "--out"]).arg(&out).current_dir(root);
    // SAFETY: setrlimit and signal are async-signal-safe and touch no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit { rlim_cur: 64 * 1024, rlim_max: 64 * 1024 };
            libc::setrlimit(libc::RLIMIT_FSIZE, &limit);
            // Without this the first write past the limit kills the process (SIGXFSZ).
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    let finished = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&finished.stderr);
    assert_eq!(finished.status.code(), Some(1), "{err}");
    support::assert_fail_lines_match_summary(&err, &out);
    assert!(err.contains("results folder incomplete") && err.contains("history.bin"), "{err}");
    assert!(err.contains("keys were kept"), "{err}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["keys"], "kept: the results folder could not be written completely");
    assert!(summary["write_errors"].as_array().is_some_and(|e| !e.is_empty()), "{summary}");
    assert_eq!(summary["verdict"]["passed"], false, "{summary}");
    // report.html, written before history.bin failed, is rendered again or gone: never a pass.
    if let Ok(page) = std::fs::read_to_string(out.join("report.html")) {
        assert!(!page.contains("pass</span> (exit 0)"), "report.html still says pass");
    }
    let tmp_files: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(tmp_files.is_empty(), "{tmp_files:?}");
    let mut conn = redis::Client::open(server.url()).unwrap().get_connection().unwrap();
    let rows: u64 = redis::cmd("ZCARD").arg("emq:{bench}:completed").query(&mut conn).unwrap();
    assert_eq!(rows, 20_000, "the run's keys are still there for `emq-bench check`");
}

/// The shipped nemesis scenario, as a user runs it: every fault kind fires at least once, none
/// fails to apply, and with its fsync-always AOF the checker finds nothing (exit 0).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_nemesis_scenario_fires_every_kind_and_passes() {
    let tmp = tempfile::tempdir().unwrap();
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/nemesis.toml");
    let result = run(support::run_args(&path, &tmp.path().join("out")), std::future::pending()).await.unwrap();
    let kinds = injected(&result);
    for kind in ["kill-connections", "pause", "script-flush", "maxmemory", "freeze", "restart", "failover"] {
        assert!(kinds.iter().any(|(k, _)| k == kind), "{kind} never fired: {kinds:?}");
    }
    assert!(kinds.iter().all(|(_, detail)| !detail.starts_with("failed")), "{kinds:?}");
    assert_eq!(violations(&result), 0, "{}", result.table);
    assert_eq!(result.outcome, CommandOutcome::Success, "{:?}\n{}", result.failures, result.table);
}

/// Issue 11 item 6: every second of an outage is a row of intervals.csv (zeros), not a gap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_second_of_an_outage_is_a_row() {
    let tmp = tempfile::tempdir().unwrap();
    let path = scenario(tmp.path(), 6, "[[faults]]\nkind = \"freeze\"\nat = \"1500ms\"\nduration = \"2500ms\"\n");
    let result = run(support::run_args(&path, &tmp.path().join("out")), std::future::pending()).await.unwrap();
    assert_eq!(injected(&result).len(), 1);
    let csv = std::fs::read_to_string(tmp.path().join("out/intervals.csv")).unwrap();
    let enqueue: Vec<Vec<&str>> =
        csv.lines().skip(1).map(|l| l.split(',').collect::<Vec<_>>()).filter(|r| r[1] == "enqueue").collect();
    let seconds: Vec<&str> = enqueue.iter().map(|r| r[0]).collect();
    for s in 0..6 {
        assert!(seconds.contains(&s.to_string().as_str()), "no row for second {s}: {seconds:?}");
    }
    let frozen = enqueue.iter().find(|r| r[0] == "2").expect("second 2");
    assert_eq!((frozen[2], frozen[8]), ("0", "freeze"), "no enqueue completes in a frozen second: {frozen:?}");
}
