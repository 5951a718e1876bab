//! `emq-bench merge DIR... --out DIR`: one result of a fleet's shards.
//!
//! Exact where exactness is possible: every script's whole-run histograms (`totals.hlog`) are
//! added (HdrHistogram's own `add`; shards of different precision are refused), so a merged
//! percentile is the percentile of every shard's values together, never an average of
//! percentiles; counters are summed; the thresholds and the default gates are judged on the
//! merged figures only. Each shard owns its queues (`sharded` mode), so the invariants, which
//! hold per job, hold over the fleet when they hold in every shard: the fleet's check is the
//! union of the shards' checks. A missing shard, an interrupted one or one whose check did not
//! run makes the verdict fail (exit 1): a partial fleet never passes.

mod series;

pub use crate::cli::merge::MergeArgs;
use super::session::judge::{self, CheckFate, Facts, Rules};
use super::Outcome;
use crate::error::AppError;
use crate::metrics::JobCounter;
use crate::report::fleet::{FleetRecord, ShardRow};
use crate::report::hlog::{read_log, write_entries};
use crate::report::run_summary::{RunSummary, SUMMARY_FILE};
use crate::report::{write_json, write_scripts_csv, Percentiles, ScriptSummary};
use crate::verdict::{Finding, FindingKind, KeptBecause, KeysFate, Verdict};
use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What `merge` prints and returns.
pub struct MergeResult {
    /// The merged folder.
    pub dir: PathBuf,
    /// Its summary.json.
    pub summary: RunSummary,
    /// The table (stdout).
    pub table: String,
    /// Pass, or fail (exit 1).
    pub outcome: Outcome,
    /// The verdict's lines (printed after `FAIL`).
    pub failures: Vec<String>,
}

/// One shard's folder, read.
struct ShardFolder {
    dir: PathBuf,
    summary: RunSummary,
    totals: Vec<crate::report::hlog::Entry>,
}

/// The shard folders `dirs` name: each a shard's folder (it has summary.json), or a fleet's
/// folder whose `shard-*` folders are read (the `merged` folder of an earlier merge is not).
fn shard_dirs(dirs: &[PathBuf]) -> Result<Vec<PathBuf>, AppError> {
    let mut out = Vec::new();
    for dir in dirs {
        if dir.join(SUMMARY_FILE).is_file() {
            out.push(dir.clone());
            continue;
        }
        let entries = std::fs::read_dir(dir)
            .map_err(|e| AppError::Usage(format!("{}: not a shard's results folder nor a fleet's: {e}", dir.display())))?;
        let mut subs: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir() && p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("shard-")))
            .collect();
        if subs.is_empty() {
            return Err(AppError::Usage(format!(
                "{}: no summary.json and no shard-NNN/ folders: not a shard's results folder nor a fleet's",
                dir.display()
            )));
        }
        subs.sort();
        out.extend(subs);
    }
    Ok(out)
}

fn read_shard(dir: &Path) -> Result<Option<ShardFolder>, AppError> {
    let path = dir.join(SUMMARY_FILE);
    if !path.is_file() {
        return Ok(None);
    }
    let summary = RunSummary::read(&path).map_err(|e| AppError::Usage(e.to_string()))?;
    if summary.shard.is_none() {
        return Err(AppError::Usage(format!(
            "{}: a run of one process, not a fleet's shard (run with --shards N)",
            path.display()
        )));
    }
    let totals_path = dir.join("totals.hlog");
    let totals = match totals_path.is_file() {
        true => read_log(&totals_path).map_err(|e| AppError::Usage(e.to_string()))?,
        false if summary.scripts.is_empty() => Vec::new(),
        false => {
            return Err(AppError::Usage(format!(
                "{}: missing: the merge adds the shards' histograms, and this shard's are not there",
                totals_path.display()
            )))
        }
    };
    Ok(Some(ShardFolder { dir: dir.to_path_buf(), summary, totals }))
}

/// Merges the shards' folders `args.dirs` into `args.out`.
///
/// Errors: [`AppError::Usage`] (exit 2) for folders that are not a fleet's shards, shards of
/// different fleets or sizes, the same index twice, histograms of different precision, an
/// `--out` holding results; [`AppError::Io`] when the merged folder cannot be written.
pub fn merge(args: MergeArgs) -> Result<MergeResult, AppError> {
    let dirs = shard_dirs(&args.dirs)?;
    if args.out.join(SUMMARY_FILE).exists() {
        return Err(AppError::Usage(format!(
            "--out {}: it already holds results (summary.json); choose an empty or new folder",
            args.out.display()
        )));
    }
    let mut shards: Vec<ShardFolder> = Vec::new();
    let mut unreadable: Vec<String> = Vec::new();
    for dir in &dirs {
        match read_shard(dir)? {
            Some(shard) => shards.push(shard),
            None => unreadable.push(dir.display().to_string()),
        }
    }
    let Some(first) = shards.first() else {
        return Err(AppError::Usage(format!(
            "no shard summary in {}: the shards have not finished (or were killed before writing)",
            dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ")
        )));
    };
    let record = first.summary.shard.clone().expect("checked");
    for s in &shards {
        let r = s.summary.shard.as_ref().expect("checked");
        if (r.group.as_str(), r.shards) != (record.group.as_str(), record.shards) {
            return Err(AppError::Usage(format!(
                "{}: shard {} of fleet {} ({} shards), but {} is of fleet {} ({} shards)",
                s.dir.display(),
                r.index,
                r.group,
                r.shards,
                first.dir.display(),
                record.group,
                record.shards
            )));
        }
    }
    shards.sort_by_key(|s| s.summary.shard.as_ref().map(|r| r.index));
    if let Some(w) = shards.windows(2).find(|w| w[0].summary.shard.as_ref().map(|r| r.index) == w[1].summary.shard.as_ref().map(|r| r.index)) {
        return Err(AppError::Usage(format!(
            "{} and {}: the same shard index twice",
            w[0].dir.display(),
            w[1].dir.display()
        )));
    }
    std::fs::create_dir_all(&args.out).map_err(|source| AppError::Io { path: args.out.display().to_string(), source })?;
    let merged = merge_shards(&shards, &record.group, record.shards)?;
    let (mut summary, histograms) = merged;
    let mut findings: Vec<Finding> = Vec::new();
    let fleet = summary.fleet.clone().expect("merge_shards sets it");
    if !fleet.missing.is_empty() {
        let missing: Vec<String> = fleet.missing.iter().map(u32::to_string).collect();
        findings.push(Finding::new(
            FindingKind::ShardMissing,
            format!(
                "fleet {} incomplete: shard(s) {} of {} missing (no summary.json{}): the merged figures cover {} shard(s) only",
                fleet.group,
                missing.join(", "),
                fleet.shards,
                if unreadable.is_empty() { String::new() } else { format!(" in {}", unreadable.join(", ")) },
                fleet.merged.len()
            ),
        ));
    }
    // What each shard's end found and the merged figures cannot show again is carried over,
    // named by its shard: interruptions, faults, lost locks, unwritten files, kept keys, a
    // check that did not run.
    for s in &shards {
        let index = s.summary.shard.as_ref().map_or(0, |r| r.index);
        for f in s.summary.verdict.iter().flat_map(|v| &v.findings) {
            if carried(f.kind) {
                findings.push(Finding::new(f.kind, format!("shard {index}: {}", f.message)));
            }
        }
        if s.summary.verdict.is_none() {
            findings.push(Finding::new(
                FindingKind::Interrupted,
                format!("shard {index}: its summary.json carries no verdict (written by an older emq-bench)"),
            ));
        }
    }
    let plan = whole_plan(&shards[0])?;
    summary.thresholds = crate::report::thresholds::evaluate(&plan.thresholds, &summary.scripts);
    let check = match shards.iter().all(|s| s.summary.check.is_some()) {
        true => CheckFate::Ran { violations: summary.check.as_ref().map_or(0, |c| c.violations_total) },
        // The shard's own CheckNotRun finding (carried) says why.
        false => CheckFate::Skipped,
    };
    let facts = Facts {
        interrupted: None,
        scripts: summary.scripts.clone(),
        jobs: summary.jobs.clone(),
        thresholds: summary.thresholds.clone(),
        producers: summary.producers.clone(),
        drained: summary.drained,
        depths_end: summary.depths_end,
        oldest_unfinished_s: summary.check.as_ref().and_then(|c| c.oldest_unfinished_s),
        check,
        ..Facts::default()
    };
    let rules = Rules { keep: true, ..Rules::of(&plan, true) };
    findings.extend(judge::judge(&facts, &rules).findings);
    let verdict = Verdict::of(findings);
    summary.verdict = Some(verdict.clone());
    let dirs: Vec<&Path> = shards.iter().map(|s| s.dir.as_path()).collect();
    let start = humantime::parse_rfc3339(&summary.started).unwrap_or(std::time::UNIX_EPOCH);
    summary.target.unavailable.extend(series::merge_series(&dirs, &args.out, start)?);
    write_merged(&args.out, &summary, &histograms, &fleet)?;
    let table = table(&summary, &fleet, &args.out);
    let outcome = if verdict.passed { Outcome::Success } else { Outcome::Failed };
    Ok(MergeResult { dir: args.out, summary, table, outcome, failures: verdict.lines() })
}

/// The marker a shard writes into its folder once the folder is complete.
pub const SHARD_DONE: &str = "shard.done";
/// The file the shard that merges claims first (created exclusively: one merge per fleet).
const MERGE_CLAIM: &str = "merge.claim";

/// Called by a shard whose folder `shard_dir` (`<fleet>/shard-NNN`) is complete: marks it
/// done, and when every one of the fleet's `shards` is done, merges them into
/// `<fleet>/merged`, once (the first shard to claim it; the others return `None`). On a shared
/// volume (a Kubernetes PVC) the last pod to finish merges.
///
/// Errors: as [`merge`]; the marker not written is [`AppError::Io`].
pub fn merge_when_complete(shard_dir: &Path, shards: u32) -> Option<Result<MergeResult, AppError>> {
    let fleet = shard_dir.parent()?;
    if let Err(source) = std::fs::write(shard_dir.join(SHARD_DONE), b"") {
        return Some(Err(AppError::Io { path: shard_dir.join(SHARD_DONE).display().to_string(), source }));
    }
    let all_done = (0..shards).all(|i| fleet.join(format!("shard-{i:03}")).join(SHARD_DONE).is_file());
    if !all_done {
        return None;
    }
    std::fs::OpenOptions::new().write(true).create_new(true).open(fleet.join(MERGE_CLAIM)).ok()?;
    Some(merge(MergeArgs { dirs: vec![fleet.to_path_buf()], out: fleet.join("merged"), json: false }))
}

/// Findings a shard's end made that the merged figures cannot make again.
fn carried(kind: FindingKind) -> bool {
    matches!(
        kind,
        FindingKind::Interrupted
            | FindingKind::FaultNotApplied
            | FindingKind::FaultsNotFired
            | FindingKind::CheckNotRun
            | FindingKind::LockLost
            | FindingKind::WriteError
            | FindingKind::CleanupFailed
            | FindingKind::KeysKept
    )
}

/// The whole fleet's plan, from the scenario a shard's summary carries (every override
/// applied), else from the copy in its folder.
fn whole_plan(shard: &ShardFolder) -> Result<crate::scenario::Plan, AppError> {
    let path = shard.dir.join("scenario.toml");
    if let Some(scenario) = &shard.summary.scenario {
        if let Ok(text) = toml::to_string(scenario) {
            if let Ok(plan) = crate::scenario::parse(&text, &path) {
                return Ok(plan);
            }
        }
    }
    Ok(crate::scenario::load(&path)?)
}

/// The merged summary (its verdict still to judge) and the merged histograms by tag.
fn merge_shards(
    shards: &[ShardFolder],
    group: &str,
    count: u32,
) -> Result<(RunSummary, Vec<(String, Histogram<u64>)>), AppError> {
    let first = &shards[0].summary;
    // Histograms by tag, added in shard order; the precision must agree.
    let mut histograms: Vec<(String, Histogram<u64>)> = Vec::new();
    for s in shards {
        for e in &s.totals {
            match histograms.iter_mut().find(|(tag, _)| *tag == e.tag) {
                Some((_, h)) => {
                    if h.sigfig() != e.histogram.sigfig() {
                        return Err(AppError::Usage(format!(
                            "{}: {} has {} significant figures, the shards before it {}: histograms of different \
                             precision cannot be added exactly",
                            s.dir.join("totals.hlog").display(),
                            e.tag,
                            e.histogram.sigfig(),
                            h.sigfig()
                        )));
                    }
                    h.add(&e.histogram).map_err(|err| {
                        AppError::Usage(format!("{}: {} cannot be added: {err:?}", s.dir.display(), e.tag))
                    })?;
                }
                None => histograms.push((e.tag.clone(), e.histogram.clone())),
            }
        }
    }
    let of = |tag: String| histograms.iter().find(|(t, _)| *t == tag).map_or_else(Percentiles::default, |(_, h)| Percentiles::of(h));
    let mut scripts: Vec<ScriptSummary> = Vec::new();
    for s in shards {
        for part in &s.summary.scripts {
            match scripts.iter_mut().find(|m| m.script == part.script) {
                Some(m) => {
                    m.calls += part.calls;
                    m.ok += part.ok;
                    m.late += part.late;
                    m.window_secs = m.window_secs.max(part.window_secs);
                    for (code, n) in &part.errors {
                        *m.errors.entry(code.clone()).or_default() += n;
                    }
                }
                None => scripts.push(part.clone()),
            }
        }
    }
    for m in &mut scripts {
        // The shards ran the same window from one t0: the fleet's rate is its calls over it.
        m.ops_per_sec = if m.window_secs > 0.0 { m.ok as f64 / m.window_secs } else { 0.0 };
        m.late_fraction = if m.calls > 0 { m.late as f64 / m.calls as f64 } else { 0.0 };
        m.latency_us = of(format!("latency.{}", m.script));
        m.service_us = of(format!("service.{}", m.script));
        m.send_lag_us = of(format!("send_lag.{}", m.script));
        m.error_latency_us = of(format!("error.{}", m.script));
    }
    let sum_map = |get: &dyn Fn(&RunSummary) -> &BTreeMap<String, u64>| {
        let mut out: BTreeMap<String, u64> = BTreeMap::new();
        for s in shards {
            for (k, v) in get(&s.summary) {
                *out.entry(k.clone()).or_default() += v;
            }
        }
        out
    };
    let all = || shards.iter().map(|s| &s.summary);
    let producers = all().filter_map(|s| s.producers.clone()).reduce(|mut a, b| {
        a.requested_per_sec += b.requested_per_sec;
        a.achieved_per_sec += b.achieved_per_sec;
        a.load_secs = a.load_secs.max(b.load_secs);
        a.intended += b.intended;
        a.sent += b.sent;
        a.never_sent += b.never_sent;
        a.late += b.late;
        a.held &= b.held;
        a.thread_busy.extend(b.thread_busy);
        a.bottleneck = a.bottleneck.or(b.bottleneck);
        a
    });
    let producers = producers.map(|mut p| {
        p.late_fraction = if p.sent > 0 { p.late as f64 / p.sent as f64 } else { 0.0 };
        p
    });
    let depths_end = all().map(|s| s.depths_end).try_fold(crate::load::coordinator::Depths::default(), |a, d| {
        let d = d?;
        Some(crate::load::coordinator::Depths {
            pending: a.pending + d.pending,
            delayed: a.delayed + d.delayed,
            active: a.active + d.active,
            completed: a.completed + d.completed,
            failed: a.failed + d.failed,
        })
    });
    let check = all().map(|s| s.check.clone()).try_fold(crate::check::CheckSummary::default(), |mut a, c| {
        let c = c?;
        a.checked_jobs += c.checked_jobs;
        a.violations_total += c.violations_total;
        for (k, v) in c.by_invariant {
            *a.by_invariant.entry(k).or_default() += v;
        }
        a.jobs_with_retries += c.jobs_with_retries;
        a.with_history = c.with_history && (a.checked_jobs == c.checked_jobs || a.with_history);
        a.seconds = a.seconds.max(c.seconds);
        a.oldest_unfinished_s = match (a.oldest_unfinished_s, c.oldest_unfinished_s) {
            (Some(x), Some(y)) => Some(x.max(y)),
            (x, y) => x.or(y),
        };
        Some(a)
    });
    let cpu: f64 = all().map(|s| s.harness.user_s + s.harness.sys_s).sum();
    let requests: f64 = all()
        .filter(|s| s.harness.us_per_request > 0.0)
        .map(|s| (s.harness.user_s + s.harness.sys_s) * 1e6 / s.harness.us_per_request)
        .sum();
    let harness = crate::report::run_summary::HarnessCpu {
        threads: all().map(|s| s.harness.threads).sum(),
        user_s: all().map(|s| s.harness.user_s).sum(),
        sys_s: all().map(|s| s.harness.sys_s).sum(),
        us_per_request: if requests > 0.0 { cpu * 1e6 / requests } else { 0.0 },
    };
    let jobs = sum_map(&|s| &s.jobs);
    let enqueued = jobs.get(JobCounter::Enqueued.name()).copied().unwrap_or(0) as f64;
    let history_bytes: f64 = all()
        .filter_map(|s| Some(s.history_bytes_per_job? * s.jobs.get(JobCounter::Enqueued.name()).copied()? as f64))
        .sum();
    let mut faults = crate::faults::FaultsSeen::default();
    for s in all() {
        faults.reconnects += s.faults.reconnects;
        faults.unknown_outcomes += s.faults.unknown_outcomes;
        faults.seen.extend(s.faults.seen.iter().cloned());
    }
    let mut target = first.target.clone();
    for s in all().skip(1) {
        for (node, other) in target.topology.nodes.iter_mut().zip(&s.target.topology.nodes) {
            node.queues.extend(other.queues.iter().cloned());
        }
    }
    let interrupted: Vec<String> = shards
        .iter()
        .filter(|s| s.summary.interrupted)
        .map(|s| {
            let index = s.summary.shard.as_ref().map_or(0, |r| r.index);
            format!("shard {index}: {}", s.summary.interrupt_reason.as_deref().unwrap_or("interrupted"))
        })
        .collect();
    let keys = all().find_map(|s| {
        let index = s.shard.as_ref().map_or(0, |r| r.index);
        match &s.keys {
            Some(KeysFate::Kept(why)) => Some(KeysFate::Kept(KeptBecause::Other(format!("shard {index}: {why}")))),
            _ => None,
        }
    });
    let rows: Vec<ShardRow> = shards
        .iter()
        .map(|s| ShardRow {
            folder: s.dir.display().to_string(),
            shard: s.summary.shard.clone().unwrap_or_default(),
            completed: !s.summary.interrupted,
            passed: s.summary.passed(),
            enqueued: s.summary.jobs.get(JobCounter::Enqueued.name()).copied().unwrap_or(0),
            completed_jobs: s.summary.jobs.get(JobCounter::Completed.name()).copied().unwrap_or(0),
        })
        .collect();
    let present: Vec<u32> = rows.iter().map(|r| r.shard.index).collect();
    let starts: Vec<f64> = rows.iter().map(|r| r.shard.started_unix_ms).collect();
    let uncertainty = rows.iter().map(|r| r.shard.clock_uncertainty_ms).fold(0.0, f64::max);
    let spread = starts.iter().copied().fold(f64::MIN, f64::max) - starts.iter().copied().fold(f64::MAX, f64::min);
    let fleet = FleetRecord {
        group: group.to_string(),
        shards: count,
        missing: (0..count).filter(|i| !present.contains(i)).collect(),
        start_spread_ms: if rows.is_empty() { 0.0 } else { spread + 2.0 * uncertainty },
        merged: rows,
    };
    let summary = RunSummary {
        schema_version: crate::report::run_summary::SCHEMA_VERSION,
        tool: format!("emq-bench {}", env!("CARGO_PKG_VERSION")),
        name: first.name.clone(),
        seed: first.seed,
        scenario: first.scenario.clone(),
        started: all().map(|s| s.started.clone()).min().unwrap_or_default(),
        ended: all().map(|s| s.ended.clone()).max().unwrap_or_default(),
        interrupted: !interrupted.is_empty() || !fleet.missing.is_empty(),
        interrupt_reason: (!interrupted.is_empty()).then(|| interrupted.join("; ")),
        interrupt_kind: all().find_map(|s| s.interrupt_kind.clone()),
        faults,
        keys: Some(keys.unwrap_or(KeysFate::Deleted)),
        verdict: None,
        write_errors: Vec::new(),
        drained: all().all(|s| s.drained),
        measured_secs: all().map(|s| s.measured_secs).fold(0.0, f64::max),
        warmup_secs: first.warmup_secs,
        target,
        server_version: first.server_version.clone(),
        // Every shard read the same server at its own moments: their INFO figures are not
        // additive, and the probe of one shard already saw the whole server.
        server_before: None,
        server_after: None,
        server_cpu_s: None,
        memory_bytes_per_job: None,
        scripts,
        jobs,
        jobs_measured: sum_map(&|s| &s.jobs_measured),
        producers,
        depths_end,
        harness,
        check,
        history_bytes_per_job: (enqueued > 0.0 && history_bytes > 0.0).then(|| history_bytes / enqueued),
        thresholds: Vec::new(),
        server_samples: all().find_map(|s| s.server_samples.clone()),
        shard: None,
        fleet: Some(fleet),
    };
    Ok((summary, histograms))
}

fn write_merged(
    dir: &Path,
    summary: &RunSummary,
    histograms: &[(String, Histogram<u64>)],
    fleet: &FleetRecord,
) -> Result<(), AppError> {
    let io = |e: crate::report::ReportError| AppError::Usage(e.to_string());
    write_json(&dir.join(SUMMARY_FILE), summary).map_err(io)?;
    write_scripts_csv(&dir.join("scripts.csv"), &summary.scripts).map_err(io)?;
    let start = humantime::parse_rfc3339(&summary.started).unwrap_or(std::time::UNIX_EPOCH);
    let comment = format!(
        "emq-bench fleet {}: whole-run histograms per script, the sum of {} shard(s)' totals.hlog, us",
        fleet.group,
        fleet.merged.len()
    );
    let (from, length) = (Duration::from_secs(summary.warmup_secs), Duration::from_secs_f64(summary.measured_secs));
    write_entries(&dir.join("totals.hlog"), &comment, start, from, length, histograms).map_err(io)?;
    let mut csv = String::from("index,folder,completed,passed,enqueued,completed_jobs,start_offset_ms,clock_offset_ms,clock_uncertainty_ms,waited_s\n");
    for r in &fleet.merged {
        csv.push_str(&format!(
            "{},{},{},{},{},{},{:.3},{:.3},{:.3},{:.3}\n",
            r.shard.index,
            r.folder,
            r.completed,
            r.passed.map_or("", |p| if p { "true" } else { "false" }),
            r.enqueued,
            r.completed_jobs,
            r.shard.start_offset_ms,
            r.shard.clock_offset_ms,
            r.shard.clock_uncertainty_ms,
            r.shard.waited_s
        ));
    }
    crate::report::write_text(&dir.join("shards.csv"), &csv).map_err(io)?;
    crate::html::write_report(dir).map_err(io)?;
    Ok(())
}

fn table(summary: &RunSummary, fleet: &FleetRecord, dir: &Path) -> String {
    let mut out = format!(
        "fleet {}: {} of {} shard(s) merged, started within {:.1} ms of each other (server clock, clock uncertainty \
         included)\n",
        fleet.group,
        fleet.merged.len(),
        fleet.shards,
        fleet.start_spread_ms
    );
    out.push_str("shard  completed  passed  enqueued  completed_jobs  start_offset_ms  clock ± ms\n");
    for r in &fleet.merged {
        out.push_str(&format!(
            "{:>5}  {:>9}  {:>6}  {:>8}  {:>14}  {:>15.1}  {:>10.2}\n",
            r.shard.index,
            r.completed,
            r.passed.map_or("-", |p| if p { "yes" } else { "no" }),
            r.enqueued,
            r.completed_jobs,
            r.shard.start_offset_ms,
            r.shard.clock_uncertainty_ms
        ));
    }
    let jobs = super::session::render::jobs_array(&summary.jobs);
    out.push_str(&crate::report::format_table(&summary.scripts, &jobs, summary.warmup_secs));
    if let Some(check) = &summary.check {
        out.push_str(&format!(
            "invariants (union of the shards' checks): {} jobs checked, {} violation(s)\n",
            check.checked_jobs, check.violations_total
        ));
    }
    for t in &summary.thresholds {
        out.push_str(&format!("{}\n", t.describe()));
    }
    out.push_str(&format!("results: {}\n", dir.display()));
    out
}
