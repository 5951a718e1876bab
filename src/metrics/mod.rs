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
//!    │        nothing), publishes a LiveSnapshot (watch channel) for the progress line and,
//!    │        with the metrics endpoint on, the totals folded onto fixed buckets (Cumulative)
//!    ▼  finish(end)
//! RunMetrics ── the finished measurement that every writer in `report/` reads.
//! ```
//!
//! Units: every latency is in **µs**, recorded in an HdrHistogram with 3 significant figures over
//! 1 µs ..= 60 s (clamped: 0 µs records as 1 µs, anything above 60 s as 60 s). Interval `k` is
//! `[start + k s, start + (k+1) s)` where `start` is the one run start shared by every recorder.
//! Warmup is whole intervals dropped by the reporter (see [`Reporter::new`]).

mod compact;
mod counters;
pub mod cpu;
pub mod cumulative;
pub mod host;
mod interval;
mod recorder;
mod reporter;
mod run_metrics;

pub use compact::CompactHistogram;
pub use counters::JobCounter;
pub use cumulative::Cumulative;
pub use interval::{IntervalData, ScriptInterval};
pub use recorder::{Flush, MetricsSink, Recorder};
pub use reporter::{ClosedInterval, LiveSnapshot, Reporter};
pub use run_metrics::{IntervalRecord, IntervalScript, RunMetrics, ScriptTotals};

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

/// A new, empty latency histogram in µs, 3 significant figures, that grows to the largest value
/// recorded into it (at most [`HIGHEST_US`]: [`record_us`] clamps).
///
/// Why it starts small: a histogram sized for 60 s up front is ~17k counters (139 KB) zeroed at
/// creation, 34 fresh pages each, and a run creates a few dozen (per interval, per total),
/// each paying its page faults and its memset. Starting at 1..=2047 µs it
/// is 16 KB, and a second of sub-16 ms latencies keeps it under 48 KB. Histograms of any size
/// add into one another ([`Histogram::add`] grows the destination); every histogram the crate
/// records into or adds into comes from here or from [`growable`].
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new(SIGFIG).expect("3 significant figures are valid")
}

/// `h` (a decoded histogram, whose range is what was encoded) made to grow like
/// [`new_histogram`]'s, so a larger histogram adds into it and a larger value records.
pub fn growable(mut h: Histogram<u64>) -> Histogram<u64> {
    h.auto(true);
    h
}

/// Record one latency in µs: 0 becomes 1 µs, anything above 60 s records as 60 s (never an
/// error).
#[inline]
pub fn record_us(h: &mut Histogram<u64>, us: u64) {
    record_us_n(h, us, 1);
}

/// [`record_us`] `n` times, in one step.
#[inline]
pub fn record_us_n(h: &mut Histogram<u64>, us: u64, n: u64) {
    let us = us.clamp(LOWEST_US, HIGHEST_US);
    // Fails only on a histogram that cannot grow (not from `new_histogram`/`growable`): then it
    // saturates at that histogram's own top rather than lose the sample.
    if h.record_n(us, n).is_err() {
        h.saturating_record_n(us, n);
    }
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
