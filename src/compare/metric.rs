//! What is compared: per called script its throughput and three latency percentiles, and the
//! throughput of the whole job cycle.

use serde::{Deserialize, Serialize};

/// One measured quantity of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Measure {
    /// Ok calls (or completed jobs) per measured second; higher is better.
    OpsPerSec,
    /// Median latency from the intended send, µs; lower is better.
    P50,
    /// 99th percentile latency, µs; lower is better.
    P99,
    /// 99.9th percentile latency, µs; lower is better.
    P999,
    /// Server time inside the script per call, µs (`emq-bench cost`, from `INFO
    /// commandstats`); lower is better. Not in [`Measure::ALL`]: runs do not measure it.
    ServerUs,
}

impl Measure {
    /// Every measure, in the order the outputs list them.
    pub const ALL: [Measure; 4] = [Measure::OpsPerSec, Measure::P50, Measure::P99, Measure::P999];

    /// Which direction is better.
    pub fn better(self) -> Better {
        match self {
            Measure::OpsPerSec => Better::Higher,
            Measure::P50 | Measure::P99 | Measure::P999 | Measure::ServerUs => Better::Lower,
        }
    }

    /// Short name as the tables print it: `ops/s`, `p50`, `p99`, `p99.9`.
    pub fn name(self) -> &'static str {
        match self {
            Measure::OpsPerSec => "ops/s",
            Measure::P50 => "p50",
            Measure::P99 => "p99",
            Measure::P999 => "p99.9",
            Measure::ServerUs => "server µs/call",
        }
    }

    /// True for the latency percentiles (values in µs).
    pub fn is_latency(self) -> bool {
        matches!(self, Measure::P50 | Measure::P99 | Measure::P999)
    }
}

/// The direction of improvement of a measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    /// Higher values are better (throughput).
    Higher,
    /// Lower values are better (latency).
    Lower,
}

/// A measure of one script, or of the whole job cycle.
///
/// The job cycle has only [`Measure::OpsPerSec`]: `jobs.completed / measured_secs`, the rate at
/// which jobs went through enqueue, claim and complete.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Metric {
    /// The script name (`enqueue`, `claim`, ...), or `None` for the whole job cycle.
    pub script: Option<String>,
    /// What is measured.
    pub measure: Measure,
}

impl Metric {
    /// The job-cycle throughput metric.
    pub fn cycle() -> Metric {
        Metric { script: None, measure: Measure::OpsPerSec }
    }

    /// A script's metric.
    pub fn script(name: &str, measure: Measure) -> Metric {
        Metric { script: Some(name.to_owned()), measure }
    }

    /// The label the outputs print: `claim p99`, `enqueue ops/s`, `cycle ops/s`.
    pub fn label(&self) -> String {
        format!("{} {}", self.script.as_deref().unwrap_or("cycle"), self.measure.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_directions() {
        assert_eq!(Metric::cycle().label(), "cycle ops/s");
        assert_eq!(Metric::script("claim", Measure::P999).label(), "claim p99.9");
        assert_eq!(Measure::OpsPerSec.better(), Better::Higher);
        assert_eq!(Measure::P99.better(), Better::Lower);
        assert!(Measure::P50.is_latency() && !Measure::OpsPerSec.is_latency());
    }
}
