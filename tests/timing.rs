//! The timing tests of `emq-bench run`: per-request latency under pipelining and open-loop
//! intended-time measurement. They sit in a binary of their own and take turns (one lock),
//! so no other test's load shifts the milliseconds they assert on.

mod support;

use emq_bench::cmd::run::{run, RepResult};
use emq_bench::report::ScriptSummary;
use std::path::{Path, PathBuf};

/// One timing test at a time.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn never() -> std::future::Pending<()> {
    std::future::pending()
}

fn script<'a>(result: &'a RepResult, name: &str) -> &'a ScriptSummary {
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
    a.lua_dir = Some(lua);
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
    a.lua_dir = Some(lua);
    let result = run(a, never()).await.unwrap();
    let enqueue = script(&result, "enqueue");
    assert!(enqueue.ok >= 100, "{enqueue:?}");
    assert!(enqueue.service_us.p99 < 30_000, "service time stays near 5 ms: {:?}", enqueue.service_us);
    assert!(enqueue.latency_us.p99 >= 200_000, "latency from intended must grow: {:?}", enqueue.latency_us);
    assert!(enqueue.late > 50, "late sends are counted: {}", enqueue.late);
    // Twice the rate the server can serve: most sends leave late, and the fraction says so.
    assert!(enqueue.late_fraction > 0.25, "late fraction {}", enqueue.late_fraction);
    let rates = result.summary.producers.as_ref().expect("open loop");
    assert!(rates.late_fraction > 0.25 && rates.line().contains("sent late ("), "{}", rates.line());
    // The whole-run send-lag histogram is in totals.hlog beside latency and service time.
    let totals = emq_bench::report::hlog::read_log(&result.dir.join("totals.hlog")).unwrap();
    let lag = totals.iter().find(|e| e.tag == "send_lag.enqueue").expect("a send_lag.enqueue histogram");
    assert_eq!(lag.histogram.value_at_quantile(0.99), enqueue.send_lag_us.p99);
}

/// Issue 11 item 1: open-loop sends leave close to their intended time. At 1 000/s on this
/// VM the send lag's p50 is tens of µs (it was ~1 ms with tokio's timer); 400 µs leaves room
/// for a loaded CI box without letting a 1 ms timer pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_loop_sends_leave_within_microseconds_of_their_intended_time() {
    let _turn = TURN.lock().await;
    let tmp = tempfile::tempdir().unwrap();
    let scenario = write_scenario(
        tmp.path(),
        "name = \"lag\"\nseed = 1\nduration = \"3s\"\nwarmup = \"1s\"\n\
         [producers]\ncount = 1\npipeline = 4\nrate = 1000.0\n[consumers]\ncount = 0\n",
    );
    let result = run(args(&scenario, tmp.path()), never()).await.unwrap();
    let enqueue = script(&result, "enqueue");
    assert!(enqueue.send_lag_us.p50 <= 400, "send lag p50 {} µs: {:?}", enqueue.send_lag_us.p50, enqueue.send_lag_us);
    assert!(enqueue.send_lag_us.max > 0, "the lag is recorded");
    assert_eq!(enqueue.late_fraction, enqueue.late as f64 / enqueue.calls as f64);
    // Producers are rated over the load phase (after warmup), not load + drain.
    assert_eq!((enqueue.window.as_str(), enqueue.window_secs.round()), ("load", 2.0));
    assert!((enqueue.ops_per_sec - 1000.0).abs() < 100.0, "enqueue at {} ops/s", enqueue.ops_per_sec);
    let rates = result.summary.producers.as_ref().expect("open loop");
    assert!(rates.held, "{rates:?}");
}

/// Issue 11 item 4: a rate the run could not hold is said, with what was never sent, and
/// fails the run unless the scenario allows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_that_was_not_held_fails_the_run_and_says_what_was_never_sent() {
    let _turn = TURN.lock().await;
    let tmp = tempfile::tempdir().unwrap();
    let text = "name = \"over\"\nseed = 1\nduration = \"2s\"\n\
         [producers]\ncount = 1\npipeline = 1\nrate = 1000000.0\n[consumers]\ncount = 0\n";
    let scenario = write_scenario(tmp.path(), text);
    let result = run(args(&scenario, &tmp.path().join("a")), never()).await.unwrap();
    let rates = result.summary.producers.clone().expect("open loop");
    assert!(!rates.held && rates.never_sent > 1_000_000, "{rates:?}");
    assert!(rates.bottleneck.is_some());
    assert_eq!(result.outcome, emq_bench::cmd::CommandOutcome::Failed);
    support::assert_verdict_in_summary(&result);
    assert!(result.failures.iter().any(|f| f.contains("RATE NOT HELD")), "{:?}", result.failures);
    let allowed =
        write_scenario(tmp.path(), &text.replace("rate = 1000000.0", "rate = 1000000.0\nallow_shortfall = true"));
    let result = run(args(&allowed, &tmp.path().join("b")), never()).await.unwrap();
    assert!(result.table.contains("RATE NOT HELD"), "still said: {}", result.table);
    assert_eq!(result.outcome, emq_bench::cmd::CommandOutcome::Success, "{:?}", result.failures);
}

/// A consumer's simulated work takes what the scenario says, not tokio's 1 ms tick: with
/// `work = "200us"` the time from a job's claim reply to its completion's send is 200 µs and a
/// little (the thread's timerfd), where a millisecond-tick timer makes it about 1 ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sub_millisecond_work_takes_its_own_time() {
    let _turn = TURN.lock().await;
    let tmp = tempfile::tempdir().unwrap();
    let scenario = write_scenario(
        tmp.path(),
        "name = \"work200\"\nseed = 7\njobs = 600\ndrain = \"20s\"\n\
         [producers]\ncount = 1\npipeline = 16\n\
         [consumers]\ncount = 1\npipeline = 1\nbatch = 1\nwork = \"200us\"\n",
    );
    let out = tmp.path().join("out");
    let result = run(args(&scenario, &out), never()).await.unwrap();
    assert!(result.summary.drained, "{:?}", result.failures);
    let (header, streams) = emq_bench::history::file::load(&out.join("history.bin")).unwrap();
    let history = emq_bench::history::History::merge(header, &streams).unwrap();
    use emq_bench::history::Kind;
    let mut waits: Vec<u64> = history
        .per_job()
        .filter_map(|events| {
            let claimed = events.iter().find(|e| e.kind == Kind::Claim)?.done_us;
            let completed = events.iter().find(|e| e.kind == Kind::Complete)?.sent_us;
            Some(completed.saturating_sub(claimed))
        })
        .collect();
    assert!(waits.len() >= 500, "{} jobs claimed and completed", waits.len());
    waits.sort_unstable();
    let median = waits[waits.len() / 2];
    assert!(waits[0] >= 195, "a job's work is never cut short: {} µs", waits[0]);
    assert!(median < 600, "median claim-to-complete {median} µs for 200 µs of work: not the precise timer");
}
