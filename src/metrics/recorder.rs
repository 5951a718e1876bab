//! The per-task recorder: plain arrays on the hot path, a box swap once a second.

use std::time::{Duration, Instant};

use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};

use super::{interval_index, IntervalData, JobCounter};
use crate::lua::{ErrorCode, Script};

/// One filled interval on its way to the reporter, with the channel its emptied box goes back on.
///
/// Opaque: only [`Recorder`] makes one and only [`Reporter`](super::Reporter) opens it.
#[derive(Debug)]
pub struct Flush {
    pub(crate) data: Box<IntervalData>,
    pub(crate) back: UnboundedSender<Box<IntervalData>>,
}

/// Where recorders send their intervals: clone it into every load task, then drop the original.
///
/// The reporter's run loop ends when every sink and every recorder made from one is dropped.
#[derive(Clone, Debug)]
pub struct MetricsSink {
    pub(crate) tx: UnboundedSender<Flush>,
    pub(crate) start: Instant,
}

impl MetricsSink {
    /// The run start every interval index is counted from.
    pub fn start(&self) -> Instant {
        self.start
    }
}

/// One load task's recorder: owned by the task, `&mut self` only, no lock, no per-request allocation.
///
/// Per reply the task calls [`maybe_flush`](Recorder::maybe_flush) with the read time (one
/// `Instant` comparison unless a 1 s boundary has passed) and then `record_*` (array writes and
/// `Histogram::record_n`, clamped: [`record_us_n`](super::record_us_n)). At a boundary the
/// filled box is swapped for a spare returned by the reporter (a new box only while the pool is
/// warming up: two boxes per task in steady state).
#[derive(Debug)]
pub struct Recorder {
    current: Box<IntervalData>,
    start: Instant,
    next_boundary: Instant,
    tx: UnboundedSender<Flush>,
    back_tx: UnboundedSender<Box<IntervalData>>,
    back_rx: UnboundedReceiver<Box<IntervalData>>,
    boxes_created: u64,
    histograms_created: u64,
    /// Ok calls recorded but not yet in the interval's histograms: a run of consecutive calls
    /// of one script with the same latencies, written with one `record_n` when it ends (a
    /// different call, or the interval's end). Replies of one pipelined read share their
    /// read time, and those of one write their send time, so at 1 connection x 64 in flight
    /// the two histogram records are paid once per run, not once per reply. The histograms
    /// are the same: `record_n(v, n)` is `n` records of `v`.
    run: Option<OkRun>,
}

/// A run of equal ok calls ([`Recorder::record_ok`]).
#[derive(Debug)]
struct OkRun {
    script: Script,
    latency_us: u64,
    service_us: u64,
    n: u64,
}

impl Recorder {
    /// A recorder sending to `sink`, starting in the interval that contains "now".
    pub fn new(sink: &MetricsSink) -> Recorder {
        let (back_tx, back_rx) = mpsc::unbounded_channel();
        let mut current = IntervalData::new_boxed();
        current.index = interval_index(sink.start, Instant::now());
        Recorder {
            next_boundary: boundary_after(sink.start, current.index),
            current,
            start: sink.start,
            tx: sink.tx.clone(),
            back_tx,
            back_rx,
            boxes_created: 1,
            histograms_created: 0,
            run: None,
        }
    }

    /// Count one ok call of `script`: `latency_us` from the intended send (open loop; equal to the
    /// actual send in closed loop), `service_us` from the actual send. Both in µs.
    #[inline]
    pub fn record_ok(&mut self, script: Script, latency_us: u64, service_us: u64) {
        match &mut self.run {
            Some(run) if run.script == script && run.latency_us == latency_us && run.service_us == service_us => {
                run.n += 1;
            }
            _ => {
                self.end_run();
                self.run = Some(OkRun { script, latency_us, service_us, n: 1 });
            }
        }
    }

    /// Writes the run of equal ok calls into the interval's histograms.
    #[inline]
    fn end_run(&mut self) {
        if let Some(run) = self.run.take() {
            self.current.record_ok_n(run.script, run.latency_us, run.service_us, run.n);
        }
    }

    /// Count one failed call of `script` by `code`, with its latency from the intended send, µs.
    /// Never counted as throughput, never in the ok percentiles.
    #[inline]
    pub fn record_error(&mut self, script: Script, code: ErrorCode, latency_us: u64) {
        self.current.record_error(script, code, latency_us);
    }

    /// Record one open-loop send's lag behind its intended time, µs.
    #[inline]
    pub fn record_lag(&mut self, script: Script, lag_us: u64) {
        self.current.record_lag(script, lag_us);
    }

    /// Count one late open-loop send of `script` (the caller applies the scenario's `late_after` rule). Also bumps
    /// [`JobCounter::LateSends`], so the jobs line carries the total.
    #[inline]
    pub fn record_late(&mut self, script: Script) {
        self.current.scripts[script.index()].late += 1;
        self.current.jobs[JobCounter::LateSends.index()] += 1;
    }

    /// Add `n` to a job-level counter.
    #[inline]
    pub fn bump(&mut self, counter: JobCounter, n: u64) {
        self.current.jobs[counter.index()] += n;
    }

    /// Call before recording a reply read at `now`: if `now` is past the current interval, hand the
    /// filled interval to the reporter and continue in the interval containing `now` (intervals in
    /// which this task recorded nothing are simply never sent; the reporter reads them as zero).
    #[inline]
    pub fn maybe_flush(&mut self, now: Instant) {
        if now >= self.next_boundary {
            self.rotate(interval_index(self.start, now));
        }
    }

    /// Send whatever the current interval holds (call once when the task ends; also done on drop).
    pub fn flush_final(&mut self) {
        let index = self.current.index;
        self.rotate(index);
    }

    /// Boxes this recorder has allocated so far (1 at creation; 2 in steady state, plus histograms
    /// allocated inside them on a script's first use, counted by [`allocations`](Self::allocations)).
    pub fn boxes_created(&self) -> u64 {
        self.boxes_created
    }

    /// Boxes plus histograms this recorder's boxes have allocated (constant in steady state).
    pub fn allocations(&self) -> u64 {
        self.boxes_created + self.histograms_created + self.current.allocations
    }

    /// Send the current box (if not empty) and continue in interval `next_index`.
    #[cold]
    fn rotate(&mut self, next_index: u64) {
        self.end_run();
        if !self.current.is_empty() {
            // The reporter returns boxes already reset; a new one only while the pool warms up.
            let spare = self.back_rx.try_recv().unwrap_or_else(|_| {
                self.boxes_created += 1;
                IntervalData::new_boxed()
            });
            let mut full = std::mem::replace(&mut self.current, spare);
            self.histograms_created += std::mem::take(&mut full.allocations);
            let flush = Flush { data: full, back: self.back_tx.clone() };
            // A closed channel means the reporter is gone (run aborted): drop the data quietly.
            let _ = self.tx.send(flush);
        }
        self.current.index = next_index;
        self.next_boundary = boundary_after(self.start, next_index);
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.flush_final();
    }
}

/// End of interval `k`: `start + (k+1) s`.
fn boundary_after(start: Instant, k: u64) -> Instant {
    start + Duration::from_secs(k + 1)
}
