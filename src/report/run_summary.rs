//! `summary.json`: the whole run in one versioned document, and the results folder writer.

use super::{summarize, ScriptSummary};
use crate::check::CheckSummary;
use crate::load::coordinator::Depths;
use crate::metrics::{JobCounter, RunMetrics};
use crate::net::InfoSnapshot;
use crate::scenario::Scenario;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the `summary.json` layout; bumped on any incompatible change. 2: the producers'
/// `ops_per_sec` is over the load phase (`window`), not load + drain.
pub const SCHEMA_VERSION: u32 = 2;

/// The target of a run as the report shows it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
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
    pub protocol: String,
    /// When a state-changing call counted as acknowledged (`[target] wait`):
    /// `acknowledged by the primary alone` or `acknowledged after WAIT 1 replica(s), 100 ms`.
    /// Empty in summaries written before the mode existed (the primary alone).
    #[serde(default)]
    pub durability: String,
    /// The Lua directory the scripts came from.
    pub lua_dir: String,
    /// Script name → SHA1 of the source that ran (to tell two script versions apart).
    pub script_sha1: BTreeMap<String, String>,
    /// For BullMQ: the pinned release installed by `scripts/setup` and the scripts that
    /// differ from it (absent for EchoMQ, or when no release is installed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bullmq: Option<crate::bullmq::release::Release>,
}

/// The harness process's own cost, from getrusage(2).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
#[serde(default)]
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

/// Everything `summary.json` holds: the one type the run writes and `report`, `compare` and
/// `merge` read back.
///
/// Reading: `interrupted`, `measured_secs` and `scripts` are required; every other field may
/// be absent (a folder of an older version, or a summary written by hand for `compare`) and
/// reads as its default: empty, zero or `null`, never a verdict or a fate that was not written.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunSummary {
    /// [`SCHEMA_VERSION`]; a summary without one reads as this version's.
    #[serde(default = "schema_version")]
    pub schema_version: u32,
    /// `emq-bench <version>`.
    #[serde(default)]
    pub tool: String,
    /// Scenario name.
    #[serde(default)]
    pub name: String,
    /// The seed every random draw came from.
    #[serde(default)]
    pub seed: u64,
    /// True in the summary a run rewrites every few seconds while it runs, from the seconds
    /// measured so far (calls, errors, ops/s and latency per script; nothing the end adds:
    /// no verdict, no check, no service time). A folder whose summary.json still says
    /// `running` ended without its final one: the run was killed at about
    /// `warmup_secs + measured_secs` s (its per-second files may run a few seconds further).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub running: bool,
    /// The scenario as run (overrides applied, password redacted); always written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenario: Option<Scenario>,
    /// Wall-clock start, RFC 3339 UTC.
    #[serde(default)]
    pub started: String,
    /// Wall-clock end, RFC 3339 UTC.
    #[serde(default)]
    pub ended: String,
    /// True when the run ended early; `interrupt_reason` says why.
    pub interrupted: bool,
    /// Why the run ended early, in words.
    #[serde(default)]
    pub interrupt_reason: Option<String>,
    /// Why the run ended early, as one stable word: `stopped` (a stop signal), `aborted` (a
    /// second one), `gave_up` (unreachable past `--give-up`), `connect`, `thread_died`,
    /// `end_unreadable`; `null` when the plan was carried out.
    #[serde(default)]
    pub interrupt_kind: Option<String>,
    /// Faults injected (`[[faults]]`) and seen (unreachable spans, reconnects, unknown
    /// outcomes), with their times: a run that rode through them is not interrupted.
    #[serde(default)]
    pub faults: crate::faults::FaultsSeen,
    /// What became of the run's keys: `deleting` (written before the deletion starts: a
    /// folder that still says it was left during the deletion), `deleted` (once it finished),
    /// or `kept: <why>` (`--keep`, an abort, the results folder could not be written, ...);
    /// always written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<crate::verdict::KeysFate>,
    /// The deletion of the run's keys: how many were deleted, which queues were not finished,
    /// how long it took (absent when the keys were kept from the start, and in older folders).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleanup: Option<crate::verdict::Cleanup>,
    /// Passed or not, the exit code, and every finding that failed the run (kind and the line
    /// the terminal prints after `FAIL`); always written, absent in older folders.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<crate::verdict::Verdict>,
    /// Files of the results folder that could not be written, with why (a full disk); the
    /// run's keys are then kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub write_errors: Vec<String>,
    /// True when the drain finished every job in time.
    #[serde(default)]
    pub drained: bool,
    /// Seconds measured (after warmup, up to the stop, the drain included): the window
    /// (`measured`) of every script's ops/s except the producers', which use the load phase
    /// (`load`; each script names its window and length).
    pub measured_secs: f64,
    /// Whole warmup seconds excluded from the histograms.
    #[serde(default)]
    pub warmup_secs: u64,
    /// The target.
    #[serde(default)]
    pub target: TargetInfo,
    /// Server version (INFO), when it could be read.
    #[serde(default)]
    pub server_version: Option<String>,
    /// INFO before the run (memory, cpu, commandstats).
    #[serde(default)]
    pub server_before: Option<InfoSnapshot>,
    /// INFO after the run, before the run's keys are deleted.
    #[serde(default)]
    pub server_after: Option<InfoSnapshot>,
    /// Server CPU during the run, s (user + sys, from INFO).
    #[serde(default)]
    pub server_cpu_s: Option<f64>,
    /// Server memory grown per enqueued job, bytes (used_memory after − before, / enqueued).
    #[serde(default)]
    pub memory_bytes_per_job: Option<f64>,
    /// One entry per called script: calls, errors by code, ops/s, latency µs.
    pub scripts: Vec<ScriptSummary>,
    /// Job counters of the whole run (warmup included: job accounting, unlike latency, has no
    /// warmup; the checker sees every job), by name.
    #[serde(default)]
    pub jobs: BTreeMap<String, u64>,
    /// The same counters over the measured part only (warmup excluded), the window of the
    /// per-script counts, so the two can be compared.
    #[serde(default)]
    pub jobs_measured: BTreeMap<String, u64>,
    /// Open loop: the requested and achieved rates over the load phase, and what was never
    /// sent (`null` in closed loop).
    #[serde(default)]
    pub producers: Option<super::rates::ProducerRates>,
    /// The system's rate over the measured load phase beside the producers': jobs finished per
    /// second, and the backlog's start, end and slope (absent in older folders).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<super::steady::SystemRates>,
    /// Whether the harness's own host was the bottleneck over the load phase: its CPU, its wait
    /// for a CPU, the host's CPU pressure and load average, the send lag; `client_bound` when
    /// the client was saturated (absent in older folders).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<super::client::ClientLoad>,
    /// The soak's growth over the load: server memory, harness RSS and results folder, each a
    /// Theil–Sen slope (MB/h) and what a 24-hour run would reach (absent for a load shorter
    /// than 40 s, and in older folders).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub growth: Option<super::growth::Growth>,
    /// Whether the run reached a steady state: the rate held, no growing backlog, no trend in
    /// throughput or p99, each check with its statistic (absent in older folders).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady: Option<super::steady::SteadyState>,
    /// Each claimed job's wait from its enqueue's reply to its first claim's reply, µs, the
    /// whole run (warmup included: a job's wait is the job's, not a call's); from the history
    /// the check merges (absent with `--no-check`, when it could not be read, or when no job
    /// was claimed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_in_queue_us: Option<super::Percentiles>,
    /// Jobs left in each location set at the end (None when the server was unreachable).
    #[serde(default)]
    pub depths_end: Option<Depths>,
    /// The harness's own CPU cost.
    #[serde(default)]
    pub harness: HarnessCpu,
    /// The invariant check after the run (None when the server could not be read).
    #[serde(default)]
    pub check: Option<CheckSummary>,
    /// Size of the run's history, bytes per enqueued job (its budget: ≤ 64).
    #[serde(default)]
    pub history_bytes_per_job: Option<f64>,
    /// The scenario's `[thresholds]`, evaluated.
    #[serde(default)]
    pub thresholds: Vec<super::thresholds::ThresholdResult>,
    /// The server sampled every second (`server.csv`), summed up per node, with what could
    /// not be read and what the sampling cost.
    #[serde(default)]
    pub server_samples: Option<crate::probe::ServerSamples>,
    /// A fleet's shard: its place, its start against the agreed `t0` (absent for one process).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<super::fleet::ShardRecord>,
    /// A merged folder: the shards merged, the missing ones, the start spread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<super::fleet::FleetRecord>,
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
pub fn jobs_map(jobs: &[u64; JobCounter::COUNT]) -> BTreeMap<String, u64> {
    JobCounter::ALL.iter().map(|c| (c.name().to_string(), jobs[c.index()])).collect()
}

fn schema_version() -> u32 {
    SCHEMA_VERSION
}

impl RunSummary {
    /// What a run's start knows, for the summary it rewrites while it runs
    /// ([`crate::report::live::LiveFolder`]): `name`, `seed`, the `scenario` (its password
    /// already redacted) and the `target`; every other field empty (`running` is set by the
    /// writer).
    pub fn at_start(name: &str, seed: u64, scenario: Option<Scenario>, target: TargetInfo) -> RunSummary {
        // Every field but these three reads as its default (see the type's doc): the start's
        // summary is that, plus what the start knows.
        let mut summary: RunSummary =
            serde_json::from_value(serde_json::json!({ "interrupted": false, "measured_secs": 0.0, "scripts": [] }))
                .expect("a summary of its required fields reads");
        summary.tool = format!("emq-bench {}", env!("CARGO_PKG_VERSION"));
        summary.name = name.to_string();
        summary.seed = seed;
        summary.scenario = scenario;
        summary.target = target;
        summary
    }

    /// Reads `path` (a summary.json).
    ///
    /// # Errors
    /// [`SummaryReadError`]: the file cannot be read, or is not a summary of this layout (the
    /// message has serde's line and column); both name the file.
    pub fn read(path: &std::path::Path) -> Result<RunSummary, SummaryReadError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| SummaryReadError::Io { path: path.to_path_buf(), source })?;
        serde_json::from_str(&text).map_err(|source| SummaryReadError::Parse { path: path.to_path_buf(), source })
    }

    /// True when the keys' fate is recorded and they were kept.
    pub fn keys_kept(&self) -> bool {
        self.keys.as_ref().is_some_and(crate::verdict::KeysFate::is_kept)
    }

    /// The run's verdict, when the file carries one (older folders do not).
    pub fn passed(&self) -> Option<bool> {
        self.verdict.as_ref().map(|v| v.passed)
    }
}

/// Why a summary.json could not be read. Both variants name the file.
#[derive(Debug, thiserror::Error)]
pub enum SummaryReadError {
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The file is not JSON of a summary's shape.
    #[error("{}: not a summary.json of emq-bench: {source}", path.display())]
    Parse {
        /// The file.
        path: std::path::PathBuf,
        /// The error, with line and column.
        source: serde_json::Error,
    },
}

/// The per-script summaries of a run (re-exported for the table).
pub fn scripts_of(metrics: &RunMetrics) -> Vec<ScriptSummary> {
    summarize(metrics)
}

/// The summary's file name.
pub const SUMMARY_FILE: &str = "summary.json";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::{FaultSpan, FaultsSeen, SpanKind};
    use crate::net::topology::{Kind, Node};
    use crate::net::{TlsInfo, Topology};
    use crate::scenario::FaultKind;
    use crate::verdict::{Finding, FindingKind, KeptBecause, KeysFate, Verdict};

    /// A summary with every optional part present, as a failed nemesis run on a cluster writes
    /// it.
    /// The target of [`full_summary`]: a TLS cluster node with every field set, `info` before
    /// and after.
    fn full_target(info: &InfoSnapshot) -> TargetInfo {
        TargetInfo {
            durability: crate::net::Durability::Primary.to_string(),
            url: "rediss://bench:***@127.0.0.1:7000".into(),
            topology: Topology {
                kind: Kind::Cluster,
                nodes: vec![Node {
                    address: "127.0.0.1:7000".into(),
                    version: "9.1.2".into(),
                    queues: vec!["bench-0".into()],
                    info_before: Some(info.clone()),
                    info_after: Some(info.clone()),
                    role: "primary".into(),
                    slots: vec![(0, 5460)],
                    ..Node::default()
                }],
            },
            tls: Some(TlsInfo { version: "TLSv1_3".into(), cipher_suite: "TLS13_AES_256_GCM_SHA384".into() }),
            unavailable: vec!["INFO commandstats: denied".into()],
            embedded: false,
            protocol: "echomq-v1".into(),
            lua_dir: "built-in".into(),
            script_sha1: [("enqueue".to_string(), "ab".repeat(20))].into(),
            bullmq: Some(crate::bullmq::release::Release { version: "5.0.0".into(), differs: vec!["x".into()] }),
        }
    }

    fn full_summary() -> RunSummary {
        let path = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/nemesis.toml"));
        let plan = crate::scenario::load(path).unwrap();
        let info = InfoSnapshot {
            server_version: "9.1.2".into(),
            used_memory: 1 << 20,
            used_cpu_s: 1.25,
            commandstats: [("evalsha".to_string(), crate::net::CommandStat { calls: 10, usec: 55 })].into(),
        };
        let span = |kind, applied, detail: &str| FaultSpan {
            kind,
            applied,
            from_s: 3.0,
            to_s: 4.5,
            count: 2,
            detail: detail.into(),
            effects: None,
            queue: None,
        };
        let verdict = Verdict::of(vec![Finding::new(FindingKind::FaultNotApplied, "fault pause not applied")]);
        RunSummary {
            growth: None,
            client: None,
            running: false,
            schema_version: SCHEMA_VERSION,
            tool: "emq-bench 0.1.0".into(),
            name: "nemesis".into(),
            seed: 4242,
            scenario: Some(plan.scenario.clone()),
            started: "2026-12-06T03:00:00Z".into(),
            ended: "2026-12-06T03:00:30Z".into(),
            interrupted: true,
            interrupt_reason: Some("stopped by a signal".into()),
            interrupt_kind: Some("stopped".into()),
            faults: FaultsSeen {
                injected: vec![span(SpanKind::Injected(FaultKind::Pause), false, "failed: denied")],
                seen: vec![span(SpanKind::Unreachable, true, "connection refused")],
                reconnects: 3,
                unknown_outcomes: 1,
                connection_errors: 2,
            },
            keys: Some(KeysFate::Kept(KeptBecause::DeletionFailed("queue q: broken pipe".into()))),
            cleanup: Some(crate::verdict::Cleanup {
                deleted: 12,
                remaining: vec!["bench-0".into()],
                secs: 0.25,
                ..Default::default()
            }),
            verdict: Some(verdict),
            write_errors: vec!["history.bin: No space left on device".into()],
            drained: false,
            measured_secs: 29.5,
            warmup_secs: 1,
            target: full_target(&info),
            server_version: Some("9.1.2".into()),
            server_before: Some(info.clone()),
            server_after: Some(info),
            server_cpu_s: Some(0.5),
            memory_bytes_per_job: Some(310.5),
            scripts: super::super::summarize(&crate::report::tests::sample_run()),
            jobs: [("enqueued".to_string(), 10), ("completed".to_string(), 9)].into(),
            jobs_measured: [("enqueued".to_string(), 8)].into(),
            producers: Some(super::super::rates::ProducerRates {
                requested_per_sec: 400.0,
                achieved_per_sec: 399.5,
                thread_busy: vec![0.25],
                bottleneck: Some("the server".into()),
                ..Default::default()
            }),
            system: Some(super::super::steady::SystemRates {
                window_secs: 8,
                arrivals_per_sec: 400.0,
                completed_per_sec: 390.0,
                backlog_start: Some(1),
                backlog_end: Some(80),
                backlog_slope_per_sec: Some(10.0),
                backlog_source: "pending".into(),
            }),
            steady: Some(super::super::steady::SteadyState {
                steady: Some(false),
                seconds: 8,
                checks: vec![super::super::steady::SteadyCheck {
                    name: "backlog".into(),
                    steady: false,
                    trend: Some(super::super::steady::TrendStatistic {
                        n: 8,
                        z: 3.5,
                        p_value: 0.0004,
                        slope_per_sec: 10.0,
                        change: 0.8,
                        variance_factor: 1.0,
                    }),
                    detail: "grows".into(),
                }],
                not_tested: None,
                criteria: Vec::new(),
            }),
            time_in_queue_us: Some(super::super::Percentiles { p50: 400, p99: 3100, ..Default::default() }),
            depths_end: Some(Depths { pending: 1, ..Depths::default() }),
            harness: HarnessCpu { threads: 2, user_s: 0.5, sys_s: 0.25, us_per_request: 3.5 },
            check: Some(CheckSummary {
                checked_jobs: 10,
                violations_total: 1,
                by_invariant: [("I7".to_string(), 1)].into(),
                oldest_unfinished_s: Some(2.5),
                ..CheckSummary::default()
            }),
            history_bytes_per_job: Some(40.0),
            thresholds: vec![super::super::thresholds::ThresholdResult {
                key: "claim.p99".into(),
                condition: "< 2ms".into(),
                value: Some(2531.0),
                passed: false,
                fault: None,
            }],
            server_samples: Some(crate::probe::ServerSamples { interval_s: 1.0, ..Default::default() }),
            shard: Some(super::super::fleet::ShardRecord {
                group: "g".into(),
                index: 1,
                shards: 3,
                queues: "sharded".into(),
                producers: [1, 1, 3],
                t0_unix_ms: 1_700_000_000_000,
                start_offset_ms: 1.5,
                ..Default::default()
            }),
            fleet: Some(super::super::fleet::FleetRecord {
                group: "g".into(),
                shards: 3,
                missing: vec![2],
                start_spread_ms: 3.25,
                ..Default::default()
            }),
        }
    }

    /// The one schema: what a run writes reads back as the same value and writes out as the
    /// same bytes, every optional part included.
    #[test]
    fn a_summary_round_trips_through_its_json() {
        let summary = full_summary();
        let text = serde_json::to_string_pretty(&summary).unwrap();
        let back: RunSummary = serde_json::from_str(&text).unwrap();
        assert_eq!(serde_json::to_string_pretty(&back).unwrap(), text);
        assert_eq!(back.verdict, summary.verdict);
        assert_eq!(back.keys, summary.keys);
        assert_eq!(back.cleanup, summary.cleanup);
        assert_eq!(back.faults, summary.faults);
        assert!(!back.faults.injected[0].applied, "a fault not applied reads back as not applied");
        assert_eq!(back.scenario, summary.scenario);
    }

    /// A summary of an older version, or one written by hand, reads with its missing parts
    /// absent, never with a verdict or a keys' fate it did not record; without its core it is
    /// refused with the field named.
    #[test]
    fn a_partial_summary_reads_without_inventing_a_verdict() {
        let old: RunSummary = serde_json::from_str(
            r#"{"interrupted": false, "measured_secs": 2.0, "keys": "kept: --keep",
                "faults": {"injected": [{"kind": "pause", "from_s": 1.0, "to_s": 2.0}]},
                "scripts": [{"script": "enqueue", "ops_per_sec": 5.0, "latency_us": {"p50": 10}}]}"#,
        )
        .unwrap();
        assert_eq!(old.schema_version, SCHEMA_VERSION);
        assert_eq!((old.passed(), &old.verdict), (None, &None));
        assert_eq!(old.keys, Some(KeysFate::Kept(KeptBecause::Keep)));
        assert_eq!(old.cleanup, None, "no deletion recorded where none was written");
        assert!(old.faults.injected[0].applied, "spans of folders that did not record it were applied");
        assert_eq!(old.scripts[0].latency_us.p50, 10);
        // A run killed during its cleanup: the fate and how far it got, as written.
        let killed: RunSummary = serde_json::from_str(
            r#"{"interrupted": false, "measured_secs": 2.0, "scripts": [], "keys": "deleting",
                "cleanup": {"deleted": 5, "remaining": ["q"]}}"#,
        )
        .unwrap();
        assert_eq!(killed.keys, Some(KeysFate::Deleting));
        assert!(!killed.keys_kept(), "not kept on purpose: left");
        assert_eq!(
            killed.cleanup,
            Some(crate::verdict::Cleanup { deleted: 5, remaining: vec!["q".into()], ..Default::default() })
        );
        let err = serde_json::from_str::<RunSummary>(r#"{"interrupted": false}"#).unwrap_err();
        assert!(err.to_string().contains("measured_secs"), "{err}");
        let err = serde_json::from_str::<RunSummary>(
            r#"{"interrupted": false, "measured_secs": 1, "scripts": [], "faults": {"seen": [{"kind": "rain"}]}}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("unknown fault span kind `rain`"), "{err}");
    }
}
