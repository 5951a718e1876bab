//! A confidence sequence for a median: an interval at every look of a sample that keeps
//! growing, which covers the median at all looks at once with probability at least 1 − α, so
//! a gate may stop at whichever look its interval first decides without inflating its error.
//!
//! The method, chosen for being simple and exactly valid without assuming a distribution:
//! - at each look, the order-statistic interval of the median ([`rank_interval`] at q = ½:
//!   distribution-free, exact binomial ranks, for independent draws of a continuous
//!   distribution);
//! - at look k (1, 2, ...) at confidence 1 − α_k with α_k = α / (k (k + 1)). The α_k sum to α
//!   (∑ 1/(k(k+1)) = 1), so by the union bound the chance that any look's interval misses the
//!   median is at most α, however many looks are taken and whatever decides when to stop
//!   (Bonferroni over looks, with the α spent by a fixed schedule: the simplest confidence
//!   sequence, cf. Howard, Ramdas, McAuliffe & Sekhon 2021, "Time-uniform, nonparametric,
//!   nonasymptotic confidence sequences", §1, whose stitched boundaries are tighter for very
//!   many looks; for the tens of looks of a gate the difference is small).
//!
//! The price is width: look 10 at α = 0.05 is an interval at 99.95 %, about 1.8 times as wide as
//! a fixed 95 % interval of the same draws. An interval at a fixed 95 % taken at every look and
//! stopped at the first that decides misses far more often than 5 % (the test below measures it).

use super::bootstrap::Interval;
use super::quantile_interval::rank_interval;

/// The α spent at look `look` (1-based) of a sequence whose total is `alpha`:
/// `alpha / (look (look + 1))`. Look 0 is treated as look 1.
pub fn alpha_at_look(alpha: f64, look: u32) -> f64 {
    let k = f64::from(look.max(1));
    alpha / (k * (k + 1.0))
}

/// The interval of the median of `values` at look `look` of a confidence sequence of total
/// error `alpha` (module doc): `[x₍ₗ₎, x₍ᵤ₎]` of the sorted values, the ranks those of
/// [`rank_interval`] at confidence `1 − alpha_at_look(alpha, look)`.
///
/// `None` when `alpha` is not in (0, 1), a value is not finite, or there are too few values for
/// either rank at that confidence (with n values the ranks need `0.5ⁿ ≤ α_k / 2`).
pub fn median_sequence_interval(values: &[f64], alpha: f64, look: u32) -> Option<Interval> {
    if !(alpha > 0.0 && alpha < 1.0) || values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let ranks = rank_interval(values.len() as u64, 0.5, 1.0 - alpha_at_look(alpha, look));
    let (lower, upper) = (ranks.lower?, ranks.upper?);
    let mut sorted = values.to_vec();
    sorted.sort_unstable_by(f64::total_cmp);
    Some(Interval { lo: sorted[lower as usize - 1], hi: sorted[upper as usize - 1] })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn the_alpha_spent_sums_to_alpha() {
        assert_eq!(alpha_at_look(0.05, 1), 0.025);
        assert_eq!(alpha_at_look(0.05, 0), 0.025);
        assert!((alpha_at_look(0.05, 4) - 0.0025).abs() < 1e-15);
        let spent: f64 = (1..100_000).map(|k| alpha_at_look(0.05, k)).sum();
        assert!(spent < 0.05 && spent > 0.05 - 1e-6, "{spent}");
    }

    #[test]
    fn the_interval_is_read_at_the_ranks_of_its_look() {
        // 10 values at 97.5 % (look 1): ranks 2 and 9; at look 2 (99.17 %): ranks 1 and 10.
        let values: Vec<f64> = (1..=10).rev().map(f64::from).collect();
        assert_eq!(median_sequence_interval(&values, 0.05, 1), Some(Interval { lo: 2.0, hi: 9.0 }));
        assert_eq!(median_sequence_interval(&values, 0.05, 2), Some(Interval { lo: 1.0, hi: 10.0 }));
        // Look 3 (α_k = 0.0042) needs 0.5ⁿ ≤ 0.0021: 8 values are too few for 99.6 %.
        assert_eq!(median_sequence_interval(&values[..8], 0.05, 3), None);
        assert_eq!(median_sequence_interval(&[1.0, f64::NAN, 2.0], 0.05, 1), None);
        assert_eq!(median_sequence_interval(&values, 1.0, 1), None);
    }

    /// One draw of a skewed, heavy-tailed distribution around `median` in log space (what a
    /// block's cost ratio looks like when the machine preempts the server now and then):
    /// a Laplace core, and one draw in ten from a wide right tail. Returns (draw, true median).
    fn skewed(rng: &mut rand::rngs::SmallRng) -> f64 {
        let u: f64 = rng.random_range(-0.5..0.5);
        let core = -0.1 * u.signum() * (1.0 - 2.0 * u.abs()).ln();
        if rng.random_range(0.0..1.0) < 0.1 {
            core + rng.random_range(0.0..1.0)
        } else {
            core
        }
    }

    /// The true median of [`skewed`], by a large sample (its tail moves it off 0).
    fn skewed_median() -> f64 {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let mut xs: Vec<f64> = (0..400_001).map(|_| skewed(&mut rng)).collect();
        xs.sort_unstable_by(f64::total_cmp);
        xs[200_000]
    }

    /// Coverage under optional stopping, simulated: sequences of up to 40 looks, 20 draws each,
    /// stopped at the first look whose interval misses the median (the worst a gate that
    /// peeks can do). The sequence misses in at most α of them (plus Monte Carlo slack); an
    /// interval at a fixed 95 % peeked at the same way misses several times as often, which
    /// shows the simulation can tell the two apart.
    #[test]
    fn coverage_holds_at_every_look_at_once_and_a_fixed_interval_peeked_at_does_not() {
        let median = skewed_median();
        let mut rng = rand::rngs::SmallRng::seed_from_u64(53);
        let (trials, looks, per_look, alpha) = (2_000, 40, 20, 0.05);
        let (mut sequence_missed, mut fixed_missed) = (0, 0);
        for _ in 0..trials {
            let mut xs = Vec::new();
            let (mut seq_miss, mut fixed_miss) = (false, false);
            for look in 1..=looks {
                xs.extend((0..per_look).map(|_| skewed(&mut rng)));
                if let Some(ci) = median_sequence_interval(&xs, alpha, look) {
                    seq_miss |= !ci.contains(median);
                }
                // A fixed 95 % order-statistic interval: the sequence's first look's ranks at
                // every look (α_1 = α/2 would be 97.5 %; this is the plain 95 %).
                let r = rank_interval(xs.len() as u64, 0.5, 1.0 - alpha);
                let mut sorted = xs.clone();
                sorted.sort_unstable_by(f64::total_cmp);
                let fixed =
                    Interval { lo: sorted[r.lower.unwrap() as usize - 1], hi: sorted[r.upper.unwrap() as usize - 1] };
                fixed_miss |= !fixed.contains(median);
            }
            sequence_missed += usize::from(seq_miss);
            fixed_missed += usize::from(fixed_miss);
        }
        let (seq_rate, fixed_rate) = (sequence_missed as f64 / trials as f64, fixed_missed as f64 / trials as f64);
        // Binomial sd of a 5 % rate over 2 000 trials is 0.5 %: 3 sd of slack.
        assert!(seq_rate <= alpha + 0.015, "the sequence missed in {seq_rate} of the trials");
        assert!(fixed_rate > 3.0 * alpha, "a fixed 95 % interval peeked at 40 times missed only {fixed_rate}");
    }
}
