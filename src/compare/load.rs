//! Reading a results folder into one set of metric values per repetition.
//!
//! Layouts, tried in this order:
//! - a repeated run: `DIR/rep-*/summary.json`, one folder per repetition, read in name order
//!   (a top-level `summary.json` beside them, e.g. a merged one, is then ignored);
//! - a single run: `DIR/summary.json`, one repetition named `run`.
//!
//! Each `summary.json` is read as the run wrote it, [`RunSummary`] (the one schema); a summary
//! written by hand needs only `interrupted`, `measured_secs` and `scripts` (each with `script`,
//! `ops_per_sec` and `latency_us`), and `jobs.completed` for the cycle rate.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::metric::{Measure, Metric};
use crate::report::run_summary::RunSummary;

/// The `summary.json` schema version this reader understands.
pub const SUMMARY_SCHEMA: u32 = crate::report::run_summary::SCHEMA_VERSION;

/// Which latency a comparison reads from each summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, clap::ValueEnum)]
pub enum LatencyKind {
    /// From the intended send time (`latency_us`): what a user of the queue waits, queueing
    /// and coordinated omission included. The default.
    #[default]
    Intended,
    /// From the actual send (`service_us`): the script's own cost plus the round trip, without
    /// the open-loop pacing jitter. Best for comparing script versions in open-loop runs.
    Service,
}

/// One repetition's metric values: ops/s, or latency in µs.
#[derive(Debug, Clone, PartialEq)]
pub struct Repetition {
    /// Folder name (`rep-001`), or `run` for a single-run folder.
    pub name: String,
    /// Every metric this repetition measured, with its value.
    pub values: BTreeMap<Metric, f64>,
    /// What its injected faults did (none for a run without `[[faults]]`).
    pub faults: super::safety::FaultTally,
}

/// A repetition that was left out, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    /// Folder name.
    pub name: String,
    /// Why: `interrupted: <reason>` or `no summary.json`.
    pub reason: String,
}

/// The repetitions of one results folder.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultSet {
    /// The folder as given.
    pub dir: PathBuf,
    /// The repetitions that ran to their end, in name order (never empty).
    pub repetitions: Vec<Repetition>,
    /// The repetitions left out (interrupted, or without a summary).
    pub skipped: Vec<Skipped>,
    /// Script names in the order the first repetitions list them (the `Script` order).
    pub scripts: Vec<String>,
    /// The scenario's name, as the first repetition used ran it.
    pub scenario: String,
}

/// Why a results folder cannot be read. Every variant names the path.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The folder or a summary could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The folder or file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A `summary.json` is not valid JSON of the expected shape.
    #[error("{path}: not a summary.json of emq-bench: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The error, with line and column.
        source: serde_json::Error,
    },
    /// A `summary.json` of a layout this version cannot read.
    #[error("{path}: summary schema version {found}, this emq-bench reads version {SUMMARY_SCHEMA}")]
    Schema {
        /// The file.
        path: PathBuf,
        /// Its `schema_version`.
        found: u32,
    },
    /// Neither `summary.json` nor `rep-*/summary.json` in the folder.
    #[error("{0}: no summary.json and no rep-*/summary.json: not a results folder of `emq-bench run`")]
    NotResults(PathBuf),
    /// Every repetition was skipped.
    #[error("{dir}: no repetition ran to its end ({})", list_skipped(.skipped))]
    NothingUsable {
        /// The folder.
        dir: PathBuf,
        /// What was skipped and why.
        skipped: Vec<Skipped>,
    },
}

fn list_skipped(skipped: &[Skipped]) -> String {
    skipped.iter().map(|s| format!("{}: {}", s.name, s.reason)).collect::<Vec<_>>().join("; ")
}

/// Fewest ok calls a repetition needs for a percentile to be compared: 100 for p50, 1 000 for
/// p99, 10 000 for p99.9 (at least ten samples beyond the quantile; fewer and "p99.9" is just
/// the maximum, whose spread makes every comparison inconclusive). `ok` is `None` when the
/// summary does not count calls (a summary written by hand): every percentile is kept.
fn enough_samples(measure: Measure, ok: Option<u64>) -> bool {
    let need = match measure {
        Measure::OpsPerSec | Measure::ServerUs => 0,
        Measure::P50 => 100,
        Measure::P99 => 1_000,
        Measure::P999 => 10_000,
    };
    ok.is_none_or(|ok| ok >= need)
}

/// Reads a results folder (see the module doc for the layouts).
///
/// Interrupted repetitions and `rep-*` folders without a `summary.json` are listed in
/// [`ResultSet::skipped`]. Errors: an unreadable folder or file, a malformed summary, a folder
/// with no summary at all, or one whose every repetition was skipped.
pub fn load_results(dir: &Path) -> Result<ResultSet, LoadError> {
    load_results_with(dir, LatencyKind::Intended)
}

/// [`load_results`], reading the latency percentiles of `kind`.
pub fn load_results_with(dir: &Path, kind: LatencyKind) -> Result<ResultSet, LoadError> {
    let read_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| LoadError::Read { path, source }
    };
    let mut reps: Vec<(String, PathBuf)> = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(read_err(dir))? {
        let entry = entry.map_err(read_err(dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("rep-") && entry.path().is_dir() {
            reps.push((name, entry.path().join("summary.json")));
        }
    }
    reps.sort();
    if reps.is_empty() {
        let single = dir.join("summary.json");
        if !single.is_file() {
            return Err(LoadError::NotResults(dir.to_path_buf()));
        }
        reps.push(("run".to_owned(), single));
    }
    let mut set = ResultSet {
        dir: dir.to_path_buf(),
        repetitions: Vec::new(),
        skipped: Vec::new(),
        scripts: Vec::new(),
        scenario: String::new(),
    };
    for (name, path) in reps {
        if !path.is_file() {
            set.skipped.push(Skipped { name, reason: "no summary.json".to_owned() });
            continue;
        }
        let text = std::fs::read_to_string(&path).map_err(read_err(&path))?;
        let summary: RunSummary =
            serde_json::from_str(&text).map_err(|source| LoadError::Parse { path: path.clone(), source })?;
        if summary.schema_version != SUMMARY_SCHEMA {
            return Err(LoadError::Schema { path, found: summary.schema_version });
        }
        if summary.interrupted {
            let why = summary.interrupt_reason.as_deref().unwrap_or("no reason recorded");
            set.skipped.push(Skipped { name, reason: format!("interrupted: {why}") });
            continue;
        }
        if set.repetitions.is_empty() {
            set.scenario.clone_from(&summary.name);
        }
        for s in &summary.scripts {
            if !set.scripts.contains(&s.script) {
                set.scripts.push(s.script.clone());
            }
        }
        let faults = super::safety::FaultTally::of_summary(&summary);
        set.repetitions.push(Repetition { name, values: values_of(&summary, kind), faults });
    }
    if set.repetitions.is_empty() {
        return Err(LoadError::NothingUsable { dir: set.dir, skipped: set.skipped });
    }
    Ok(set)
}

/// The metric values of one summary (latency percentiles of 0, from an empty histogram, are
/// left out; a throughput of 0 is kept). The cycle rate is `jobs.completed / measured_secs`; note
/// that the job counters include warmup while `measured_secs` does not, a bias both sides of a
/// comparison share when they ran the same scenario. It is left out when either is missing or 0.
fn values_of(summary: &RunSummary, kind: LatencyKind) -> BTreeMap<Metric, f64> {
    let mut values = BTreeMap::new();
    if let Some(&completed) = summary.jobs.get("completed") {
        if summary.measured_secs > 0.0 && completed > 0 {
            values.insert(Metric::cycle(), completed as f64 / summary.measured_secs);
        }
    }
    for s in &summary.scripts {
        // A summary without service times (written by hand) compares its latency instead.
        let l = match kind {
            LatencyKind::Service if s.service_us != Default::default() => &s.service_us,
            _ => &s.latency_us,
        };
        // A summary that counts no call at all was written by hand: its percentiles stand.
        let ok = (s.calls > 0 || s.ok > 0).then_some(s.ok);
        for (measure, v) in [
            (Measure::OpsPerSec, s.ops_per_sec),
            (Measure::P50, l.p50 as f64),
            (Measure::P99, l.p99 as f64),
            (Measure::P999, l.p999 as f64),
        ] {
            // A 0 percentile is an empty histogram (no ok call measured), not a 0 µs latency.
            if !(measure.is_latency() && v <= 0.0) && enough_samples(measure, ok) {
                values.insert(Metric::script(&s.script, measure), v);
            }
        }
    }
    values
}

#[cfg(test)]
mod sample_rule_tests {
    use super::*;

    #[test]
    fn percentiles_need_enough_ok_calls() {
        assert!(enough_samples(Measure::OpsPerSec, Some(0)));
        assert!(!enough_samples(Measure::P50, Some(99)) && enough_samples(Measure::P50, Some(100)));
        assert!(!enough_samples(Measure::P99, Some(999)) && enough_samples(Measure::P99, Some(1_000)));
        assert!(!enough_samples(Measure::P999, Some(9_999)) && enough_samples(Measure::P999, Some(10_000)));
        assert!(enough_samples(Measure::P999, None), "summaries without counts keep every percentile");
    }
}
