//! `[producers]`: the tasks that enqueue jobs, and the opts mix they draw from.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::dist::Dist;
use super::units::{Count, HumanDuration, HumanSize};

/// The raw `[producers]` table; every key is optional (defaults in [`Default`]).
///
/// ```toml
/// [producers]
/// count = 4              # producer tasks, 0..=100000
/// connections = 2        # 1..=count, at most 4096 (tasks share connections round-robin)
/// pipeline = 8           # enqueue requests in flight per task, 1..=10000;
///                        # count x pipeline <= 250000, x the largest payload <= 1 GiB
/// rate = 2000.0          # jobs/s over all tasks => open loop, at most 1e7; absent => closed loop
///                        # (or the open loop of `[[stages]]`, which refuses a rate beside them)
/// arrival = "poisson"    # "poisson" | "uniform"; only with `rate` or `[[stages]]`
/// late_after = "1ms"     # a send this much after its intended time counts as late; 10µs..=1h
/// allow_shortfall = false # true: a rate the run could not hold (achieved < 95%) does not fail it
/// payload = { uniform = ["64B", "4KiB"] }  # size distribution, every size in 20 bytes..=64 MiB
/// delayed = 0.1          # fraction sent with `enqueue_delayed`
/// delay = "50ms"         # duration distribution of those delays
/// priority = 0.2         # fraction sent with a non-zero priority drawn from `priorities`
/// priorities = [1, 5, 9] # drawn uniformly; 0 is the highest priority; at most 1000 entries
/// duplicate = 0.01       # fraction that re-enqueue an already used id (must return 0)
/// max_attempts = 3       # the `fail` script's max_attempts ARGV, 1..=10000
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Producers {
    /// Number of producer tasks (0 = no producers, e.g. a drain-only run).
    pub count: Count,
    /// Connections shared by the tasks, round-robin.
    pub connections: Count,
    /// Requests in flight per task.
    pub pipeline: Count,
    /// Total arrival rate in jobs/s; presence selects the open loop.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Inter-arrival law for the open loop; default poisson. Refused without `rate` or stages.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arrival: Option<Arrival>,
    /// How far behind its intended time a send may leave before it counts as late; default
    /// 1 ms (precise pacing leaves within tens of µs, so only overload crosses it).
    pub late_after: HumanDuration,
    /// When true, an open-loop rate the run could not hold does not fail the run.
    pub allow_shortfall: bool,
    /// Payload size distribution (bytes); default a fixed 256 bytes.
    pub payload: Dist<HumanSize>,
    /// Fraction of jobs enqueued delayed, in [0, 1].
    pub delayed: f64,
    /// Delay distribution for delayed jobs; default a fixed 100ms.
    pub delay: Dist<HumanDuration>,
    /// Fraction of jobs given a priority from `priorities`, in [0, 1].
    pub priority: f64,
    /// Priorities to draw from uniformly (non-negative; 0 = highest).
    pub priorities: Vec<u32>,
    /// Fraction of enqueues that repeat an already used id, in [0, 1].
    pub duplicate: f64,
    /// Attempts before `fail` moves a job to `failed`.
    pub max_attempts: Count,
}

impl Default for Producers {
    fn default() -> Self {
        Self {
            count: Count::from(1),
            connections: Count::from(1),
            pipeline: Count::from(1),
            rate: None,
            arrival: None,
            late_after: HumanDuration::from_duration(Duration::from_millis(1)),
            allow_shortfall: false,
            payload: Dist::Fixed(HumanSize::from_bytes(256)),
            delayed: 0.0,
            delay: Dist::Fixed(HumanDuration::from_duration(Duration::from_millis(100))),
            priority: 0.0,
            priorities: Vec::new(),
            duplicate: 0.0,
            max_attempts: Count::from(3),
        }
    }
}

/// How open-loop arrivals are spaced. TOML: `"poisson"` or `"uniform"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arrival {
    /// Exponential inter-arrival times with mean 1/rate (a Poisson process).
    #[default]
    Poisson,
    /// Evenly spaced arrivals, exactly 1/rate apart.
    Uniform,
}
