//! Resolved distributions: samplers the hot path calls with the run's seeded RNG.
//!
//! A [`SizeSampler`] returns bytes, a [`DurationSampler`] a `Duration`. Both are built
//! from a raw [`Dist`] once, at validation time, with every configured value
//! checked against a `[min, max]` range; log-normal samples are clamped to it.

use std::time::Duration;

use rand::distr::weighted::WeightedIndex;
use rand::distr::Distribution;
use rand::Rng;
use rand_distr::LogNormal;

use super::bounds::MAX_LIST;
use super::dist::Dist;
use super::error::Problem;
use super::units::{HumanDuration, HumanSize};

/// z-score of the 99th percentile of the standard normal: σ = ln(p99/median) / Z99.
const Z99: f64 = 2.326_347_874_040_840_8;
/// z-score of the 99.999th percentile: the largest of the ~10^5 sizes a lane draws in a long
/// run, what its reused buffer grows to (a log-normal's clamp is reached about never).
const Z99999: f64 = 4.264_890_793_922_602;

/// Largest payload the harness sends (bytes); also the log-normal clamp.
pub const MAX_SIZE: u64 = 64 * 1024 * 1024;
/// Longest sampled duration; also the log-normal clamp.
pub const MAX_DURATION: Duration = Duration::from_secs(3600);

/// A units-free sampler over `u64` (bytes, or nanoseconds for durations).
#[derive(Debug, Clone)]
enum Shape {
    Fixed(u64),
    Uniform { lo: u64, hi: u64 },
    LogNormal { dist: LogNormal<f64>, min: u64, max: u64, p99999: u64 },
    Weighted { values: Vec<u64>, index: WeightedIndex<f64> },
}

impl Shape {
    /// Checks `dist` (values converted by `value`) against `[min, max]` and builds it.
    /// `show` renders a `u64` in the unit of the field for messages.
    fn build<V>(
        dist: &Dist<V>,
        value: impl Fn(&V) -> u64,
        (min, max): (u64, u64),
        show: impl Fn(u64) -> String,
    ) -> Result<Self, Problem> {
        let range = || format!("between {} and {}", show(min), show(max));
        let check = |field: &str, v: u64| {
            if (min..=max).contains(&v) {
                Ok(v)
            } else {
                Err(Problem::new(field, show(v), range()))
            }
        };
        Ok(match dist {
            Dist::Fixed(v) => Shape::Fixed(check("fixed", value(v))?),
            Dist::Uniform([lo, hi]) => {
                let (lo, hi) = (check("uniform", value(lo))?, check("uniform", value(hi))?);
                if lo > hi {
                    let found = format!("[{}, {}]", show(lo), show(hi));
                    return Err(Problem::new("uniform", found, "[LO, HI] with LO <= HI"));
                }
                Shape::Uniform { lo, hi }
            }
            Dist::LogNormal(spec) => {
                let median = check("lognormal.median", value(&spec.median))?;
                let p99 = check("lognormal.p99", value(&spec.p99))?;
                if median == 0 || p99 < median {
                    let found = format!("median {}, p99 {}", show(median), show(p99));
                    return Err(Problem::new("lognormal", found, "0 < median <= p99"));
                }
                let (mu, sigma) = ((median as f64).ln(), (p99 as f64 / median as f64).ln() / Z99);
                let dist = LogNormal::new(mu, sigma).map_err(|e| Problem::new("lognormal", e, "a valid log-normal"))?;
                // `as` saturates for f64 -> u64; the clamp keeps the range.
                let p99999 = ((mu + Z99999 * sigma).exp().round() as u64).clamp(min, max);
                Shape::LogNormal { dist, min, max, p99999 }
            }
            Dist::Weighted(pairs) => {
                if pairs.is_empty() {
                    return Err(Problem::new("weighted", "[]", "at least one [VALUE, WEIGHT] pair"));
                }
                if pairs.len() > MAX_LIST {
                    let found = format!("{} pairs", pairs.len());
                    return Err(Problem::new("weighted", found, format!("at most {MAX_LIST} [VALUE, WEIGHT] pairs")));
                }
                let mut values = Vec::with_capacity(pairs.len());
                for (i, (v, w)) in pairs.iter().enumerate() {
                    values.push(check(&format!("weighted[{i}]"), value(v))?);
                    if !(w.is_finite() && *w > 0.0) {
                        return Err(Problem::new(&format!("weighted[{i}]"), format!("weight {w}"), "a weight > 0"));
                    }
                }
                let index = WeightedIndex::new(pairs.iter().map(|(_, w)| *w))
                    .map_err(|e| Problem::new("weighted", e, "valid weights"))?;
                Shape::Weighted { values, index }
            }
        })
    }

    /// One value: a fixed one read in place, any other drawn out of line. Every enqueue
    /// samples its payload size, and a call per sample of a fixed size (the usual one) would
    /// cost more than reading it.
    #[inline(always)]
    fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        match self {
            Shape::Fixed(v) => *v,
            drawn => drawn.draw(rng),
        }
    }

    /// [`Shape::sample`] of a distribution that draws.
    #[inline(never)]
    fn draw<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        match self {
            Shape::Fixed(v) => *v,
            Shape::Uniform { lo, hi } => rng.random_range(*lo..=*hi),
            Shape::LogNormal { dist, min, max, .. } => {
                // `as` saturates for f64 -> u64 (NaN -> 0); the clamp keeps the range.
                (dist.sample(rng).round() as u64).clamp(*min, *max)
            }
            Shape::Weighted { values, index } => values[index.sample(rng)],
        }
    }

    /// The largest value the sampler can return.
    fn upper_bound(&self) -> u64 {
        match self {
            Shape::Fixed(v) => *v,
            Shape::Uniform { hi, .. } => *hi,
            Shape::LogNormal { max, .. } => *max,
            Shape::Weighted { values, .. } => values.iter().copied().max().unwrap_or(0),
        }
    }

    /// The largest value a long run draws: [`Shape::upper_bound`], but a log-normal's
    /// 99.999th percentile instead of its clamp.
    fn largest_drawn(&self) -> u64 {
        match self {
            Shape::LogNormal { p99999, .. } => *p99999,
            other => other.upper_bound(),
        }
    }
}

/// Samples payload sizes in bytes (`producers.payload`).
#[derive(Debug, Clone)]
pub struct SizeSampler(Shape);

impl SizeSampler {
    /// Resolves a raw size distribution; every configured size must lie in
    /// `min ..= MAX_SIZE` bytes (the payload needs `min` = 16 for its header).
    ///
    /// # Errors
    /// A [`Problem`] naming the sub-field (`uniform`, `lognormal.p99`, `weighted[2]`, ...).
    pub(crate) fn new(dist: &Dist<HumanSize>, min: u64) -> Result<Self, Problem> {
        let show = |b: u64| format!("{b} bytes");
        Shape::build(dist, HumanSize::bytes, (min, MAX_SIZE), show).map(Self)
    }

    /// Always `bytes`.
    pub fn fixed(bytes: u64) -> Self {
        Self(Shape::Fixed(bytes))
    }

    /// One size, in bytes.
    #[inline]
    pub fn sample(&self, rng: &mut impl Rng) -> u64 {
        self.0.sample(rng)
    }

    /// The largest size this sampler can return, in bytes.
    pub fn max_bytes(&self) -> u64 {
        self.0.upper_bound()
    }

    /// The largest size a long run draws, in bytes, what a reused payload buffer grows to:
    /// [`SizeSampler::max_bytes`], except for a log-normal its 99.999th percentile (its
    /// 64 MiB clamp is reached about never). Used to bound the payload bytes in flight.
    pub fn largest_drawn_bytes(&self) -> u64 {
        self.0.largest_drawn()
    }
}

/// Samples durations (`producers.delay`, `consumers.work`), at nanosecond resolution.
#[derive(Debug, Clone)]
pub struct DurationSampler(Shape);

impl DurationSampler {
    /// Resolves a raw duration distribution; every configured duration must lie in
    /// `0 ..= MAX_DURATION` (1 hour).
    ///
    /// # Errors
    /// A [`Problem`] naming the sub-field.
    pub(crate) fn new(dist: &Dist<HumanDuration>) -> Result<Self, Problem> {
        let nanos = |d: &HumanDuration| u64::try_from(d.get().as_nanos()).unwrap_or(u64::MAX);
        let show = |n: u64| humantime::format_duration(Duration::from_nanos(n)).to_string();
        Shape::build(dist, nanos, (0, MAX_DURATION.as_nanos() as u64), show).map(Self)
    }

    /// Always `d`.
    pub fn fixed(d: Duration) -> Self {
        Self(Shape::Fixed(d.as_nanos() as u64))
    }

    /// One duration.
    pub fn sample(&self, rng: &mut impl Rng) -> Duration {
        Duration::from_nanos(self.0.sample(rng))
    }

    /// The longest duration this sampler can return.
    pub fn max(&self) -> Duration {
        Duration::from_nanos(self.0.upper_bound())
    }

    /// True when every sample is zero (e.g. the default `work`), so callers can skip sleeping.
    pub fn is_zero(&self) -> bool {
        self.0.upper_bound() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::dist::LogNormalSpec;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    fn b(n: u64) -> HumanSize {
        HumanSize::from_bytes(n)
    }

    #[test]
    fn fixed_returns_the_value() {
        let mut rng = SmallRng::seed_from_u64(1);
        let s = SizeSampler::new(&Dist::Fixed(b(300)), 16).unwrap();
        assert!((0..100).all(|_| s.sample(&mut rng) == 300));
        let d = DurationSampler::new(&Dist::Fixed(HumanDuration::parse("5ms").unwrap())).unwrap();
        assert_eq!(d.sample(&mut rng), Duration::from_millis(5));
    }

    #[test]
    fn uniform_stays_within_bounds_and_covers_them() {
        let mut rng = SmallRng::seed_from_u64(2);
        let s = SizeSampler::new(&Dist::Uniform([b(16), b(20)]), 16).unwrap();
        let xs: Vec<u64> = (0..1000).map(|_| s.sample(&mut rng)).collect();
        assert!(xs.iter().all(|x| (16..=20).contains(x)));
        assert!(xs.contains(&16) && xs.contains(&20));
    }

    #[test]
    fn lognormal_median_is_close_to_the_configured_median() {
        let mut rng = SmallRng::seed_from_u64(42);
        let spec = LogNormalSpec { median: b(1000), p99: b(10_000) };
        let s = SizeSampler::new(&Dist::LogNormal(spec), 16).unwrap();
        let mut xs: Vec<u64> = (0..20_000).map(|_| s.sample(&mut rng)).collect();
        xs.sort_unstable();
        let median = xs[xs.len() / 2] as f64;
        assert!((median - 1000.0).abs() / 1000.0 < 0.05, "median {median}");
        let p99 = xs[xs.len() * 99 / 100] as f64;
        assert!((p99 - 10_000.0).abs() / 10_000.0 < 0.15, "p99 {p99}");
    }

    #[test]
    fn a_lognormals_largest_drawn_size_is_its_p99999_not_its_clamp() {
        let spec = LogNormalSpec { median: b(1000), p99: b(10_000) };
        let s = SizeSampler::new(&Dist::LogNormal(spec), 16).unwrap();
        assert_eq!(s.max_bytes(), MAX_SIZE);
        // σ = ln 10 / Z99; p99.999 = 1000 · e^(Z99999 σ) ≈ 68 100 bytes.
        assert!((68_000..68_300).contains(&s.largest_drawn_bytes()), "{}", s.largest_drawn_bytes());
        let u = SizeSampler::new(&Dist::Uniform([b(16), b(4096)]), 16).unwrap();
        assert_eq!(u.largest_drawn_bytes(), 4096);
    }

    #[test]
    fn weighted_frequencies_follow_the_weights() {
        let mut rng = SmallRng::seed_from_u64(7);
        let dist = Dist::Weighted(vec![(b(100), 1.0), (b(200), 3.0)]);
        let s = SizeSampler::new(&dist, 16).unwrap();
        let n = 20_000;
        let big = (0..n).filter(|_| s.sample(&mut rng) == 200).count() as f64 / n as f64;
        assert!((big - 0.75).abs() < 0.02, "share of 200: {big}");
    }

    #[test]
    fn bad_values_name_the_sub_field() {
        let e = SizeSampler::new(&Dist::Uniform([b(100), b(20)]), 16).unwrap_err();
        assert_eq!(e.field, "uniform");
        let e = SizeSampler::new(&Dist::Fixed(b(8)), 16).unwrap_err();
        assert_eq!((e.field.as_str(), e.found.as_str()), ("fixed", "8 bytes"));
        let spec = LogNormalSpec { median: b(100), p99: b(50) };
        assert_eq!(SizeSampler::new(&Dist::LogNormal(spec), 16).unwrap_err().field, "lognormal");
        let w = Dist::Weighted(vec![(b(100), 1.0), (b(200), 0.0)]);
        assert_eq!(SizeSampler::new(&w, 16).unwrap_err().field, "weighted[1]");
    }
}
