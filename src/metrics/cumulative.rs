//! The run's totals so far as fixed buckets: what a Prometheus scrape serves, made once a second
//! by the reporter (never per request) and once more from the finished [`RunMetrics`].
//!
//! Classic Prometheus histograms are summed across a fleet's pods bucket by bucket, so every
//! process uses one boundary list, [`BOUNDS_US`]; the HDR histograms stay the source of truth for
//! every percentile the result files print.

use hdrhistogram::Histogram;

use super::{JobCounter, RunMetrics, ScriptTotals};
use crate::lua::{ErrorCode, Script};

/// Upper bucket boundaries, µs, ascending: 1-1.5-2-3-5-7 per decade from 10 µs to 7 s, then
/// 10, 15, 20, 30 and 60 s (the histograms' top). A value lands in the first bucket whose bound
/// is at least the value; `+Inf` follows the last.
pub const BOUNDS_US: [u64; 41] = [
    10, 15, 20, 30, 50, 70, 100, 150, 200, 300, 500, 700, 1_000, 1_500, 2_000, 3_000, 5_000, 7_000, 10_000, 15_000,
    20_000, 30_000, 50_000, 70_000, 100_000, 150_000, 200_000, 300_000, 500_000, 700_000, 1_000_000, 1_500_000,
    2_000_000, 3_000_000, 5_000_000, 7_000_000, 10_000_000, 15_000_000, 20_000_000, 30_000_000, 60_000_000,
];

/// One latency histogram folded onto [`BOUNDS_US`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Buckets {
    /// Samples per bucket (not cumulative), by position in [`BOUNDS_US`]; the last entry is
    /// `+Inf` (always 0: the HDR histograms saturate at 60 s). Empty when no sample.
    pub counts: Vec<u64>,
    /// Sum of the samples, µs, each taken at its HDR bucket's highest equivalent value (the
    /// 0.1 % precision of the recording).
    pub sum_us: f64,
    /// Number of samples.
    pub count: u64,
}

impl Buckets {
    /// `h` folded onto [`BOUNDS_US`]: one pass over its recorded values.
    pub fn of(h: &Histogram<u64>) -> Buckets {
        let mut counts = vec![0; BOUNDS_US.len() + 1];
        let mut sum_us = 0.0;
        for v in h.iter_recorded() {
            let value = v.value_iterated_to();
            let n = v.count_at_value();
            // The top HDR bucket's highest equivalent lies past 60 s: it is still a 60 s sample.
            let at = BOUNDS_US.partition_point(|&b| b < value.min(super::HIGHEST_US));
            counts[at] += n;
            sum_us += value as f64 * n as f64;
        }
        Buckets { counts, sum_us, count: h.len() }
    }
}

/// One script's totals as fixed buckets.
#[derive(Clone, Debug, PartialEq)]
pub struct ScriptCumulative {
    /// The script.
    pub script: Script,
    /// Ok calls.
    pub ok: u64,
    /// Failed calls by [`ErrorCode::index`].
    pub errors: [u64; ErrorCode::COUNT],
    /// Late open-loop sends.
    pub late: u64,
    /// Ok calls, from the intended send.
    pub latency: Buckets,
    /// Ok calls, from the actual send.
    pub service: Buckets,
    /// Open-loop sends, from the intended to the actual send.
    pub send_lag: Buckets,
}

/// The measured part of the run so far (warmup excluded, as in summary.json), by script, plus
/// the job counters since the run start (warmup included, as summary.json's `jobs`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cumulative {
    /// Scripts called so far, in [`Script`] order.
    pub scripts: Vec<ScriptCumulative>,
    /// Job counters by [`JobCounter::index`].
    pub jobs: [u64; JobCounter::COUNT],
}

impl Cumulative {
    /// The totals of `scripts` (those not called are left out) and the counters `jobs`.
    pub fn of<'a>(scripts: impl IntoIterator<Item = &'a ScriptTotals>, jobs: [u64; JobCounter::COUNT]) -> Cumulative {
        let scripts = scripts
            .into_iter()
            .filter(|t| t.was_called())
            .map(|t| ScriptCumulative {
                script: t.script,
                ok: t.ok,
                errors: t.errors,
                late: t.late,
                latency: Buckets::of(&t.latency),
                service: Buckets::of(&t.service),
                send_lag: Buckets::of(&t.send_lag),
            })
            .collect();
        Cumulative { scripts, jobs }
    }

    /// The finished run's totals: the same figures summary.json is written from.
    pub fn of_run(metrics: &RunMetrics) -> Cumulative {
        let mut jobs = metrics.jobs;
        for (a, w) in jobs.iter_mut().zip(metrics.warmup_jobs) {
            *a += w;
        }
        Cumulative::of(&metrics.scripts, jobs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{new_histogram, record_us};

    #[test]
    fn a_value_lands_in_the_first_bucket_whose_bound_holds_it() {
        let mut h = new_histogram();
        for us in [1, 10, 11, 100, 60_000_000] {
            record_us(&mut h, us);
        }
        let b = Buckets::of(&h);
        assert_eq!(b.count, 5);
        assert_eq!(b.counts.len(), BOUNDS_US.len() + 1);
        assert_eq!(b.counts[0], 2, "1 and 10 µs are at most 10 µs");
        assert_eq!(b.counts[1], 1, "11 µs is in (10, 15]");
        assert_eq!(b.counts[BOUNDS_US.iter().position(|&x| x == 100).unwrap()], 1);
        assert_eq!(b.counts[BOUNDS_US.len() - 1], 1, "60 s is the last finite bucket");
        assert_eq!(b.counts[BOUNDS_US.len()], 0, "+Inf holds nothing: recording saturates at 60 s");
        assert!((b.sum_us - 60_000_122.0).abs() / 60_000_122.0 < 1e-3, "sum {}", b.sum_us);
    }

    #[test]
    fn the_bounds_ascend_and_end_at_the_histograms_top() {
        assert!(BOUNDS_US.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(*BOUNDS_US.last().unwrap(), crate::metrics::HIGHEST_US);
    }
}
