//! The bootstrap confidence interval of the ratio of two medians (new / base), percentile method
//! (Efron 1979, "Bootstrap methods: another look at the jackknife"; Efron & Tibshirani 1993,
//! *An Introduction to the Bootstrap*, §13.3), as criterion.rs reports its change interval.
//!
//! Each side is resampled with replacement on its own (the two samples are independent runs),
//! the ratio of the resampled medians is taken, and the interval is read from the quantiles of
//! those ratios. Seeded, so the same inputs and seed give the same interval.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::describe::{median_of_sorted, quantile_sorted};

/// The usual number of resamples: the 2.5 % and 97.5 % quantiles then rest on 250 values each.
pub const DEFAULT_RESAMPLES: usize = 10_000;

/// A closed interval `[lo, hi]` of a ratio (1.0 = no change, 1.2 = new is 20 % higher).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Interval {
    /// Lower bound.
    pub lo: f64,
    /// Upper bound (≥ `lo`).
    pub hi: f64,
}

impl Interval {
    /// True when `x` lies in `[lo, hi]`.
    pub fn contains(&self, x: f64) -> bool {
        self.lo <= x && x <= self.hi
    }
}

/// The `confidence` (e.g. 0.95) percentile-bootstrap interval of `median(new) / median(base)`
/// from `resamples` resamples drawn with a [`SmallRng`] seeded by `seed`.
///
/// `None` when a sample is empty or holds a non-finite value, when a base value is not positive
/// (the ratio needs a positive denominator), when `resamples` is 0 or `confidence` is not in
/// `(0, 1)`. With one value a side the interval is that single ratio: the bootstrap cannot
/// invent spread, which is why the caller also requires several repetitions.
/// The same inputs and seed give the same interval with the same `rand` version (SmallRng's
/// stream is not promised across `rand` releases).
pub fn ratio_of_medians_ci(
    base: &[f64],
    new: &[f64],
    confidence: f64,
    resamples: usize,
    seed: u64,
) -> Option<Interval> {
    let usable = !base.is_empty()
        && !new.is_empty()
        && base.iter().all(|b| b.is_finite() && *b > 0.0)
        && new.iter().all(|n| n.is_finite())
        && resamples > 0
        && confidence > 0.0
        && confidence < 1.0;
    if !usable {
        return None;
    }
    let mut rng = SmallRng::seed_from_u64(seed);
    let (mut b, mut n) = (vec![0.0; base.len()], vec![0.0; new.len()]);
    let mut ratios = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        resample(&mut rng, base, &mut b);
        resample(&mut rng, new, &mut n);
        ratios.push(median_of_sorted(&n)? / median_of_sorted(&b)?);
    }
    ratios.sort_unstable_by(f64::total_cmp);
    let tail = (1.0 - confidence) / 2.0;
    Some(Interval { lo: quantile_sorted(&ratios, tail)?, hi: quantile_sorted(&ratios, 1.0 - tail)? })
}

/// The `confidence` percentile-bootstrap interval of the median of one sample (e.g. paired
/// ratios new/base: the pairs are resampled, so what the two members of a pair share cancels).
///
/// `None` when `xs` is empty or holds a non-finite value, when `resamples` is 0 or `confidence`
/// is not in `(0, 1)`.
pub fn median_ci(xs: &[f64], confidence: f64, resamples: usize, seed: u64) -> Option<Interval> {
    let usable =
        !xs.is_empty() && xs.iter().all(|x| x.is_finite()) && resamples > 0 && confidence > 0.0 && confidence < 1.0;
    if !usable {
        return None;
    }
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut draw = vec![0.0; xs.len()];
    let mut medians = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        resample(&mut rng, xs, &mut draw);
        medians.push(median_of_sorted(&draw)?);
    }
    medians.sort_unstable_by(f64::total_cmp);
    let tail = (1.0 - confidence) / 2.0;
    Some(Interval { lo: quantile_sorted(&medians, tail)?, hi: quantile_sorted(&medians, 1.0 - tail)? })
}

/// Fills `out` with `out.len()` draws with replacement from `from`, sorted ascending.
fn resample(rng: &mut SmallRng, from: &[f64], out: &mut [f64]) {
    for slot in out.iter_mut() {
        *slot = from[rng.random_range(0..from.len())];
    }
    out.sort_unstable_by(f64::total_cmp);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::median;
    use rand_distr::{Distribution, Normal};

    const BASE: [f64; 10] = [100.0, 101.5, 99.2, 100.8, 98.9, 100.3, 101.1, 99.7, 100.0, 100.6];

    #[test]
    fn same_seed_same_interval_and_the_estimate_is_inside() {
        let new: Vec<f64> = BASE.iter().map(|b| b * 1.2).collect();
        let a = ratio_of_medians_ci(&BASE, &new, 0.95, 2_000, 7).unwrap();
        assert_eq!(a, ratio_of_medians_ci(&BASE, &new, 0.95, 2_000, 7).unwrap());
        let point = median(&new).unwrap() / median(&BASE).unwrap();
        assert!(a.contains(point), "{a:?} should hold {point}");
        assert!(a.lo > 1.15 && a.hi < 1.25, "a clean 20 % shift: {a:?}");
        let wider = ratio_of_medians_ci(&BASE, &new, 0.99, 2_000, 7).unwrap();
        assert!(wider.lo <= a.lo && wider.hi >= a.hi, "99 % holds 95 %");
    }

    #[test]
    fn a_median_interval_holds_its_median_and_narrows_with_agreement() {
        let ratios = [1.10, 1.12, 1.09, 1.11, 1.10, 1.13, 1.08, 1.10];
        let ci = median_ci(&ratios, 0.95, 2_000, 3).unwrap();
        assert!(ci.contains(median(&ratios).unwrap()) && ci.lo > 1.08 && ci.hi < 1.13, "{ci:?}");
        assert_eq!(median_ci(&[1.2; 4], 0.95, 100, 1), Some(Interval { lo: 1.2, hi: 1.2 }));
        assert_eq!(median_ci(&[], 0.95, 100, 1), None);
        assert_eq!(median_ci(&[1.0, f64::INFINITY], 0.95, 100, 1), None);
    }

    #[test]
    fn constant_samples_give_a_point_interval() {
        let ci = ratio_of_medians_ci(&[4.0; 5], &[5.0; 6], 0.95, 100, 1).unwrap();
        assert_eq!(ci, Interval { lo: 1.25, hi: 1.25 });
        let one = ratio_of_medians_ci(&[2.0], &[3.0], 0.95, 100, 1).unwrap();
        assert_eq!(one, Interval { lo: 1.5, hi: 1.5 });
    }

    #[test]
    fn unusable_inputs_give_none() {
        assert_eq!(ratio_of_medians_ci(&[], &[1.0], 0.95, 10, 1), None);
        assert_eq!(ratio_of_medians_ci(&[1.0], &[], 0.95, 10, 1), None);
        assert_eq!(ratio_of_medians_ci(&[0.0, 1.0], &[1.0], 0.95, 10, 1), None);
        assert_eq!(ratio_of_medians_ci(&[1.0], &[f64::NAN], 0.95, 10, 1), None);
        assert_eq!(ratio_of_medians_ci(&[1.0], &[1.0], 0.95, 0, 1), None);
        assert_eq!(ratio_of_medians_ci(&[1.0], &[1.0], 1.0, 10, 1), None);
    }

    #[test]
    fn equal_distributions_are_covered_most_of_the_time() {
        // Property: two samples of 10 from one distribution; the 95 % interval should hold 1.0
        // in most trials (the percentile bootstrap under-covers a little at n = 10).
        let normal = Normal::new(1000.0, 30.0).unwrap();
        let mut rng = SmallRng::seed_from_u64(42);
        let trials = 100;
        let covered = (0..trials)
            .filter(|&t| {
                let a: Vec<f64> = (0..10).map(|_| normal.sample(&mut rng)).collect();
                let b: Vec<f64> = (0..10).map(|_| normal.sample(&mut rng)).collect();
                ratio_of_medians_ci(&a, &b, 0.95, 1_000, t).unwrap().contains(1.0)
            })
            .count();
        assert!(covered >= 85, "covered {covered} of {trials}");
    }
}
