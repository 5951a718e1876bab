//! Measurement: per-script latency histograms, the one-second interval swap and the merge.
//!
//! Shape of the data flow (the HdrHistogram / wrk2 recipe, without locks on the hot path):
//!
//! ```text
//! load task ── owns a Recorder (plain arrays indexed by Script::index(), &mut self, no lock)
//!    │  record_ok / record_error / record_late / bump          per reply: array writes only
//!    │  maybe_flush(now)                                        per reply: one Instant compare
//!    ▼  once a second: swap the filled Box<IntervalData> for a spare, send it (unbounded mpsc)
//! Reporter ── merges every task's box for interval k (Histogram::add, never averaging
//!    │        percentiles), returns the emptied box to its task (so steady state allocates
//!    │        nothing), publishes a LiveSnapshot (watch channel) for the progress line
//!    ▼  finish(end)
//! RunMetrics ── the finished measurement that every writer in `report/` reads.
//! ```
//!
//! Units: every latency is in **µs**, recorded in an HdrHistogram with 3 significant figures over
//! 1 µs ..= 60 s (`saturating_record`; 0 µs records as 1 µs). Interval `k` is
//! `[start + k s, start + (k+1) s)` where `start` is the one run start shared by every recorder.
//! Warmup is whole intervals dropped by the reporter (see [`Reporter::new`]).

mod compact;
mod counters;
pub mod cpu;
mod interval;
mod recorder;
mod reporter;
mod run;

pub use compact::CompactHistogram;
pub use counters::JobCounter;
pub use interval::{IntervalData, ScriptInterval};
pub use recorder::{Flush, MetricsSink, Recorder};
pub use reporter::{LiveSnapshot, Reporter};
pub use run::{IntervalRecord, IntervalScript, RunMetrics, ScriptTotals};

use std::time::Instant;

use hdrhistogram::Histogram;

/// Lowest trackable latency, µs (HdrHistogram's lower bound; a 0 µs sample is recorded as 1).
pub const LOWEST_US: u64 = 1;
/// Highest trackable latency, µs (60 s); larger samples saturate to this value.
pub const HIGHEST_US: u64 = 60_000_000;
/// HdrHistogram precision: 3 significant figures (0.1 % value resolution).
pub const SIGFIG: u8 = 3;
/// Length of one reporting interval, µs (1 s).
pub const INTERVAL_US: u64 = 1_000_000;

/// A new, empty latency histogram in µs with the harness-wide bounds (1 µs ..= 60 s, 3 sig. fig.).
///
/// Every histogram in the crate comes from here, so `Histogram::add` between any two of them takes
/// the fast same-layout path and can never fail with "value exceeds range".
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(LOWEST_US, HIGHEST_US, SIGFIG)
        .expect("constant bounds 1..60e6 with 3 sig. fig. are valid")
}

/// Record one latency in µs: 0 becomes 1 µs, anything above 60 s saturates (never an error).
#[inline]
pub fn record_us(h: &mut Histogram<u64>, us: u64) {
    h.saturating_record(us.max(LOWEST_US));
}

/// [`record_us`] `n` times, in one step.
pub fn record_us_n(h: &mut Histogram<u64>, us: u64, n: u64) {
    h.saturating_record_n(us.max(LOWEST_US), n);
}

/// Whole µs from `from` to `to`, 0 if `to` is earlier (a clock that went "backwards" is 0, not a
/// panic). Use it for both latencies: `elapsed_us(intended, read_at)` and `elapsed_us(sent, read_at)`.
#[inline]
pub fn elapsed_us(from: Instant, to: Instant) -> u64 {
    // Seconds and sub-second µs instead of `as_micros`: no u128 division on the hot path.
    let d = to.saturating_duration_since(from);
    d.as_secs().saturating_mul(1_000_000).saturating_add(u64::from(d.subsec_micros()))
}

/// Index of the interval containing `now`: `floor((now - start) / 1 s)` (0 before `start`).
#[inline]
pub fn interval_index(start: Instant, now: Instant) -> u64 {
    now.saturating_duration_since(start).as_secs()
}

#[cfg(test)]
mod tests;
