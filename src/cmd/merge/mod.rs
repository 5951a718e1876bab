//! `emq-bench merge DIR... --out DIR`: one result of a fleet's shards.
//!
//! Exact where exactness is possible: every script's whole-run histograms (`totals.hlog`) are
//! added (HdrHistogram's own `add`; shards of different precision are refused), so a merged
//! percentile is the percentile of every shard's values together, never an average of
//! percentiles; counters are summed; the thresholds and the default gates are judged on the
//! merged figures only. In `sharded` mode each shard owns its queues, so the invariants, which
//! hold per job, hold over the fleet when they hold in every shard: the fleet's check is the
//! union of the shards' checks. In `shared` mode the merge runs the one check itself, over the
//! union of the shards' histories ([`shared`]), and then deletes the keys; it needs the
//! server (`--url`). A missing shard, an interrupted one or one whose check did not run makes
//! the verdict fail (exit 1): a partial fleet never passes.

mod combine;
mod series;
mod shared;

pub use shared::FleetTarget;

use super::session::judge::{self, CheckFate, Facts, Rules};
use super::CommandOutcome;
pub use crate::cli::merge::MergeArgs;
use crate::error::AppError;
use crate::report::fleet::FleetRecord;
use crate::report::hlog::{read_log, write_entries};
use crate::report::run_summary::{RunSummary, SUMMARY_FILE};
use crate::report::{write_json, write_scripts_csv, JudgedRun};
use crate::scenario::QueueMode;
use crate::verdict::{Cleanup, Finding, FindingKind, KeptBecause, KeysFate, Verdict};
use hdrhistogram::Histogram;
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
    pub outcome: CommandOutcome,
    /// The verdict's lines (printed after `FAIL`).
    pub failures: Vec<String>,
}

/// One shard's folder, read.
pub(super) struct ShardFolder {
    /// The folder.
    pub(super) dir: PathBuf,
    /// Its summary.json.
    pub(super) summary: RunSummary,
    /// Its totals.hlog.
    pub(super) totals: Vec<crate::report::hlog::Entry>,
    /// True when the shard marked its folder complete ([`SHARD_DONE`]): its cleanup ran.
    pub(super) done: bool,
}

impl ShardFolder {
    fn index(&self) -> u32 {
        self.summary.shard.as_ref().map_or(0, |r| r.index)
    }
}

/// True when `name` is a shard's own folder name, `shard-NNN` as `run --shards` writes it
/// ([`crate::report::fleet::shard_folder`]): three digits or more.
fn is_shard_name(name: &str) -> bool {
    name.strip_prefix("shard-").is_some_and(|n| n.len() >= 3 && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The shard folders found at and under `dir`, whatever the folders around them are named: a
/// folder with a summary.json is a shard's (or a merged fleet's, which `read_shard` refuses
/// when named, and which is skipped below one). Else the shards among its subfolders are
/// taken (a subfolder with a summary.json, or named `shard-NNN`: a shard killed before its
/// summary), and only when it has none are its subfolders searched in turn: a fleet's folder
/// stops the search, so copies of its shards further below (an earlier merge's `merged/`, a
/// folder of edited shards) are not read with them.
fn shards_under(dir: &Path, named: bool, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let merged = |d: &Path| RunSummary::read(&d.join(SUMMARY_FILE)).is_ok_and(|s| s.fleet.is_some());
    if dir.join(SUMMARY_FILE).is_file() {
        if named || !merged(dir) {
            out.push(dir.to_path_buf());
        }
        return Ok(());
    }
    let mut subs: Vec<PathBuf> =
        std::fs::read_dir(dir)?.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_dir()).collect();
    subs.sort();
    let is_shard = |p: &Path| {
        let named_so = p.file_name().is_some_and(|n| is_shard_name(&n.to_string_lossy()));
        (p.join(SUMMARY_FILE).is_file() && !merged(p)) || named_so
    };
    let shards: Vec<PathBuf> = subs.iter().filter(|p| is_shard(p)).cloned().collect();
    if !shards.is_empty() {
        out.extend(shards);
        return Ok(());
    }
    let before = out.len();
    for sub in subs {
        shards_under(&sub, false, out)?;
    }
    // A `shard-NNN` folder given by name, with no shard below it: a shard killed before its
    // summary (the merge names it missing).
    if named && out.len() == before && dir.file_name().is_some_and(|n| is_shard_name(&n.to_string_lossy())) {
        out.push(dir.to_path_buf());
    }
    Ok(())
}

/// What `dir` holds, for an error that says what was there: its entries' names (folders with
/// a `/`), the first few.
fn listing(dir: &Path) -> String {
    let Ok(entries) = std::fs::read_dir(dir) else { return "nothing readable".to_string() };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| {
            let slash = if e.path().is_dir() { "/" } else { "" };
            format!("{}{slash}", e.file_name().to_string_lossy())
        })
        .collect();
    names.sort();
    match names.len() {
        0 => "an empty folder".to_string(),
        n if n > 8 => format!("{}, ... ({n} entries)", names[..8].join(", ")),
        _ => names.join(", "),
    }
}

/// The shard folders `dirs` name: each a shard's folder, or any folder holding shards' folders
/// at any depth (a fleet's `--out`, a pod's volume, their parent), whatever their names.
///
/// Errors: a folder that cannot be read, or that holds no summary.json and no shard's folder
/// (the error names the file looked for and what the folder holds).
fn shard_dirs(dirs: &[PathBuf]) -> Result<Vec<PathBuf>, AppError> {
    let mut out = Vec::new();
    for dir in dirs {
        let before = out.len();
        shards_under(dir, true, &mut out).map_err(|e| {
            AppError::Usage(format!("{}: not a shard's results folder nor a folder holding them: {e}", dir.display()))
        })?;
        if out.len() == before {
            return Err(AppError::Usage(format!(
                "{}: no {SUMMARY_FILE} there nor in any folder below it (it holds {}): not a shard's results folder \
                 nor a folder holding them",
                dir.join(SUMMARY_FILE).display(),
                listing(dir)
            )));
        }
    }
    Ok(out)
}

/// Reads the shard folder `dir`; `Ok(Err(why))` when it holds no finished shard's summary
/// (`why` names the file looked for and what was there, or says the shard is still running).
fn read_shard(dir: &Path) -> Result<Result<ShardFolder, String>, AppError> {
    let path = dir.join(SUMMARY_FILE);
    if !path.is_file() {
        return Ok(Err(format!("{}: no such file (the folder holds {})", path.display(), listing(dir))));
    }
    let summary = RunSummary::read(&path).map_err(|e| AppError::Usage(e.to_string()))?;
    // A shard killed mid-run (a lost node, a task killed by its scheduler) leaves the summary
    // it rewrites while it runs, which is not its end: the shard is missing, as one killed
    // before its first summary.
    if summary.running && !dir.join(SHARD_DONE).is_file() {
        return Ok(Err(format!(
            "{}: marked running (the shard is still running, or was killed before its end)",
            path.display()
        )));
    }
    if summary.shard.is_none() {
        let what = if summary.fleet.is_some() { "a fleet's merged folder" } else { "a run of one process" };
        return Err(AppError::Usage(format!("{}: {what}, not a fleet's shard (run with --shards N)", path.display())));
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
    let done = dir.join(SHARD_DONE).is_file();
    Ok(Ok(ShardFolder { dir: dir.to_path_buf(), summary, totals, done }))
}

/// Reads the shards of `dirs`, all of one fleet (one group, size, `t0` and configuration),
/// by index; why each folder without a finished shard's summary has none is returned apart.
fn read_fleet(dirs: &[PathBuf]) -> Result<(Vec<ShardFolder>, Vec<String>), AppError> {
    let mut shards: Vec<ShardFolder> = Vec::new();
    let mut unreadable: Vec<String> = Vec::new();
    for dir in dirs {
        match read_shard(dir)? {
            Ok(shard) => shards.push(shard),
            Err(why) => unreadable.push(why),
        }
    }
    let Some(first) = shards.first() else {
        return Err(AppError::Usage(format!("no finished shard to merge: {}", unreadable.join("; "))));
    };
    let record = first.summary.shard.clone().expect("read_shard checks it");
    for s in &shards {
        let r = s.summary.shard.as_ref().expect("read_shard checks it");
        let same = (r.group.as_str(), r.shards, r.t0_unix_ms, r.config.as_str())
            == (record.group.as_str(), record.shards, record.t0_unix_ms, record.config.as_str());
        if !same {
            return Err(AppError::Usage(format!(
                "{}: shard {} of fleet {} ({} shards, t0 {}), but {} is of fleet {} ({} shards, t0 {}){}: not one \
                 fleet's shards",
                s.dir.display(),
                r.index,
                r.group,
                r.shards,
                r.t0_unix_ms,
                first.dir.display(),
                record.group,
                record.shards,
                record.t0_unix_ms,
                if r.config != record.config { ", another configuration" } else { "" }
            )));
        }
    }
    shards.sort_by_key(ShardFolder::index);
    if let Some(w) = shards.windows(2).find(|w| w[0].index() == w[1].index()) {
        return Err(AppError::Usage(format!(
            "{} and {}: the same shard index twice",
            w[0].dir.display(),
            w[1].dir.display()
        )));
    }
    Ok((shards, unreadable))
}

/// A shard that started later than this after `t0` is said: the fleet's seconds are then not
/// one second of every shard.
const LATE_START_MS: f64 = 1_000.0;

/// The findings only a fleet has: shards missing or incomplete, shards without a check, late
/// starts; then each shard's findings the merged figures cannot make again, named by shard.
fn fleet_findings(shards: &[ShardFolder], fleet: &FleetRecord, unreadable: &[String]) -> Vec<Finding> {
    let mut findings = Vec::new();
    let any_checked = shards.iter().any(|s| s.summary.check.is_some());
    if !fleet.missing.is_empty() {
        let missing: Vec<String> = fleet.missing.iter().map(u32::to_string).collect();
        findings.push(Finding::new(
            FindingKind::ShardMissing,
            format!(
                "fleet {} incomplete: shard(s) {} of {} missing ({}): the merged figures cover {} shard(s) only",
                fleet.group,
                missing.join(", "),
                fleet.shards,
                if unreadable.is_empty() { "no folder of theirs was given".to_string() } else { unreadable.join("; ") },
                fleet.merged.len()
            ),
        ));
    }
    for s in shards {
        let index = s.index();
        let own = || s.summary.verdict.iter().flat_map(|v| &v.findings);
        if !s.done {
            findings.push(Finding::new(
                FindingKind::ShardMissing,
                format!(
                    "shard {index}: its folder is incomplete (no {SHARD_DONE}: it ended after writing its summary, \
                     before its cleanup)"
                ),
            ));
        }
        // Every shard agreed on --no-check (the configuration covers it): a fleet that asked for
        // no check is judged as one process that asked for none; one shard without a check
        // among shards with one leaves its jobs out of the fleet's check.
        if any_checked && s.summary.check.is_none() && own().all(|f| f.kind != FindingKind::CheckNotRun) {
            findings.push(Finding::new(
                FindingKind::CheckNotRun,
                format!("shard {index}: ran without the invariant check: the fleet's check leaves its jobs out"),
            ));
        }
        let offset = s.summary.shard.as_ref().map_or(0.0, |r| r.start_offset_ms);
        if offset.abs() > LATE_START_MS {
            findings.push(Finding::new(
                FindingKind::LateStart,
                format!(
                    "shard {index}: started {offset:.0} ms off t0 (more than {LATE_START_MS:.0} ms): the fleet's \
                     seconds are not the same second of every shard"
                ),
            ));
        }
        for f in own().filter(|f| carried(f.kind)) {
            findings.push(Finding::new(f.kind, format!("shard {index}: {}", f.message)));
        }
        if s.summary.verdict.is_none() {
            findings.push(Finding::new(
                FindingKind::Interrupted,
                format!("shard {index}: its summary.json carries no verdict (written by an older emq-bench)"),
            ));
        }
    }
    findings
}

/// Merges the shards' folders `args.dirs` into `args.out`.
///
/// Errors: [`AppError::Usage`] (exit 2) for folders that are not a fleet's shards, shards of
/// different fleets (group, size, `t0` or configuration), the same index twice, histograms of
/// different precision, an `--out` holding results; [`AppError::Report`] / [`AppError::Io`]
/// (exit 1) when the merged folder cannot be written.
pub async fn merge(args: MergeArgs) -> Result<MergeResult, AppError> {
    let target = args.url.clone().map(|url| FleetTarget { url, flags: args.target.flags() });
    merge_with(args, target).await
}

/// [`merge`], reaching the server (a `shared` fleet's check) at `target`.
///
/// Errors: as [`merge`].
pub async fn merge_with(args: MergeArgs, target: Option<FleetTarget>) -> Result<MergeResult, AppError> {
    let dirs = shard_dirs(&args.dirs)?;
    if args.out.join(SUMMARY_FILE).exists() {
        return Err(AppError::Usage(format!(
            "--out {}: it already holds results (summary.json); choose an empty or new folder",
            args.out.display()
        )));
    }
    let (shards, unreadable) = read_fleet(&dirs)?;
    let record = shards[0].summary.shard.clone().expect("read_fleet checks it");
    let plan = whole_plan(&shards[0])?;
    let histograms = combine::add_histograms(&shards)?;
    std::fs::create_dir_all(&args.out)
        .map_err(|source| AppError::Io { path: args.out.display().to_string(), source })?;
    let mut summary = combine::merge_shards(&shards, &histograms, &plan, &record.group, record.shards);
    let fleet = summary.fleet.clone().expect("merge_shards sets it");
    let mut findings = fleet_findings(&shards, &fleet, &unreadable);
    summary.thresholds =
        crate::report::thresholds::evaluate(&plan.thresholds, &summary.scripts, &summary.faults.injected);
    // A `shared` fleet's check: the merge's own, over every shard's history.
    let shared = record.queues == QueueMode::Shared.name();
    let mut fleet_check = None;
    let check = if shared {
        let checked = match (&target, record.check) {
            (None, true) => Err(format!(
                "fleet {}'s queues are shared: its check runs at the merge, over every shard's history, and needs \
                 the server: emq-bench merge ... --url URL (the keys stay on the server until then)",
                record.group
            )),
            // `--no-check`: nothing to check, and without the server nothing to delete either.
            (None, false) => Ok(None),
            (Some(target), run_check) => match shared::union_history(&shards) {
                Ok((header, streams)) => {
                    shared::check_shared(&header, &streams, target, &record.group, &args.out, run_check).await.map(Some)
                }
                Err(err) => Err(err),
            },
        };
        match checked {
            Ok(Some(checked)) => {
                let fate = match &checked.outcome {
                    Some(outcome) => {
                        summary.check = Some(outcome.summary(true));
                        summary.jobs.insert(
                            crate::metrics::JobCounter::FailedByStall.name().to_string(),
                            outcome.failed_by_stall,
                        );
                        CheckFate::Ran { violations: outcome.report.violations_total }
                    }
                    None => CheckFate::Skipped,
                };
                fleet_check = Some(checked);
                fate
            }
            Ok(None) => CheckFate::Skipped,
            Err(reason) => CheckFate::NotRun(reason),
        }
    } else {
        match &summary.check {
            Some(union) => CheckFate::Ran { violations: union.violations_total },
            // Each shard without a check has its finding above.
            None => CheckFate::Skipped,
        }
    };
    if shared {
        summary.keys = Some(shared_keys(&shards, &fleet, fleet_check.is_some()));
    }
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
    // The keys' fate is each shard's (its findings are carried); only a `shared` fleet's merge
    // deletes keys, below, once the merged folder is written.
    let rules = Rules::of(&plan, true);
    findings.extend(judge::judge(&facts, &rules).findings);
    let gates = judge::gates(&facts, &rules);
    let verdict = Verdict::of(findings);
    summary.verdict = Some(verdict.clone());
    let dirs: Vec<&Path> = shards.iter().map(|s| s.dir.as_path()).collect();
    let start = humantime::parse_rfc3339(&summary.started).unwrap_or(std::time::UNIX_EPOCH);
    summary.target.unavailable.extend(series::merge_series(&dirs, &args.out, start, shared)?);
    // The fleet's invariants.json: the merge's own check's (`shared`), else the union of the
    // shards' (each checked its own queues).
    let invariants = match fleet_check.as_ref().and_then(|c| c.outcome.as_ref()) {
        Some(outcome) => Some(outcome.report.clone()),
        None if shared => None,
        None => combine::union_invariants(&shards)?,
    };
    let histories: Vec<PathBuf> = match shared {
        true => vec![args.out.join("history.bin")],
        false => shards.iter().map(|s| s.dir.join("history.bin")).collect(),
    };
    let queue_time = combine::time_in_queue(&histories, &args.out);
    summary.time_in_queue_us = queue_time.filter(|h| !h.is_empty()).map(|h| crate::report::Percentiles::of(&h));
    write_merged(&args.out, &summary, &histograms, &fleet)?;
    write_judged(&args.out, &JudgedRun { summary: &summary, invariants: invariants.as_ref(), gates: &gates })?;
    let mut verdict = verdict;
    if let Some(checked) = fleet_check {
        // The folder is written (its keys say `deleting`): the keys are no longer the only
        // evidence. It says `deleted` once they are gone.
        if summary.keys == Some(KeysFate::Deleting) {
            let started = std::time::Instant::now();
            let (deleted, failed) = shared::delete_keys(&checked).await;
            let remaining = match &failed {
                Ok(()) => Vec::new(),
                Err((queue, _)) => {
                    checked.queues.iter().map(|k| k.queue.to_string()).skip_while(|q| q != queue).collect()
                }
            };
            summary.cleanup =
                Some(Cleanup { deleted, remaining, secs: started.elapsed().as_secs_f64(), ..Default::default() });
            summary.keys = Some(judge::keys_deleted(failed.as_ref().err().map(|(_, err)| err.clone())));
            if let Err((_, err)) = failed {
                let mut findings = verdict.findings.clone();
                findings.push(Finding::new(FindingKind::CleanupFailed, format!("the fleet's keys: {err}")));
                verdict = Verdict::of(findings);
                summary.verdict = Some(verdict.clone());
            }
            write_json(&args.out.join(SUMMARY_FILE), &summary).map_err(AppError::Report)?;
            write_judged(&args.out, &JudgedRun { summary: &summary, invariants: invariants.as_ref(), gates: &gates })?;
        }
        checked.lock.release_all().await;
    }
    let table = table(&summary, &fleet, &args.out);
    let outcome = if verdict.passed { CommandOutcome::Success } else { CommandOutcome::Failed };
    Ok(MergeResult { dir: args.out, summary, table, outcome, failures: verdict.lines() })
}

/// What becomes of a `shared` fleet's keys: deleted (`deleting` until the merged folder is
/// written and the deletion ends) once the merge reached the server and ran
/// its check (or the fleet asked for none), every shard is there and complete, and none kept
/// them for a reason of its own (`--keep`, an abort, the end unreadable, a lost lock).
fn shared_keys(shards: &[ShardFolder], fleet: &FleetRecord, checked: bool) -> KeysFate {
    let mut kept: Vec<String> = shards
        .iter()
        .filter_map(|s| {
            let index = s.index();
            match (&s.summary.keys, s.done) {
                (Some(KeysFate::Kept(KeptBecause::FleetCheck)), true) => None,
                (Some(KeysFate::Kept(why)), true) => Some(format!("shard {index}: {why}")),
                (_, false) => Some(format!("shard {index}: its folder is incomplete")),
                (_, true) => Some(format!("shard {index}: its summary does not say it kept them for the fleet")),
            }
        })
        .collect();
    kept.extend(fleet.missing.iter().map(|i| format!("shard {i}: missing")));
    if !checked {
        kept.push("the merge's check did not run (or it had no --url to reach the server)".to_string());
    }
    match kept.is_empty() {
        true => KeysFate::Deleting,
        false => KeysFate::Kept(KeptBecause::Other(kept.join("; "))),
    }
}

/// The marker a shard writes into its folder once the folder is complete.
pub const SHARD_DONE: &str = "shard.done";
/// The file the shard that merges claims first (created exclusively: one merge per fleet).
const MERGE_CLAIM: &str = "merge.claim";

/// Called by a shard whose folder `shard_dir` (`<fleet>/shard-NNN`) is complete: marks it
/// done, and when every one of the fleet's `shards` is done and `may_merge`, merges them into
/// `<fleet>/merged` (a `shared` fleet checked on `target`), once (the first shard to claim it;
/// the others return `None`). On a shared volume (a Kubernetes PVC) the last pod to finish
/// merges. An aborted shard passes `may_merge` false: it only marks its folder.
///
/// Errors: as [`merge`]; the marker not written is [`AppError::Io`].
pub async fn merge_when_complete(
    shard_dir: &Path,
    shards: u32,
    target: FleetTarget,
    may_merge: bool,
) -> Option<Result<MergeResult, AppError>> {
    let fleet = shard_dir.parent()?;
    if let Err(source) = std::fs::write(shard_dir.join(SHARD_DONE), b"") {
        return Some(Err(AppError::Io { path: shard_dir.join(SHARD_DONE).display().to_string(), source }));
    }
    if !may_merge {
        return None;
    }
    let all_done = (0..shards).all(|i| fleet.join(crate::report::fleet::shard_folder(i)).join(SHARD_DONE).is_file());
    if !all_done {
        return None;
    }
    match std::fs::OpenOptions::new().write(true).create_new(true).open(fleet.join(MERGE_CLAIM)) {
        Ok(_) => {}
        // Another shard claimed the merge.
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => return None,
        Err(source) => return Some(Err(AppError::Io { path: fleet.join(MERGE_CLAIM).display().to_string(), source })),
    }
    let args = MergeArgs {
        dirs: vec![fleet.to_path_buf()],
        out: fleet.join("merged"),
        json: false,
        url: None,
        target: Default::default(),
    };
    Some(merge_with(args, Some(target)).await)
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

fn write_merged(
    dir: &Path,
    summary: &RunSummary,
    histograms: &[(String, Histogram<u64>)],
    fleet: &FleetRecord,
) -> Result<(), AppError> {
    let io = AppError::Report;
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

/// The merged folder's `invariants.json`, `junit.xml` and `summary.md`, by the run's writers.
///
/// Errors: the first file not written, as [`AppError::Report`] (exit 1).
fn write_judged(dir: &Path, judged: &JudgedRun) -> Result<(), AppError> {
    for writer in crate::ci::run::judged_writers() {
        writer.write(&dir.join(writer.file()), judged).map_err(AppError::Report)?;
    }
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
        let how = match fleet.merged.first().is_some_and(|r| r.shard.queues == QueueMode::Shared.name()) {
            true => "the fleet's check over every shard's history",
            false => "union of the shards' checks",
        };
        out.push_str(&format!(
            "invariants ({how}): {} jobs checked, {} violation(s)\n",
            check.checked_jobs, check.violations_total
        ));
    }
    for t in &summary.thresholds {
        out.push_str(&format!("{}\n", t.describe()));
    }
    out.push_str(&format!("results: {}\n", dir.display()));
    out
}
