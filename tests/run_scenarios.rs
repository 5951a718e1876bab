//! `emq-bench run` end to end against real embedded servers: every shipped scenario runs and
//! drains; an interrupted run and a lost server still leave a complete results folder; key
//! safety. The timing tests are in `timing.rs`.

mod support;

use emq_bench::cli::RunArgs;
use emq_bench::cmd::run::{run, RepResult};
use emq_bench::cmd::CommandOutcome;
use emq_bench::net::Transport;
use emq_bench::report::ScriptSummary;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn args(scenario: &Path, out: &Path) -> RunArgs {
    support::run_args(scenario, out)
}

fn never() -> std::future::Pending<()> {
    std::future::pending()
}

fn script<'a>(result: &'a RepResult, name: &str) -> &'a ScriptSummary {
    result.summary.scripts.iter().find(|s| s.script == name).unwrap_or_else(|| panic!("no {name} row"))
}

/// Checks that the results folder holds every file and that each parses.
fn assert_complete_folder(dir: &Path) {
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["schema_version"], 2);
    for csv_file in ["scripts.csv", "intervals.csv"] {
        let mut reader = csv::Reader::from_path(dir.join(csv_file)).unwrap();
        assert!(reader.headers().unwrap().len() > 3);
        for row in reader.records() {
            row.unwrap();
        }
    }
    let hlog = std::fs::read(dir.join("latency.hlog")).unwrap();
    let entries = hdrhistogram::serialization::interval_log::IntervalLogIterator::new(&hlog)
        .filter(|e| matches!(e, Ok(hdrhistogram::serialization::interval_log::LogEntry::Interval(_))))
        .count();
    assert!(entries > 0, "latency.hlog has no interval");
    assert!(dir.join("scenario.toml").is_file());
    for file in ["server.csv", "queue.csv", "totals.hlog"] {
        assert!(dir.join(file).is_file(), "no {file}");
    }
    // The scratch files of the run (the seconds' counts, the server's rows, the history's
    // parts) are gone once it ends.
    let scratch: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(scratch.is_empty(), "{scratch:?}");
    support::assert_offline_page(&dir.join("report.html"));
}

fn write_scenario(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("scenario.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_shipped_scenario_runs_and_drains() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut names = Vec::new();
    for entry in std::fs::read_dir(root.join("scenarios")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            names.push(path);
        }
    }
    names.sort();
    assert!(names.len() >= 5, "{names:?}");
    for scenario in names {
        let tmp = tempfile::tempdir().unwrap();
        let mut a = args(&scenario, tmp.path());
        // Each scenario's own protocol's scripts: lua/ for EchoMQ, BullMQ's pinned release.
        a.lua_dir = None;
        a.duration = Some(Duration::from_millis(1500));
        let result = run(a, never()).await.unwrap();
        // A fault set after the short load never fires: a `fault.<effect>` threshold then has no
        // fault's effects to judge, which fails it (a gate that tested nothing must not pass).
        // That is the only failure such a scenario may have here.
        let unfired = |f: &String| f.starts_with("threshold fault.") && f.contains("no fault's effects");
        if !result.failures.is_empty() && result.failures.iter().all(unfired) {
            assert_eq!(result.outcome, CommandOutcome::Failed, "{}", scenario.display());
        } else {
            assert_eq!(result.outcome, CommandOutcome::Success, "{}: {:?}", scenario.display(), result.failures);
        }
        assert!(result.summary.drained, "{} did not drain", scenario.display());
        let enqueued = result.summary.jobs["enqueued"];
        assert!(enqueued > 0, "{}: nothing enqueued", scenario.display());
        // A zombie's complete that the server accepted (its lease not reaped yet) is the job's
        // one completion: counted in `completed` (and in `stale_accepted`), once.
        assert_eq!(
            result.summary.jobs["completed"] + result.summary.jobs["failed"] + result.summary.jobs["failed_by_stall"],
            enqueued,
            "{}: every job ends completed or failed once",
            scenario.display()
        );
        assert!(result.table.contains("enqueue") || result.table.contains("addStandardJob"));
        assert_complete_folder(tmp.path());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_exercises_every_verb() {
    smoke_over(Transport::Pipe).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_exercises_every_verb_over_the_redis_rs_transport_too() {
    smoke_over(Transport::RedisRs).await;
}

async fn smoke_over(transport: Transport) {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/smoke.toml");
    let result = run(RunArgs { transport, ..args(&scenario, tmp.path()) }, never()).await.unwrap();
    assert_eq!(result.outcome, CommandOutcome::Success, "{:?}", result.failures);
    for name in ["enqueue", "enqueue_delayed", "claim", "complete", "fail", "extend", "progress", "reap", "promote"] {
        assert!(script(&result, name).ok > 0, "{name} was never called successfully");
    }
    let jobs = &result.summary.jobs;
    for counter in ["duplicates", "retried", "reaped", "promoted", "stalled", "stale_refused"] {
        assert!(jobs[counter] > 0, "{counter} is 0: {jobs:?}");
    }
    assert_eq!(jobs["payload_corrupt"], 0);
    assert_eq!(jobs["duplicate_accepted"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_run_still_writes_a_complete_results_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/throughput.toml");
    let mut a = args(&scenario, tmp.path());
    a.duration = Some(Duration::from_secs(60));
    let result = run(a, tokio::time::sleep(Duration::from_millis(2500))).await.unwrap();
    assert_eq!(result.outcome, CommandOutcome::Failed);
    support::assert_verdict_in_summary(&result);
    assert!(result.summary.interrupted);
    assert_eq!(
        result.summary.interrupt_reason.as_deref(),
        Some("interrupted by a stop signal (Ctrl-C, SIGTERM or SIGHUP)")
    );
    assert!(result.summary.measured_secs < 10.0);
    assert!(script(&result, "enqueue").ok > 0);
    assert_complete_folder(tmp.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_lost_mid_run_is_reported_and_the_folder_is_complete() {
    let tmp = tempfile::tempdir().unwrap();
    let server = support::server();
    let scenario = write_scenario(
        tmp.path(),
        "name = \"lost\"\nseed = 3\nduration = \"3s\"\ndrain = \"1s\"\n\
         [producers]\ncount = 1\npipeline = 2\n[consumers]\ncount = 1\n",
    );
    let mut a = args(&scenario, tmp.path());
    a.url = Some(server.url());
    a.timeout = Duration::from_millis(500);
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1200));
        server.stop();
    });
    let result = run(a, never()).await.unwrap();
    killer.join().unwrap();
    assert_eq!(result.outcome, CommandOutcome::Failed);
    support::assert_verdict_in_summary(&result);
    assert!(result.summary.interrupted, "{:?}", result.summary.interrupt_reason);
    let errors: u64 = result.summary.scripts.iter().map(|s| s.calls - s.ok).sum();
    assert!(errors > 0, "requests after the loss are counted as errors");
    assert_complete_folder(tmp.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn existing_keys_are_refused_unless_forced() {
    let tmp = tempfile::tempdir().unwrap();
    let server = support::server();
    let mut conn = support::client(&server).await.connection().clone();
    redis::cmd("SET").arg("emq:{bench}:pending").arg("x").exec_async(&mut conn).await.unwrap();
    redis::cmd("SET").arg("unrelated").arg("kept").exec_async(&mut conn).await.unwrap();
    let scenario = write_scenario(tmp.path(), "name = \"safety\"\nseed = 1\njobs = 10\n[consumers]\ncount = 1\n");
    let mut a = args(&scenario, tmp.path());
    a.url = Some(server.url());
    let err = run(a.clone(), never()).await.err().expect("refused");
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("--force"), "{err}");
    a.force = true;
    let result = run(a, never()).await.unwrap();
    assert_eq!(result.outcome, CommandOutcome::Success, "{:?}", result.failures);
    let left: Vec<String> = redis::cmd("KEYS").arg("*").query_async(&mut conn).await.unwrap();
    assert_eq!(left, vec!["unrelated".to_string()], "the run deletes its own keys and only those");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_server_ends_the_run_after_the_give_up_window_not_its_length() {
    let tmp = tempfile::tempdir().unwrap();
    let server = support::server();
    let scenario = write_scenario(
        tmp.path(),
        "name = \"dead\"\nseed = 4\nduration = \"60s\"\n[producers]\ncount = 1\n[consumers]\ncount = 1\n",
    );
    let mut a = args(&scenario, &tmp.path().join("out"));
    a.url = Some(server.url());
    a.timeout = Duration::from_millis(500);
    a.give_up = Duration::from_secs(2);
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(1));
        server.stop();
    });
    let began = std::time::Instant::now();
    let result = run(a, never()).await.unwrap();
    killer.join().unwrap();
    // 60 s asked for; the server died at 1 s: the run ends a give-up window later (plus the
    // reply timeouts of the last reads), far from 60 s even on a loaded machine.
    assert!(began.elapsed() < Duration::from_secs(30), "the run took {:?}", began.elapsed());
    assert_eq!(result.outcome, CommandOutcome::Failed);
    support::assert_verdict_in_summary(&result);
    let reason = result.summary.interrupt_reason.clone().unwrap_or_default();
    assert!(reason.contains("unreachable") && reason.contains("--give-up"), "{reason}");
    assert_complete_folder(&tmp.path().join("out"));
}
