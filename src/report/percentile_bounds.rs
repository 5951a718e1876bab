//! Each percentile's 95 % distribution-free interval, as summary.json carries it and the table,
//! report.html and scripts.csv show it.
//!
//! The bounds are recorded samples at the ranks [`rank_interval`] gives (order statistics), so
//! they hold for any latency distribution, provided the samples are independent: the script's
//! `effective_samples` says how far they are not.

use std::fmt::Write as _;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::{ms3, ScriptSummary};
use crate::stats::{rank_interval, samples_for_upper_bound, value_at_rank};

/// The two-sided confidence of every percentile interval, 0..1.
pub const CONFIDENCE: f64 = 0.95;

/// One percentile's interval at [`CONFIDENCE`], µs (bucket tops, as the percentile itself).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PercentileBound {
    /// Lower bound, µs; None when too few samples give none (the smallest is above the
    /// percentile too often).
    pub lo_us: Option<u64>,
    /// Upper bound, µs; None when too few samples give none (the largest is below the
    /// percentile too often).
    pub hi_us: Option<u64>,
    /// With `hi_us` None: the fewest samples that give an upper bound
    /// ([`samples_for_upper_bound`]); None when `hi_us` is set.
    pub needs_calls: Option<u64>,
}

impl PercentileBound {
    /// The interval of the `q`-quantile of the samples in `h` (0 < q < 1).
    pub fn of(h: &Histogram<u64>, q: f64) -> PercentileBound {
        let ranks = rank_interval(h.len(), q, CONFIDENCE);
        let hi_us = ranks.upper.and_then(|k| value_at_rank(h, k));
        PercentileBound {
            // The lower bound is its bucket's bottom: a bucket's top would lift it by up to a
            // bucket width, and an objective's test must not be tipped by the rounding.
            lo_us: ranks.lower.and_then(|k| value_at_rank(h, k)).map(|v| h.lowest_equivalent(v)),
            hi_us,
            needs_calls: hi_us.is_none().then(|| samples_for_upper_bound(q, CONFIDENCE)),
        }
    }
}

/// The intervals of [`Percentiles`](super::Percentiles)' named percentiles, and the samples
/// they rest on. All None / 0 for an empty histogram.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PercentileIntervals {
    /// Median.
    pub p50: PercentileBound,
    /// 90th percentile.
    pub p90: PercentileBound,
    /// 99th percentile.
    pub p99: PercentileBound,
    /// 99.9th percentile.
    pub p999: PercentileBound,
    /// 99.99th percentile.
    pub p9999: PercentileBound,
    /// Samples in the histogram (the n of every interval).
    pub samples: u64,
}

impl PercentileIntervals {
    /// The intervals of `h`'s percentiles.
    pub fn of(h: &Histogram<u64>) -> PercentileIntervals {
        PercentileIntervals {
            p50: PercentileBound::of(h, 0.5),
            p90: PercentileBound::of(h, 0.9),
            p99: PercentileBound::of(h, 0.99),
            p999: PercentileBound::of(h, 0.999),
            p9999: PercentileBound::of(h, 0.9999),
            samples: h.len(),
        }
    }
}

/// `n` with a space between groups of three digits (`3688` → `3 688`), as the text prints counts.
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

/// A bound's two ends as `lo–hi` in ms with 3 decimals; a missing lower end reads `0` (a
/// latency is never negative) and a missing upper end `∞`.
pub fn range_ms(b: &PercentileBound) -> String {
    let lo = b.lo_us.map_or_else(|| "0".to_string(), ms3);
    let hi = b.hi_us.map_or_else(|| "∞".to_string(), ms3);
    format!("{lo}–{hi}")
}

/// One percentile and its interval, ms: `p99 1.310 (1.280–1.350)`, or with no finite upper
/// bound `p99.9 needs ≥ 3 688 calls (has 1 204)`.
fn phrase(label: &str, value_us: u64, b: &PercentileBound, samples: u64) -> String {
    match b.needs_calls {
        Some(needs) if b.hi_us.is_none() => {
            format!("{label} needs ≥ {} calls (has {})", grouped(needs), grouped(samples))
        }
        _ => format!("{label} {} ({})", ms3(value_us), range_ms(b)),
    }
}

/// The lines under the terminal table: one per script with an ok call, giving each percentile
/// of the table with its 95 % interval, up to the first whose interval has no upper bound
/// (named with the calls it needs; the higher ones have none either), then, when the
/// per-second p99 series is correlated enough to halve the information, the effective sample
/// size. Shape, ms:
///
/// `  enqueue: p50 0.210 (0.205–0.214); p90 0.610 (0.600–0.622); p99 1.310 (1.280–1.350); p99.9
/// needs ≥ 3 688 calls (has 1 204)`
pub fn interval_lines(scripts: &[ScriptSummary]) -> Vec<String> {
    let mut lines = Vec::new();
    for s in scripts.iter().filter(|s| s.ok > 0) {
        let (l, iv) = (&s.latency_us, &s.latency_us.intervals);
        let mut line = format!("  {}:", s.script);
        let all = [
            ("p50", l.p50, &iv.p50),
            ("p90", l.p90, &iv.p90),
            ("p99", l.p99, &iv.p99),
            ("p99.9", l.p999, &iv.p999),
            ("p99.99", l.p9999, &iv.p9999),
        ];
        // A higher percentile than one with no upper bound has none either: say it once.
        for (k, (label, value, b)) in all.into_iter().enumerate() {
            let sep = if k == 0 { " " } else { "; " };
            let _ = write!(line, "{sep}{}", phrase(label, value, b, iv.samples));
            if b.hi_us.is_none() {
                break;
            }
        }
        if let (Some(ess), Some(rho)) = (s.effective_samples, s.lag1_autocorrelation) {
            if ess.saturating_mul(2) < iv.samples {
                let _ = write!(
                    line,
                    "; per-second p99 correlated (lag-1 {rho:.2}): worth {} independent calls",
                    grouped(ess)
                );
            }
        }
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1, 2, .., n µs, each value exact (5 significant figures: unit buckets up to 131 071).
    fn histogram(n: u64) -> Histogram<u64> {
        let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 5).unwrap();
        for v in 1..=n {
            h.record(v).unwrap();
        }
        h
    }

    #[test]
    fn too_few_calls_leave_the_tail_without_an_upper_bound() {
        let iv = PercentileIntervals::of(&histogram(1_204));
        assert_eq!(iv.samples, 1_204);
        assert_eq!(iv.p999.hi_us, None);
        assert_eq!(iv.p999.needs_calls, Some(3_688));
        assert!(iv.p99.hi_us.is_some() && iv.p99.needs_calls.is_none());
        let (lo, hi) = (iv.p99.lo_us.unwrap(), iv.p99.hi_us.unwrap());
        assert!(lo < 1_192 && 1_192 < hi, "p99 of 1..=1204 is 1192: {lo}..{hi}");
    }

    #[test]
    fn ten_thousand_calls_bound_p999_by_the_9983rd_and_9997th() {
        let iv = PercentileIntervals::of(&histogram(10_000));
        assert_eq!((iv.p999.lo_us, iv.p999.hi_us), (Some(9_983), Some(9_997)));
        assert_eq!(iv.p9999.needs_calls, Some(36_887));
    }

    #[test]
    fn an_empty_histogram_has_no_interval() {
        let iv = PercentileIntervals::of(&histogram(0));
        assert_eq!(iv.samples, 0);
        assert_eq!(iv.p50.lo_us, None);
    }

    #[test]
    fn a_script_line_gives_every_interval_up_to_the_first_percentile_without_a_bound() {
        let mut s = ScriptSummary::with_counts("claim", 1_204, 1_204, &[]);
        s.latency_us = super::super::Percentiles::of(&histogram(1_204));
        let iv = s.latency_us.intervals;
        let want = format!(
            "  claim: p50 0.602 ({}); p90 1.084 ({}); p99 1.192 ({}); p99.9 needs ≥ 3 688 calls (has 1 204)",
            range_ms(&iv.p50),
            range_ms(&iv.p90),
            range_ms(&iv.p99)
        );
        assert_eq!(interval_lines(std::slice::from_ref(&s)), std::slice::from_ref(&want));
        // Correlated enough to halve the calls: said at the end of the line.
        (s.lag1_autocorrelation, s.effective_samples) = (Some(0.8), Some(133));
        let line = &interval_lines(&[s])[0];
        assert_eq!(
            line.strip_prefix(&want).unwrap(),
            "; per-second p99 correlated (lag-1 0.80): worth 133 independent calls"
        );
    }

    #[test]
    fn counts_are_grouped_by_three() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(3_688), "3 688");
        assert_eq!(grouped(1_234_567), "1 234 567");
    }

    #[test]
    fn a_missing_bound_reads_as_the_calls_it_needs() {
        let b = PercentileBound { lo_us: Some(1_280), hi_us: None, needs_calls: Some(3_688) };
        assert_eq!(phrase("p99.9", 1_310, &b, 1_204), "p99.9 needs ≥ 3 688 calls (has 1 204)");
        let b = PercentileBound { lo_us: Some(1_280), hi_us: Some(1_350), needs_calls: None };
        assert_eq!(phrase("p99", 1_310, &b, 50_000), "p99 1.310 (1.280–1.350)");
        assert_eq!(range_ms(&PercentileBound { lo_us: None, hi_us: Some(9), needs_calls: None }), "0–0.009");
    }
}
