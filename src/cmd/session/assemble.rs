//! Assemble: summary.json of a finished run, built once from what the run observed, and the
//! facts the judge reads of it.

use super::judge;
use super::options::RunOptions;
use crate::check::CheckOutcome;
use crate::faults::SpanKind;
use crate::load::coordinator::Driven;
use crate::lua::Script;
use crate::metrics::JobCounter;
use crate::net::InfoSnapshot;
use crate::report::rates::ProducerRates;
use crate::report::run_summary::{
    all_jobs, jobs_map, scripts_of, HarnessCpu, RunSummary, TargetInfo, SCHEMA_VERSION, SUMMARY_FILE,
};
use crate::report::steady;
use crate::report::write_json;
use crate::scenario::{self, FaultKind, Plan};
use crate::verdict::{Cleanup, KeysFate};
use std::path::Path;
use std::time::SystemTime;

/// What the end of a run observed besides the drive itself, for [`summarize`].
pub(super) struct Observed<'a> {
    pub(super) target: TargetInfo,
    pub(super) before: Option<InfoSnapshot>,
    pub(super) after: Option<InfoSnapshot>,
    /// The job counters of the whole run, the check's stall failures in.
    pub(super) jobs: [u64; JobCounter::COUNT],
    pub(super) server: crate::probe::ServerSamples,
    pub(super) checked: Option<&'a CheckOutcome>,
    /// A fleet's shard: its place and start.
    pub(super) shard: Option<crate::report::fleet::ShardRecord>,
    /// The queues' depths read each second, s since the run start.
    pub(super) depths: &'a [crate::report::DepthSample],
    /// Each claimed job's wait from its enqueue to its first claim, µs (None: no history).
    pub(super) queue_time: Option<&'a hdrhistogram::Histogram<u64>>,
    /// The history's encoded size, bytes (what history.bin holds of it).
    pub(super) history_bytes: u64,
    /// The soak's growth over the load (server memory, harness RSS, results folder).
    pub(super) growth: Option<crate::report::growth::Growth>,
}

/// summary.json of a finished run, assembled once: the drive's figures, what the end observed,
/// the keys' fate (with the deletion's record when they are to be deleted); the verdict is the
/// judge's to fill in.
pub(super) fn summarize(
    plan: &Plan,
    opts: &RunOptions,
    driven: &Driven,
    observed: Observed,
    keys: KeysFate,
) -> RunSummary {
    let Observed { target, before, after, jobs, server, checked, shard, depths, queue_time, history_bytes, growth } =
        observed;
    let metrics = &driven.metrics;
    let mut scenario = plan.scenario.clone();
    scenario.target = scenario.target.redacted();
    let enqueued = jobs[JobCounter::Enqueued.index()];
    let history_bytes_per_job = (enqueued > 0).then(|| history_bytes as f64 / enqueued as f64);
    let same_process = !driven.faults.injected.iter().any(|f| {
        matches!(
            f.kind,
            SpanKind::Injected(
                FaultKind::Restart
                    | FaultKind::Failover
                    | FaultKind::KillPrimary
                    | FaultKind::ClusterFailover
                    | FaultKind::Partition
            )
        )
    });
    let calls: u64 = metrics.scripts.iter().map(|s| s.calls()).sum();
    let (user_s, sys_s) = crate::metrics::cpu::cpu_seconds(crate::metrics::cpu::CpuOf::Process);
    let rfc = |t: SystemTime| humantime::format_rfc3339_millis(t).to_string();
    let mut scripts = scripts_of(metrics);
    // The producers' scripts are rated over the load phase (after warmup), the rest over the
    // whole measured run.
    crate::report::over_load_phase(&mut scripts, driven.load_secs - metrics.warmup_intervals as f64);
    let thresholds = crate::report::thresholds::evaluate(&plan.thresholds, &scripts, &driven.faults.injected);
    let producers = plan.producers.open_loop.as_ref().map(|open| {
        let late = all_jobs(metrics)[JobCounter::LateSends.index()];
        let jobs_bounded = matches!(plan.stop, scenario::Stop::Jobs(_));
        let (load, sent, never) = (driven.load_secs, driven.sent, driven.never_sent);
        ProducerRates::new(open.rate_per_sec, load, sent, never, late, jobs_bounded, driven.busy.clone())
            .with_server(server.saturated().map(|n| (n.node.as_str(), n.cpu_pct_mean)))
    });
    let series = steady::LoadSeries::of(metrics, depths, driven.load_secs);
    let shaped = plan.producers.open_loop.as_ref().is_some_and(|o| o.stages.is_some());
    let steady = Some(steady::judge(&series, producers.as_ref(), shaped, plan.consumers.count > 0));
    let system = Some(series.system_rates());
    let client = crate::report::client::ClientLoad::judge(&crate::report::client::ClientMeasures {
        window: Some(driven.host),
        busy: driven.busy.clone(),
        waited: driven.waited.clone(),
        late_fraction: producers.as_ref().map(|p| p.late_fraction),
        send_lag_p99_us: producers.as_ref().map(|_| scripts.iter().map(|s| s.send_lag_us.p99).max().unwrap_or(0)),
    });
    RunSummary {
        growth,
        running: false,
        schema_version: SCHEMA_VERSION,
        tool: format!("emq-bench {}", env!("CARGO_PKG_VERSION")),
        name: plan.name.clone(),
        seed: plan.seed,
        scenario: Some(scenario),
        started: rfc(driven.started),
        ended: rfc(driven.ended),
        interrupted: driven.interrupted.is_some(),
        interrupt_reason: driven.interrupted.as_ref().map(ToString::to_string),
        interrupt_kind: driven.interrupted.as_ref().map(|i| i.kind().to_string()),
        faults: driven.faults.clone(),
        // The deletion's record starts with the folder that says `deleting`.
        cleanup: (keys == KeysFate::Deleting).then(|| Cleanup::before(&plan.queues)),
        keys: Some(keys),
        verdict: None,
        write_errors: Vec::new(),
        drained: driven.drained,
        measured_secs: metrics.measured_secs(),
        warmup_secs: metrics.warmup_intervals,
        target,
        server_version: before.as_ref().map(|b| b.server_version.clone()),
        // Differences between two processes (a restart, a failover) mean nothing.
        server_cpu_s: before
            .as_ref()
            .zip(after.as_ref())
            .filter(|_| same_process)
            .map(|(b, a)| a.used_cpu_s - b.used_cpu_s),
        memory_bytes_per_job: before
            .as_ref()
            .zip(after.as_ref())
            .filter(|_| enqueued > 0 && same_process)
            .map(|(b, a)| (a.used_memory as f64 - b.used_memory as f64) / enqueued as f64),
        server_before: before,
        server_after: after,
        scripts,
        jobs: jobs_map(&jobs),
        jobs_measured: jobs_map(&metrics.jobs),
        producers,
        system,
        client: Some(client),
        steady,
        time_in_queue_us: queue_time.filter(|h| !h.is_empty()).map(crate::report::Percentiles::of),
        depths_end: driven.depths,
        check: checked.map(|outcome| outcome.summary(true)),
        history_bytes_per_job,
        thresholds,
        server_samples: Some(server),
        shard,
        fleet: None,
        harness: HarnessCpu {
            threads: opts.threads,
            user_s,
            sys_s,
            us_per_request: if calls > 0 { (user_s + sys_s) * 1e6 / calls as f64 } else { 0.0 },
        },
    }
}

/// What the end of a run found besides summary.json's figures, every part of it required (a
/// judge that missed one would pass what it did not see).
pub(super) struct EndFacts {
    /// Why the check could not run, if it could not (`None` and no check summary: skipped).
    pub(super) check_error: Option<String>,
    /// Run-lock leases lost while the run held them.
    pub(super) lock_lost: Vec<String>,
    /// Where kept keys can be looked at.
    pub(super) kept_hint: judge::KeptKeysHint,
}

/// What the judge reads of `summary`, `driven` and what the end found. `timeout` widens the
/// seconds a fault explains failures in.
pub(super) fn facts_of(
    summary: &RunSummary,
    driven: &Driven,
    timeout: std::time::Duration,
    end: EndFacts,
) -> judge::Facts {
    let check = match (end.check_error, &summary.check) {
        (Some(reason), _) => judge::CheckFate::NotRun(reason),
        (None, Some(check)) => judge::CheckFate::Ran { violations: check.violations_total },
        (None, None) => judge::CheckFate::Skipped,
    };
    // Failures an injected fault explains are judged by the checker, not the 1% rule: the grace
    // after a fault covers the calls that waited out the reply timeout (at most 10 s of it) and
    // the reconnect backoff (1 s).
    let grace = timeout.min(std::time::Duration::from_secs(10)) + std::time::Duration::from_secs(1);
    let explained = driven.faults.explained_errors(&driven.metrics, grace);
    judge::Facts {
        interrupted: summary.interrupt_reason.clone(),
        scripts: summary.scripts.clone(),
        jobs: summary.jobs.clone(),
        thresholds: summary.thresholds.clone(),
        explained: Script::ALL
            .iter()
            .filter(|s| explained[s.index()] > 0)
            .map(|s| (s.name().to_string(), explained[s.index()]))
            .collect(),
        injected: driven.faults.injected.clone(),
        producers: summary.producers.clone(),
        drained: summary.drained,
        depths_end: driven.depths,
        oldest_unfinished_s: summary.check.as_ref().and_then(|c| c.oldest_unfinished_s),
        check,
        lock_lost: end.lock_lost,
        write_errors: summary.write_errors.clone(),
        keys: summary.keys.clone(),
        kept_hint: end.kept_hint,
    }
}

/// Judges again after the end found more (files not written, keys not deleted), rewrites
/// summary.json with it and renders report.html again from it, so neither keeps saying what
/// the first verdict said. Best effort (the small file may still fit where large ones did
/// not); when summary.json cannot be rewritten, report.html and then summary.json itself are
/// removed: a folder without a summary is incomplete, one whose summary says "passed" for a
/// failed run lies.
pub(super) fn amend(dir: &Path, summary: &mut RunSummary, facts: &mut judge::Facts, rules: &judge::Rules) {
    facts.keys = summary.keys.clone();
    summary.verdict = Some(judge::judge(facts, rules));
    let path = dir.join(SUMMARY_FILE);
    if write_json(&path, summary).is_ok() {
        let _ = crate::html::write_report(dir);
        return;
    }
    let _ = std::fs::remove_file(dir.join(crate::html::REPORT_FILE));
    if write_json(&path, summary).is_err() {
        let _ = std::fs::remove_file(&path);
    }
}

/// A shard's record: its place in the fleet (`plan.shard`) and its start against `t0` on the
/// server's clock (`start`, from the barrier with the configuration it agreed on; `started`,
/// when its clock started); `end_clock`, the clock offset measured again after the run and how
/// many s after the start; `check`, whether the fleet runs the invariant check.
pub(super) fn shard_record(
    plan: &Plan,
    start: Option<&(crate::plane::barrier::Start, String)>,
    started: SystemTime,
    end_clock: Option<(crate::plane::barrier::ClockOffset, f64)>,
    check: bool,
) -> Option<crate::report::fleet::ShardRecord> {
    let (start, config) = (start.map(|(s, _)| s), start.map_or(String::new(), |(_, c)| c.clone()));
    let shard = plan.shard.as_ref()?;
    let range = |r: &crate::scenario::TaskRange| [r.first, r.count, r.total];
    let local_ms = started.duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64() * 1000.0);
    let (t0, offset, uncertainty, waited) = start
        .map_or((0, 0.0, 0.0, 0.0), |s| (s.t0_ms, s.clock.offset_ms, s.clock.uncertainty_ms, s.waited.as_secs_f64()));
    let started_ms = local_ms + offset;
    Some(crate::report::fleet::ShardRecord {
        group: shard.group.clone(),
        index: shard.index,
        shards: shard.count,
        queues: shard.mode.name().into(),
        producers: range(&shard.producers),
        consumers: range(&shard.consumers),
        job_numbers: [shard.numbers.stride, shard.numbers.offset],
        check,
        t0_unix_ms: t0,
        started_unix_ms: started_ms,
        start_offset_ms: if t0 > 0 { started_ms - t0 as f64 } else { 0.0 },
        clock_offset_ms: offset,
        clock_uncertainty_ms: uncertainty,
        waited_s: waited,
        config,
        clock_offset_end_ms: end_clock.map(|(clock, _)| clock.offset_ms),
        clock_end_after_s: end_clock.map_or(0.0, |(_, after)| after),
    })
}
