//! `[consumers]`: the tasks that claim jobs and finish them, and the failure mix.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use super::dist::Dist;
use super::units::{Count, HumanDuration};

/// The raw `[consumers]` table; every key is optional (defaults in [`Default`]).
///
/// ```toml
/// [consumers]
/// count = 4            # consumer tasks, 0..=100000
/// connections = 2      # 1..=count, at most 4096
/// pipeline = 1         # claim/complete requests in flight per task, 1..=10000;
///                      # count x pipeline <= 250000, x batch x the largest payload <= 1 GiB
/// batch = 10           # `claim` count ARGV, 1..=1000
/// lease = "1s"         # `claim` lease_ms ARGV, 1ms..=1h
/// work = { uniform = ["0ms", "2ms"] }  # simulated work per job (duration distribution)
/// fail = 0.05          # fraction of attempts that call `fail` (retried until max_attempts)
/// backoff = { exponential = { base = "50ms", max = "5s" } }  # or { fixed = "100ms" }
/// stall = 0.01         # fraction of attempts abandoned so the lease expires; fail + stall <= 1
/// zombie = 0.5         # fraction of stalled jobs later completed with the stale token
/// zombie_delay = "2s"  # when the zombie tries; default 2 x lease
/// progress = 2         # `progress` calls per job, spread over the work, 0..=1000
/// extend = true        # false | true (every lease/2) | "200ms" (every 200ms); see below
/// poll = "1ms"         # sleep after a claim that returned nothing, at most 1h
/// # every other duration (backoff, zombie_delay, extend, work) is at most 1h too
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Consumers {
    /// Number of consumer tasks.
    pub count: Count,
    /// Connections shared by the tasks, round-robin.
    pub connections: Count,
    /// Requests in flight per task.
    pub pipeline: Count,
    /// Jobs asked for per `claim` call.
    pub batch: Count,
    /// Lease per claim.
    pub lease: HumanDuration,
    /// Simulated work per job; default a fixed 0s.
    pub work: Dist<HumanDuration>,
    /// Fraction of attempts that fail, in [0, 1].
    pub fail: f64,
    /// Retry delay after a failed attempt; absent = 0ms (straight back to pending).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backoff: Option<BackoffSpec>,
    /// Fraction of attempts abandoned without a verb, in [0, 1].
    pub stall: f64,
    /// Fraction of stalled jobs whose consumer later calls `complete` with its stale token.
    pub zombie: f64,
    /// Delay before a zombie's late `complete`; absent = 2 x lease.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zombie_delay: Option<HumanDuration>,
    /// `progress` calls per job.
    pub progress: Count,
    /// Lease renewal while working, see [`ExtendSpec`].
    pub extend: ExtendSpec,
    /// Sleep after an empty claim.
    pub poll: HumanDuration,
}

impl Default for Consumers {
    fn default() -> Self {
        Self {
            count: Count::from(1),
            connections: Count::from(1),
            pipeline: Count::from(1),
            batch: Count::from(1),
            lease: HumanDuration::from_duration(Duration::from_secs(5)),
            work: Dist::Fixed(HumanDuration::from_duration(Duration::ZERO)),
            fail: 0.0,
            backoff: None,
            stall: 0.0,
            zombie: 0.0,
            zombie_delay: None,
            progress: Count::from(0),
            extend: ExtendSpec::Enabled(false),
            poll: HumanDuration::from_duration(Duration::from_millis(1)),
        }
    }
}

/// Retry delay after a failed attempt (the `fail` script's `backoff_ms` ARGV).
///
/// TOML: `{ fixed = "100ms" }`, `{ exponential = { base = "50ms", max = "5s" } }`, or a delay
/// drawn per failure, `{ weighted = [["0ms", 1], ["20ms", 1]] }` (at most 1000 pairs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum BackoffSpec {
    /// The same delay after every failed attempt.
    Fixed(HumanDuration),
    /// `base x 2^(attempt - 1)`, capped at `max`.
    Exponential {
        /// Delay after the first failed attempt.
        base: HumanDuration,
        /// Upper bound of the delay.
        max: HumanDuration,
    },
    /// A delay drawn per failure: (delay, weight > 0) pairs.
    Weighted(Vec<(HumanDuration, f64)>),
}

/// `consumers.extend`: renew the lease (the `extend` script) while a job's work runs.
///
/// TOML: `false` (default, never), `true` (every lease/2), or a duration string
/// (every that long; must be > 0 and < lease). Ticks count from the start of the
/// work, so only jobs whose work outlasts one interval are extended; with `true`
/// that is exactly the jobs whose work exceeds lease/2.
#[derive(Debug, Clone, PartialEq)]
pub enum ExtendSpec {
    /// `true` or `false`.
    Enabled(bool),
    /// An explicit renewal interval.
    Every(HumanDuration),
}

impl Serialize for ExtendSpec {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Enabled(b) => s.serialize_bool(*b),
            Self::Every(d) => d.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for ExtendSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = ExtendSpec;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("true, false, or a renewal interval such as \"200ms\"")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
                Ok(ExtendSpec::Enabled(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                HumanDuration::parse(v).map(ExtendSpec::Every).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}
