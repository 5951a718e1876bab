//! A fleet in summary.json: a shard's own place and start (`shard`), and a merged folder's
//! account of every shard (`fleet`).

use serde::{Deserialize, Serialize};

/// The folder shard `index` writes inside its fleet's (`shard-007`): where `run` puts it and
/// where `merge` looks for it.
pub fn shard_folder(index: u32) -> String {
    format!("shard-{index:03}")
}

/// One shard's place in its fleet and when it started (summary.json `shard`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ShardRecord {
    /// The fleet's name (`--group`).
    pub group: String,
    /// This shard's index.
    pub index: u32,
    /// The fleet's size.
    pub shards: u32,
    /// `sharded` (each shard owns its queues, prefixed `s<I>.`) or `shared` (every shard drives
    /// the same queues; the merge checks them).
    pub queues: String,
    /// The shard's producers: the first's global index, how many, the fleet's total.
    pub producers: [u32; 3],
    /// True when the fleet runs the invariant check (no `--no-check`): a `shared` fleet's
    /// merge runs it.
    pub check: bool,
    /// The shard's consumers, as `producers`.
    pub consumers: [u32; 3],
    /// Where its job numbers sit among the fleet's: `[stride, offset]` (its block `b` of 16
    /// numbers is the fleet's block `b · stride + offset`; `[1, 0]`: its own numbers).
    pub job_numbers: [u64; 2],
    /// The agreed start, ms since the Unix epoch on the server's clock.
    pub t0_unix_ms: u64,
    /// When this shard's clock started, ms since the Unix epoch on the server's clock (its
    /// own clock corrected by `clock_offset_ms`).
    pub started_unix_ms: f64,
    /// `started_unix_ms - t0_unix_ms`, ms: how late this shard started (its connections
    /// opening past the margin, the timer's tick).
    pub start_offset_ms: f64,
    /// The server's clock minus this shard's, ms.
    pub clock_offset_ms: f64,
    /// The offset's uncertainty, ± ms (half the shortest `TIME` round trip).
    pub clock_uncertainty_ms: f64,
    /// Time spent at the barrier, s.
    pub waited_s: f64,
    /// A `shared` fleet's shard: the server's clock minus this shard's, ms, measured again
    /// after the run (`clock_end_after_s` after its start); with `clock_offset_ms` it gives
    /// the drift the merge corrects for. `null` when not measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock_offset_end_ms: Option<f64>,
    /// When `clock_offset_end_ms` was measured, s after this shard's start.
    pub clock_end_after_s: f64,
    /// The configuration hash every shard of the fleet agreed on at the barrier (scenario,
    /// flags, version, and the scripts unless `--mixed-scripts`): `merge` refuses shards of
    /// different ones.
    pub config: String,
}

/// A merged folder's fleet (summary.json `fleet`): every shard that was merged, what was
/// missing, and how far apart the shards started.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FleetRecord {
    /// The fleet's name.
    pub group: String,
    /// The fleet's size.
    pub shards: u32,
    /// The merged shards, by index.
    pub merged: Vec<ShardRow>,
    /// Indices of shards whose folder or summary was missing.
    pub missing: Vec<u32>,
    /// Latest minus earliest start of the merged shards, ms (server clock), with the largest
    /// clock uncertainty of any shard added: how far apart they may have started.
    pub start_spread_ms: f64,
}

/// One merged shard, as the fleet's table shows it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ShardRow {
    /// The shard's folder.
    pub folder: String,
    /// Its place and start.
    pub shard: ShardRecord,
    /// True when it ran to its end.
    pub completed: bool,
    /// Its own verdict (`null` when its summary had none).
    pub passed: Option<bool>,
    /// Jobs it enqueued.
    pub enqueued: u64,
    /// Jobs it completed.
    pub completed_jobs: u64,
}
