//! `emq-bench run SCENARIO`: resolve the scenario and flags into a plan, prepare the target
//! (embedded server or loopback URL, own keys only), drive the load, write the results folder
//! and print the table.

use super::Outcome;
use crate::cli::RunArgs;
use crate::error::AppError;
use crate::load::run::{drive, DriveOptions, Driven};
use crate::metrics::JobCounter;
use crate::output::Progress;
use crate::protocol::{client, ConnectOptions, QueueKeys, QueueName, Script, ScriptRegistry};
use crate::report::format_table;
use crate::report::run_summary::SCHEMA_VERSION;
use crate::report::run_summary::{all_jobs, jobs_map, scripts_of, write_results, HarnessCpu, RunSummary, TargetInfo};
use crate::scenario::{self, Plan, TargetPlan};
use crate::server::{EmbeddedServer, ServerOptions};
use crate::target::{self, InfoSnapshot};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

/// What `run` prints and returns.
pub struct RunResult {
    /// The results folder.
    pub dir: PathBuf,
    /// summary.json's content.
    pub summary: RunSummary,
    /// The table (stdout).
    pub table: String,
    /// Success or failure (interrupted, or an invariant the driver itself saw broken).
    pub outcome: Outcome,
    /// Why the outcome is a failure, one line each.
    pub failures: Vec<String>,
}

/// Runs a scenario end to end. `shutdown` (Ctrl-C) ends the run early; the results folder is
/// still written, marked as interrupted.
///
/// Errors: scenario, scripts, server, target and results-folder errors (see [`AppError`]);
/// once load has started, failures are reported in the results, not as errors.
pub async fn run(args: RunArgs, shutdown: impl Future<Output = ()>) -> Result<RunResult, AppError> {
    let plan = scenario::load(&args.scenario)?.with_overrides(args.duration, args.seed)?;
    let plan = Arc::new(plan);
    let registry = Arc::new(ScriptRegistry::from_dir(&args.lua_dir)?);
    let queues = queue_keys(&plan)?;

    // The target: a URL (flag, then scenario) or an embedded server started now.
    let url_given = args.url.clone().or(match &plan.target {
        TargetPlan::Url(url) => Some(url.clone()),
        TargetPlan::Embedded { .. } => None,
    });
    let embedded = match url_given {
        Some(_) => None,
        None => Some(EmbeddedServer::start(&server_options(&plan, &args))?),
    };
    let url = url_given.unwrap_or_else(|| embedded.as_ref().expect("started").url());
    target::check_loopback(&url)?;
    let connect = ConnectOptions { response_timeout: args.timeout, ..ConnectOptions::default() };
    let mut control = client::connect(&url, connect).await.map_err(AppError::Prepare)?;
    target::ensure_clean(&mut control, &queues, args.force).await?;
    let before = target::info(&mut control).await.map_err(AppError::Prepare)?;

    let dir = results_dir(&args, &plan)?;
    copy_scenario(&args.scenario, &dir)?;

    let progress = Progress::new(args.quiet);
    let opts = DriveOptions { url: url.clone(), registry: registry.clone(), threads: args.threads as usize, connect };
    let driven = drive(plan.clone(), opts, control.clone(), queues.clone(), shutdown, |live, depths| {
        progress.update(live, depths)
    })
    .await;
    progress.finish();

    let after = target::info(&mut control).await.ok();
    let summary = summarize(&plan, &args, &url, embedded.is_some(), &registry, &driven, before, after);
    write_results(&dir, &summary, &driven.metrics)?;
    if !args.keep && driven.depths.is_some() {
        for keys in &queues {
            target::delete_queue(&mut control, keys).await.map_err(AppError::Prepare)?;
        }
    }
    drop(embedded);

    let failures = failures(&summary, &driven);
    let mut table = format_table(&summary.scripts, &all_jobs(&driven.metrics));
    table.push_str(&format!("results: {}\n", dir.display()));
    let outcome = if failures.is_empty() { Outcome::Success } else { Outcome::Failed };
    Ok(RunResult { dir, summary, table, outcome, failures })
}

fn queue_keys(plan: &Plan) -> Result<Vec<QueueKeys>, AppError> {
    plan.queues
        .iter()
        .map(|q| QueueName::new(q).map(QueueKeys::new).map_err(|e| AppError::Usage(e.to_string())))
        .collect()
}

fn server_options(plan: &Plan, args: &RunArgs) -> ServerOptions {
    let mut config: Vec<(String, String)> = match &plan.target {
        TargetPlan::Embedded { options } => options.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        TargetPlan::Url(_) => Vec::new(),
    };
    config.extend(args.server.server_config.iter().cloned());
    ServerOptions { binary: args.server.server_bin.clone(), config }
}

/// `--out`, or `results/<UTC time>-<name>` (e.g. `results/20261130T054200Z-smoke`).
fn results_dir(args: &RunArgs, plan: &Plan) -> Result<PathBuf, AppError> {
    let dir = match &args.out {
        Some(dir) => dir.clone(),
        None => {
            let stamp: String = humantime::format_rfc3339_seconds(SystemTime::now())
                .to_string()
                .chars()
                .filter(|c| !matches!(c, '-' | ':'))
                .collect();
            Path::new("results").join(format!("{stamp}-{}", plan.name))
        }
    };
    std::fs::create_dir_all(&dir).map_err(|source| AppError::Io { path: dir.display().to_string(), source })?;
    Ok(dir)
}

fn copy_scenario(scenario: &Path, dir: &Path) -> Result<(), AppError> {
    let to = dir.join("scenario.toml");
    std::fs::copy(scenario, &to).map_err(|source| AppError::Io { path: to.display().to_string(), source })?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn summarize(
    plan: &Plan,
    args: &RunArgs,
    url: &str,
    embedded: bool,
    registry: &ScriptRegistry,
    driven: &Driven,
    before: InfoSnapshot,
    after: Option<InfoSnapshot>,
) -> RunSummary {
    let metrics = &driven.metrics;
    let mut scenario = plan.scenario.clone();
    scenario.target = scenario.target.redacted();
    let enqueued = all_jobs(metrics)[JobCounter::Enqueued.index()];
    let calls: u64 = metrics.scripts.iter().map(|s| s.calls()).sum();
    let (user_s, sys_s) = process_cpu();
    let rfc = |t: SystemTime| humantime::format_rfc3339_millis(t).to_string();
    RunSummary {
        schema_version: SCHEMA_VERSION,
        tool: format!("emq-bench {}", env!("CARGO_PKG_VERSION")),
        name: plan.name.clone(),
        seed: plan.seed,
        scenario,
        started: rfc(driven.started),
        ended: rfc(driven.ended),
        interrupted: driven.interrupted.is_some(),
        interrupt_reason: driven.interrupted.clone(),
        drained: driven.drained,
        measured_secs: metrics.measured_secs(),
        warmup_secs: metrics.warmup_intervals,
        target: TargetInfo {
            url: scenario::redact_url(url),
            embedded,
            lua_dir: args.lua_dir.display().to_string(),
            script_sha1: Script::ALL.iter().map(|s| (s.name().to_string(), registry.sha(*s).to_string())).collect(),
        },
        server_version: Some(before.server_version.clone()),
        server_cpu_s: after.as_ref().map(|a| a.used_cpu_s - before.used_cpu_s),
        memory_bytes_per_job: after
            .as_ref()
            .filter(|_| enqueued > 0)
            .map(|a| (a.used_memory as f64 - before.used_memory as f64) / enqueued as f64),
        server_before: Some(before),
        server_after: after,
        scripts: scripts_of(metrics),
        jobs: jobs_map(&all_jobs(metrics)),
        depths_end: driven.depths,
        harness: HarnessCpu {
            threads: args.threads as usize,
            user_s,
            sys_s,
            us_per_request: if calls > 0 { (user_s + sys_s) * 1e6 / calls as f64 } else { 0.0 },
        },
    }
}

/// User and system CPU of this process so far, seconds (getrusage(2)).
fn process_cpu() -> (f64, f64) {
    // SAFETY: getrusage writes into the zeroed struct we own; no other precondition.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(usage.ru_utime), secs(usage.ru_stime))
}

/// The reasons a finished run is a failure (exit 1).
fn failures(summary: &RunSummary, driven: &Driven) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(reason) = &driven.interrupted {
        out.push(format!("run interrupted: {reason}"));
    }
    let jobs = all_jobs(&driven.metrics);
    let corrupt = jobs[JobCounter::PayloadCorrupt.index()];
    if corrupt > 0 {
        out.push(format!("I4 payload-intact: {corrupt} claimed payloads differ from what was enqueued"));
    }
    let dup = jobs[JobCounter::DuplicateAccepted.index()];
    if dup > 0 {
        out.push(format!("I8 duplicate-enqueue: {dup} re-used ids were accepted as new jobs"));
    }
    if !summary.drained && !summary.interrupted {
        let left = driven.depths.map(|d| d.unfinished()).unwrap_or(0);
        out.push(format!("drain incomplete: {left} jobs unfinished after the drain limit"));
    }
    out
}
