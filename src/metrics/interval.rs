//! One task's (or the merged) data for one interval: per-script counts and histograms, job counters.

use hdrhistogram::Histogram;

use super::{new_histogram, record_us, record_us_n, JobCounter};
use crate::lua::{ErrorCode, Script};

/// One script's calls within one interval.
///
/// Histograms are allocated on first use (a producer task never pays for `claim`'s) and then kept
/// for the life of the box: [`IntervalData::reset`] clears them without freeing, so a recycled box
/// records without allocating.
#[derive(Debug, Default)]
pub struct ScriptInterval {
    /// Calls that succeeded (the only calls counted as throughput).
    pub ok: u64,
    /// Failed calls by [`ErrorCode::index`].
    pub errors: [u64; ErrorCode::COUNT],
    /// Open-loop sends later than intended (the caller decides the threshold, 1 ms).
    pub late: u64,
    /// Ok calls, µs from the *intended* send time (coordinated-omission free, as wrk2).
    pub(crate) latency: Option<Histogram<u64>>,
    /// Ok calls, µs from the actual send time (what the server and the wire cost).
    pub(crate) service: Option<Histogram<u64>>,
    /// Failed calls, µs from the intended send time (kept apart: a fast refusal must not make the
    /// script look faster, and a timeout must not hide in the ok percentiles).
    pub(crate) error_latency: Option<Histogram<u64>>,
    /// Open-loop sends, µs from the intended to the actual send time (how well the harness held
    /// its schedule; every call, ok or not).
    pub(crate) send_lag: Option<Histogram<u64>>,
}

impl ScriptInterval {
    /// Ok-call latency from the intended send, if any ok call was recorded since the box was made.
    pub fn latency(&self) -> Option<&Histogram<u64>> {
        self.latency.as_ref()
    }

    /// Ok-call service time from the actual send.
    pub fn service(&self) -> Option<&Histogram<u64>> {
        self.service.as_ref()
    }

    /// Failed-call latency from the intended send.
    pub fn error_latency(&self) -> Option<&Histogram<u64>> {
        self.error_latency.as_ref()
    }

    /// Open-loop send lag, µs.
    pub fn send_lag(&self) -> Option<&Histogram<u64>> {
        self.send_lag.as_ref()
    }

    /// Total failed calls (all codes).
    pub fn error_total(&self) -> u64 {
        self.errors.iter().sum()
    }

    /// True when nothing was recorded (no ok, no error, no late send).
    pub fn is_empty(&self) -> bool {
        self.ok == 0 && self.late == 0 && self.error_total() == 0
    }

    fn reset(&mut self) {
        self.ok = 0;
        self.errors = [0; ErrorCode::COUNT];
        self.late = 0;
        for h in
            [&mut self.latency, &mut self.service, &mut self.error_latency, &mut self.send_lag].into_iter().flatten()
        {
            h.reset();
        }
    }
}

/// The slot's histogram, allocated on first use; bumps `allocs` when it had to allocate.
#[inline]
fn slot<'a>(h: &'a mut Option<Histogram<u64>>, allocs: &mut u64) -> &'a mut Histogram<u64> {
    h.get_or_insert_with(|| {
        *allocs += 1;
        new_histogram()
    })
}

/// Add `src` into the lazily allocated `dst` (growable: it takes any `src`).
fn merge_slot(dst: &mut Option<Histogram<u64>>, src: &Option<Histogram<u64>>, allocs: &mut u64) {
    if let Some(src) = src.as_ref().filter(|h| !h.is_empty()) {
        slot(dst, allocs).add(src).expect("a growable histogram takes any other");
    }
}

/// Everything one recorder saw in one interval, tagged with the interval index.
///
/// Shape: `scripts[Script::index()]`, `jobs[JobCounter::index()]`. Always handled boxed (a few KB
/// plus 16-139 KB per allocated histogram) and recycled between task and reporter.
#[derive(Debug, Default)]
pub struct IntervalData {
    /// Interval index `k`: the data covers `[start + k s, start + (k+1) s)`.
    pub index: u64,
    /// Per-script data, indexed by [`Script::index`].
    pub scripts: [ScriptInterval; Script::COUNT],
    /// Job-level counters, indexed by [`JobCounter::index`].
    pub jobs: [u64; JobCounter::COUNT],
    /// Histograms this box has allocated over its life (for the "steady state allocates nothing"
    /// check; never reset).
    pub(crate) allocations: u64,
}

impl IntervalData {
    /// A new, empty box for interval 0 with no histogram allocated yet.
    pub fn new_boxed() -> Box<IntervalData> {
        Box::default()
    }

    /// Count `n` ok calls with the same two latencies, µs, and record them (`n` times each).
    #[inline]
    pub(crate) fn record_ok_n(&mut self, script: Script, latency_us: u64, service_us: u64, n: u64) {
        let s = &mut self.scripts[script.index()];
        s.ok += n;
        record_us_n(slot(&mut s.latency, &mut self.allocations), latency_us, n);
        record_us_n(slot(&mut s.service, &mut self.allocations), service_us, n);
    }

    /// Count one failed call by code and record its latency from the intended send, µs.
    #[inline]
    pub(crate) fn record_error(&mut self, script: Script, code: ErrorCode, latency_us: u64) {
        let s = &mut self.scripts[script.index()];
        s.errors[code.index()] += 1;
        record_us(slot(&mut s.error_latency, &mut self.allocations), latency_us);
    }

    /// Record one open-loop send's lag behind its intended time, µs.
    #[inline]
    pub(crate) fn record_lag(&mut self, script: Script, lag_us: u64) {
        let s = &mut self.scripts[script.index()];
        record_us(slot(&mut s.send_lag, &mut self.allocations), lag_us);
    }

    /// True when nothing at all was recorded (the recorder then skips sending it).
    pub fn is_empty(&self) -> bool {
        self.jobs.iter().all(|&n| n == 0) && self.scripts.iter().all(ScriptInterval::is_empty)
    }

    /// Add every count and histogram of `other` into `self` (the index is left alone).
    ///
    /// Percentiles are never averaged: histograms are merged with `Histogram::add`.
    pub fn merge_from(&mut self, other: &IntervalData) {
        for (dst, src) in self.scripts.iter_mut().zip(&other.scripts) {
            dst.ok += src.ok;
            dst.late += src.late;
            for (d, s) in dst.errors.iter_mut().zip(&src.errors) {
                *d += s;
            }
            merge_slot(&mut dst.latency, &src.latency, &mut self.allocations);
            merge_slot(&mut dst.service, &src.service, &mut self.allocations);
            merge_slot(&mut dst.error_latency, &src.error_latency, &mut self.allocations);
            merge_slot(&mut dst.send_lag, &src.send_lag, &mut self.allocations);
        }
        for (d, s) in self.jobs.iter_mut().zip(&other.jobs) {
            *d += s;
        }
    }

    /// Zero every count and histogram, keeping the histograms' memory for reuse.
    pub fn reset(&mut self) {
        self.scripts.iter_mut().for_each(ScriptInterval::reset);
        self.jobs = [0; JobCounter::COUNT];
    }
}
