//! `emq-bench run` end to end against real embedded servers: every shipped scenario runs and
//! drains; per-request latency under pipelining; open-loop intended-time measurement; an
//! interrupted run and a lost server still leave a complete results folder.

mod support;

use emq_bench::cli::RunArgs;
use emq_bench::cmd::run::{run, RunResult};
use emq_bench::cmd::Outcome;
use emq_bench::report::ScriptSummary;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn args(scenario: &Path, out: &Path) -> RunArgs {
    support::run_args(scenario, out)
}

fn never() -> std::future::Pending<()> {
    std::future::pending()
}

fn script<'a>(result: &'a RunResult, name: &str) -> &'a ScriptSummary {
    result.summary.scripts.iter().find(|s| s.script == name).unwrap_or_else(|| panic!("no {name} row"))
}

/// Checks that the results folder holds every file and that each parses.
fn assert_complete_folder(dir: &Path) {
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["schema_version"], 1);
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
}

/// A copy of `lua/` whose `enqueue.lua` busy-waits `ms` milliseconds of server CPU first.
fn slow_enqueue_lua(dir: &Path, ms: u32) -> PathBuf {
    // os.clock (CPU time) advances while busy; TIME is frozen for the length of a script.
    let busy = format!("local c0 = os.clock()\nwhile os.clock() - c0 < {} do end\n", f64::from(ms) / 1000.0);
    support::lua_copy(dir, "lua-slow", "enqueue", |source| busy + &source)
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
        a.duration = Some(Duration::from_millis(1500));
        let result = run(a, never()).await.unwrap();
        assert_eq!(result.outcome, Outcome::Success, "{}: {:?}", scenario.display(), result.failures);
        assert!(result.summary.drained, "{} did not drain", scenario.display());
        let enqueued = result.summary.jobs["enqueued"];
        assert!(enqueued > 0, "{}: nothing enqueued", scenario.display());
        assert_eq!(
            result.summary.jobs["completed"] + result.summary.jobs["failed"] - result.summary.jobs["stale_accepted"],
            enqueued,
            "{}: every job ends completed or failed once",
            scenario.display()
        );
        assert!(result.table.contains("enqueue"));
        assert_complete_folder(tmp.path());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_exercises_every_verb() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/smoke.toml");
    let result = run(args(&scenario, tmp.path()), never()).await.unwrap();
    assert_eq!(result.outcome, Outcome::Success, "{:?}", result.failures);
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
async fn pipelined_requests_are_timed_one_by_one() {
    // Four enqueues 1 ms apart on one connection (pipeline 4), to a server that spends 5 ms on
    // each. Valkey runs the first alone (reply at ~5 ms), then reads the other three in one go
    // and flushes their replies together (at ~20 ms). Each request's own latency is therefore
    // ~5, ~19, ~18, ~17 ms; a harness that gave the pipeline one time would report four equal
    // values, and one that timed from the batch start would report no 5 ms.
    let tmp = tempfile::tempdir().unwrap();
    let lua = slow_enqueue_lua(tmp.path(), 5);
    let scenario = write_scenario(
        tmp.path(),
        "name = \"pipeline\"\nseed = 7\njobs = 4\ndrain = \"5s\"\n\
         [producers]\ncount = 1\nconnections = 1\npipeline = 4\nrate = 1000.0\narrival = \"uniform\"\n\
         [consumers]\ncount = 1\npoll = \"10ms\"\n",
    );
    let mut a = args(&scenario, tmp.path());
    a.lua_dir = lua;
    let result = run(a, never()).await.unwrap();
    let enqueue = script(&result, "enqueue");
    assert_eq!(enqueue.ok, 4);
    let l = enqueue.latency_us;
    assert!(l.min >= 4_500, "no reply comes before its own 5 ms script: {l:?}");
    assert!(l.max as f64 >= 2.0 * l.min as f64, "latencies are per request: {l:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_loop_latency_counts_from_the_intended_send_time() {
    // 400 jobs/s offered to a server that can do 200/s (5 ms each) through one lane: the queue
    // of intended sends grows for the whole second, so latency from the intended time reaches
    // hundreds of ms while each request's own service time stays ~5 ms (no coordinated omission).
    let tmp = tempfile::tempdir().unwrap();
    let lua = slow_enqueue_lua(tmp.path(), 5);
    let scenario = write_scenario(
        tmp.path(),
        "name = \"openloop\"\nseed = 7\nduration = \"1s\"\ndrain = \"10s\"\n\
         [producers]\ncount = 1\npipeline = 1\nrate = 400.0\narrival = \"uniform\"\n\
         [consumers]\ncount = 1\n",
    );
    let mut a = args(&scenario, tmp.path());
    a.lua_dir = lua;
    let result = run(a, never()).await.unwrap();
    let enqueue = script(&result, "enqueue");
    assert!(enqueue.ok >= 100, "{enqueue:?}");
    assert!(enqueue.service_us.p99 < 30_000, "service time stays near 5 ms: {:?}", enqueue.service_us);
    assert!(enqueue.latency_us.p99 >= 200_000, "latency from intended must grow: {:?}", enqueue.latency_us);
    assert!(enqueue.late > 50, "late sends are counted: {}", enqueue.late);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_run_still_writes_a_complete_results_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/throughput.toml");
    let mut a = args(&scenario, tmp.path());
    a.duration = Some(Duration::from_secs(60));
    let result = run(a, tokio::time::sleep(Duration::from_millis(2500))).await.unwrap();
    assert_eq!(result.outcome, Outcome::Failed);
    assert!(result.summary.interrupted);
    assert_eq!(result.summary.interrupt_reason.as_deref(), Some("interrupted by Ctrl-C"));
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
    assert_eq!(result.outcome, Outcome::Failed);
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
    assert_eq!(result.outcome, Outcome::Success, "{:?}", result.failures);
    let left: Vec<String> = redis::cmd("KEYS").arg("*").query_async(&mut conn).await.unwrap();
    assert_eq!(left, vec!["unrelated".to_string()], "the run deletes its own keys and only those");
}
