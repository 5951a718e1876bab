//! The timing tests of `emq-bench run`: per-request latency under pipelining and open-loop
//! intended-time measurement. They sit in a binary of their own and take turns (one lock),
//! so no other test's load shifts the milliseconds they assert on.

mod support;

use emq_bench::cmd::run::{run, RunResult};
use emq_bench::report::ScriptSummary;
use std::path::{Path, PathBuf};

/// One timing test at a time.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn never() -> std::future::Pending<()> {
    std::future::pending()
}

fn script<'a>(result: &'a RunResult, name: &str) -> &'a ScriptSummary {
    result.summary.scripts.iter().find(|s| s.script == name).unwrap_or_else(|| panic!("no {name} row"))
}

fn write_scenario(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("scenario.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn args(scenario: &Path, out: &Path) -> emq_bench::cli::RunArgs {
    support::run_args(scenario, out)
}

/// A copy of `lua/` whose `enqueue.lua` busy-waits `ms` milliseconds of server CPU first.
fn slow_enqueue_lua(dir: &Path, ms: u32) -> PathBuf {
    // os.clock (CPU time) advances while busy; TIME is frozen for the length of a script.
    let busy = format!("local c0 = os.clock()\nwhile os.clock() - c0 < {} do end\n", f64::from(ms) / 1000.0);
    support::lua_copy(dir, "lua-slow", "enqueue", |source| busy + &source)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_are_timed_one_by_one() {
    let _turn = TURN.lock().await;
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
    let _turn = TURN.lock().await;
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
