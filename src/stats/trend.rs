//! A trend test for a per-second series: the Mann–Kendall test (Mann 1945; Kendall 1975) with
//! the variance correction of Hamed & Rao (1998, *J. Hydrology* 204) for autocorrelated data,
//! and the Theil–Sen slope (Sen 1968) as the size of the trend.
//!
//! Why these: a run's per-second throughput, p99 and backlog are autocorrelated (a busy second
//! is followed by a busy second), so a plain regression's or the plain Mann–Kendall test's
//! p-value is far too small and a stationary run would be called trending. Mann–Kendall uses
//! only the signs of pairwise differences (no assumption of normality, robust to the outliers a
//! p99 series has), and the Hamed–Rao factor widens its variance by the autocorrelation the
//! detrended series shows. Theil–Sen, the median of pairwise slopes, is the matching robust
//! slope.

use super::normal::normal_sf;

/// The outcome of [`mann_kendall`] on one series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrendTest {
    /// Points in the series.
    pub n: usize,
    /// Kendall's S: concordant minus discordant pairs (positive: rising).
    pub s: i64,
    /// The normal score of S with the continuity correction and the corrected variance.
    pub z: f64,
    /// Two-sided p-value of "no monotone trend", from `z`.
    pub p_value: f64,
    /// Theil–Sen slope: the median of `(x[j] - x[i]) / (j - i)`, units of the series per step.
    pub slope: f64,
    /// Hamed–Rao's `n / n*`: how much the autocorrelation widens S's variance (1: none).
    pub variance_factor: f64,
}

/// The fewest points [`mann_kendall`] tests: below it the variance's normal approximation and
/// the autocorrelation estimate mean nothing.
pub const MIN_POINTS: usize = 8;

/// Tests `xs` (equally spaced, in order) for a monotone trend. `None` with fewer than
/// [`MIN_POINTS`] points or any non-finite value.
///
/// The variance of S counts ties (Kendall's correction), and is widened by Hamed–Rao's factor:
/// the lag-k autocorrelations of the ranks of the series detrended by the Theil–Sen slope,
/// those significant at 5 % (|ρ_k| > 1.96/√n), for k up to n/3. The factor is kept at least
/// 1: a negative autocorrelation would narrow the variance, and a trend is not to be found
/// more readily than the independent case allows.
pub fn mann_kendall(xs: &[f64]) -> Option<TrendTest> {
    let n = xs.len();
    if n < MIN_POINTS || xs.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let mut s: i64 = 0;
    for i in 0..n {
        for j in i + 1..n {
            s += match xs[j].partial_cmp(&xs[i]) {
                Some(std::cmp::Ordering::Greater) => 1,
                Some(std::cmp::Ordering::Less) => -1,
                _ => 0,
            };
        }
    }
    let nf = n as f64;
    let mut sorted = xs.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mut ties = 0.0;
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && sorted[j + 1] == sorted[i] {
            j += 1;
        }
        let t = (j - i + 1) as f64;
        ties += t * (t - 1.0) * (2.0 * t + 5.0);
        i = j + 1;
    }
    let var_s = (nf * (nf - 1.0) * (2.0 * nf + 5.0) - ties) / 18.0;
    let slope = sen_slope(xs);
    let variance_factor = hamed_rao_factor(xs, slope);
    let var = var_s * variance_factor;
    let z = if var <= 0.0 {
        0.0
    } else if s > 0 {
        (s as f64 - 1.0) / var.sqrt()
    } else if s < 0 {
        (s as f64 + 1.0) / var.sqrt()
    } else {
        0.0
    };
    let p_value = (2.0 * normal_sf(z.abs())).min(1.0);
    Some(TrendTest { n, s, z, p_value, slope, variance_factor })
}

/// The most points [`mann_kendall_binned`] tests: the test and the slope take time and memory
/// quadratic in the points (a day of seconds would need 30 GB for the slopes).
pub const MAX_POINTS: usize = 600;

/// [`mann_kendall`] of `xs` averaged into at most [`MAX_POINTS`] equal bins (the last one
/// shorter), with the slope given back per step of `xs`, not per bin. A long run's trend is
/// the same trend at a coarser step; bin means are also less autocorrelated than seconds.
pub fn mann_kendall_binned(xs: &[f64]) -> Option<TrendTest> {
    if xs.len() <= MAX_POINTS {
        return mann_kendall(xs);
    }
    let width = xs.len().div_ceil(MAX_POINTS);
    let bins: Vec<f64> = xs.chunks(width).map(|c| c.iter().sum::<f64>() / c.len() as f64).collect();
    mann_kendall(&bins).map(|t| TrendTest { slope: t.slope / width as f64, ..t })
}

/// The Theil–Sen slope of `xs` against its index: the median of every pairwise slope.
fn sen_slope(xs: &[f64]) -> f64 {
    let n = xs.len();
    let mut slopes = Vec::with_capacity(n * (n - 1) / 2);
    for i in 0..n {
        for j in i + 1..n {
            slopes.push((xs[j] - xs[i]) / (j - i) as f64);
        }
    }
    super::describe::median(&slopes).unwrap_or(0.0)
}

/// Hamed–Rao's `n / n*` for `xs` detrended by `slope` (see [`mann_kendall`]).
fn hamed_rao_factor(xs: &[f64], slope: f64) -> f64 {
    let n = xs.len();
    let detrended: Vec<f64> = xs.iter().enumerate().map(|(i, x)| x - slope * i as f64).collect();
    let ranks = ranks(&detrended);
    let mean = (n as f64 + 1.0) / 2.0;
    let denom: f64 = ranks.iter().map(|r| (r - mean).powi(2)).sum();
    if denom <= 0.0 {
        return 1.0;
    }
    let nf = n as f64;
    let bound = 1.96 / nf.sqrt();
    let mut sum = 0.0;
    for k in 1..=(n / 3) {
        let rho: f64 = (0..n - k).map(|i| (ranks[i] - mean) * (ranks[i + k] - mean)).sum::<f64>() / denom;
        if rho.abs() > bound {
            let m = (n - k) as f64;
            sum += m * (m - 1.0) * (m - 2.0) * rho;
        }
    }
    (1.0 + 2.0 * sum / (nf * (nf - 1.0) * (nf - 2.0))).max(1.0)
}

/// 1-based ranks of `xs`, ties given their mean rank.
fn ranks(xs: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..xs.len()).collect();
    order.sort_by(|a, b| xs[*a].total_cmp(&xs[*b]));
    let mut out = vec![0.0; xs.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && xs[order[j + 1]] == xs[order[i]] {
            j += 1;
        }
        let rank = (i + j) as f64 / 2.0 + 1.0;
        for &k in &order[i..=j] {
            out[k] = rank;
        }
        i = j + 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn noise(n: usize, seed: u64) -> Vec<f64> {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        (0..n).map(|_| rng.random::<f64>()).collect()
    }

    #[test]
    fn a_long_series_is_tested_in_bins_with_its_slope_per_step() {
        let xs: Vec<f64> = noise(86_400, 3).iter().enumerate().map(|(i, e)| 0.001 * i as f64 + e).collect();
        let t = mann_kendall_binned(&xs).unwrap();
        assert!(t.n <= MAX_POINTS);
        assert!((t.slope - 0.001).abs() < 1e-4, "{}", t.slope);
        assert_eq!(mann_kendall_binned(&xs[..100]), mann_kendall(&xs[..100]));
    }

    #[test]
    fn too_short_or_not_finite_is_not_tested() {
        assert!(mann_kendall(&[1.0; 7]).is_none());
        let mut xs = noise(20, 1);
        xs[3] = f64::NAN;
        assert!(mann_kendall(&xs).is_none());
    }

    #[test]
    fn a_constant_series_has_no_trend() {
        let t = mann_kendall(&[5.0; 30]).unwrap();
        assert_eq!((t.s, t.z, t.slope), (0, 0.0, 0.0));
        assert_eq!(t.p_value, 1.0);
    }

    #[test]
    fn matches_the_textbook_statistic_on_a_small_series() {
        // 10 points, S and its variance by hand: S = 45 - 2·(discordant pairs).
        let xs = [1.0, 2.0, 3.0, 5.0, 4.0, 6.0, 7.0, 8.0, 10.0, 9.0];
        let t = mann_kendall(&xs).unwrap();
        assert_eq!(t.s, 41);
        // Var(S) = 10·9·25/18 = 125 (no ties); z = 40/√(125·factor).
        assert!((t.z - 40.0 / (125.0 * t.variance_factor).sqrt()).abs() < 1e-12);
        assert!(t.p_value < 0.01);
        assert!((t.slope - 1.0).abs() < 1e-12);
    }

    #[test]
    fn white_noise_is_rarely_called_trending() {
        let called = (0..200).filter(|seed| mann_kendall(&noise(60, *seed)).unwrap().p_value < 0.01).count();
        // 1 % expected; 8 of 200 would be p < 0.002 under the binomial.
        assert!(called <= 8, "{called} of 200 white-noise series called trending at 1 %");
    }

    #[test]
    fn a_clear_trend_is_found_with_its_slope() {
        let xs: Vec<f64> = noise(60, 7).iter().enumerate().map(|(i, e)| 0.5 * i as f64 + e).collect();
        let t = mann_kendall(&xs).unwrap();
        assert!(t.p_value < 1e-6 && t.z > 0.0);
        assert!((t.slope - 0.5).abs() < 0.05, "{}", t.slope);
        let down: Vec<f64> = xs.iter().rev().copied().collect();
        assert!(mann_kendall(&down).unwrap().z < 0.0);
    }

    #[test]
    fn autocorrelation_widens_the_variance_and_keeps_a_random_walkish_series_from_being_called() {
        // A strongly autocorrelated stationary series (AR(1), φ = 0.9): the plain test calls
        // many of them trending; the corrected one far fewer.
        let ar = |seed: u64| {
            let e = noise(60, seed);
            let mut x = 0.0;
            e.iter()
                .map(|e| {
                    x = 0.9 * x + (e - 0.5);
                    x
                })
                .collect::<Vec<f64>>()
        };
        let corrected = (0..100).filter(|s| mann_kendall(&ar(*s)).unwrap().p_value < 0.01).count();
        let factors: Vec<f64> = (0..100).map(|s| mann_kendall(&ar(s)).unwrap().variance_factor).collect();
        assert!(factors.iter().all(|f| *f >= 1.0));
        assert!(crate::stats::median(&factors).unwrap() > 1.5, "{factors:?}");
        assert!(corrected <= 25, "{corrected} of 100 AR(1) series called trending");
    }
}
