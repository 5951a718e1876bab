//! The thresholds of the verdict rule, with their defaults in one place.

use serde::{Deserialize, Serialize};

use super::metric::Measure;
use crate::stats::bootstrap::DEFAULT_RESAMPLES;

/// The parameters of the comparison. Fractions are unitless (0.05 = 5 %).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareOptions {
    /// Significance level of the one-sided Mann–Whitney test (default 0.01).
    pub alpha: f64,
    /// Noise band of throughput (ops/s), a fraction of the base median (default 0.05).
    pub noise_throughput: f64,
    /// Noise band of p50 latency (default 0.05).
    pub noise_p50: f64,
    /// Noise band of tail latency, p99 and p99.9 (default 0.15: tails move more run to run).
    pub noise_tail: f64,
    /// Noise band of a script's server cost per call (default 0.03: measured over thousands of
    /// calls on an idle server, it moves less between repetitions than a latency does).
    #[serde(default = "default_noise_cost")]
    pub noise_cost: f64,
    /// Largest coefficient of variation (sample std / mean) a side may have before its metric
    /// is called inconclusive (default 0.10).
    pub max_cv: f64,
    /// Fewest repetitions a side needs for a verdict (default 3; at least 2 to have a CV).
    pub min_repetitions: usize,
    /// Confidence level of the bootstrap interval (default 0.95).
    pub confidence: f64,
    /// Bootstrap resamples per metric (default 10 000).
    pub resamples: usize,
    /// Seed of the bootstrap's generator (default 1); the same seed gives the same intervals.
    pub seed: u64,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            alpha: 0.01,
            noise_throughput: 0.05,
            noise_p50: 0.05,
            noise_tail: 0.15,
            noise_cost: default_noise_cost(),
            max_cv: 0.10,
            min_repetitions: 3,
            confidence: 0.95,
            resamples: DEFAULT_RESAMPLES,
            seed: 1,
        }
    }
}

fn default_noise_cost() -> f64 {
    0.03
}

impl CompareOptions {
    /// The noise band of a measure, as a fraction of the base median.
    pub fn noise(&self, measure: Measure) -> f64 {
        match measure {
            Measure::OpsPerSec => self.noise_throughput,
            Measure::P50 => self.noise_p50,
            Measure::P99 | Measure::P999 => self.noise_tail,
            Measure::ServerUs => self.noise_cost,
        }
    }

    /// Checks the ranges: `alpha` and `confidence` in (0, 1), noise bands in [0, 1), `max_cv` > 0,
    /// `min_repetitions` ≥ 2, `resamples` ≥ 100. Errors: a message naming the option.
    pub fn validate(&self) -> Result<(), String> {
        let open_unit = |name: &str, v: f64| {
            if v > 0.0 && v < 1.0 {
                Ok(())
            } else {
                Err(format!("{name} must be between 0 and 1 exclusive, found {v}"))
            }
        };
        open_unit("alpha", self.alpha)?;
        open_unit("confidence", self.confidence)?;
        for (name, v) in [
            ("noise-throughput", self.noise_throughput),
            ("noise-p50", self.noise_p50),
            ("noise-tail", self.noise_tail),
            ("noise-cost", self.noise_cost),
        ] {
            if !(0.0..1.0).contains(&v) {
                return Err(format!("{name} must be a fraction in [0, 1) such as 0.05 or 5%, found {v}"));
            }
        }
        if self.max_cv.is_nan() || self.max_cv <= 0.0 {
            return Err(format!("max-cv must be above 0, found {}", self.max_cv));
        }
        if self.min_repetitions < 2 {
            return Err(format!("min-repetitions must be at least 2, found {}", self.min_repetitions));
        }
        if self.resamples < 100 {
            return Err(format!("resamples must be at least 100, found {}", self.resamples));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_bands_follow_the_measure() {
        let o = CompareOptions::default();
        assert_eq!(o.validate(), Ok(()));
        assert_eq!(o.noise(Measure::OpsPerSec), 0.05);
        assert_eq!(o.noise(Measure::P50), 0.05);
        assert_eq!(o.noise(Measure::P999), 0.15);
    }

    #[test]
    fn out_of_range_values_are_named() {
        let bad = CompareOptions { alpha: 1.5, ..CompareOptions::default() };
        assert!(bad.validate().unwrap_err().contains("alpha"));
        let bad = CompareOptions { noise_tail: 5.0, ..CompareOptions::default() };
        assert!(bad.validate().unwrap_err().contains("noise-tail"));
        let bad = CompareOptions { max_cv: f64::NAN, ..CompareOptions::default() };
        assert!(bad.validate().unwrap_err().contains("max-cv"));
    }
}
