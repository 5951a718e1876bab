//! The one-sided sign test (Arbuthnot 1710; Conover, *Practical Nonparametric Statistics*,
//! §3.4): for paired measurements, whether the ratios lie above 1 more often than chance
//! allows. It assumes nothing of the ratios' distribution, only that pairs are independent, so
//! a drift that moves both members of a pair alike does not move it.

/// The p-value that the ratios tend to lie above 1 (`above = true`) or below it: the binomial
/// tail `P(X >= k)` for `X ~ Binomial(n, 1/2)`, where `k` counts the ratios on that side and
/// `n` the ratios not equal to 1 (ties are dropped, as the test prescribes).
///
/// `None` when no ratio differs from 1, or one is not finite.
pub fn sign_test(ratios: &[f64], above: bool) -> Option<f64> {
    if ratios.iter().any(|r| !r.is_finite()) {
        return None;
    }
    let n = ratios.iter().filter(|r| **r != 1.0).count();
    let k = ratios.iter().filter(|r| if above { **r > 1.0 } else { **r < 1.0 }).count();
    if n == 0 {
        return None;
    }
    // P(X = i) by the running ratio C(n, i) / C(n, i - 1) = (n - i + 1) / i, from 0.5^n.
    let mut p_i = 0.5f64.powi(n as i32);
    let mut tail = 0.0;
    for i in 0..=n {
        if i >= k {
            tail += p_i;
        }
        p_i *= (n - i) as f64 / (i + 1) as f64;
    }
    Some(tail.min(1.0))
}

/// The smallest p-value [`sign_test`] can give with `n` pairs: `0.5^n` (every ratio on one side).
pub fn min_sign_p_value(n: usize) -> f64 {
    0.5f64.powi(n as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binomial_tails_match_the_reference() {
        // scipy.stats.binomtest(k, n, 0.5, alternative="greater").pvalue
        let ratios = |k: usize, n: usize| -> Vec<f64> { (0..n).map(|i| if i < k { 1.1 } else { 0.9 }).collect() };
        let p = sign_test(&ratios(8, 10), true).unwrap();
        assert!((p - 0.0546875).abs() < 1e-12, "{p}");
        let p = sign_test(&ratios(10, 10), true).unwrap();
        assert!((p - 0.0009765625).abs() < 1e-12, "{p}");
        assert!((sign_test(&ratios(0, 10), true).unwrap() - 1.0).abs() < 1e-12);
        assert!((sign_test(&ratios(2, 10), false).unwrap() - 0.0546875).abs() < 1e-12);
        // Ties drop out: 3 above, 0 below, 2 equal is 3 of 3.
        assert_eq!(sign_test(&[1.2, 1.1, 1.3, 1.0, 1.0], true), Some(0.125));
        assert_eq!(sign_test(&[1.0, 1.0], true), None);
        assert_eq!(sign_test(&[f64::NAN], true), None);
        assert_eq!(min_sign_p_value(10), 0.0009765625);
    }
}
