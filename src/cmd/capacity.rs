//! `emq-bench capacity SCENARIO --slo ...`: the highest open-loop rate the target sustains while
//! every objective holds and the run is steady. One session (one embedded server, one lock),
//! one whole run per probe, each in a folder of its own; the search ([`crate::capacity`]) reads
//! their summaries and picks the next rate.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::session::{check_out, results_dir, RunOptions, Session};
use super::CommandOutcome;
use crate::capacity::{
    CapacityReport, NextProbe, ProbeOutcome, ProbeRecord, RateInterval, Search, SearchEnd, Slo, CAPACITY_FILE,
    CAPACITY_SCHEMA_VERSION, NOT_BINDING,
};
use crate::cli::capacity::CapacityArgs;
use crate::error::AppError;
use crate::load::stop::StopSignal;
use crate::output::note;
use crate::report::write_json;
use crate::resp::ScriptRegistry;

/// The lowest rate the search offers, jobs/s.
const FLOOR: f64 = 10.0;
/// The highest: the scenario's bound on `producers.rate`.
const CEILING: f64 = 1e7;
/// An undecided probe is run again twice as long, up to this many base lengths.
const LONGEST: u32 = 4;
/// A probe's drain is cut to this: a probe that cannot finish its backlog this fast was not
/// sustained anyway, and a long drain after an overloaded probe only spends the budget.
const PROBE_DRAIN: Duration = Duration::from_secs(5);

/// What `capacity` prints and returns.
pub struct CapacityRun {
    /// capacity.json's content.
    pub report: CapacityReport,
    /// The capacity folder (capacity.json, capacity.html, one folder per probe).
    pub dir: PathBuf,
    /// The table (stdout).
    pub table: String,
    /// 0: the answer found (or no rate sustained, exit 1); 1: a probe's check found a
    /// violation; 3: the budget or a stop ended the search first.
    pub outcome: CommandOutcome,
}

/// Clears `value` when it is what the environment variable `name` holds, read as clap reads it
/// (`parse`): clap took it from there, not from a flag. Says so on stderr.
fn leave_out_environment<T: PartialEq>(name: &str, value: &mut Option<T>, parse: impl Fn(&str) -> Option<T>) {
    let from_env = std::env::var(name).ok().and_then(|env| parse(&env));
    if value.is_some() && *value == from_env {
        eprintln!("emq-bench: capacity: ${name} is set; a search does not use it (only `run` does)");
        *value = None;
    }
}

/// Runs the search. Errors: bad flags or objectives (exit 2), scenario, scripts, server and
/// target errors; once probing has started, a probe's failures are its record, not errors.
pub async fn capacity(args: CapacityArgs, stop: impl Into<StopSignal>) -> Result<CapacityRun, AppError> {
    let stop = stop.into();
    let mut args = args;
    leave_out_run_environment(&mut args);
    let slos = args.slos.iter().map(|s| Slo::parse(s)).collect::<Result<Vec<_>, _>>().map_err(AppError::Usage)?;
    refuse_run_flags(&args)?;
    let base = RunOptions::resolve(&args.run)?;
    let start = check_plan(&args, &base, &slos)?;
    check_out(base.out.as_deref())?;
    let probe_options = ProbeOptions { args: &args, warmup: base.plan.warmup, drain: base.plan.drain.min(PROBE_DRAIN) };
    let first = probe_options.of(start, 1)?;
    let (mut session, registries) = Session::open(&first, &[first.lua_dir.as_deref()]).await?;
    let registry = registries.into_iter().next().expect("one registry");
    let outcome = async {
        let dir = results_dir(base.out.as_deref(), &format!("capacity-{}", base.plan.name))?;
        let mut searching = Searching {
            session: &mut session,
            registry: registry.clone(),
            dir: &dir,
            stop: &stop,
            slos: &slos,
            options: &probe_options,
            began: Instant::now(),
            overhead: Duration::from_secs(3),
            probes: Vec::new(),
            failed: None,
        };
        let mut search = Search::new(start, args.tolerance, FLOOR, CEILING);
        let ended = searching.search(&mut search).await;
        // A budget spent below a client-bound rate ends on what matters more: the harness's
        // host, not the deployment, topped the bracket.
        let ended = if ended == SearchEnd::Budget && search.client_bound() { SearchEnd::ClientBound } else { ended };
        let consumers = base.plan.consumers.count > 0;
        let Searching { began, probes, failed, .. } = searching;
        let (lo, hi) = (search.lo(), search.hi());
        let binding = hi
            .and_then(|hi| probes.iter().rev().find(|p| p.rate == hi && p.outcome == Some(ProbeOutcome::NotSustained)))
            .map(|p| p.reasons.iter().filter(|r| !r.starts_with(NOT_BINDING)).cloned().collect())
            .unwrap_or_default();
        let report = CapacityReport {
            schema_version: CAPACITY_SCHEMA_VERSION,
            tool: format!("emq-bench {}", env!("CARGO_PKG_VERSION")),
            scenario: base.plan.name.clone(),
            target: session.target_url(),
            protocol: registry.protocol().name().to_string(),
            slos: slos.iter().map(|s| s.text.clone()).collect(),
            workload: if consumers { "producers and consumers" } else { "producers only" }.to_string(),
            criteria: crate::capacity::criteria(consumers),
            sustainable_rate: lo.filter(|_| matches!(ended, SearchEnd::Found | SearchEnd::Ceiling)),
            interval: RateInterval { lo, hi },
            tolerance: args.tolerance,
            ended,
            binding,
            probe_secs: args.probe.as_secs_f64(),
            budget_secs: args.budget.as_secs_f64(),
            elapsed_secs: began.elapsed().as_secs_f64(),
            error: failed.as_ref().map(ToString::to_string),
            probes,
        };
        write_json(&dir.join(CAPACITY_FILE), &report)?;
        crate::html::capacity::write_capacity_html(&dir, &report)?;
        if let Some(err) = failed {
            note(
                "capacity",
                &format!("the search ended early; {} holds its probes", dir.join(CAPACITY_FILE).display()),
            );
            return Err(err);
        }
        Ok(finish(report, dir))
    }
    .await;
    session.close(&stop).await;
    outcome
}

/// What a CI job's environment sets for its runs (EMQ_EXPORT_BMF, ...) is not a flag given to
/// this search: it is left out, said once, instead of refusing the search.
fn leave_out_run_environment(args: &mut CapacityArgs) {
    let export = &mut args.run.export;
    leave_out_environment("EMQ_EXPORT_BMF", &mut export.export_bmf, |env| Some(PathBuf::from(env)));
    leave_out_environment("EMQ_EXPORT_GAB", &mut export.export_gab, |env| Some(PathBuf::from(env)));
    leave_out_environment("EMQ_METRICS_ADDR", &mut args.run.metrics.metrics_addr, |env| {
        crate::cli::metrics::parse_metrics_addr(env).ok()
    });
}

/// Refuses the run flags a search sets itself or cannot honour.
///
/// Errors: [`AppError::Usage`] naming the first such flag given.
fn refuse_run_flags(args: &CapacityArgs) -> Result<(), AppError> {
    let refused = [
        (args.run.rate.is_some(), "--rate: the search sets the rate (give --start-rate)"),
        (args.run.duration.is_some(), "--duration: the search sets each probe's length (give --probe)"),
        (args.run.repeat != 1, "--repeat: each probe is one run"),
        (args.run.shards.is_some_and(|n| n != 1), "--shards: a capacity search runs in one process"),
        (args.run.keep, "--keep: every probe deletes its keys before the next"),
        (args.run.no_check, "--no-check: a probe is sustained only when its invariant check passes"),
        (args.run.metrics.metrics_addr.is_some(), "--metrics-addr: only `run` serves the metrics endpoint"),
        (
            args.run.export.export_bmf.is_some() || args.run.export.export_gab.is_some(),
            "--export-bmf/--export-gab: a search has no one run to export (each probe's folder has its junit.xml)",
        ),
    ];
    match refused.iter().find(|(given, _)| *given) {
        Some((_, why)) => Err(AppError::Usage(format!("capacity: {why}"))),
        None => Ok(()),
    }
}

/// Checks the resolved plan `base` against the search before anything starts: every
/// objective on a script the load calls, no faults, no stages, a start rate in range and a
/// budget of at least one probe. Returns the start rate, jobs/s.
///
/// Errors: [`AppError::Usage`] naming what does not fit.
fn check_plan(args: &CapacityArgs, base: &RunOptions, slos: &[Slo]) -> Result<f64, AppError> {
    // An objective on a script the load never calls could only fail after a whole probe: the
    // plan says which scripts its load calls, so it is refused before anything starts.
    let called = crate::load::calls::scripts_called(&base.plan);
    if let Some(slo) = slos.iter().find(|slo| !called.iter().any(|s| s.name() == slo.script)) {
        return Err(AppError::Usage(format!(
            "--slo {:?}: {}: the scenario never calls {} (its load calls {}); an objective needs a script the \
             scenario calls",
            slo.text,
            args.run.scenario.display(),
            slo.script,
            called.iter().map(|s| s.name()).collect::<Vec<_>>().join(", ")
        )));
    }
    if !base.plan.faults.is_empty() {
        return Err(AppError::Usage(format!(
            "{}: capacity: the scenario has [[faults]]; a fault makes a probe unsteady by design, so no rate would \
             be sustained (remove them, or copy the scenario without them)",
            args.run.scenario.display()
        )));
    }
    if base.plan.producers.open_loop.as_ref().is_some_and(|o| o.stages.is_some()) {
        return Err(AppError::Usage(format!(
            "{}: capacity: the scenario has [[stages]]; the search offers one constant rate per probe (remove them)",
            args.run.scenario.display()
        )));
    }
    // A consumers-only scenario has no rate to offer: its question (how fast the consumers
    // drain a backlog) needs a preloaded backlog, which a probe cannot make yet.
    if base.plan.producers.count == 0 {
        return Err(AppError::Usage(format!(
            "{}: capacity: the scenario has no producers ([producers] count = 0); a search offers an open-loop \
             enqueue rate (give producers; without consumers the search judges the enqueues alone)",
            args.run.scenario.display()
        )));
    }
    let start = args.start_rate.or(base.plan.producers.open_loop.as_ref().map(|o| o.rate_per_sec)).unwrap_or(1000.0);
    if !(FLOOR..=CEILING).contains(&start) {
        return Err(AppError::Usage(format!("--start-rate {start}: expected {FLOOR} to {CEILING} jobs/s")));
    }
    let warmup = base.plan.warmup;
    let shortest = warmup + args.probe + Duration::from_secs(3);
    if args.budget < shortest {
        return Err(AppError::Usage(format!(
            "--budget {}: shorter than one probe (warmup {} + --probe {} + about 3 s to start, drain, check and write)",
            humantime::format_duration(args.budget),
            humantime::format_duration(warmup),
            humantime::format_duration(args.probe)
        )));
    }
    Ok(start)
}

/// The run options of each probe: the search's run flags with the probe's rate and length, its
/// output quiet and its drain cut to `drain`.
struct ProbeOptions<'a> {
    args: &'a CapacityArgs,
    /// The scenario's warmup, before every probe's load.
    warmup: Duration,
    drain: Duration,
}

impl ProbeOptions<'_> {
    /// A probe at `rate` jobs/s for `length` base probe lengths.
    ///
    /// Errors: the options do not resolve.
    fn of(&self, rate: f64, length: u32) -> Result<RunOptions, AppError> {
        let mut a = self.args.run.clone();
        a.rate = Some(rate);
        a.duration = Some(self.length(length));
        a.quiet = true;
        a.set.push(crate::scenario::settings::Setting {
            key: vec!["drain".to_owned()],
            value: toml::Value::String(humantime::format_duration(self.drain).to_string()),
        });
        RunOptions::resolve(&a)
    }

    /// A probe's run length for `length` base probe lengths: the warmup and the load.
    fn length(&self, length: u32) -> Duration {
        self.warmup + self.args.probe * length
    }
}

/// The search as it runs its probes on the session.
struct Searching<'a> {
    session: &'a mut Session,
    registry: Arc<ScriptRegistry>,
    /// The capacity folder.
    dir: &'a Path,
    stop: &'a StopSignal,
    slos: &'a [Slo],
    options: &'a ProbeOptions<'a>,
    began: Instant,
    /// Seconds a probe takes beyond its load phase (start, drain, check, files), learnt.
    overhead: Duration,
    /// Every probe run, in order.
    probes: Vec<ProbeRecord>,
    /// A probe that could not run (the target lost, keys appeared): the search ends, and
    /// capacity.json still records every probe before it.
    failed: Option<AppError>,
}

impl Searching<'_> {
    /// Probes the rates `search` asks for until it has its answer, the budget would be
    /// exceeded, a stop comes or a probe fails; an undecided probe is run again twice as long.
    async fn search(&mut self, search: &mut Search) -> SearchEnd {
        loop {
            let Some(mut probe) = search.next() else {
                return match (search.lo(), search.hi()) {
                    _ if search.client_bound() => SearchEnd::ClientBound,
                    (None, _) => SearchEnd::NoRate,
                    (Some(_), None) => SearchEnd::Ceiling,
                    (Some(_), Some(_)) => SearchEnd::Found,
                };
            };
            loop {
                match self.probe(probe).await {
                    Err(end) => return end,
                    Ok(Some(outcome)) => {
                        search.record(probe, outcome);
                        break;
                    }
                    Ok(None) => probe = NextProbe { length: probe.length * 2, ..probe },
                }
            }
        }
    }

    /// Runs `probe` and records it: `Ok(Some)` its outcome, `Ok(None)` undecided (run it again
    /// longer), `Err` how the search ends before or with it.
    async fn probe(&mut self, probe: NextProbe) -> Result<Option<ProbeOutcome>, SearchEnd> {
        let length = self.options.length(probe.length);
        if self.began.elapsed() + length + self.overhead > self.options.args.budget {
            return Err(SearchEnd::Budget);
        }
        if tokio::time::timeout(Duration::ZERO, self.stop.stopped()).await.is_ok() {
            return Err(SearchEnd::Stopped);
        }
        let index = self.probes.len() + 1;
        let folder = format!("probe-{index:02}-{:.0}", probe.rate);
        let (rate, step) = (probe.rate, probe.step.name());
        note(
            "capacity",
            &format!("probe {index}: {rate:.0} jobs/s for {} ({step})", humantime::format_duration(length)),
        );
        let t = Instant::now();
        let ran = match self.options.of(probe.rate, probe.length) {
            Ok(options) => {
                self.session.set_options(options);
                self.session.rep(self.registry.clone(), &self.dir.join(&folder), false, self.stop.clone()).await
            }
            Err(err) => Err(err),
        };
        let (result, metrics) = ran.map_err(|err| self.fail(err))?;
        self.overhead = t.elapsed().saturating_sub(length).max(Duration::from_secs(1));
        let summary = &result.summary;
        if let Some(slo) =
            self.slos.iter().find(|slo| !summary.scripts.iter().any(|s| s.script == slo.script && s.calls > 0))
        {
            return Err(self.fail(AppError::Usage(format!(
                "--slo {:?}: the scenario never called {} in probe {index}; an objective needs a script the \
                 scenario calls",
                slo.text, slo.script
            ))));
        }
        let mut record = ProbeRecord::of(index, probe, folder, summary, &metrics, self.slos);
        if let Some(b) = summary.producers.as_ref().and_then(|p| p.bottleneck.clone()) {
            record.reasons.push(format!("the rate was not held; bottleneck: {b}"));
        }
        let stopped = matches!(summary.interrupt_kind.as_deref(), Some("stopped" | "aborted"));
        if stopped {
            record.outcome = None;
            record.reasons.push("stopped".into());
        }
        let decided = match record.outcome {
            Some(outcome) => Some(outcome),
            None if stopped => None,
            None if probe.length * 2 <= LONGEST => None,
            None => {
                record.reasons.push("undecided at the longest probe: counted as not sustained".into());
                record.outcome = Some(ProbeOutcome::NotSustained);
                record.outcome
            }
        };
        note("capacity", &format!("probe {index}: {}", probe_line(&record)));
        self.probes.push(record);
        match stopped {
            true => Err(SearchEnd::Stopped),
            false => Ok(decided),
        }
    }

    /// Ends the search with a probe that could not run: `err` is kept for the end.
    fn fail(&mut self, err: AppError) -> SearchEnd {
        self.failed = Some(err);
        SearchEnd::ProbeFailed
    }
}

/// What the search prints and returns once capacity.json is written: its outcome, table and
/// folder `dir`.
fn finish(report: CapacityReport, dir: PathBuf) -> CapacityRun {
    let violations = report.probes.iter().any(|p| p.violations > 0);
    let outcome = match report.ended {
        _ if violations => CommandOutcome::Failed,
        SearchEnd::NoRate => CommandOutcome::Failed,
        SearchEnd::Budget | SearchEnd::Stopped | SearchEnd::ProbeFailed | SearchEnd::ClientBound => {
            CommandOutcome::Inconclusive
        }
        SearchEnd::Found | SearchEnd::Ceiling => CommandOutcome::Success,
    };
    let mut table = report.table();
    if violations {
        table.push_str("a probe's check found invariant violations: see its folder's invariants.json\n");
    }
    table.push_str(&format!("results: {} (capacity.json, capacity.html, probe-NN-RATE/ each)\n", dir.display()));
    CapacityRun { report, dir, table, outcome }
}

/// A probe's line on stderr as it ends: `sustained: finished 3 604/s, steady, claim.p99 0.912
/// ms [0.890, 0.934] ok`, or its reasons.
fn probe_line(p: &ProbeRecord) -> String {
    let outcome = match p.outcome {
        None => "undecided, a longer probe follows",
        Some(_) => p.outcome_word(),
    };
    let mut line = format!("{outcome}: achieved {:.0}/s, finished {:.0}/s", p.achieved_per_sec, p.completed_per_sec);
    if !p.reasons.is_empty() {
        line.push_str(&format!(" ({})", p.reasons.join("; ")));
    }
    line
}
