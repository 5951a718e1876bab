//! A distribution-free confidence interval for a quantile, from order statistics.
//!
//! For n independent samples X₁..Xₙ of a continuous distribution with q-quantile ξ, the count
//! B of samples at or below ξ is Binomial(n, q). The k-th smallest sample X₍ₖ₎ lies above ξ
//! exactly when B < k, so
//!
//! - P(X₍ₗ₎ > ξ) = P(B ≤ l − 1): the lower rank l is the largest with P(B ≤ l − 1) ≤ α/2;
//! - P(X₍ᵤ₎ < ξ) = P(B ≥ u) = 1 − P(B ≤ u − 1): the upper rank u is the smallest with
//!   P(B ≤ u − 1) ≥ 1 − α/2,
//!
//! with α = 1 − confidence split into equal tails. [X₍ₗ₎, X₍ᵤ₎] then covers ξ with probability
//! at least `confidence`, whatever the distribution (Hahn & Meeker, *Statistical Intervals*,
//! 2nd ed., §5.2). Ranks are discrete, so the coverage is conservative: at least, rarely exactly,
//! `confidence`. A high quantile of few samples has no upper rank at all: no sample is above it
//! with enough probability (p99.9 needs 3 688 samples at 95 %, since 1 − 0.999ⁿ ≥ 0.975 from
//! there on).
//!
//! The binomial CDF is summed term by term from the rank outward, in the tail away from the
//! mean: statrs's regularized incomplete beta stops its continued fraction after 140 terms,
//! which is not enough near the mean once n passes ~10⁶ (it returns −3.7 for
//! P(B ≤ n/2) at n = 10⁹, q = 0.5), and the rank search passes there. The sum needs about
//! ten standard deviations of terms at most, so a rank search at n = 10¹⁰ takes milliseconds.
//! The first term comes from statrs's `ln_binomial` (Lanczos lnΓ); at n = 10¹⁰ its logarithm
//! carries ~10⁻⁵ absolute error, which moves a rank by well under one.

use hdrhistogram::Histogram;
use statrs::function::factorial::ln_binomial;

/// 1-based ranks of the order statistics bounding the q-quantile at `confidence` (two-sided,
/// equal tails), for n independent samples; None = no finite bound (too few samples).
///
/// `lower` ≤ `upper` when both are set; both lie in 1..=n.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RankInterval {
    /// Rank of the lower bound: the q-quantile is below the `lower`-th smallest sample with
    /// probability ≤ α/2. None when even the smallest sample is above it too often.
    pub lower: Option<u64>,
    /// Rank of the upper bound: the q-quantile is above the `upper`-th smallest sample with
    /// probability ≤ α/2. None when even the largest sample is below it too often.
    pub upper: Option<u64>,
}

/// The ranks bounding the `q`-quantile of `n` independent samples at `confidence` (module doc).
///
/// `q` and `confidence` must lie strictly between 0 and 1; otherwise, or with `n` = 0, both
/// bounds are None. About 2·log₂ n binomial CDFs, each O(standard deviation) at worst.
pub fn rank_interval(n: u64, q: f64, confidence: f64) -> RankInterval {
    let none = RankInterval { lower: None, upper: None };
    if n == 0 || !valid(q) || !valid(confidence) {
        return none;
    }
    let tail = (1.0 - confidence) / 2.0;
    let cdf = |k: u64| binomial_cdf(n, q, k);
    // Lower: P(B ≤ l − 1) grows with l; the largest l with it ≤ tail. Past the mean the CDF is
    // above one half, so l − 1 ≤ ⌈nq⌉ bounds the search.
    let lower = if cdf(0) > tail {
        None
    } else {
        let hi = (((n as f64) * q).ceil() as u64).saturating_add(1).min(n);
        Some(last_true(1, hi, |l| cdf(l - 1) <= tail))
    };
    // Upper: the smallest u with P(B ≤ u − 1) ≥ 1 − tail; none when P(B ≤ n − 1) falls short.
    let upper = if cdf(n - 1) < 1.0 - tail { None } else { Some(first_true(1, n, |u| cdf(u - 1) >= 1.0 - tail)) };
    RankInterval { lower, upper }
}

/// The smallest n for which `rank_interval(n, q, confidence).upper` is Some: the fewest samples
/// whose largest is above the q-quantile with probability ≥ 1 − α/2, i.e. 1 − qⁿ ≥ 1 − α/2
/// (for p99.9 at 95 %: 3 688).
///
/// `u64::MAX` when `q` or `confidence` is not strictly between 0 and 1.
pub fn samples_for_upper_bound(q: f64, confidence: f64) -> u64 {
    if !valid(q) || !valid(confidence) {
        return u64::MAX;
    }
    let tail = (1.0 - confidence) / 2.0;
    // qⁿ ≤ tail ⇔ n ≥ ln(tail) / ln(q); the float estimate is then settled by the exact test.
    let enough = |n: u64| binomial_cdf(n, q, n - 1) >= 1.0 - tail;
    let mut n = (tail.ln() / q.ln()).ceil().max(1.0) as u64;
    while n > 1 && enough(n - 1) {
        n -= 1;
    }
    while !enough(n) {
        n += 1;
    }
    n
}

/// The value of the k-th smallest (1-based) sample recorded in `h`: the `highest_equivalent`
/// of its bucket, as `value_at_quantile` reports (so `value_at_rank(h, ⌈q·len⌉)` equals
/// `value_at_quantile(q)` for q > 0). None if k == 0 or k > len.
pub fn value_at_rank(h: &Histogram<u64>, k: u64) -> Option<u64> {
    if k == 0 || k > h.len() {
        return None;
    }
    let mut seen = 0u64;
    for v in h.iter_recorded() {
        seen += v.count_at_value();
        if seen >= k {
            return Some(h.highest_equivalent(v.value_iterated_to()));
        }
    }
    None
}

fn valid(p: f64) -> bool {
    p > 0.0 && p < 1.0
}

/// P(B ≤ k) for B ~ Binomial(n, q), 0 < q < 1: the shorter tail summed from k outward, where
/// every term is smaller than the one before, until a term no longer moves the sum.
fn binomial_cdf(n: u64, q: f64, k: u64) -> f64 {
    if k >= n {
        return 1.0;
    }
    let (ln_q, ln_p) = (q.ln(), (-q).ln_1p());
    let ln_pmf = |j: u64| ln_binomial(n, j) + j as f64 * ln_q + (n - j) as f64 * ln_p;
    let ratio_down = (1.0 - q) / q; // pmf(j − 1) / pmf(j) = ratio_down · j / (n − j + 1)
    if (k as f64) < n as f64 * q {
        // k is at or below the mode: terms shrink going down.
        let mut term = ln_pmf(k).exp();
        let mut sum = term;
        let mut j = k;
        while j > 0 && term > sum * 1e-17 {
            term *= ratio_down * j as f64 / (n - j + 1) as f64;
            sum += term;
            j -= 1;
        }
        sum.min(1.0)
    } else {
        // k + 1 is at or above the mode: terms shrink going up.
        let mut j = k + 1;
        let mut term = ln_pmf(j).exp();
        let mut sum = term;
        while j < n && term > sum * 1e-17 {
            term *= (n - j) as f64 / ((j + 1) as f64 * ratio_down);
            sum += term;
            j += 1;
        }
        (1.0 - sum).max(0.0)
    }
}

/// The largest x in lo..=hi with `pred(x)`, given `pred(lo)` and that `pred` is true then false.
fn last_true(mut lo: u64, mut hi: u64, pred: impl Fn(u64) -> bool) -> u64 {
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if pred(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo
}

/// The smallest x in lo..=hi with `pred(x)`, given `pred(hi)` and that `pred` is false then true.
fn first_true(mut lo: u64, mut hi: u64, pred: impl Fn(u64) -> bool) -> u64 {
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;

    const NS: [u64; 7] = [1, 10, 100, 1000, 3687, 3688, 10_000];
    const QS: [f64; 5] = [0.5, 0.9, 0.99, 0.999, 0.9999];

    /// ln of Γ(x + 1) by Stirling's series (x ≥ 1) or a product: independent of statrs.
    fn ln_fact(x: u64) -> f64 {
        if x < 20 {
            return (1..=x).map(|i| (i as f64).ln()).sum();
        }
        let x = x as f64;
        x * x.ln() - x + 0.5 * (2.0 * std::f64::consts::PI * x).ln() + 1.0 / (12.0 * x) - 1.0 / (360.0 * x.powi(3))
            + 1.0 / (1260.0 * x.powi(5))
    }

    /// The whole binomial CDF by direct summation of every pmf term in log space (log-sum-exp).
    fn reference_cdf(n: u64, q: f64) -> Vec<f64> {
        let ln_pmf: Vec<f64> = (0..=n)
            .map(|j| ln_fact(n) - ln_fact(j) - ln_fact(n - j) + j as f64 * q.ln() + (n - j) as f64 * (1.0 - q).ln())
            .collect();
        let mut out = Vec::with_capacity(ln_pmf.len());
        let mut acc = f64::NEG_INFINITY;
        for l in ln_pmf {
            let (a, b) = if acc > l { (acc, l) } else { (l, acc) };
            acc = a + (b - a).exp().ln_1p();
            out.push(acc.exp());
        }
        out
    }

    /// The ranks by the definition, scanning every rank against the reference CDF.
    fn reference_ranks(n: u64, q: f64, confidence: f64) -> RankInterval {
        let cdf = reference_cdf(n, q);
        let tail = (1.0 - confidence) / 2.0;
        let lower = (1..=n).filter(|&l| cdf[(l - 1) as usize] <= tail).max();
        let upper = (1..=n).find(|&u| cdf[(u - 1) as usize] >= 1.0 - tail);
        RankInterval { lower, upper }
    }

    #[test]
    fn ranks_match_a_direct_summation_of_the_binomial() {
        for n in NS {
            for q in QS {
                let got = rank_interval(n, q, 0.95);
                assert_eq!(got, reference_ranks(n, q, 0.95), "n {n}, q {q}");
            }
        }
    }

    #[test]
    fn the_cdf_matches_the_reference_to_many_digits() {
        for n in [10, 1000, 10_000] {
            for q in QS {
                let reference = reference_cdf(n, q);
                for k in (0..n).step_by((n as usize / 50).max(1)) {
                    let (got, want) = (binomial_cdf(n, q, k), reference[k as usize]);
                    assert!((got - want).abs() < 1e-9, "n {n} q {q} k {k}: {got} vs {want}");
                }
            }
        }
    }

    #[test]
    fn coverage_is_at_least_the_confidence() {
        for n in NS {
            for q in QS {
                let r = rank_interval(n, q, 0.95);
                let cdf = |k: u64| binomial_cdf(n, q, k);
                let below = r.lower.map_or(0.0, |l| cdf(l - 1));
                let above = r.upper.map_or(0.0, |u| 1.0 - cdf(u - 1));
                assert!(1.0 - below - above >= 0.95 - 1e-12, "n {n}, q {q}: {r:?}");
                if let (Some(l), Some(u)) = (r.lower, r.upper) {
                    assert!(l <= u && u <= n, "n {n}, q {q}: {r:?}");
                }
            }
        }
    }

    #[test]
    fn p999_needs_3688_samples_for_an_upper_bound() {
        assert_eq!(samples_for_upper_bound(0.999, 0.95), 3688);
        assert!(1.0 - 0.999f64.powi(3688) >= 0.975 && 1.0 - 0.999f64.powi(3687) < 0.975);
        assert_eq!(rank_interval(3687, 0.999, 0.95).upper, None);
        assert_eq!(rank_interval(3688, 0.999, 0.95).upper, Some(3688));
        for q in QS {
            let n = samples_for_upper_bound(q, 0.95);
            assert!(rank_interval(n, q, 0.95).upper.is_some(), "q {q}");
            assert!(n == 1 || rank_interval(n - 1, q, 0.95).upper.is_none(), "q {q}");
        }
        assert_eq!(samples_for_upper_bound(0.9999, 0.95), 36_887);
        assert_eq!(samples_for_upper_bound(0.0, 0.95), u64::MAX);
    }

    /// At 10 000 samples p99.9 is somewhere in p99.83…p99.97.
    #[test]
    fn p999_of_10_000_samples_is_within_p9983_and_p9997() {
        let r = rank_interval(10_000, 0.999, 0.95);
        let (l, u) = (r.lower.unwrap(), r.upper.unwrap());
        assert_eq!((l, u), (9983, 9997));
        assert_eq!(format!("{:.2}", 100.0 * l as f64 / 1e4), "99.83");
        assert_eq!(format!("{:.2}", 100.0 * u as f64 / 1e4), "99.97");
    }

    #[test]
    fn too_few_samples_have_no_finite_bound() {
        assert_eq!(rank_interval(1, 0.5, 0.95), RankInterval { lower: None, upper: None });
        // Five samples: the median is below the smallest with probability 1/32 > 2.5 %.
        assert_eq!(rank_interval(5, 0.5, 0.95), RankInterval { lower: None, upper: None });
        assert_eq!(rank_interval(6, 0.5, 0.95), RankInterval { lower: Some(1), upper: Some(6) });
        assert_eq!(rank_interval(0, 0.5, 0.95), RankInterval { lower: None, upper: None });
    }

    #[test]
    fn a_billion_samples_give_ranks_about_two_standard_deviations_out() {
        for (n, q) in [(1_000_000_000u64, 0.5), (1_000_000_000, 0.999), (10_000_000_000, 0.9999)] {
            let start = std::time::Instant::now();
            let r = rank_interval(n, q, 0.95);
            assert!(start.elapsed().as_secs_f64() < 2.0, "n {n}, q {q}: {:?}", start.elapsed());
            let (mean, sd) = (n as f64 * q, (n as f64 * q * (1.0 - q)).sqrt());
            let z = |rank: u64| (rank as f64 - mean) / sd;
            let (zl, zu) = (z(r.lower.unwrap()), z(r.upper.unwrap()));
            assert!((zl + 1.96).abs() < 0.01 && (zu - 1.96).abs() < 0.01, "n {n}, q {q}: {zl} {zu}");
        }
    }

    #[test]
    fn value_at_rank_reads_the_histogram_as_value_at_quantile() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
        for v in 1..=10_000u64 {
            h.record(v * 7).unwrap();
        }
        assert_eq!(value_at_rank(&h, 0), None);
        assert_eq!(value_at_rank(&h, 10_001), None);
        assert_eq!(value_at_rank(&h, 1), Some(h.highest_equivalent(7)));
        for q in QS {
            let k = (q * h.len() as f64).ceil() as u64;
            assert_eq!(value_at_rank(&h, k), Some(h.value_at_quantile(q)), "q {q}");
        }
        assert_eq!(value_at_rank(&h, 10_000), Some(h.max()));
    }
}
