//! `emq-bench run SCENARIO [--repeat N]`: one run, or N repetitions on a fresh server state
//! each (the run's keys removed in between), one results folder per repetition plus the
//! per-script histograms merged over all of them (percentiles are never averaged) and one
//! junit.xml of every repetition's cases.

pub use super::session::RepResult;
use super::session::{check_out, results_dir, RunOptions, Session};
use super::CommandOutcome;
use crate::cli::RunArgs;
use crate::error::AppError;
use crate::exposition::{MetricsEndpoint, RunInfo};
use crate::load::stop::StopSignal;
use crate::metrics::RunMetrics;
use crate::report::run_summary::{all_jobs, scripts_of};
use crate::report::{format_table, write_json, write_scripts_csv, ScriptSummary};
use crate::verdict::{Finding, Verdict};
use serde::Serialize;

/// `merged.json` of a repeated run: the repetitions and their merged per-script latencies.
#[derive(Debug, Serialize)]
pub struct Merged {
    /// Repetitions run (an interrupted one ends the series).
    pub repetitions: usize,
    /// Each repetition's folder name.
    pub folders: Vec<String>,
    /// Per script over all repetitions: calls and errors summed, percentiles from the merged
    /// histograms, ops/s = ok calls / the summed measured time.
    pub scripts: Vec<ScriptSummary>,
}

/// Runs a scenario end to end, `--repeat` times. A stop (Ctrl-C, or a plain future that
/// resolves) ends the current repetition early and skips the rest; every folder is still
/// written, marked interrupted. An abort (a second signal) also skips the check and cleanup.
///
/// Errors: scenario, scripts, server, target and results-folder errors (see [`AppError`]);
/// once load has started, failures are reported in the result, not as errors.
pub async fn run(args: RunArgs, stop: impl Into<StopSignal>) -> Result<RepResult, AppError> {
    let stop = stop.into();
    let options = RunOptions::resolve(&args)?;
    check_out(options.out.as_deref())?;
    super::exports::check(&args.export)?;
    // Bound before any server starts: a taken port costs nothing.
    let endpoint = match args.metrics.metrics_addr {
        Some(addr) => Some(MetricsEndpoint::bind(addr).map_err(|e| AppError::Usage(e.to_string()))?),
        None => None,
    };
    if let Some(endpoint) = &endpoint {
        crate::output::note("metrics", &format!("serving http://{}/metrics", endpoint.addr()));
    }
    let (mut session, registries) = Session::open(&options, &[options.lua_dir.as_deref()]).await?;
    if let Some(endpoint) = &endpoint {
        let plan = session.plan();
        let board = endpoint.board();
        board.set_info(RunInfo {
            scenario: plan.name.clone(),
            seed: plan.seed,
            target: session.target_url(),
            protocol: plan.protocol.name().to_string(),
        });
        session.expose(board);
    }
    // The lock is released however the repetitions end.
    let outcome = async {
        let registry = registries.into_iter().next().expect("one registry");
        let dir = results_dir(options.out.as_deref(), &session.plan().name)?;
        let repeat = options.repeat;
        if repeat == 1 {
            let mut result = session.rep(registry, &dir, options.keep, stop.clone()).await?.0;
            if let Some(fleet) = &options.fleet {
                // The last shard of the fleet to finish merges, and its exit code is the worse of
                // its own verdict and the fleet's: the fleet's check (a `shared` fleet has no
                // other), thresholds and missing shards fail a process a Job or CI reads. An
                // aborted shard marks its folder done and merges nothing (the abort asked
                // for nothing more on the server).
                let target = super::merge::FleetTarget {
                    url: options.url.clone().unwrap_or_default(),
                    flags: options.flags.clone(),
                };
                let merge = !stop.is_aborted();
                match super::merge::merge_when_complete(&dir, fleet.barrier.shards, target, merge).await {
                    Some(Ok(merged)) => {
                        result.table.push_str(&format!("\nthe fleet's shards are all done: merged\n{}", merged.table));
                        let said =
                            if merged.failures.is_empty() { "pass".to_string() } else { merged.failures.join("; ") };
                        result.table.push_str(&format!("fleet verdict: {said}\n"));
                        result.failures.extend(merged.failures.iter().map(|f| format!("fleet: {f}")));
                        if merged.outcome != CommandOutcome::Success {
                            result.outcome = CommandOutcome::Failed;
                        }
                    }
                    Some(Err(err)) => {
                        result.table.push_str(&format!("the fleet's merge failed: {err}\n"));
                        result.failures.push(format!("fleet: the merge failed: {err}"));
                        result.outcome = CommandOutcome::Failed;
                    }
                    None => {}
                }
            }
            export(&args, &mut result, None);
            return Ok(result);
        }
        let mut merged: Option<RunMetrics> = None;
        let mut folders = Vec::new();
        let mut last = None;
        // Every repetition's findings, each message prefixed with its folder: the series' verdict.
        let mut findings = Vec::new();
        // Every repetition's junit.xml suites, each named after its folder: the series' junit.xml.
        let mut junit = crate::ci::junit::Report::default();
        // The producers' windows summed over the repetitions: merged ops/s use the same
        // windows as each repetition's own.
        let mut load_window_s = 0.0;
        for k in 1..=repeat {
            let name = format!("rep-{k:03}");
            let keep = options.keep && k == repeat;
            let (result, metrics) = session.rep(registry.clone(), &dir.join(&name), keep, stop.clone()).await?;
            findings.extend(
                result
                    .summary
                    .verdict
                    .iter()
                    .flat_map(|v| &v.findings)
                    .map(|f| Finding { kind: f.kind, message: format!("{name}: {}", f.message) }),
            );
            junit.time_s += result.junit.time_s;
            junit.suites.extend(result.junit.suites.iter().map(|suite| crate::ci::junit::Suite {
                name: format!("{name} {}", suite.name),
                cases: suite.cases.clone(),
            }));
            load_window_s += result.summary.scripts.iter().find(|s| s.window == "load").map_or(0.0, |s| s.window_secs);
            folders.push(name);
            match merged.as_mut() {
                Some(all) => all.absorb(&metrics),
                None => merged = Some(metrics),
            }
            let interrupted = result.summary.interrupted;
            last = Some(result);
            if interrupted {
                break;
            }
        }
        let merged = merged.expect("at least one repetition");
        let mut scripts = scripts_of(&merged);
        crate::report::over_load_phase(&mut scripts, load_window_s);
        write_scripts_csv(&dir.join("scripts.csv"), &scripts)?;
        junit.name = format!("emq-bench run {} ({} repetitions)", session.plan().name, folders.len());
        junit.write(&dir.join(crate::ci::junit::JUNIT_FILE))?;
        write_json(
            &dir.join("merged.json"),
            &Merged { repetitions: folders.len(), folders: folders.clone(), scripts: scripts.clone() },
        )?;
        let mut last = last.expect("at least one repetition");
        let mut table = format!("{} repetitions, histograms merged:\n", folders.len());
        table.push_str(&format_table(&scripts, &all_jobs(&merged), merged.warmup_intervals));
        table.push_str(&format!(
            "results: {} ({}/ each; merged.json, scripts.csv and junit.xml over all)\n",
            dir.display(),
            "rep-NNN"
        ));
        last.table = table;
        last.dir = dir;
        // The last repetition's summary speaks for the series (`--json` prints it): its verdict
        // is the series', as the exit code is.
        let verdict = Verdict::of(findings);
        last.outcome = if verdict.passed { CommandOutcome::Success } else { CommandOutcome::Failed };
        last.failures = verdict.lines();
        last.summary.verdict = Some(verdict);
        export(&args, &mut last, Some(&scripts));
        Ok(last)
    }
    .await;
    session.close(&stop).await;
    if let Some(endpoint) = endpoint {
        linger(endpoint, args.metrics.metrics_linger, &stop).await;
    }
    outcome
}

/// Keeps `endpoint` serving the final figures for `linger` (a stop, even one before the run
/// ended, cuts it short), then stops it.
async fn linger(endpoint: MetricsEndpoint, linger: std::time::Duration, stop: &StopSignal) {
    if !linger.is_zero() {
        tokio::select! {
            _ = tokio::time::sleep(linger) => {}
            _ = stop.stopped() => {}
        }
    }
    // The server thread ends within one scrape: joined off the runtime.
    let _ = tokio::task::spawn_blocking(move || drop(endpoint)).await;
}

/// Writes `--export-bmf` and `--export-gab` of a finished run: from `merged` (a repeated run's
/// histograms merged), else from the run's own summary. A file not written fails the run
/// (exit 1) with a line naming it; the results folder is written already.
fn export(args: &RunArgs, result: &mut RepResult, merged: Option<&[ScriptSummary]>) {
    let scripts = merged.unwrap_or(&result.summary.scripts);
    let name = &result.summary.name;
    let errors = super::exports::write(
        &args.export,
        || crate::ci::run::bmf(name, scripts),
        || crate::ci::run::gab(name, scripts),
    );
    if !errors.is_empty() {
        result.failures.extend(errors);
        result.outcome = CommandOutcome::Failed;
    }
}
