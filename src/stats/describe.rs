//! Descriptive statistics of a small sample: median, mean, sample standard deviation,
//! coefficient of variation and linear-interpolation quantiles.
//!
//! Inputs are slices of finite `f64` in any order (NaN sorts last under `f64::total_cmp` and
//! poisons the mean; callers keep NaN out). Every function answers `None` where the statistic is
//! undefined rather than returning NaN.

/// The `q` quantile of an already sorted (ascending) sample, by linear interpolation between
/// order statistics: Hyndman & Fan (1996) definition 7, the default of R and numpy.
///
/// `q` is clamped to `[0, 1]`. `None` for an empty slice.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let h = q.clamp(0.0, 1.0) * last as f64;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(last);
    Some(sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo]))
}

/// The median: the middle value, or the mean of the two middle values for an even length.
///
/// `None` for an empty slice. Sorts a copy (O(n log n)); the samples here are repetitions, tens
/// at most.
pub fn median(xs: &[f64]) -> Option<f64> {
    let mut sorted = xs.to_vec();
    sorted.sort_unstable_by(f64::total_cmp);
    median_of_sorted(&sorted)
}

/// The median of a sorted slice, without copying (used in the bootstrap's inner loop).
pub(crate) fn median_of_sorted(sorted: &[f64]) -> Option<f64> {
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

/// The arithmetic mean. `None` for an empty slice.
pub fn mean(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    Some(xs.iter().sum::<f64>() / xs.len() as f64)
}

/// The sample standard deviation (Bessel's correction: divides by `n - 1`).
///
/// `None` for fewer than two values: one value says nothing about spread.
pub fn std_dev(xs: &[f64]) -> Option<f64> {
    if xs.len() < 2 {
        return None;
    }
    let m = mean(xs)?;
    let ss: f64 = xs.iter().map(|x| (x - m) * (x - m)).sum();
    Some((ss / (xs.len() - 1) as f64).sqrt())
}

/// The coefficient of variation: sample standard deviation / |mean|, a unitless fraction
/// (0.10 = 10 %), the usual "how noisy are these repetitions" number.
///
/// `None` for fewer than two values or a zero mean.
pub fn coefficient_of_variation(xs: &[f64]) -> Option<f64> {
    let m = mean(xs)?;
    if m == 0.0 {
        return None;
    }
    Some(std_dev(xs)? / m.abs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_lengths() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[7.0]), Some(7.0));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn std_dev_and_cv_match_hand_computed_values() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, sum of squares 32, sample variance 32 / 7.
        let xs = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        assert_eq!(mean(&xs), Some(5.0));
        let sd = std_dev(&xs).unwrap();
        assert!((sd - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        assert!((coefficient_of_variation(&xs).unwrap() - sd / 5.0).abs() < 1e-12);
        assert_eq!(std_dev(&[1.0]), None);
        assert_eq!(coefficient_of_variation(&[-1.0, 1.0]), None, "zero mean");
        assert_eq!(coefficient_of_variation(&[3.0, 3.0, 3.0]), Some(0.0));
    }

    #[test]
    fn quantiles_interpolate_like_numpy() {
        // numpy.quantile([1, 2, 3, 4], [0, 0.25, 0.5, 0.975, 1]) = 1, 1.75, 2.5, 3.925, 4.
        let s = [1.0, 2.0, 3.0, 4.0];
        for (q, want) in [(0.0, 1.0), (0.25, 1.75), (0.5, 2.5), (0.975, 3.925), (1.0, 4.0), (1.5, 4.0)] {
            assert!((quantile_sorted(&s, q).unwrap() - want).abs() < 1e-12, "q={q}");
        }
        assert_eq!(quantile_sorted(&[], 0.5), None);
        assert_eq!(quantile_sorted(&[5.0], 0.9), Some(5.0));
    }
}
