//! A share of events over units of time, Σaᵢ / Σnᵢ (calls above a limit over calls, second by
//! second), with an interval that treats each **unit** as one observation.
//!
//! Why not the calls: calls of one second share that second's server state, so a slow second
//! makes many slow calls, and an interval that counts calls as independent is far too narrow.
//! The seconds are closer to independent, and what dependence they keep the interval widens
//! for: the linearised variance of a ratio estimator (Cochran, *Sampling Techniques*, §6.3),
//! multiplied by (1 + ρ)/(1 − ρ) for the lag-1 autocorrelation ρ > 0 of its residuals, with a
//! Student t quantile for the few units a probe has.

use statrs::distribution::{ContinuousCDF, StudentsT};

use super::autocorrelation::lag1_autocorrelation;

/// The fewest units [`share_interval`] works with.
pub const MIN_UNITS: usize = 4;
/// ρ above this is taken as this: (1 + ρ)/(1 − ρ) would otherwise run to infinity on a series
/// too short to estimate a ρ that high.
const MAX_RHO: f64 = 0.9;

/// A share with its interval, each in 0..=1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShareInterval {
    /// Σa / Σn.
    pub share: f64,
    /// Lower bound.
    pub lo: f64,
    /// Upper bound.
    pub hi: f64,
    /// Units with at least one event of `n`.
    pub units: usize,
    /// The lag-1 autocorrelation of the residuals the variance was widened by (0 when ≤ 0).
    pub rho: f64,
}

/// The share Σa/Σn of `hits` (aᵢ, e.g. calls over a limit) over `totals` (nᵢ, calls) per unit,
/// with its two-sided `confidence` interval (0.95), units with nᵢ = 0 left out. `None` with
/// fewer than [`MIN_UNITS`] such units, or slices of different lengths.
pub fn share_interval(hits: &[f64], totals: &[f64], confidence: f64) -> Option<ShareInterval> {
    if hits.len() != totals.len() {
        return None;
    }
    let units: Vec<(f64, f64)> = hits.iter().zip(totals).filter(|(_, n)| **n > 0.0).map(|(a, n)| (*a, *n)).collect();
    let k = units.len();
    if k < MIN_UNITS {
        return None;
    }
    let (sum_a, sum_n) = units.iter().fold((0.0, 0.0), |(a, n), u| (a + u.0, n + u.1));
    let share = sum_a / sum_n;
    let residuals: Vec<f64> = units.iter().map(|(a, n)| a - share * n).collect();
    let kf = k as f64;
    let var = kf / (kf - 1.0) * residuals.iter().map(|r| r * r).sum::<f64>() / (sum_n * sum_n);
    let rho = lag1_autocorrelation(&residuals).filter(|r| r.is_finite()).unwrap_or(0.0).clamp(0.0, MAX_RHO);
    let se = (var * (1.0 + rho) / (1.0 - rho)).sqrt();
    let t = StudentsT::new(0.0, 1.0, kf - 1.0).ok()?.inverse_cdf(0.5 + confidence / 2.0);
    Some(ShareInterval { share, lo: (share - t * se).max(0.0), hi: (share + t * se).min(1.0), units: k, rho })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_few_units_or_mismatched_slices_give_none() {
        assert!(share_interval(&[1.0, 2.0, 3.0], &[10.0, 10.0, 10.0], 0.95).is_none());
        assert!(share_interval(&[1.0; 5], &[10.0; 4], 0.95).is_none());
        // Units without events do not count.
        assert!(share_interval(&[0.0; 6], &[0.0, 0.0, 0.0, 10.0, 10.0, 10.0], 0.95).is_none());
    }

    #[test]
    fn the_share_is_the_ratio_of_the_sums_and_its_interval_holds_it() {
        let hits = [1.0, 3.0, 2.0, 0.0, 4.0, 2.0];
        let totals = [100.0, 300.0, 200.0, 100.0, 200.0, 100.0];
        let s = share_interval(&hits, &totals, 0.95).unwrap();
        assert!((s.share - 12.0 / 1000.0).abs() < 1e-12);
        assert!(s.lo < s.share && s.share < s.hi);
        assert_eq!(s.units, 6);
    }

    #[test]
    fn identical_seconds_have_no_spread_and_uneven_ones_a_wide_interval() {
        let even = share_interval(&[10.0; 8], &[1000.0; 8], 0.95).unwrap();
        assert_eq!((even.lo, even.hi), (0.01, 0.01));
        // The same 1 % overall, all in two bad seconds: the seconds disagree, so the share is
        // known far less precisely than 80 of 8 000 independent calls would say.
        let bursty = share_interval(&[0.0, 0.0, 40.0, 0.0, 0.0, 40.0, 0.0, 0.0], &[1000.0; 8], 0.95).unwrap();
        assert!((bursty.share - 0.01).abs() < 1e-12);
        assert!(bursty.hi > 0.02, "{bursty:?}");
    }

    #[test]
    fn positive_autocorrelation_widens_the_interval() {
        // Bad seconds in a run (a slow stretch) against the same seconds spread out.
        let totals = [1000.0; 12];
        let clustered = [0.0, 0.0, 0.0, 0.0, 30.0, 30.0, 30.0, 30.0, 0.0, 0.0, 0.0, 0.0];
        let spread = [0.0, 30.0, 0.0, 0.0, 30.0, 0.0, 0.0, 30.0, 0.0, 0.0, 30.0, 0.0];
        let (c, s) =
            (share_interval(&clustered, &totals, 0.95).unwrap(), share_interval(&spread, &totals, 0.95).unwrap());
        assert!((c.share - s.share).abs() < 1e-12);
        assert!(c.rho > 0.0 && c.hi - c.lo > s.hi - s.lo, "{c:?} {s:?}");
    }
}
