//! The one-sided Mann–Whitney U test (Mann & Whitney 1947, "On a test of whether one of two
//! random variables is stochastically larger than the other"; Wilcoxon's rank-sum test).
//!
//! It asks whether sample `x` tends to be larger (or smaller) than sample `y` without assuming a
//! distribution, which suits benchmark repetitions: few, skewed, with the odd outlier. The
//! conventions (U of `x`, the tie and continuity corrections) are scipy's
//! `scipy.stats.mannwhitneyu`, and the tests check its values.

use super::normal::normal_sf;

/// Largest size of each sample for which [`Method::Auto`] computes the exact null distribution
/// (when there are no ties); beyond it the normal approximation is close enough.
pub const EXACT_MAX_N: usize = 10;

/// The alternative hypothesis, for `x` against `y`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alternative {
    /// `x` is stochastically greater than `y` (small p when `x`'s values rank high).
    Greater,
    /// `x` is stochastically smaller than `y`.
    Less,
}

/// How the p-value is computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Exact when both samples have at most [`EXACT_MAX_N`] values and no value is tied,
    /// asymptotic otherwise.
    Auto,
    /// The exact permutation distribution of U, counted by the recurrence of Mann & Whitney
    /// (1947, eq. 1). It assumes no ties; with ties it is only an approximation.
    Exact,
    /// The normal approximation with the tie correction of the variance and a continuity
    /// correction of 0.5.
    Asymptotic,
}

/// The result of one test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UTest {
    /// U of `x`: the number of pairs `(xᵢ, yⱼ)` with `xᵢ > yⱼ`, ties counting ½
    /// (= rank sum of `x` − n_x(n_x + 1)/2, with average ranks for ties). In `[0, n_x·n_y]`.
    pub u: f64,
    /// The one-sided p-value for the requested alternative, in `[0, 1]`.
    pub p_value: f64,
    /// The method used: [`Method::Exact`] or [`Method::Asymptotic`], never `Auto`.
    pub method: Method,
}

/// The one-sided test of `x` against `y` with [`Method::Auto`].
///
/// `None` when either sample is empty.
pub fn mann_whitney_u(x: &[f64], y: &[f64], alternative: Alternative) -> Option<UTest> {
    mann_whitney_u_with(x, y, alternative, Method::Auto)
}

/// The one-sided test of `x` against `y` with the given method.
///
/// `None` when either sample is empty. When every value is tied the asymptotic p-value is 1.
pub fn mann_whitney_u_with(x: &[f64], y: &[f64], alternative: Alternative, method: Method) -> Option<UTest> {
    if x.is_empty() || y.is_empty() {
        return None;
    }
    let (n_x, n_y) = (x.len(), y.len());
    let (rank_sum_x, tie_term) = rank_sum(x, y);
    let u = rank_sum_x - (n_x * (n_x + 1)) as f64 / 2.0;
    // The statistic whose upper tail is the p-value: U for "greater", its mirror for "less"
    // (the null distribution is symmetric about n_x·n_y/2).
    let upper = match alternative {
        Alternative::Greater => u,
        Alternative::Less => (n_x * n_y) as f64 - u,
    };
    let method = match method {
        Method::Auto if tie_term == 0.0 && n_x.max(n_y) <= EXACT_MAX_N => Method::Exact,
        Method::Auto => Method::Asymptotic,
        m => m,
    };
    let p_value = match method {
        Method::Exact => exact_upper_tail(n_x, n_y, upper),
        _ => asymptotic_upper_tail(n_x, n_y, upper, tie_term),
    };
    Some(UTest { u, p_value: p_value.clamp(0.0, 1.0), method })
}

/// The smallest one-sided p-value the exact test can give for these sizes: `1 / C(n_x + n_y, n_x)`,
/// reached when the samples do not overlap at all. If it is not below α, no data can make the
/// test significant (3 against 3 gives 0.05; 5 against 5 gives 0.004).
pub fn min_exact_p_value(n_x: usize, n_y: usize) -> f64 {
    let (small, total) = (n_x.min(n_y), n_x + n_y);
    // C(total, small) as a running product, exact in f64 for the sizes that matter here.
    let ways = (0..small).fold(1.0, |acc, i| acc * (total - i) as f64 / (i + 1) as f64);
    1.0 / ways
}

/// Rank sum of `x` in the pooled sample (average ranks for ties, 1-based) and the tie term
/// `Σ (t³ − t)` over groups of `t` tied values.
fn rank_sum(x: &[f64], y: &[f64]) -> (f64, f64) {
    let mut pooled: Vec<(f64, bool)> = x.iter().map(|&v| (v, true)).chain(y.iter().map(|&v| (v, false))).collect();
    pooled.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
    let (mut rank_sum_x, mut tie_term) = (0.0, 0.0);
    let mut start = 0;
    while start < pooled.len() {
        let end = start + pooled[start..].iter().take_while(|p| p.0 == pooled[start].0).count();
        let t = (end - start) as f64;
        // Ranks start + 1 ..= end share their average.
        let average_rank = (start + 1 + end) as f64 / 2.0;
        rank_sum_x += average_rank * pooled[start..end].iter().filter(|p| p.1).count() as f64;
        tie_term += t * t * t - t;
        start = end;
    }
    (rank_sum_x, tie_term)
}

/// `P(U ≥ u)` under the null hypothesis, from the exact distribution of U for sizes `m`, `n`.
fn exact_upper_tail(m: usize, n: usize, u: f64) -> f64 {
    let counts = exact_counts(m, n);
    let total: f64 = counts.iter().sum();
    let from = u.ceil().max(0.0) as usize;
    counts.iter().skip(from).sum::<f64>() / total
}

/// The number of orderings of `m` x's and `n` y's giving each value `k = 0 ..= m·n` of U.
///
/// Mann & Whitney's recurrence on the largest value: if it is an x it beats all `n` y's,
/// so `f(m, n, k) = f(m − 1, n, k − n) + f(m, n − 1, k)`, with `f(0, n, 0) = f(m, 0, 0) = 1`.
/// Counts are integers below 2⁵³ up to 25 values a side, so `f64` holds them exactly.
fn exact_counts(m: usize, n: usize) -> Vec<f64> {
    // row[j] = f(i, j, ·) for the current i; row i = 0 is all ones at k = 0.
    let mut row: Vec<Vec<f64>> = (0..=n).map(|_| vec![1.0]).collect();
    for i in 1..=m {
        let mut next: Vec<Vec<f64>> = Vec::with_capacity(n + 1);
        next.push(vec![1.0]);
        for j in 1..=n {
            let mut f = vec![0.0; i * j + 1];
            for (k, c) in row[j].iter().enumerate() {
                f[k + j] += c; // f(i − 1, j, k) shifted by j
            }
            for (k, c) in next[j - 1].iter().enumerate() {
                f[k] += c; // f(i, j − 1, k)
            }
            next.push(f);
        }
        row = next;
    }
    row.pop().unwrap_or_else(|| vec![1.0])
}

/// `P(U ≥ u)` by the normal approximation: mean `m·n/2`, variance
/// `m·n/12 · ((N + 1) − Σ(t³ − t) / (N(N − 1)))` with `N = m + n`, and `u` lowered by ½
/// (continuity correction), as scipy does.
fn asymptotic_upper_tail(m: usize, n: usize, u: f64, tie_term: f64) -> f64 {
    let (mf, nf) = (m as f64, n as f64);
    let total = mf + nf;
    let tie_fix = if total > 1.0 { tie_term / (total * (total - 1.0)) } else { 0.0 };
    let variance = mf * nf / 12.0 * ((total + 1.0) - tie_fix);
    if variance <= 0.0 {
        return 1.0; // every value tied: no evidence either way
    }
    normal_sf((u - mf * nf / 2.0 - 0.5) / variance.sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;
    use Alternative::{Greater, Less};
    use Method::{Asymptotic, Exact};

    /// scipy's documentation example (from Wikipedia, "Mann–Whitney U test"): ages of males
    /// and females, U₁ = 17, exact two-sided p = 0.1111.
    const MALES: [f64; 5] = [19.0, 22.0, 16.0, 29.0, 24.0];
    const FEMALES: [f64; 4] = [20.0, 11.0, 17.0, 12.0];
    /// Ten latency-like medians, µs, no ties.
    const SLOW: [f64; 10] = [1020.0, 1185.0, 998.0, 1231.0, 1107.0, 1302.0, 1150.0, 1089.0, 1264.0, 1199.0];
    const FAST: [f64; 10] = [1003.0, 951.0, 1042.0, 978.0, 1110.0, 1015.0, 989.0, 1066.0, 1034.0, 962.0];

    fn check(x: &[f64], y: &[f64], alt: Alternative, method: Method, u: f64, p: f64) {
        let t = mann_whitney_u_with(x, y, alt, method).unwrap();
        assert_eq!(t.u, u, "U of {alt:?} {method:?}");
        assert!((t.p_value - p).abs() <= 1e-6 * p.max(1e-3), "{alt:?} {method:?}: p = {} want {p}", t.p_value);
    }

    #[test]
    fn exact_p_values_match_scipy() {
        // scipy 1.17.1 mannwhitneyu(x, y, alternative=..., method='exact').
        check(&MALES, &FEMALES, Greater, Exact, 17.0, 0.05555555555555555);
        check(&MALES, &FEMALES, Less, Exact, 17.0, 0.9682539682539683);
        check(&SLOW, &FAST, Greater, Exact, 88.0, 0.001439736733854381);
        check(&SLOW, &FAST, Less, Exact, 88.0, 0.9989553789863388);
        // No overlap, 10 against 10: the smallest attainable p, 1 / C(20, 10).
        let high: Vec<f64> = (11..=20).map(f64::from).collect();
        let low: Vec<f64> = (1..=10).map(f64::from).collect();
        check(&high, &low, Greater, Exact, 100.0, 5.412544112234515e-06);
        check(&high, &low, Less, Exact, 100.0, 1.0);
        assert!((min_exact_p_value(10, 10) - 5.412544112234515e-06).abs() < 1e-18);
    }

    #[test]
    fn asymptotic_p_values_match_scipy() {
        // scipy 1.17.1 mannwhitneyu(x, y, alternative=..., method='asymptotic') (continuity
        // correction on, the default).
        check(&MALES, &FEMALES, Greater, Asymptotic, 17.0, 0.055673443266570206);
        check(&MALES, &FEMALES, Less, Asymptotic, 17.0, 0.9669037101389033);
        check(&SLOW, &FAST, Greater, Asymptotic, 88.0, 0.002293196040126747);
        check(&SLOW, &FAST, Less, Asymptotic, 88.0, 0.9981947428438352);
    }

    #[test]
    fn ties_use_average_ranks_and_the_tie_corrected_variance() {
        // scipy 1.17.1 mannwhitneyu(x, y, alternative=..., method='asymptotic').
        let x = [1.0, 2.0, 2.0, 3.0, 3.0, 3.0, 4.0, 5.0];
        let y = [2.0, 3.0, 4.0, 4.0, 5.0, 5.0, 6.0, 7.0, 7.0];
        check(&x, &y, Greater, Asymptotic, 13.5, 0.9876172774448116);
        check(&x, &y, Less, Asymptotic, 13.5, 0.015879478574031856);
        let x = [1285.0, 1290.0, 1285.0, 1301.0, 1296.0, 1290.0, 1310.0, 1285.0];
        let y = [1270.0, 1285.0, 1262.0, 1275.0, 1290.0, 1268.0, 1281.0, 1275.0];
        check(&x, &y, Greater, Asymptotic, 58.5, 0.002879733811509059);
        check(&x, &y, Less, Asymptotic, 58.5, 0.9979304988818686);
        // Auto falls back to the approximation when there are ties.
        assert_eq!(mann_whitney_u(&x, &y, Greater).unwrap().method, Asymptotic);
        // scipy 1.17.1 mannwhitneyu([5, 5, 5], [5, 5, 5], alternative='greater'): U 4.5, p 1.
        check(&[5.0; 3], &[5.0; 3], Greater, Asymptotic, 4.5, 1.0);
    }

    #[test]
    fn larger_samples_match_scipy_both_ways() {
        // scipy 1.17.1 mannwhitneyu(x, y, alternative='greater', method=...), 15 against 12.
        let x = [3.1, 4.7, 2.2, 5.9, 4.1, 3.8, 6.3, 5.2, 4.4, 2.9, 5.5, 4.9, 3.3, 6.8, 5.0];
        let y = [2.5, 3.0, 1.9, 4.2, 2.8, 3.6, 2.1, 4.0, 3.4, 2.6, 1.7, 3.9];
        check(&x, &y, Greater, Exact, 151.0, 0.001058683169330632);
        check(&x, &y, Greater, Asymptotic, 151.0, 0.001578115141351001);
        check(&x, &y, Less, Exact, 151.0, 0.9991302852185878);
        assert_eq!(mann_whitney_u(&x, &y, Greater).unwrap().method, Asymptotic, "15 > EXACT_MAX_N");
    }

    #[test]
    fn auto_is_exact_for_small_untied_samples_and_sides_are_complementary() {
        let t = mann_whitney_u(&SLOW, &FAST, Greater).unwrap();
        assert_eq!(t.method, Exact);
        // For a continuous statistic P(U ≥ u) + P(U ≤ u) = 1 + P(U = u).
        let g = mann_whitney_u(&MALES, &FEMALES, Greater).unwrap().p_value;
        let l = mann_whitney_u(&MALES, &FEMALES, Less).unwrap().p_value;
        assert!(g + l > 1.0 && g + l < 1.1);
        assert_eq!(mann_whitney_u(&[], &FAST, Greater), None);
        assert_eq!(min_exact_p_value(3, 3), 0.05);
        assert!((min_exact_p_value(5, 5) - 1.0 / 252.0).abs() < 1e-15);
    }
}
