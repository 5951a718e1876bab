//! Serial correlation of a series, and the effective sample size it leaves.
//!
//! Order-statistic intervals ([`super::quantile_interval`]) assume independent samples. Latency
//! samples of a loaded server are not: a slow second (a fork, a compaction, a GC in the client)
//! slows every call in it. The lag-1 autocorrelation ρ of a per-second series measures that
//! stickiness, and under an AR(1) model the variance of a mean of n correlated samples equals
//! that of n·(1 − ρ)/(1 + ρ) independent ones (Bayley & Hammersley 1946; Wilks, *Statistical
//! Methods in the Atmospheric Sciences*, §5.2.3): the effective sample size.

/// The lag-1 sample autocorrelation of `xs`: Σ (xₜ − x̄)(xₜ₊₁ − x̄) / Σ (xₜ − x̄)², in −1..1.
///
/// None with fewer than two values; 0.0 for a constant series (no variation to correlate).
pub fn lag1_autocorrelation(xs: &[f64]) -> Option<f64> {
    if xs.len() < 2 {
        return None;
    }
    let mean = xs.iter().sum::<f64>() / xs.len() as f64;
    let var: f64 = xs.iter().map(|x| (x - mean).powi(2)).sum();
    if var == 0.0 {
        return Some(0.0);
    }
    let cov: f64 = xs.windows(2).map(|w| (w[0] - mean) * (w[1] - mean)).sum();
    Some((cov / var).clamp(-1.0, 1.0))
}

/// The effective number of independent samples among `n` with lag-1 autocorrelation `rho`:
/// n·(1 − ρ)/(1 + ρ), rounded down and clamped to 1..=n; `n` itself when ρ ≤ 0 (a negative
/// correlation is not counted as extra information), 0 when `n` is 0.
pub fn effective_sample_size(n: u64, rho: f64) -> u64 {
    if n == 0 || rho <= 0.0 || rho.is_nan() {
        return n;
    }
    let ess = n as f64 * (1.0 - rho) / (1.0 + rho);
    (ess.floor() as u64).clamp(1, n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;
    use rand_distr::{Distribution, StandardNormal};

    /// An AR(1) series xₜ = ρ·xₜ₋₁ + εₜ with standard normal ε, seeded.
    fn ar1(rho: f64, len: usize, seed: u64) -> Vec<f64> {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut x = 0.0;
        (0..len)
            .map(|_| {
                let e: f64 = StandardNormal.sample(&mut rng);
                x = rho * x + e;
                x
            })
            .collect()
    }

    #[test]
    fn white_noise_keeps_about_every_sample() {
        let xs = ar1(0.0, 10_000, 7);
        let rho = lag1_autocorrelation(&xs).unwrap();
        assert!(rho.abs() < 0.05, "{rho}");
        let ess = effective_sample_size(10_000, rho);
        assert!(ess >= 9_000, "{ess}");
    }

    #[test]
    fn an_ar1_series_with_rho_0_8_keeps_about_a_ninth() {
        let xs = ar1(0.8, 20_000, 11);
        let rho = lag1_autocorrelation(&xs).unwrap();
        assert!((rho - 0.8).abs() < 0.02, "{rho}");
        let ess = effective_sample_size(90_000, rho) as f64;
        assert!((ess / 10_000.0 - 1.0).abs() < 0.15, "{ess} of 90 000, about 90 000 / 9");
    }

    #[test]
    fn edge_cases_are_defined() {
        assert_eq!(lag1_autocorrelation(&[1.0]), None);
        assert_eq!(lag1_autocorrelation(&[3.0; 8]), Some(0.0));
        // Alternating: perfectly anti-correlated, which counts as n.
        let alt: Vec<f64> = (0..10).map(|i| if i % 2 == 0 { 1.0 } else { -1.0 }).collect();
        let rho = lag1_autocorrelation(&alt).unwrap();
        assert!(rho < -0.8, "{rho}");
        assert_eq!(effective_sample_size(100, rho), 100);
        assert_eq!(effective_sample_size(100, 0.999_999), 1);
        assert_eq!(effective_sample_size(0, 0.5), 0);
        assert_eq!(effective_sample_size(100, 1.0 / 3.0), 50);
    }
}
