//! The top level of a scenario file: run identity, run length and the queue set.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use super::consumers::Consumers;
use super::maintenance::Maintenance;
use super::producers::Producers;
use super::target::TargetTable;
use super::units::{Count, HumanDuration};

/// A scenario file exactly as written (the raw layer; see [`Plan`](super::Plan) for
/// the resolved one). Serializable so a run's `summary.json` can carry it.
///
/// ```toml
/// name = "smoke"              # required; 1-64 bytes of [A-Za-z0-9_.-] (used in result paths)
/// description = "..."         # free text
/// seed = 42                   # required; all randomness derives from it
/// duration = "10s"            # run length, at most 7 days ... (exactly one of duration / jobs / [[stages]])
/// # jobs = 100000             # ... or total jobs to enqueue, 1..=10000000
/// warmup = "1s"               # excluded from histograms; default "0s"; at most 7 days
/// drain = "30s"               # max wait for consumers after producers stop; default "30s"; <= 7 days
/// queues = 4                  # "name" (one queue) or N in 1..=10000 (bench-0 .. bench-(N-1)); default "bench"
/// protocol = "bullmq"         # the queue protocol: "echomq-v1" (default) or "bullmq" (BullMQ's own scripts)
/// [target] ... [producers] ... [consumers] ... [maintenance] ... [[stages]] ... [[faults]] ...
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short identifier of the scenario.
    pub name: String,
    /// What the scenario exercises.
    #[serde(default)]
    pub description: String,
    /// Seed of every random choice in the run.
    pub seed: u64,
    /// Run length (producers stop after it); exclusive with `jobs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<HumanDuration>,
    /// Total jobs to enqueue over all producers; exclusive with `duration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs: Option<Count>,
    /// Initial period whose latencies are not recorded.
    #[serde(default = "zero")]
    pub warmup: HumanDuration,
    /// Longest wait, after producers stop, for every job to reach a final state.
    #[serde(default = "default_drain")]
    pub drain: HumanDuration,
    /// The queue set.
    #[serde(default)]
    pub queues: Queues,
    /// The queue protocol whose scripts the run drives.
    #[serde(default, skip_serializing_if = "is_echomq")]
    pub protocol: crate::lua::Protocol,
    /// `[target]`.
    #[serde(default)]
    pub target: TargetTable,
    /// `[producers]`.
    #[serde(default)]
    pub producers: Producers,
    /// `[consumers]`.
    #[serde(default)]
    pub consumers: Consumers,
    /// `[maintenance]`.
    #[serde(default)]
    pub maintenance: Maintenance,
    /// `[[stages]]`: the open loop's load shape (see `stages.rs`); exclusive with `duration`,
    /// `jobs` and `producers.rate`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<super::stages::StageSpec>,
    /// `[[faults]]`: the nemesis schedule (see `faults.rs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<super::faults::FaultSpec>,
    /// `[thresholds]`: absolute CI gates, key → "<op> <limit>" (see `thresholds.rs`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub thresholds: std::collections::BTreeMap<String, String>,
}

fn is_echomq(protocol: &crate::lua::Protocol) -> bool {
    *protocol == crate::lua::Protocol::EchoMqV1
}

fn zero() -> HumanDuration {
    HumanDuration::from_duration(Duration::ZERO)
}

fn default_drain() -> HumanDuration {
    HumanDuration::from_duration(Duration::from_secs(30))
}

/// `queues`: one named queue, or a count of generated names. Default: `"bench"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Queues {
    /// TOML string: a single queue with this name.
    Name(String),
    /// TOML integer N: queues `bench-0` .. `bench-(N-1)`.
    Count(u32),
}

impl Default for Queues {
    fn default() -> Self {
        Self::Name("bench".to_owned())
    }
}

impl Serialize for Queues {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Name(n) => s.serialize_str(n),
            Self::Count(c) => s.serialize_u32(*c),
        }
    }
}

impl<'de> Deserialize<'de> for Queues {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Queues;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a queue name (string) or a queue count (positive integer)")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Queues::Name(v.to_owned()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                u32::try_from(v).map(Queues::Count).map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                u32::try_from(v).map(Queues::Count).map_err(|_| E::invalid_value(de::Unexpected::Unsigned(v), &self))
            }
        }
        d.deserialize_any(V)
    }
}
