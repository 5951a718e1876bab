//! Recorder + reporter together: merging, interval boundaries, warmup, errors, buffer reuse.

use std::time::{Duration, Instant};

use super::*;
use crate::lua::{ErrorCode, Script};

const S: Script = Script::Complete;

/// `start + ms` milliseconds.
fn at(start: Instant, ms: u64) -> Instant {
    start + Duration::from_millis(ms)
}

fn totals(m: &RunMetrics, script: Script) -> &ScriptTotals {
    m.script(script).expect("the script was called")
}

#[test]
fn merged_percentiles_equal_one_histogram_fed_everything() {
    let start = Instant::now();
    let (mut reporter, sink) = Reporter::new(start, Duration::ZERO);
    let (mut a, mut b) = (Recorder::new(&sink), Recorder::new(&sink));
    let mut single = new_histogram();
    for v in 1..=1000 {
        a.record_ok(S, v, v / 2);
        record_us(&mut single, v);
    }
    for _ in 0..10 {
        b.record_ok(S, 1_000_000, 900);
        record_us(&mut single, 1_000_000);
    }
    a.maybe_flush(at(start, 1_100));
    b.maybe_flush(at(start, 1_100));
    reporter.drain();
    let m = reporter.finish(at(start, 1_000));
    let t = totals(&m, S);
    assert_eq!(t.ok, 1010);
    assert_eq!(t.latency.len(), single.len());
    for q in [0.5, 0.9, 0.99, 0.999, 1.0] {
        assert_eq!(t.latency.value_at_quantile(q), single.value_at_quantile(q), "q={q}");
    }
    // The merged p99 is ~1 ms; averaging the two tasks' p99s (~990 and 1e6) would give ~500 ms.
    let p99 = t.latency.value_at_quantile(0.99);
    assert!((990..=1001).contains(&p99), "p99 {p99}");
    assert_eq!(t.latency.max(), single.max());
    assert_eq!(t.service.len(), 1010);
    assert_eq!(m.measured_us, 1_000_000);
}

#[test]
fn runs_of_equal_calls_record_what_each_call_would_have() {
    let start = Instant::now();
    let (mut reporter, sink) = Reporter::new(start, Duration::ZERO);
    let mut rec = Recorder::new(&sink);
    let mut single = (new_histogram(), new_histogram());
    // Runs of equal calls, broken by another script, other values and an error between.
    let calls = [(S, 100, 50), (S, 100, 50), (S, 100, 50), (Script::Claim, 100, 50), (S, 100, 50), (S, 100, 51)];
    for (k, &(script, latency, service)) in calls.iter().cycle().take(600).enumerate() {
        rec.record_ok(script, latency, service);
        if k % 97 == 0 {
            rec.record_error(S, ErrorCode::Fence, 7);
        }
        if script == S {
            record_us(&mut single.0, latency);
            record_us(&mut single.1, service);
        }
    }
    rec.flush_final();
    reporter.drain();
    let m = reporter.finish(at(start, 1_000));
    let t = totals(&m, S);
    assert_eq!((t.ok, t.error_total()), (500, 7));
    assert_eq!(t.latency, single.0);
    assert_eq!(t.service, single.1);
    assert_eq!(totals(&m, Script::Claim).ok, 100);
}

#[test]
fn samples_land_in_the_interval_of_their_read_time() {
    let start = Instant::now();
    let (mut reporter, sink) = Reporter::new(start, Duration::ZERO);
    let mut rec = Recorder::new(&sink);
    for (t, n) in [(100, 3), (1_500, 5), (3_200, 2)] {
        for _ in 0..n {
            rec.maybe_flush(at(start, t));
            rec.record_ok(S, 100, 50);
        }
    }
    rec.bump(JobCounter::Completed, 2);
    rec.flush_final();
    reporter.drain();
    let m = reporter.finish(at(start, 3_500));
    let series: Vec<(u64, u64)> = m.intervals.iter().map(|r| (r.index, r.scripts[0].ok)).collect();
    assert_eq!(series, vec![(0, 3), (1, 5), (3, 2)]);
    assert_eq!(m.intervals[2].duration_us, 500_000, "last interval cut at the end");
    assert_eq!(m.intervals[2].jobs[JobCounter::Completed.index()], 2);
    assert_eq!(totals(&m, S).ok, 10);
}

#[test]
fn warmup_intervals_are_excluded_from_totals_and_series() {
    let start = Instant::now();
    let (mut reporter, sink) = Reporter::new(start, Duration::from_millis(1_000));
    let mut rec = Recorder::new(&sink);
    for _ in 0..5 {
        rec.record_ok(S, 10_000, 10_000);
    }
    rec.bump(JobCounter::Enqueued, 3);
    rec.maybe_flush(at(start, 1_001));
    for _ in 0..7 {
        rec.record_ok(S, 100, 100);
    }
    rec.bump(JobCounter::Enqueued, 4);
    rec.flush_final();
    reporter.drain();
    let m = reporter.finish(at(start, 2_000));
    assert_eq!(m.warmup_intervals, 1);
    assert_eq!(m.measured_us, 1_000_000);
    assert_eq!(totals(&m, S).ok, 7);
    assert_eq!(totals(&m, S).latency.max(), 100, "no warmup sample in the histogram");
    assert_eq!(m.intervals.len(), 1);
    assert_eq!(m.intervals[0].index, 1);
    assert_eq!(m.job(JobCounter::Enqueued), 4);
    assert_eq!(m.warmup_jobs[JobCounter::Enqueued.index()], 3);
}

#[test]
fn errors_are_counted_by_code_and_never_as_ok() {
    let start = Instant::now();
    let (mut reporter, sink) = Reporter::new(start, Duration::ZERO);
    let mut rec = Recorder::new(&sink);
    rec.record_ok(S, 200, 100);
    rec.record_error(S, ErrorCode::Fence, 50);
    rec.record_error(S, ErrorCode::Fence, 60);
    rec.record_error(S, ErrorCode::Timeout, 5_000_000);
    rec.record_late(S);
    drop(rec);
    reporter.drain();
    let m = reporter.finish(at(start, 1_000));
    let t = totals(&m, S);
    assert_eq!((t.ok, t.error_total(), t.calls(), t.late), (1, 3, 4, 1));
    assert_eq!(t.errors[ErrorCode::Fence.index()], 2);
    assert_eq!(t.errors[ErrorCode::Timeout.index()], 1);
    assert_eq!(t.latency.len(), 1, "error latencies stay out of the ok histogram");
    assert_eq!(t.latency.max(), 200);
    assert_eq!(t.error_latency.len(), 3);
    assert_eq!(m.job(JobCounter::LateSends), 1);
}

#[test]
fn steady_state_reuses_boxes_and_histograms() {
    let start = Instant::now();
    let (mut reporter, sink) = Reporter::new(start, Duration::ZERO);
    let mut rec = Recorder::new(&sink);
    let mut after_warmup = None;
    for k in 0..20u64 {
        rec.maybe_flush(at(start, k * 1_000 + 10));
        rec.record_ok(Script::Claim, 100 + k, 90);
        rec.record_ok(S, 300, 200);
        rec.record_error(S, ErrorCode::State, 40);
        reporter.drain();
        reporter.tick(at(start, k * 1_000 + 250));
        if k == 3 {
            after_warmup = Some(rec.allocations());
        }
    }
    assert_eq!(rec.boxes_created(), 2, "one box in flight, one being filled");
    assert_eq!(Some(rec.allocations()), after_warmup, "no allocation after the pool is warm");
    drop(rec);
    let m = reporter.finish(at(start, 20_000));
    assert_eq!(totals(&m, Script::Claim).ok, 20);
    assert_eq!(m.intervals.len(), 20);
}

#[test]
fn data_arriving_after_an_interval_closed_is_still_merged() {
    let start = Instant::now();
    let (mut reporter, sink) = Reporter::new(start, Duration::ZERO);
    let (mut fast, mut slow) = (Recorder::new(&sink), Recorder::new(&sink));
    fast.record_ok(S, 100, 100);
    slow.record_ok(S, 900, 900);
    fast.maybe_flush(at(start, 1_001));
    reporter.drain();
    reporter.tick(at(start, 4_250)); // closes interval 0 (grace passed)
    slow.maybe_flush(at(start, 4_300)); // the stalled task's data for interval 0
    reporter.drain();
    let m = reporter.finish(at(start, 5_000));
    assert_eq!(totals(&m, S).ok, 2);
    assert_eq!(m.intervals.len(), 1);
    let s = &m.intervals[0].scripts[0];
    assert_eq!((s.ok, s.max_us), (2, 900));
    assert_eq!(s.latency.decode().unwrap().len(), 2);
}

#[test]
fn live_snapshot_shows_the_last_finished_interval() {
    let start = Instant::now();
    let (mut reporter, sink) = Reporter::new(start, Duration::from_secs(1));
    let live = reporter.live();
    let mut rec = Recorder::new(&sink);
    for _ in 0..40 {
        rec.record_ok(S, 2_000, 1_000);
    }
    rec.record_error(S, ErrorCode::NoJob, 10);
    rec.maybe_flush(at(start, 1_010));
    reporter.drain();
    reporter.tick(at(start, 1_250));
    let snap = live.borrow().clone();
    assert_eq!((snap.interval, snap.warmup), (0, true));
    assert_eq!(snap.ops_per_sec[S.index()], 40.0);
    assert!((2_000..=2_002).contains(&snap.p99_us[S.index()]));
    assert_eq!(snap.errors_total, 1);
}

#[tokio::test]
async fn run_loop_ends_when_every_recorder_is_dropped() {
    let start = Instant::now();
    let (reporter, sink) = Reporter::new(start, Duration::ZERO);
    let handle = tokio::spawn(reporter.run());
    let task = {
        let sink = sink.clone();
        tokio::spawn(async move {
            let mut rec = Recorder::new(&sink);
            for i in 0..100 {
                rec.maybe_flush(Instant::now());
                rec.record_ok(Script::Enqueue, i, i);
            }
            rec.flush_final();
        })
    };
    drop(sink);
    task.await.unwrap();
    let m = handle.await.unwrap().finish(Instant::now());
    assert_eq!(totals(&m, Script::Enqueue).ok, 100);
}

/// A finished run whose only calls are `n` ok calls of each of `scripts` (latency `us`).
fn run_of(scripts: &[Script], n: u64, us: u64) -> RunMetrics {
    let start = Instant::now();
    let (mut reporter, sink) = Reporter::new(start, Duration::ZERO);
    let mut rec = Recorder::new(&sink);
    for &script in scripts {
        for _ in 0..n {
            rec.record_ok(script, us, us);
        }
    }
    rec.maybe_flush(at(start, 1_000));
    drop(rec);
    reporter.drain();
    reporter.finish(at(start, 1_000))
}

#[test]
fn repetitions_that_called_other_scripts_merge_by_script() {
    let mut all = run_of(&[Script::Claim], 3, 100);
    all.absorb(&run_of(&[Script::Enqueue, Script::Complete], 2, 200));
    all.absorb(&run_of(&[Script::Claim, Script::Complete], 1, 300));
    let called: Vec<(Script, u64)> = all.scripts.iter().map(|t| (t.script, t.ok)).collect();
    assert_eq!(called, [(Script::Enqueue, 2), (Script::Claim, 4), (Script::Complete, 3)], "in Script order");
    let claim = all.script(Script::Claim).unwrap();
    assert_eq!((claim.latency.len(), claim.latency.max()), (4, 300));
    assert!(all.script(Script::Fail).is_none());
}
