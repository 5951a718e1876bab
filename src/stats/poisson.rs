//! Counts of rare events over an exposure (violations per injected fault): the exact (Garwood
//! 1936) interval of a Poisson rate, and the exact conditional test that two rates differ
//! (Przyborowski and Wilenski 1940): given `n = x_a + x_b` events in all, `x_b` is
//! `Binomial(n, t_b / (t_a + t_b))` when both sides share one rate. Both stay exact at the small
//! counts a fault study yields (0 to a few dozen), where a normal approximation misleads.

use super::bootstrap::Interval;
use statrs::distribution::{ChiSquared, ContinuousCDF};
use statrs::function::gamma::ln_gamma;

/// The exact two-sided `confidence` interval (e.g. 0.95) of the rate of a Poisson count:
/// `count` events over `exposure` units (> 0), per unit. Garwood's: the `χ²` quantiles with
/// `2·count` and `2·count + 2` degrees of freedom, halved; the lower end of a count of 0 is 0.
///
/// `None` when `exposure` is not positive and finite or `confidence` is outside (0, 1).
pub fn poisson_rate_interval(count: u64, exposure: f64, confidence: f64) -> Option<Interval> {
    if !(exposure.is_finite() && exposure > 0.0 && confidence > 0.0 && confidence < 1.0) {
        return None;
    }
    let tail = (1.0 - confidence) / 2.0;
    let lo = match count {
        0 => 0.0,
        c => ChiSquared::new(2.0 * c as f64).ok()?.inverse_cdf(tail) / 2.0,
    };
    let hi = ChiSquared::new(2.0 * count as f64 + 2.0).ok()?.inverse_cdf(1.0 - tail) / 2.0;
    Some(Interval { lo: lo / exposure, hi: hi / exposure })
}

/// The two-sided exact p-value that two Poisson rates differ: `x_a` events over exposure `t_a`
/// against `x_b` over `t_b`. Conditional on `n = x_a + x_b`, `x_b ~ Binomial(n, p)` with
/// `p = t_b / (t_a + t_b)` under equal rates; the p-value sums the probabilities of every
/// outcome no likelier than the one seen (the rule of R's `binom.test` and `poisson.test`),
/// with a relative tolerance of 1e-7 so ties of equal likelihood count on both sides.
///
/// `1.0` when no event was seen on either side (nothing tells the rates apart); `None` when an
/// exposure is not positive and finite.
pub fn poisson_rates_test(x_a: u64, t_a: f64, x_b: u64, t_b: f64) -> Option<f64> {
    if !(t_a.is_finite() && t_a > 0.0 && t_b.is_finite() && t_b > 0.0) {
        return None;
    }
    let n = x_a + x_b;
    if n == 0 {
        return Some(1.0);
    }
    let p = t_b / (t_a + t_b);
    let ln_pmf = |k: u64| {
        let (n, k) = (n as f64, k as f64);
        ln_gamma(n + 1.0) - ln_gamma(k + 1.0) - ln_gamma(n - k + 1.0) + k * p.ln() + (n - k) * (1.0 - p).ln()
    };
    let seen = ln_pmf(x_b);
    let bound = seen + (1.0f64 + 1e-7).ln();
    let total: f64 = (0..=n).map(ln_pmf).filter(|&l| l <= bound).map(f64::exp).sum();
    Some(total.min(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1e-12)
    }

    #[test]
    fn garwood_intervals_match_the_published_table() {
        // Reference values: R's poisson.test(x)$conf.int (exact, 95 %).
        let i = poisson_rate_interval(0, 1.0, 0.95).unwrap();
        assert_eq!(i.lo, 0.0);
        assert!(close(i.hi, 3.688879, 1e-5), "{i:?}");
        let i = poisson_rate_interval(1, 1.0, 0.95).unwrap();
        assert!(close(i.lo, 0.02531781, 1e-5) && close(i.hi, 5.571643, 1e-5), "{i:?}");
        let i = poisson_rate_interval(10, 1.0, 0.95).unwrap();
        assert!(close(i.lo, 4.795389, 1e-5) && close(i.hi, 18.390356, 1e-5), "{i:?}");
        // A rate: 10 events over 5 faults is 2 per fault, its ends divided by 5.
        let r = poisson_rate_interval(10, 5.0, 0.95).unwrap();
        assert!(close(r.lo, 4.795389 / 5.0, 1e-5) && close(r.hi, 18.390356 / 5.0, 1e-5), "{r:?}");
        assert!(poisson_rate_interval(3, 0.0, 0.95).is_none());
        assert!(poisson_rate_interval(3, 1.0, 1.0).is_none());
    }

    #[test]
    fn the_conditional_test_matches_binom_test_and_is_symmetric() {
        // Equal exposures: binom.test(x_b, n, 0.5). binom.test(0, 10) p = 0.001953125.
        assert!(close(poisson_rates_test(10, 5.0, 0, 5.0).unwrap(), 0.001953125, 1e-9));
        assert!(close(poisson_rates_test(0, 5.0, 10, 5.0).unwrap(), 0.001953125, 1e-9));
        // binom.test(2, 8) p = 0.2890625.
        assert!(close(poisson_rates_test(6, 1.0, 2, 1.0).unwrap(), 0.2890625, 1e-9));
        // Unequal exposures, 7 events, p = 1/3 and x_b = 1: the outcomes no likelier than
        // P(1) are k in {0, 1, 4, 5, 6, 7} (P(2) and P(3) are likelier).
        let p = poisson_rates_test(6, 2.0, 1, 1.0).unwrap();
        let exact: f64 = [0u64, 1, 4, 5, 6, 7]
            .iter()
            .map(|&k| {
                let c = [1.0, 7.0, 21.0, 35.0, 35.0, 21.0, 7.0, 1.0][k as usize];
                c * (1.0f64 / 3.0).powi(k as i32) * (2.0f64 / 3.0).powi(7 - k as i32)
            })
            .sum();
        assert!(close(p, exact, 1e-9), "{p} vs {exact}");
        // Nothing seen: nothing told apart.
        assert_eq!(poisson_rates_test(0, 5.0, 0, 5.0), Some(1.0));
        // Equal counts over equal exposures: p = 1.
        assert!(close(poisson_rates_test(4, 5.0, 4, 5.0).unwrap(), 1.0, 1e-9));
        assert!(poisson_rates_test(1, 0.0, 1, 1.0).is_none());
    }
}
