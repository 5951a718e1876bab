//! The fleet's figures from its shards' summaries and histograms: what can be added is
//! added (histograms, counters), what cannot is taken from the one shard that saw it all (the
//! server's samples) or left out (INFO before and after: every shard read the same server at
//! its own moment).

use super::ShardFolder;
use crate::check::report::{InvariantsReport, INVARIANTS_FILE};
use crate::check::CheckSummary;
use crate::error::AppError;
use crate::faults::FaultsSeen;
use crate::load::coordinator::Depths;
use crate::metrics::JobCounter;
use crate::report::fleet::{FleetRecord, ShardRow};
use crate::report::rates::ProducerRates;
use crate::report::run_summary::{HarnessCpu, RunSummary, SCHEMA_VERSION};
use crate::report::{Percentiles, ScriptSummary};
use crate::scenario::{Plan, Stop};
use crate::verdict::{Cleanup, KeptBecause, KeysFate};
use hdrhistogram::Histogram;
use std::collections::BTreeMap;

/// Every shard's histograms added tag by tag (`latency.<script>`, `service.<script>`, ...), in
/// shard order.
///
/// Errors: two histograms of one tag with different precision (they cannot be added exactly),
/// or an addition that fails.
pub(super) fn add_histograms(shards: &[ShardFolder]) -> Result<Vec<(String, Histogram<u64>)>, AppError> {
    let mut histograms: Vec<(String, Histogram<u64>)> = Vec::new();
    for s in shards {
        for e in &s.totals {
            match histograms.iter_mut().find(|(tag, _)| *tag == e.tag) {
                Some((_, h)) if h.sigfig() != e.histogram.sigfig() => {
                    return Err(AppError::Usage(format!(
                        "{}: {} has {} significant figures, the shards before it {}: histograms of different \
                         precision cannot be added exactly",
                        s.dir.join("totals.hlog").display(),
                        e.tag,
                        e.histogram.sigfig(),
                        h.sigfig()
                    )));
                }
                Some((_, h)) => h.add(&e.histogram).map_err(|err| {
                    AppError::Usage(format!("{}: {} cannot be added: {err:?}", s.dir.display(), e.tag))
                })?,
                None => histograms.push((e.tag.clone(), e.histogram.clone())),
            }
        }
    }
    Ok(histograms)
}

/// The scripts' summaries of the fleet: counts summed, percentiles read from the added
/// histograms, ops/s over the longest window (the shards ran the same window from one `t0`).
fn scripts(shards: &[ShardFolder], histograms: &[(String, Histogram<u64>)]) -> Vec<ScriptSummary> {
    let of = |tag: String| {
        histograms.iter().find(|(t, _)| *t == tag).map_or_else(Percentiles::default, |(_, h)| Percentiles::of(h))
    };
    let mut scripts: Vec<ScriptSummary> = Vec::new();
    for part in shards.iter().flat_map(|s| &s.summary.scripts) {
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
    for m in &mut scripts {
        m.ops_per_sec = if m.window_secs > 0.0 { m.ok as f64 / m.window_secs } else { 0.0 };
        m.late_fraction = if m.calls > 0 { m.late as f64 / m.calls as f64 } else { 0.0 };
        m.latency_us = of(format!("latency.{}", m.script));
        m.service_us = of(format!("service.{}", m.script));
        m.send_lag_us = of(format!("send_lag.{}", m.script));
        m.error_latency_us = of(format!("error.{}", m.script));
    }
    scripts
}

/// The producers' rates of the fleet, judged again on the sums as one process's would be
/// (held or not, against the fleet's requested rate over the longest load phase).
fn producers(all: &[&RunSummary], plan: &Plan) -> Option<ProducerRates> {
    let parts: Vec<&ProducerRates> = all.iter().filter_map(|s| s.producers.as_ref()).collect();
    if parts.is_empty() {
        return None;
    }
    let load_secs = parts.iter().map(|p| p.load_secs).fold(0.0, f64::max);
    Some(ProducerRates::new(
        parts.iter().map(|p| p.requested_per_sec).sum(),
        load_secs,
        parts.iter().map(|p| p.sent).sum(),
        parts.iter().map(|p| p.never_sent).sum(),
        parts.iter().map(|p| p.late).sum(),
        matches!(plan.stop, Stop::Jobs(_)),
        parts.iter().flat_map(|p| p.thread_busy.iter().copied()).collect(),
    ))
}

/// The check over the fleet: the union of the shards' checks (each owns its queues, and the
/// invariants hold per job), over the shards that ran one; `None` when none did.
fn check(all: &[&RunSummary]) -> Option<CheckSummary> {
    let checks: Vec<&CheckSummary> = all.iter().filter_map(|s| s.check.as_ref()).collect();
    if checks.is_empty() {
        return None;
    }
    let mut union = CheckSummary { with_history: checks.iter().all(|c| c.with_history), ..CheckSummary::default() };
    for c in checks {
        union.checked_jobs += c.checked_jobs;
        union.violations_total += c.violations_total;
        for (k, v) in &c.by_invariant {
            *union.by_invariant.entry(k.clone()).or_default() += v;
        }
        union.jobs_with_retries += c.jobs_with_retries;
        union.seconds = union.seconds.max(c.seconds);
        union.oldest_unfinished_s = match (union.oldest_unfinished_s, c.oldest_unfinished_s) {
            (Some(x), Some(y)) => Some(x.max(y)),
            (x, y) => x.or(y),
        };
    }
    Some(union)
}

/// The fleet's `invariants.json` of a `sharded` fleet: every shard's violations together (each
/// names its own `s<I>.` queue), over the jobs every shard checked; `None` when no shard ran
/// the check, or when one that ran it has no invariants.json (a union without it would
/// undercount: the merged folder then has none, and its summary's `check` says the counts).
///
/// Errors: a shard's invariants.json that is there and does not read.
pub(super) fn union_invariants(shards: &[ShardFolder]) -> Result<Option<InvariantsReport>, AppError> {
    let mut checked_jobs = 0;
    let mut violations = Vec::new();
    let mut any = false;
    for shard in shards.iter().filter(|s| s.summary.check.is_some()) {
        let path = shard.dir.join(INVARIANTS_FILE);
        if !path.is_file() {
            return Ok(None);
        }
        let text = std::fs::read_to_string(&path)
            .map_err(|source| AppError::Io { path: path.display().to_string(), source })?;
        let report: InvariantsReport = serde_json::from_str(&text)
            .map_err(|e| AppError::Usage(format!("{}: not an invariants report: {e}", path.display())))?;
        checked_jobs += report.checked_jobs;
        violations.extend(report.violations);
        any = true;
    }
    Ok(any.then(|| InvariantsReport::new(checked_jobs, violations)))
}

/// The fleet's time in queue: every job's wait ([`crate::report::queue_time`]) read from the
/// histories `histories` (each shard's for a `sharded` fleet, whose jobs each stay in one
/// shard; the merge's joined one for a `shared` fleet), added. `None` when any history is
/// missing or unreadable: the waits of some shards alone are not the fleet's.
pub(super) fn time_in_queue(histories: &[std::path::PathBuf], spill: &std::path::Path) -> Option<Histogram<u64>> {
    let budget = crate::cli::DEFAULT_CHECK_MEMORY_MB << 20;
    let mut sum: Option<Histogram<u64>> = None;
    for path in histories {
        let parts = crate::history::HistoryParts::read(path, budget, spill).ok()?;
        let h = crate::report::queue_time::time_in_queue(&parts).ok()?;
        match &mut sum {
            Some(sum) => sum.add(&h).ok()?,
            None => sum = Some(h),
        }
    }
    sum
}

fn depths(all: &[&RunSummary]) -> Option<Depths> {
    all.iter().map(|s| s.depths_end).try_fold(Depths::default(), |a, d| {
        let d = d?;
        Some(Depths {
            pending: a.pending + d.pending,
            delayed: a.delayed + d.delayed,
            active: a.active + d.active,
            completed: a.completed + d.completed,
            failed: a.failed + d.failed,
        })
    })
}

fn harness(all: &[&RunSummary]) -> HarnessCpu {
    let cpu: f64 = all.iter().map(|s| s.harness.user_s + s.harness.sys_s).sum();
    let requests: f64 = all
        .iter()
        .filter(|s| s.harness.us_per_request > 0.0)
        .map(|s| (s.harness.user_s + s.harness.sys_s) * 1e6 / s.harness.us_per_request)
        .sum();
    HarnessCpu {
        threads: all.iter().map(|s| s.harness.threads).sum(),
        user_s: all.iter().map(|s| s.harness.user_s).sum(),
        sys_s: all.iter().map(|s| s.harness.sys_s).sum(),
        us_per_request: if requests > 0.0 { cpu * 1e6 / requests } else { 0.0 },
    }
}

fn sum_counters<'a>(maps: impl Iterator<Item = &'a BTreeMap<String, u64>>) -> BTreeMap<String, u64> {
    let mut out: BTreeMap<String, u64> = BTreeMap::new();
    for map in maps {
        for (k, v) in map {
            *out.entry(k.clone()).or_default() += v;
        }
    }
    out
}

/// True when the shard ran consumers.
fn has_consumers(summary: &RunSummary) -> bool {
    summary.shard.as_ref().is_some_and(|r| r.consumers[1] > 0)
}

/// The fleet's shard table, its missing indices and its start spread.
fn fleet(shards: &[ShardFolder], group: &str, count: u32) -> FleetRecord {
    let rows: Vec<ShardRow> = shards
        .iter()
        .map(|s| ShardRow {
            folder: s.dir.display().to_string(),
            shard: s.summary.shard.clone().unwrap_or_default(),
            completed: !s.summary.interrupted && s.done,
            passed: s.summary.passed(),
            enqueued: s.summary.jobs.get(JobCounter::Enqueued.name()).copied().unwrap_or(0),
            completed_jobs: s.summary.jobs.get(JobCounter::Completed.name()).copied().unwrap_or(0),
        })
        .collect();
    let present: Vec<u32> = rows.iter().map(|r| r.shard.index).collect();
    let starts = rows.iter().map(|r| r.shard.started_unix_ms);
    let uncertainty = rows.iter().map(|r| r.shard.clock_uncertainty_ms).fold(0.0, f64::max);
    let spread = starts.clone().fold(f64::MIN, f64::max) - starts.fold(f64::MAX, f64::min);
    FleetRecord {
        group: group.to_string(),
        shards: count,
        missing: (0..count).filter(|i| !present.contains(i)).collect(),
        start_spread_ms: if rows.is_empty() { 0.0 } else { spread + 2.0 * uncertainty },
        merged: rows,
    }
}

/// What became of the fleet's keys: deleted only when every shard says so and every shard is
/// there and complete; else kept, naming every shard whose `s<I>.` keys may remain.
fn keys(shards: &[ShardFolder], fleet: &FleetRecord) -> KeysFate {
    let mut kept: Vec<String> = shards
        .iter()
        .filter_map(|s| {
            let index = s.summary.shard.as_ref().map_or(0, |r| r.index);
            match (&s.summary.keys, s.done) {
                (Some(KeysFate::Kept(why)), _) => Some(format!("shard {index}: {why}")),
                (Some(KeysFate::Deleting), _) => {
                    Some(format!("shard {index}: its cleanup did not finish, its s{index}.* keys may remain"))
                }
                (None, _) => Some(format!("shard {index}: its summary does not say")),
                (_, false) => Some(format!("shard {index}: its folder is incomplete, its s{index}.* keys may remain")),
                _ => None,
            }
        })
        .collect();
    kept.extend(fleet.missing.iter().map(|i| format!("shard {i}: missing, its s{i}.* keys may remain")));
    match kept.is_empty() {
        true => KeysFate::Deleted,
        false => KeysFate::Kept(KeptBecause::Other(kept.join("; "))),
    }
}

/// The fleet's deletions as one: the keys every shard counted and deleted, the queues any did
/// not finish, the keys left (when every shard counted), the longest one's time; absent unless every shard recorded one (each deletes its own).
fn cleanup(all: &[&RunSummary]) -> Option<Cleanup> {
    let records: Vec<&Cleanup> = all.iter().map(|s| s.cleanup.as_ref()).collect::<Option<_>>()?;
    Some(Cleanup {
        deleted: records.iter().map(|c| c.deleted).sum(),
        remaining: records.iter().flat_map(|c| c.remaining.iter().cloned()).collect(),
        secs: records.iter().map(|c| c.secs).fold(0.0, f64::max),
        counted: records.iter().flat_map(|c| c.counted.iter()).fold(Default::default(), |mut all, (q, n)| {
            *all.entry(q.clone()).or_default() += n;
            all
        }),
        remaining_keys: records.iter().map(|c| c.remaining_keys).sum(),
    })
}

/// The merged summary (its thresholds and verdict still to judge) of `shards`, shards of
/// fleet `group` of `count` run with `plan`.
pub(super) fn merge_shards(
    shards: &[ShardFolder],
    histograms: &[(String, Histogram<u64>)],
    plan: &Plan,
    group: &str,
    count: u32,
) -> RunSummary {
    let all: Vec<&RunSummary> = shards.iter().map(|s| &s.summary).collect();
    let first = all[0];
    let jobs = sum_counters(all.iter().map(|s| &s.jobs));
    let enqueued = jobs.get(JobCounter::Enqueued.name()).copied().unwrap_or(0) as f64;
    let history_bytes: f64 = all
        .iter()
        .filter_map(|s| Some(s.history_bytes_per_job? * *s.jobs.get(JobCounter::Enqueued.name())? as f64))
        .sum();
    let mut faults = FaultsSeen::default();
    for s in &all {
        faults.reconnects += s.faults.reconnects;
        faults.unknown_outcomes += s.faults.unknown_outcomes;
        faults.connection_errors += s.faults.connection_errors;
        faults.seen.extend(s.faults.seen.iter().cloned());
    }
    let mut target = first.target.clone();
    for s in all.iter().skip(1) {
        for (node, other) in target.topology.nodes.iter_mut().zip(&s.target.topology.nodes) {
            // A `shared` fleet's shards name the same queues.
            for queue in &other.queues {
                if !node.queues.contains(queue) {
                    node.queues.push(queue.clone());
                }
            }
        }
    }
    let interrupted: Vec<String> = all
        .iter()
        .filter(|s| s.interrupted)
        .map(|s| {
            let index = s.shard.as_ref().map_or(0, |r| r.index);
            format!("shard {index}: {}", s.interrupt_reason.as_deref().unwrap_or("interrupted"))
        })
        .collect();
    let fleet = fleet(shards, group, count);
    let shared = first.shard.as_ref().is_some_and(|r| r.queues == crate::scenario::QueueMode::Shared.name());
    RunSummary {
        // Each shard's growth is its own process's: a fleet has no one harness to measure.
        growth: None,
        client: None,
        running: false,
        schema_version: SCHEMA_VERSION,
        tool: format!("emq-bench {}", env!("CARGO_PKG_VERSION")),
        name: first.name.clone(),
        seed: first.seed,
        scenario: first.scenario.clone(),
        started: all.iter().map(|s| s.started.clone()).min().unwrap_or_default(),
        ended: all.iter().map(|s| s.ended.clone()).max().unwrap_or_default(),
        interrupted: !interrupted.is_empty() || !fleet.missing.is_empty(),
        interrupt_reason: (!interrupted.is_empty()).then(|| interrupted.join("; ")),
        interrupt_kind: all.iter().find_map(|s| s.interrupt_kind.clone()),
        faults,
        cleanup: cleanup(&all),
        keys: Some(keys(shards, &fleet)),
        verdict: None,
        write_errors: Vec::new(),
        // A shard without consumers has nothing to drain (`shared` mode's producer shards).
        drained: match all.iter().any(|s| has_consumers(s)) {
            true => all.iter().filter(|s| has_consumers(s)).all(|s| s.drained),
            false => all.iter().all(|s| s.drained),
        },
        measured_secs: all.iter().map(|s| s.measured_secs).fold(0.0, f64::max),
        warmup_secs: first.warmup_secs,
        target,
        server_version: first.server_version.clone(),
        // Every shard read the same server at its own moments: their INFO figures are not
        // additive, and the probe of one shard already saw the whole server.
        server_before: None,
        server_after: None,
        server_cpu_s: None,
        memory_bytes_per_job: None,
        scripts: scripts(shards, histograms),
        jobs,
        jobs_measured: sum_counters(all.iter().map(|s| &s.jobs_measured)),
        producers: producers(&all, plan),
        // Steadiness is a shard's own: each shard's summary.json carries it.
        system: None,
        steady: None,
        // The merge reads it from the histories ([`time_in_queue`]).
        time_in_queue_us: None,
        depths_end: match shared {
            // Every shard read the same queues at its end: the last reading is the fleet's.
            true => all
                .iter()
                .filter_map(|s| s.depths_end.map(|d| (s.ended.clone(), d)))
                .max_by(|a, b| a.0.cmp(&b.0))
                .map(|(_, d)| d),
            false => depths(&all),
        },
        harness: harness(&all),
        check: check(&all),
        history_bytes_per_job: (enqueued > 0.0 && history_bytes > 0.0).then(|| history_bytes / enqueued),
        thresholds: Vec::new(),
        server_samples: all.iter().find_map(|s| s.server_samples.clone()),
        shard: None,
        fleet: Some(fleet),
    }
}
