//! `summary.json`: the whole run in one versioned document, and the results folder writer.

use super::{summarize, ScriptSummary};
use crate::check::CheckSummary;
use crate::load::coordinator::Depths;
use crate::metrics::{JobCounter, RunMetrics};
use crate::net::InfoSnapshot;
use crate::scenario::Scenario;
use serde::Serialize;
use std::collections::BTreeMap;

/// Version of the `summary.json` layout; bumped on any incompatible change. 2: the producers'
/// `ops_per_sec` is over the load phase (`window`), not load + drain.
pub const SCHEMA_VERSION: u32 = 2;

/// The target of a run as the report shows it.
#[derive(Debug, Clone, Serialize)]
pub struct TargetInfo {
    /// The resolved target, `rediss://user:***@host:port/db` (never the password).
    pub url: String,
    /// Standalone or cluster, its nodes, their roles and slot ranges.
    pub topology: crate::net::Topology,
    /// The negotiated TLS version and cipher suite (`null` for plain TCP).
    pub tls: Option<crate::net::TlsInfo>,
    /// Server figures that could not be read (a command denied by ACL, or missing), with why.
    pub unavailable: Vec<String>,
    /// True when the harness started the server itself.
    pub embedded: bool,
    /// The queue protocol the run drove: `echomq-v1` or `bullmq`.
    pub protocol: &'static str,
    /// The Lua directory the scripts came from.
    pub lua_dir: String,
    /// Script name → SHA1 of the source that ran (to tell two script versions apart).
    pub script_sha1: BTreeMap<String, String>,
    /// For BullMQ: the pinned release installed by `scripts/setup` and the scripts that
    /// differ from it (absent for EchoMQ, or when no release is installed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bullmq: Option<crate::protocol::release::Release>,
}

/// The harness process's own cost, from getrusage(2).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct HarnessCpu {
    /// Load threads.
    pub threads: usize,
    /// User CPU of the whole process, s.
    pub user_s: f64,
    /// System CPU of the whole process, s.
    pub sys_s: f64,
    /// (user + sys) / calls, µs per request (all calls of the run, warmup included).
    pub us_per_request: f64,
}

/// Everything `summary.json` holds.
#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `emq-bench <version>`.
    pub tool: String,
    /// Scenario name.
    pub name: String,
    /// The seed every random draw came from.
    pub seed: u64,
    /// The scenario as run (overrides applied, password redacted).
    pub scenario: Scenario,
    /// Wall-clock start, RFC 3339 UTC.
    pub started: String,
    /// Wall-clock end, RFC 3339 UTC.
    pub ended: String,
    /// True when the run ended early; `interrupt_reason` says why.
    pub interrupted: bool,
    /// Why the run ended early, in words.
    pub interrupt_reason: Option<String>,
    /// Why the run ended early, as one stable word: `stopped` (a stop signal), `aborted` (a
    /// second one), `gave_up` (unreachable past `--give-up`), `connect`, `thread_died`,
    /// `end_unreadable`; `null` when the plan was carried out.
    pub interrupt_kind: Option<&'static str>,
    /// Faults injected (`[[faults]]`) and seen (unreachable spans, reconnects, unknown
    /// outcomes), with their times: a run that rode through them is not interrupted.
    pub faults: crate::faults::FaultsSeen,
    /// What became of the run's keys: `deleted`, or `kept: <why>` (`--keep`, an abort, the
    /// results folder could not be written, ...).
    pub keys: crate::verdict::KeysFate,
    /// Passed or not, the exit code, and every finding that failed the run (kind and the line
    /// the terminal prints after `FAIL`).
    pub verdict: crate::verdict::Verdict,
    /// Files of the results folder that could not be written, with why (a full disk); the
    /// run's keys are then kept.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub write_errors: Vec<String>,
    /// True when the drain finished every job in time.
    pub drained: bool,
    /// Seconds measured (after warmup, up to the stop, the drain included): the window
    /// (`measured`) of every script's ops/s except the producers', which use the load phase
    /// (`load`; each script names its window and length).
    pub measured_secs: f64,
    /// Whole warmup seconds excluded from the histograms.
    pub warmup_secs: u64,
    /// The target.
    pub target: TargetInfo,
    /// Server version (INFO), when it could be read.
    pub server_version: Option<String>,
    /// INFO before the run (memory, cpu, commandstats).
    pub server_before: Option<InfoSnapshot>,
    /// INFO after the run, before the run's keys are deleted.
    pub server_after: Option<InfoSnapshot>,
    /// Server CPU during the run, s (user + sys, from INFO).
    pub server_cpu_s: Option<f64>,
    /// Server memory grown per enqueued job, bytes (used_memory after − before, / enqueued).
    pub memory_bytes_per_job: Option<f64>,
    /// One entry per called script: calls, errors by code, ops/s, latency µs.
    pub scripts: Vec<ScriptSummary>,
    /// Job counters of the whole run (warmup included: job accounting, unlike latency, has no
    /// warmup; the checker sees every job), by name.
    pub jobs: BTreeMap<&'static str, u64>,
    /// The same counters over the measured part only (warmup excluded), the window of the
    /// per-script counts, so the two can be compared.
    pub jobs_measured: BTreeMap<&'static str, u64>,
    /// Open loop: the requested and achieved rates over the load phase, and what was never
    /// sent (`null` in closed loop).
    pub producers: Option<super::rates::ProducerRates>,
    /// Jobs left in each location set at the end (None when the server was unreachable).
    pub depths_end: Option<Depths>,
    /// The harness's own CPU cost.
    pub harness: HarnessCpu,
    /// The invariant check after the run (None when the server could not be read).
    pub check: Option<CheckSummary>,
    /// Size of the run's history, bytes per enqueued job (its budget: ≤ 64).
    pub history_bytes_per_job: Option<f64>,
    /// The scenario's `[thresholds]`, evaluated.
    pub thresholds: Vec<super::thresholds::ThresholdResult>,
    /// The server sampled every second (`server.csv`), summed up per node, with what could
    /// not be read and what the sampling cost.
    pub server_samples: Option<crate::probe::ServerSamples>,
}

/// Counters of everything the run did, warmup included (what the server state reflects).
pub fn all_jobs(metrics: &RunMetrics) -> [u64; JobCounter::COUNT] {
    let mut all = metrics.jobs;
    for (a, w) in all.iter_mut().zip(metrics.warmup_jobs) {
        *a += w;
    }
    all
}

/// Builds the job-counter map of `summary.json`.
pub fn jobs_map(jobs: &[u64; JobCounter::COUNT]) -> BTreeMap<&'static str, u64> {
    JobCounter::ALL.iter().map(|c| (c.name(), jobs[c.index()])).collect()
}

/// The per-script summaries of a run (re-exported for the table).
pub fn scripts_of(metrics: &RunMetrics) -> Vec<ScriptSummary> {
    summarize(metrics)
}

/// The summary's file name.
pub const SUMMARY_FILE: &str = "summary.json";
