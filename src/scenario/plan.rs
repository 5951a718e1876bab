//! The resolved, typed plan: what the load driver sees, resolved once before the run starts.
//!
//! Every value here is checked and in its working unit (`Duration`, bytes,
//! [`Fraction`], samplers); nothing on the hot path parses a string.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use rand::Rng;

use super::bounds::LANE_CALLS_PER_SEC;
use super::error::ScenarioError;
use super::file::Scenario;
use super::producers::Arrival;
use super::sampler::{DurationSampler, SizeSampler};
use super::stages::Stages;
use super::units::HumanDuration;

/// A validated scenario, plus any command-line overrides.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The file the plan came from (for messages and results).
    pub source: PathBuf,
    /// The raw scenario, updated with overrides, for `summary.json`. Note that
    /// `target.url` may hold a password: serialize `scenario.target.redacted()`.
    pub scenario: Scenario,
    /// `name`.
    pub name: String,
    /// `description`.
    pub description: String,
    /// `seed`: the root of every RNG in the run.
    pub seed: u64,
    /// When producers stop.
    pub stop: Stop,
    /// Leading time whose latencies are not recorded.
    pub warmup: Duration,
    /// Longest wait after producers stop for every job to be `completed` or `failed`.
    pub drain: Duration,
    /// Resolved queue names, each valid per docs/protocol.md (1-64 bytes of `[A-Za-z0-9_.-]`).
    pub queues: Vec<String>,
    /// The queue protocol (`protocol`).
    pub protocol: crate::lua::Protocol,
    /// The server to drive.
    pub target: TargetPlan,
    /// When a state-changing call of the load counts as acknowledged (`target.wait`).
    pub durability: crate::net::Durability,
    /// `[producers]`, resolved.
    pub producers: ProducerPlan,
    /// `[consumers]`, resolved.
    pub consumers: ConsumerPlan,
    /// `[maintenance]`, resolved.
    pub maintenance: MaintenancePlan,
    /// `[thresholds]`, resolved: absolute gates checked after the run.
    pub thresholds: Vec<super::thresholds::Threshold>,
    /// `[[faults]]`, resolved: the nemesis schedule (empty: no fault is injected).
    pub faults: Vec<super::faults::FaultPlan>,
    /// Set when this process is one shard of a fleet ([`Plan::for_shard`]): its place and
    /// its tasks' global indices. The counts, rate and queues above are then the shard's.
    pub shard: Option<super::shard::Shard>,
}

impl Plan {
    /// The same plan on the queues `names`: a cluster spreads `queues = N` over its primaries
    /// once its topology is known (a new plan, not a patched one).
    pub fn with_queues(self, names: Vec<String>) -> Plan {
        Plan { queues: names, ..self }
    }

    /// Applies the CLI's `--duration` and `--seed`. A duration replaces the file's
    /// `duration` or `jobs` (the run becomes time-bounded); with `[[stages]]` it cuts the
    /// shape at that length, or holds the last stage's final rate up to it, and `scenario`
    /// (summary.json's copy) has the stages that ran, with no `duration` beside them.
    ///
    /// # Errors
    /// [`ScenarioError::Override`] if the duration is zero or not longer than `warmup`, or
    /// if the stages cut at it intend no job.
    pub fn with_overrides(mut self, duration: Option<Duration>, seed: Option<u64>) -> Result<Self, ScenarioError> {
        if let Some(d) = duration {
            let refuse = |expected: String| ScenarioError::Override {
                path: self.source.clone(),
                flag: "--duration".to_owned(),
                found: humantime::format_duration(d).to_string(),
                expected,
            };
            if d.is_zero() || d <= self.warmup {
                let expected = format!("a duration longer than warmup ({})", humantime::format_duration(self.warmup));
                return Err(refuse(expected));
            }
            self.stop = Stop::Duration(d);
            match self
                .producers
                .open_loop
                .as_mut()
                .and_then(|open| open.stages.as_mut().map(|s| (s, &mut open.rate_per_sec)))
            {
                Some((stages, rate)) => {
                    let cut = stages.cut_or_hold(d);
                    if cut.jobs() < 1.0 {
                        return Err(refuse("a duration within which the [[stages]] intend at least one job".into()));
                    }
                    *rate = cut.mean_rate();
                    self.scenario.stages = cut.specs();
                    *stages = cut;
                }
                None => {
                    self.scenario.duration = Some(HumanDuration::from_duration(d));
                    self.scenario.jobs = None;
                }
            }
        }
        if let Some(s) = seed {
            self.seed = s;
            self.scenario.seed = s;
        }
        Ok(self)
    }

    /// What is legal but unwise in the plan, one message each (the caller prints them once,
    /// at the start): an open-loop rate that the producers' requests in flight cannot carry
    /// even at a loopback round trip ([`LANE_CALLS_PER_SEC`] per lane, Little's law), so the
    /// sends fall behind the schedule and the latency measures the harness's own queue.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        let p = &self.producers;
        if let Some(open) = &p.open_loop {
            let lanes = f64::from(p.count) * f64::from(p.pipeline);
            // A shape is held to its peak: the lanes must carry its fastest stretch.
            let (key, rate) = match open.stages {
                Some(_) => ("the stages' peak rate", open.peak_rate()),
                None => ("producers.rate", open.rate_per_sec),
            };
            let needed = (rate / LANE_CALLS_PER_SEC).ceil();
            if needed > lanes {
                out.push(format!(
                    "{}: {key} = {rate} jobs/s needs at least {needed} requests in flight (one lane completes at \
                     most ~{LANE_CALLS_PER_SEC} calls/s, at a loopback round trip), but producers.count × \
                     producers.pipeline = {lanes}: sends will fall behind the schedule (counted as late)",
                    self.source.display(),
                ));
            }
        }
        out
    }
}

/// When the producers stop (`duration` or `jobs` in the file, exactly one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// After this long (including warmup).
    Duration(Duration),
    /// After this many enqueue calls in total, over all producers (>= 1).
    Jobs(u64),
}

/// The server a run drives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetPlan {
    /// Start a `valkey-server` with these extra `--name value` options.
    Embedded {
        /// Option name -> value, from `target.server`.
        options: BTreeMap<String, String>,
        /// A cluster of embedded servers instead of one (`target.cluster`).
        cluster: Option<ClusterShape>,
    },
    /// Connect to this `redis://` URL.
    Url(String),
}

/// The embedded cluster's shape, checked: `primaries` in 1..=16, `replicas` in 0..=4.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClusterShape {
    /// Primaries.
    pub primaries: usize,
    /// Replicas per primary.
    pub replicas: usize,
    /// `cluster-node-timeout`.
    pub node_timeout: std::time::Duration,
}

/// A probability in [0, 1], checked at resolution.
#[derive(Debug, Clone, Copy, Default, PartialEq, PartialOrd)]
pub struct Fraction(f64);

impl Fraction {
    /// Never.
    pub const ZERO: Self = Self(0.0);

    /// `Some` when `p` is finite and within [0, 1].
    pub fn new(p: f64) -> Option<Self> {
        (p.is_finite() && (0.0..=1.0).contains(&p)).then_some(Self(p))
    }

    /// The probability.
    pub fn get(self) -> f64 {
        self.0
    }

    /// One Bernoulli draw: true with probability `self`. Draws nothing when zero,
    /// so adding a zero fraction does not shift the RNG stream.
    pub fn draw(self, rng: &mut impl Rng) -> bool {
        self.0 > 0.0 && rng.random_bool(self.0)
    }
}

/// Open-loop pacing: arrivals at a total rate independent of service time, constant or
/// following a load shape (`[[stages]]`).
#[derive(Debug, Clone, PartialEq)]
pub struct OpenLoop {
    /// Total jobs per second over all producers (> 0, finite): the constant rate, or with
    /// `stages` their mean over the load phase (intended jobs / its length), what the run is
    /// held to and reports as its requested rate.
    pub rate_per_sec: f64,
    /// How inter-arrival gaps are drawn (in the shape's operational time with `stages`).
    pub arrival: Arrival,
    /// `Some`: the rate follows this piecewise-linear shape from the load phase's start;
    /// `None`: it is `rate_per_sec` throughout.
    pub stages: Option<Stages>,
}

impl OpenLoop {
    /// The highest rate the schedule asks for, jobs/s over all producers.
    pub fn peak_rate(&self) -> f64 {
        self.stages.as_ref().map_or(self.rate_per_sec, Stages::peak_rate)
    }
}

/// `[producers]`, resolved.
#[derive(Debug, Clone)]
pub struct ProducerPlan {
    /// Producer tasks (may be 0).
    pub count: u32,
    /// Connections (>= 1, <= count when count > 0); task `i` uses connection `i % connections`.
    pub connections: u32,
    /// Requests in flight per task (>= 1).
    pub pipeline: u32,
    /// `Some` = open loop at this rate; `None` = closed loop.
    pub open_loop: Option<OpenLoop>,
    /// A send leaving later than this after its intended time is counted late.
    pub late_after: Duration,
    /// An open-loop rate the run could not hold does not fail the run.
    pub allow_shortfall: bool,
    /// Payload sizes in bytes (each >= [`MIN_PAYLOAD`](super::MIN_PAYLOAD)).
    pub payload: SizeSampler,
    /// Share of jobs sent with `enqueue_delayed`.
    pub delayed: Fraction,
    /// Delay of a delayed job (`delay_ms` ARGV).
    pub delay: DurationSampler,
    /// Share of jobs sent with a priority from `priorities`.
    pub priority: Fraction,
    /// Priorities drawn uniformly; non-empty when `priority` > 0.
    pub priorities: Vec<u32>,
    /// Share of enqueues repeating an already used id.
    pub duplicate: Fraction,
    /// `max_attempts` ARGV of `fail` (>= 1).
    pub max_attempts: u32,
}

/// `[consumers]`, resolved.
#[derive(Debug, Clone)]
pub struct ConsumerPlan {
    /// Consumer tasks (may be 0).
    pub count: u32,
    /// Connections (>= 1, <= count when count > 0).
    pub connections: u32,
    /// Requests in flight per task (>= 1).
    pub pipeline: u32,
    /// `claim` count ARGV, 1..=1000.
    pub batch: u32,
    /// `claim`/`extend` lease (>= 1ms; send `as_millis()`).
    pub lease: Duration,
    /// Simulated work per job.
    pub work: DurationSampler,
    /// Share of attempts that call `fail`.
    pub fail: Fraction,
    /// Retry delay after a failed attempt.
    pub backoff: Backoff,
    /// Share of attempts abandoned (lease left to expire); `fail + stall <= 1`.
    pub stall: Fraction,
    /// Share of stalled jobs later completed with the stale token (expect `EMQFENCE`/`EMQSTATE`).
    pub zombie: Fraction,
    /// Delay before a zombie's stale `complete`.
    pub zombie_delay: Duration,
    /// `progress` calls per job, spread over its work.
    pub progress: u32,
    /// `Some(interval)`: call `extend` every interval while a job's work runs
    /// (ticks from the start of the work; interval < lease). `None`: never.
    pub extend_every: Option<Duration>,
    /// Sleep after a claim that returned no job.
    pub poll: Duration,
}

/// Retry delay after a failed attempt (`backoff_ms` ARGV of `fail`).
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Backoff {
    /// 0ms: the job goes straight back to pending.
    #[default]
    None,
    /// The same delay every time.
    Fixed(Duration),
    /// `base x 2^(attempt - 1)`, capped at `max` (base <= max).
    Exponential {
        /// Delay after the first failed attempt.
        base: Duration,
        /// Cap.
        max: Duration,
    },
    /// A delay drawn per failure from weighted values (weights > 0, summing to `total`): a
    /// mix of immediate and delayed retries in one run (BullMQ: retryJob and moveToDelayed).
    Weighted {
        /// (delay, weight) pairs.
        choices: std::sync::Arc<[(Duration, f64)]>,
        /// The weights' sum.
        total: f64,
    },
}

impl Backoff {
    /// The delay after failed attempt number `attempt` (the fencing token, 1-based); a
    /// weighted backoff draws it with `rng`.
    pub fn draw(&self, attempt: u32, rng: &mut impl rand::Rng) -> Duration {
        match self {
            Backoff::Weighted { choices, total } => {
                let mut x = rng.random::<f64>() * total;
                for &(delay, weight) in choices.iter() {
                    if x < weight {
                        return delay;
                    }
                    x -= weight;
                }
                choices.last().map_or(Duration::ZERO, |c| c.0)
            }
            other => other.delay(attempt),
        }
    }

    /// The delay after failed attempt number `attempt` (the fencing token, 1-based); for a
    /// weighted backoff, its largest delay.
    pub fn delay(&self, attempt: u32) -> Duration {
        match *self {
            Backoff::Weighted { ref choices, .. } => choices.iter().map(|c| c.0).max().unwrap_or_default(),
            Backoff::None => Duration::ZERO,
            Backoff::Fixed(d) => d,
            Backoff::Exponential { base, max } => {
                let factor = 1u32.checked_shl(attempt.saturating_sub(1)).unwrap_or(u32::MAX);
                base.checked_mul(factor).map_or(max, |d| d.min(max))
            }
        }
    }
}

/// `[maintenance]`, resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaintenancePlan {
    /// Interval between `reap` calls per queue (> 0).
    pub reap: Duration,
    /// Interval between `promote` calls per queue (> 0).
    pub promote: Duration,
    /// `limit` ARGV of the three (1..=100000).
    pub limit: u32,
    /// Interval between `clean` calls on each finished set of each queue (> 0); `None`: no
    /// retention.
    pub clean: Option<Duration>,
    /// The `age_ms` ARGV of `clean`: finished jobs younger than this are kept.
    pub retain: Duration,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_backoff_doubles_and_caps() {
        let b = Backoff::Exponential { base: Duration::from_millis(50), max: Duration::from_millis(300) };
        let ms: Vec<u128> = (1..=6).map(|a| b.delay(a).as_millis()).collect();
        assert_eq!(ms, [50, 100, 200, 300, 300, 300]);
        assert_eq!(b.delay(200), Duration::from_millis(300));
        assert_eq!(Backoff::None.delay(3), Duration::ZERO);
    }

    #[test]
    fn fractions_are_checked() {
        assert!(Fraction::new(1.0).is_some() && Fraction::new(0.0).is_some());
        assert!(Fraction::new(1.01).is_none() && Fraction::new(f64::NAN).is_none());
        assert!(Fraction::new(-0.1).is_none());
    }
}
