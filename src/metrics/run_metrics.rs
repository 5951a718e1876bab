//! The finished measurement: what [`Reporter::finish`](super::Reporter::finish) hands to `report/`.

use std::time::SystemTime;

use hdrhistogram::Histogram;

use super::{new_histogram, CompactHistogram, JobCounter};
use crate::lua::{ErrorCode, Script};

/// One script's totals over the measured part of the run (warmup excluded).
#[derive(Debug)]
pub struct ScriptTotals {
    /// The script.
    pub script: Script,
    /// Ok calls (the only calls counted as throughput).
    pub ok: u64,
    /// Failed calls by [`ErrorCode::index`].
    pub errors: [u64; ErrorCode::COUNT],
    /// Late open-loop sends.
    pub late: u64,
    /// Ok calls, µs from the intended send (coordinated-omission free); merged, never averaged.
    pub latency: Histogram<u64>,
    /// Ok calls, µs from the actual send.
    pub service: Histogram<u64>,
    /// Failed calls, µs from the intended send.
    pub error_latency: Histogram<u64>,
    /// Open-loop sends, µs from the intended to the actual send (every call).
    pub send_lag: Histogram<u64>,
}

impl ScriptTotals {
    pub(crate) fn new(script: Script) -> ScriptTotals {
        ScriptTotals {
            script,
            ok: 0,
            errors: [0; ErrorCode::COUNT],
            late: 0,
            latency: new_histogram(),
            service: new_histogram(),
            error_latency: new_histogram(),
            send_lag: new_histogram(),
        }
    }

    /// Adds `ok` and `late` calls and failed calls by [`ErrorCode::index`].
    pub(crate) fn add_counts(&mut self, ok: u64, late: u64, errors: &[u64; ErrorCode::COUNT]) {
        self.ok += ok;
        self.late += late;
        for (total, add) in self.errors.iter_mut().zip(errors) {
            *total += add;
        }
    }

    /// Total failed calls (all codes).
    pub fn error_total(&self) -> u64 {
        self.errors.iter().sum()
    }

    /// Calls made: ok plus failed.
    pub fn calls(&self) -> u64 {
        self.ok + self.error_total()
    }

    /// True when the script was called (or an open-loop send of it was late) in the measured
    /// part: the scripts a summary, scripts.csv and intervals.csv have rows for.
    pub fn was_called(&self) -> bool {
        self.calls() > 0 || self.late > 0
    }
}

/// One script within one measured interval (only scripts with at least one call or late send).
#[derive(Clone, Debug)]
pub struct IntervalScript {
    /// The script.
    pub script: Script,
    /// Ok calls in this interval.
    pub ok: u64,
    /// Failed calls in this interval by [`ErrorCode::index`].
    pub errors: [u64; ErrorCode::COUNT],
    /// Late open-loop sends in this interval.
    pub late: u64,
    /// Median ok latency from the intended send, µs (0 when no ok call).
    pub p50_us: u64,
    /// 99th percentile ok latency, µs (0 when no ok call).
    pub p99_us: u64,
    /// Highest ok latency, µs (0 when no ok call).
    pub max_us: u64,
    /// The interval's ok-latency histogram, V2-encoded (what `latency.hlog` writes).
    pub latency: CompactHistogram,
}

impl IntervalScript {
    /// Total failed calls (all codes) in this interval.
    pub fn error_total(&self) -> u64 {
        self.errors.iter().sum()
    }
}

/// One measured interval of the per-second series.
#[derive(Clone, Debug)]
pub struct IntervalRecord {
    /// Interval index `k` (counted from the run start, warmup included).
    pub index: u64,
    /// Interval start, µs since the run start (`k * 1_000_000`).
    pub start_us: u64,
    /// Interval length, µs: 1 s, except a last interval cut short by the end of the run.
    pub duration_us: u64,
    /// Scripts with at least one call in the interval, in [`Script::index`] order.
    pub scripts: Vec<IntervalScript>,
    /// Job counters bumped in this interval, by [`JobCounter::index`].
    pub jobs: [u64; JobCounter::COUNT],
}

/// The finished measurement of one run (warmup excluded everywhere except `warmup_jobs`).
#[derive(Debug)]
pub struct RunMetrics {
    /// Wall-clock time of the run start (interval 0), for the hlog StartTime/BaseTime headers.
    pub start_wall: SystemTime,
    /// Whole warmup intervals dropped from every total and from the series.
    pub warmup_intervals: u64,
    /// Measured duration, µs: from the end of warmup to the end the driver gave `finish`.
    /// Every ops/s figure divides ok calls by this.
    pub measured_us: u64,
    /// Per-script totals of the scripts called (or sent late) in the measured part, in
    /// [`Script`] order; [`RunMetrics::script`] finds one.
    pub scripts: Vec<ScriptTotals>,
    /// The per-second series, measured intervals only, by ascending index (missing = no data).
    /// A reporter that streams its seconds to a tap finishes with only the data merged into a
    /// second after it closed; the tap's owner puts the series back.
    pub intervals: Vec<IntervalRecord>,
    /// Job counters over the measured part, by [`JobCounter::index`].
    pub jobs: [u64; JobCounter::COUNT],
    /// Job counters during warmup (jobs enqueued then still exist: the checker wants both).
    pub warmup_jobs: [u64; JobCounter::COUNT],
}

impl RunMetrics {
    /// Measured duration in seconds (0.0 if the run ended during warmup).
    pub fn measured_secs(&self) -> f64 {
        self.measured_us as f64 / 1e6
    }

    /// A job counter over the measured part.
    pub fn job(&self, counter: JobCounter) -> u64 {
        self.jobs[counter.index()]
    }

    /// `script`'s totals; `None` when it was not called in the measured part.
    pub fn script(&self, script: Script) -> Option<&ScriptTotals> {
        self.scripts.iter().find(|t| t.script == script)
    }
}

impl RunMetrics {
    /// `script`'s totals, made empty (in [`Script`] order) when it has none yet.
    pub(crate) fn script_mut(&mut self, script: Script) -> &mut ScriptTotals {
        let at = match self.scripts.binary_search_by_key(&script.index(), |t| t.script.index()) {
            Ok(at) => at,
            Err(at) => {
                self.scripts.insert(at, ScriptTotals::new(script));
                at
            }
        };
        &mut self.scripts[at]
    }

    /// Adds `other`'s totals into this one (repetitions of one scenario): calls, errors and
    /// job counters summed, histograms merged (never percentiles averaged), measured time
    /// summed so ops/s stays ok calls / measured seconds. The per-second series stay this
    /// run's own.
    pub fn absorb(&mut self, other: &RunMetrics) {
        for theirs in &other.scripts {
            let mine = self.script_mut(theirs.script);
            mine.add_counts(theirs.ok, theirs.late, &theirs.errors);
            // Every histogram comes from `new_histogram`, growable, so add cannot fail.
            let _ = mine.latency.add(&theirs.latency);
            let _ = mine.service.add(&theirs.service);
            let _ = mine.error_latency.add(&theirs.error_latency);
            let _ = mine.send_lag.add(&theirs.send_lag);
        }
        for (a, b) in self.jobs.iter_mut().zip(other.jobs) {
            *a += b;
        }
        for (a, b) in self.warmup_jobs.iter_mut().zip(other.warmup_jobs) {
            *a += b;
        }
        self.measured_us += other.measured_us;
    }
}
