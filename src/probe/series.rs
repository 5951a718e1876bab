//! What the probe sampled over a run, and its summary in `summary.json`.

use super::Row;
use serde::{Deserialize, Serialize};

/// A node's mean CPU, % of one core, from which its CPU is taken to have limited the run:
/// Valkey runs scripts on one thread, so a node near one core's worth is saturated.
pub const SATURATED_CPU_PCT: f64 = 90.0;

/// The probe's rows (one per node per second, by time then node), what it could not read, and
/// its own cost.
#[derive(Debug, Clone, Default)]
pub struct ServerSeries {
    /// The rows, by `t_s` then node.
    pub rows: Vec<Row>,
    /// What could not be sampled (INFO denied, a section missing), each said once.
    pub notes: Vec<String>,
    /// What the probe cost.
    pub cost: ProbeCost,
}

/// The probe's own cost over a run.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ProbeCost {
    /// Call sets made (one INFO per node each).
    pub call_sets: u64,
    /// Wall time spent waiting on them, s in all.
    pub wall_s: f64,
    /// CPU time of the probe's thread, s (user + sys).
    pub cpu_s: f64,
}

impl ServerSeries {
    /// Records `note` unless it was recorded already (a denied INFO is said once, not per second).
    pub fn note(&mut self, note: String) {
        if !self.notes.contains(&note) {
            self.notes.push(note);
        }
    }

    /// Counts the rows' times from `start` (the run's interval 0) instead of the epoch.
    pub fn rebase(&mut self, start: std::time::SystemTime) {
        let zero = super::epoch_secs(start);
        for row in &mut self.rows {
            row.t_s -= zero;
        }
    }

    /// The summary of this series for `summary.json`.
    pub fn summary(&self) -> ServerSamples {
        let mut nodes: Vec<NodeSamples> = Vec::new();
        for row in &self.rows {
            let at = match nodes.iter().position(|n| n.node == row.node) {
                Some(at) => at,
                None => {
                    nodes.push(NodeSamples { node: row.node.clone(), ..NodeSamples::default() });
                    nodes.len() - 1
                }
            };
            let n = &mut nodes[at];
            n.rows += 1;
            let Some(f) = &row.figures else {
                n.rows_without_figures += 1;
                continue;
            };
            let cpu = f.cpu_user_pct + f.cpu_sys_pct;
            n.cpu_pct_max = n.cpu_pct_max.max(cpu);
            n.cpu_pct_mean += cpu;
            n.ops_per_sec_max = n.ops_per_sec_max.max(f.ops_per_sec);
            n.ops_per_sec_mean += f.ops_per_sec;
            n.used_memory_max = n.used_memory_max.max(f.level.used_memory);
            n.used_memory_rss_max = n.used_memory_rss_max.max(f.level.used_memory_rss);
            n.connected_clients_max = n.connected_clients_max.max(f.level.connected_clients);
            if let Some((_, p99, _)) = f.level.evalsha_percentiles {
                n.evalsha_p99_us_last = Some(p99);
            }
        }
        for n in &mut nodes {
            let measured = (n.rows - n.rows_without_figures).max(1) as f64;
            n.cpu_pct_mean /= measured;
            n.ops_per_sec_mean /= measured;
        }
        ServerSamples {
            interval_s: super::EVERY.as_secs_f64(),
            nodes,
            unavailable: self.notes.clone(),
            cost: self.cost,
        }
    }
}

/// `summary.json`'s `server_samples`: the per-second server series summed up per node (the rows
/// themselves are in `server.csv`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerSamples {
    /// Seconds between samples.
    pub interval_s: f64,
    /// One entry per node.
    pub nodes: Vec<NodeSamples>,
    /// What could not be sampled, and why.
    pub unavailable: Vec<String>,
    /// The probe's own cost.
    pub cost: ProbeCost,
}

impl ServerSamples {
    /// The node whose CPU was busiest on average, when that is at least [`SATURATED_CPU_PCT`]
    /// of one core: the server limited the run. `None` when no node was that busy, or none was
    /// sampled.
    pub fn saturated(&self) -> Option<&NodeSamples> {
        self.nodes
            .iter()
            .filter(|n| n.rows > n.rows_without_figures && n.cpu_pct_mean >= SATURATED_CPU_PCT)
            .max_by(|a, b| a.cpu_pct_mean.total_cmp(&b.cpu_pct_mean))
    }
}

/// One node's samples summed up.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeSamples {
    /// `host:port`.
    pub node: String,
    /// Rows in `server.csv` for this node.
    pub rows: u64,
    /// Rows whose INFO did not answer in time (or failed).
    pub rows_without_figures: u64,
    /// Server CPU (user + sys), % of one core: mean and highest second.
    pub cpu_pct_mean: f64,
    /// See `cpu_pct_mean`.
    pub cpu_pct_max: f64,
    /// Commands per second: mean and highest second.
    pub ops_per_sec_mean: f64,
    /// See `ops_per_sec_mean`.
    pub ops_per_sec_max: f64,
    /// Highest `used_memory` seen, bytes.
    pub used_memory_max: u64,
    /// Highest `used_memory_rss` seen, bytes.
    pub used_memory_rss_max: u64,
    /// Most clients connected at once.
    pub connected_clients_max: u64,
    /// The server's own EVALSHA p99 (latencystats, since it started), µs, at the last sample.
    pub evalsha_p99_us_last: Option<f64>,
}
