//! A prepared target that one or more repetitions run against: the resolved plan, the
//! embedded server (or the target URL resolved with its flags), the control connection, the
//! target's topology and the run lock. `run` (also `--repeat`) and
//! `ab` both drive their repetitions through [`Session::rep`].

use super::Outcome;
use crate::check::report::INVARIANTS_FILE;
use crate::check::{self, format_violations, write_invariants, CheckOutcome};
use crate::cli::{RunArgs, UNWISE_TIMEOUT};
use crate::error::AppError;
use crate::history::{self, History, HistoryHeader};
use crate::load::run::{drive, DriveOptions, Driven};
use crate::metrics::{JobCounter, RunMetrics};
use crate::output::Progress;
use crate::protocol::ids::run_tag;
use crate::protocol::{ConnectOptions, QueueKeys, QueueName, Script, ScriptRegistry};
use crate::report::run_summary::SCHEMA_VERSION;
use crate::report::run_summary::{all_jobs, jobs_map, scripts_of, write_results, HarnessCpu, RunSummary, TargetInfo};
use crate::report::{format_table, gates};
use crate::scenario::thresholds::ThresholdMetric;
use crate::scenario::{self, Plan, TargetPlan};
use crate::server::{EmbeddedServer, ServerOptions};
use crate::target::{self, Connector, InfoSnapshot, Plane, Route, RunLock, Target, Topology};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

/// What is legal but unwise in the flags and the plan, one message each: a `--timeout` under
/// [`UNWISE_TIMEOUT`], and [`Plan::warnings`].
fn warnings(args: &RunArgs, plan: &Plan) -> Vec<String> {
    let mut out = Vec::new();
    if args.timeout < UNWISE_TIMEOUT {
        out.push(format!(
            "--timeout {} is short: a server pause that long (a snapshot's fork, a slow network) fails every \
             request in flight, and the lock renewal, the invariant scan and the cleanup time out too",
            humantime::format_duration(args.timeout)
        ));
    }
    out.extend(plan.warnings());
    out
}

/// What one repetition prints and returns.
pub struct RunResult {
    /// The results folder.
    pub dir: PathBuf,
    /// summary.json's content.
    pub summary: RunSummary,
    /// The table (stdout).
    pub table: String,
    /// Success or failure (interrupted, a violation, a failed threshold, ...).
    pub outcome: Outcome,
    /// Why the outcome is a failure, one line each.
    pub failures: Vec<String>,
}

/// The target and plan shared by the repetitions of one command.
pub struct Session {
    /// The resolved scenario (flags applied).
    pub plan: Arc<Plan>,
    /// The run's queues.
    pub queues: Vec<QueueKeys>,
    /// The target's shape (standalone or cluster, its nodes).
    pub topology: Topology,
    embedded: Option<EmbeddedServer>,
    plane: Plane,
    connect: ConnectOptions,
    lock: Option<RunLock>,
    args: RunArgs,
}

impl Session {
    /// Resolves the scenario and flags, reads the script directories `lua_dirs` (one registry
    /// each, in order), starts the embedded server (or resolves the target URL with its auth
    /// and TLS flags), connects, reads the topology, takes the run lock of every queue, and
    /// refuses (or with `--force` deletes) existing keys of the run's queues. Input is checked
    /// before any server starts. Errors: scenario, scripts, server and target errors, a queue
    /// locked by another run (exit 2).
    pub async fn open(args: &RunArgs, lua_dirs: &[&Path]) -> Result<(Session, Vec<Arc<ScriptRegistry>>), AppError> {
        let mut plan = scenario::load(&args.scenario)?.with_overrides(args.duration, args.seed)?;
        for warning in warnings(args, &plan) {
            eprintln!("emq-bench: warning: {warning}");
        }
        let registries =
            lua_dirs.iter().map(|dir| ScriptRegistry::from_dir(dir).map(Arc::new)).collect::<Result<Vec<_>, _>>()?;
        // The target: a URL (flag, then scenario) or an embedded server started now.
        let url_given = args.url.clone().or(match &plan.target {
            TargetPlan::Url(url) => Some(url.clone()),
            TargetPlan::Embedded { .. } => None,
        });
        let flags = args.target.flags().merge(&plan.scenario.target.flags());
        if url_given.is_none() && flags != target::TargetFlags::default() {
            return Err(AppError::Usage("--user, --pass and the TLS flags need --url (or [target] url)".into()));
        }
        // Resolved before any server starts, so a bad URL or TLS file costs nothing.
        let resolved = match &url_given {
            Some(url) => Some(Connector::new(Target::resolve(url, &flags, |name| std::env::var(name).ok())?)?),
            None => None,
        };
        let embedded = match url_given {
            Some(_) => None,
            None => Some(EmbeddedServer::start(&server_options(&plan, args))?),
        };
        let connector = match resolved {
            Some(connector) => connector,
            None => {
                let url = embedded.as_ref().expect("started").url();
                Connector::new(Target::resolve(&url, &flags, |_| None)?)?
            }
        };
        let connect =
            ConnectOptions { response_timeout: args.timeout, transport: args.transport, ..ConnectOptions::default() };
        let plane = Plane::open(&connector, connect).await?;
        // Every script loads (and so compiles, and is permitted) on every node before anything
        // else: a user without SCRIPT LOAD, or a script the server refuses, is a clear error
        // now, not an interrupted run.
        for mut node in plane.nodes() {
            for registry in &registries {
                registry.load_all(&mut node).await.map_err(AppError::Prepare)?;
            }
        }
        let mut topology = plane.topology();
        if topology.nodes.len() > 1 {
            if let scenario::Queues::Count(n) = plan.scenario.queues {
                plan.queues = target::plane::spread_names(n as usize, &topology);
            }
        }
        let plan = Arc::new(plan);
        let queues = queue_keys(&plan)?;
        for keys in &queues {
            topology.nodes[plane.node_of(keys)].queues.push(keys.queue.to_string());
        }
        let run_id = format!(
            "emq-bench pid {} since {}",
            std::process::id(),
            humantime::format_rfc3339_seconds(SystemTime::now())
        );
        let lock = RunLock::acquire(&plane, &queues, &run_id).await?;
        if let Err(err) = target::ensure_clean(&plane, &queues, args.force).await {
            lock.release().await;
            return Err(err.into());
        }
        let session =
            Session { plan, queues, topology, embedded, plane, connect, lock: Some(lock), args: args.clone() };
        Ok((session, registries))
    }

    /// Releases the run lock (the locks otherwise expire within [`target::lock::LOCK_TTL`]).
    pub async fn close(mut self) {
        if let Some(lock) = self.lock.take() {
            lock.release().await;
        }
    }

    /// Runs one repetition with the scripts of `registry` (read from `lua_dir`) into `dir`:
    /// drive, save the history, check, write the results folder, then delete the run's keys
    /// unless `keep`. `shutdown` (Ctrl-C) ends it early; the folder is still written.
    ///
    /// Errors: results-folder and history errors; load failures are reported in the result.
    pub async fn rep(
        &mut self,
        registry: Arc<ScriptRegistry>,
        lua_dir: &Path,
        dir: &Path,
        keep: bool,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(RunResult, RunMetrics), AppError> {
        let (plan, queues, args) = (self.plan.clone(), self.queues.clone(), self.args.clone());
        target::ensure_clean(&self.plane, &queues, false).await?;
        // INFO may be denied to a least-privilege user: the run goes on without server figures.
        let mut topology = self.topology.clone();
        let mut unavailable = Vec::new();
        let before = node_info(&self.plane, &mut topology, "before", &mut unavailable).await;
        std::fs::create_dir_all(dir).map_err(|source| AppError::Io { path: dir.display().to_string(), source })?;
        copy_scenario(&args.scenario, plan.scenario.target.url.as_deref(), dir)?;

        let progress = Progress::new(args.quiet);
        let opts = DriveOptions {
            registry: registry.clone(),
            threads: args.threads as usize,
            connect: self.connect,
            give_up: args.give_up,
        };
        let driven = drive(plan.clone(), opts, self.plane.clone(), queues.clone(), shutdown, |live, depths| {
            progress.update(live, depths)
        })
        .await;
        progress.finish();

        // A slot may have moved during the run: read the map again before the check and cleanup.
        if let Err(err) = self.plane.refresh().await {
            unavailable.push(format!("the slot map after the run: {err}"));
        }
        let after = match before {
            Some(_) => node_info(&self.plane, &mut topology, "after", &mut unavailable).await,
            None => None,
        };
        let target = TargetInfo {
            url: self.plane.seed().connector().target().display(),
            topology,
            tls: self.plane.seed().tls_info(),
            unavailable,
            embedded: self.embedded.is_some(),
            lua_dir: lua_dir.display().to_string(),
            script_sha1: Script::ALL.iter().map(|s| (s.name().to_string(), registry.sha(*s).to_string())).collect(),
        };
        let mut summary = summarize(&plan, &args, target, &driven, before, after);
        let checked = check_run(&plan, dir, &driven, &self.plane, &queues, args.no_check).await;
        let check_error = match &checked {
            Ok(Err(reason)) => Some(reason.clone()),
            _ => None,
        };
        let checked = checked.map(|c| c.ok().flatten());
        summary.check = checked.as_ref().ok().and_then(|c| c.as_ref()).map(|outcome| outcome.summary(true));
        let mut jobs = all_jobs(&driven.metrics);
        if let Ok(Some(outcome)) = &checked {
            // reap's reply counts stall failures among the reaped; the scan tells them apart.
            jobs[JobCounter::FailedByStall.index()] = outcome.failed_by_stall;
            summary.jobs = jobs_map(&jobs);
        }
        let history_bytes: usize = driven.streams.iter().map(Vec::len).sum();
        let enqueued = summary.jobs.get("enqueued").copied().unwrap_or(0);
        summary.history_bytes_per_job = (enqueued > 0).then(|| history_bytes as f64 / enqueued as f64);
        let written = write_results(dir, &summary, &driven.metrics);
        // A lease lost mid-run means another run may be on these queues now: its keys are not
        // ours to delete, and this run's verdict cannot stand.
        let lost = self.lock.as_ref().map(RunLock::lost).unwrap_or_default();
        // The run's keys go whatever happened to the files: a failed write must not leave
        // them behind to block the next run.
        if !keep && driven.depths.is_some() && lost.is_empty() {
            for keys in &queues {
                target::delete_queue(&mut self.plane.conn_for(keys), keys).await.map_err(AppError::Prepare)?;
            }
        }
        let checked = checked?;
        written?;

        let mut failures = failures(&plan, &summary, &driven);
        failures.extend(lost.into_iter().map(|line| format!("run lock lost: {line} (its keys were kept)")));
        if let Some(reason) = check_error {
            failures.push(format!("the invariant check could not run: {reason}"));
        }
        let mut table = format!("target: {}, {}\n", summary.target.url, summary.target.topology.describe());
        table.push_str(&format_table(&summary.scripts, &jobs));
        let redirects = jobs[JobCounter::Redirects.index()];
        if redirects > 0 || summary.target.topology.kind == target::topology::Kind::Cluster {
            table.push_str(&format!("cluster redirects followed (MOVED, ASK, TRYAGAIN): {redirects}\n"));
        }
        if let Some(outcome) = &checked {
            let names: Vec<&str> = plan.queues.iter().map(String::as_str).collect();
            table.push_str(&outcome.report.summary_line(&names));
            table.push('\n');
            if !outcome.report.is_clean() {
                table.push_str(&format_violations(&outcome.report.violations));
                failures
                    .push(format!("{} invariant violations (all in invariants.json)", outcome.report.violations_total));
            }
        }
        table.push_str(&format!("results: {}\n", dir.display()));
        let outcome = if failures.is_empty() { Outcome::Success } else { Outcome::Failed };
        Ok((RunResult { dir: dir.to_path_buf(), summary, table, outcome, failures }, driven.metrics))
    }
}

/// Saves the history (`history.bin`) and, when the server can still be read, checks every
/// invariant against it (`invariants.json`). Returns the outcome (None when no check was
/// due), or why the check could not run. Errors: the history or `invariants.json` write.
async fn check_run(
    plan: &Plan,
    dir: &Path,
    driven: &Driven,
    plane: &Plane,
    queues: &[QueueKeys],
    no_check: bool,
) -> Result<Result<Option<CheckOutcome>, String>, AppError> {
    let header = HistoryHeader {
        seed: plan.seed,
        run_tag: run_tag(plan.seed),
        queues: plan.queues.clone(),
        drained: driven.drained,
        issued: driven.issued,
        max_attempts: plan.producers.max_attempts,
        must_finish: plan.consumers.count > 0 && driven.interrupted.is_none(),
    };
    let path = dir.join("history.bin");
    history::file::save(&path, &header, &driven.streams).map_err(|e| AppError::History(e.to_string()))?;
    if no_check {
        return Ok(Ok(None)); // `check --history` can run later
    }
    if driven.depths.is_none() {
        return Ok(Err("the server could not be read at the end of the run".to_string()));
    }
    let history = History::merge(header, &driven.streams).map_err(|e| AppError::History(e.to_string()))?;
    let outcome = match check::check(plane, queues, Some(&history)).await {
        Ok(outcome) => outcome,
        Err(err) => return Ok(Err(err.to_string())),
    };
    write_invariants(&dir.join(INVARIANTS_FILE), &outcome.report)?;
    Ok(Ok(Some(outcome)))
}

/// INFO of every node into `topology` (`when`: "before" or "after"), and their sum; `None` when
/// a node's INFO is denied or fails (said in `unavailable`).
async fn node_info(
    plane: &Plane,
    topology: &mut Topology,
    when: &str,
    unavailable: &mut Vec<String>,
) -> Option<InfoSnapshot> {
    let mut snapshots = Vec::new();
    for (node, mut conn) in topology.nodes.iter_mut().zip(plane.nodes()) {
        match target::info(&mut conn).await {
            Ok(snapshot) => {
                node.version = snapshot.server_version.clone();
                match when {
                    "before" => node.info_before = Some(snapshot.clone()),
                    _ => node.info_after = Some(snapshot.clone()),
                }
                snapshots.push(snapshot);
            }
            Err(err) => unavailable.push(format!("INFO of {} {when} the run: {err}", node.address)),
        }
    }
    (snapshots.len() == topology.nodes.len()).then(|| InfoSnapshot::sum(&snapshots))
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
    ServerOptions { binary: args.server.server_bin.clone(), config, port: None }
}

/// What a run, `--repeat` or `ab` writes into its folder: a folder that holds any of them
/// holds an earlier run's results, which a new run must not mix its own into.
const RESULT_ENTRIES: [&str; 13] = [
    "summary.json",
    "scripts.csv",
    "intervals.csv",
    "latency.hlog",
    "history.bin",
    "invariants.json",
    "merged.json",
    "compare.json",
    "compare.md",
    "rep-001",
    "A",
    "B",
    "warmup",
];

/// Checks `--out` before any server is touched: it is created when missing (exit 2 when it
/// cannot be), and refused (exit 2) when it already holds an earlier run's results.
///
/// Errors: [`AppError::Usage`] naming the folder and what is in it.
pub fn check_out(out: Option<&Path>) -> Result<(), AppError> {
    let Some(dir) = out else { return Ok(()) };
    std::fs::create_dir_all(dir)
        .map_err(|e| AppError::Usage(format!("--out {}: cannot be created: {e}", dir.display())))?;
    if let Some(found) = RESULT_ENTRIES.iter().find(|name| dir.join(name).exists()) {
        return Err(AppError::Usage(format!(
            "--out {}: it already holds an earlier run's results ({found}); choose an empty or new folder",
            dir.display()
        )));
    }
    Ok(())
}

/// `--out`, or `results/<UTC time>-<name>` (e.g. `results/20261130T054200Z-smoke`).
pub fn results_dir(args: &RunArgs, plan: &Plan) -> Result<PathBuf, AppError> {
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

/// Copies the scenario file into the results folder, with the password of its `[target] url`
/// (if it has one) masked: a result file never holds a password.
fn copy_scenario(scenario: &Path, url: Option<&str>, dir: &Path) -> Result<(), AppError> {
    let io = |path: &Path, source| AppError::Io { path: path.display().to_string(), source };
    let mut text = std::fs::read_to_string(scenario).map_err(|e| io(scenario, e))?;
    if let Some(url) = url {
        text = text.replace(url, &scenario::redact_url(url));
    }
    let to = dir.join("scenario.toml");
    std::fs::write(&to, text).map_err(|e| io(&to, e))?;
    Ok(())
}

fn summarize(
    plan: &Plan,
    args: &RunArgs,
    target: TargetInfo,
    driven: &Driven,
    before: Option<InfoSnapshot>,
    after: Option<InfoSnapshot>,
) -> RunSummary {
    let metrics = &driven.metrics;
    let mut scenario = plan.scenario.clone();
    scenario.target = scenario.target.redacted();
    let enqueued = all_jobs(metrics)[JobCounter::Enqueued.index()];
    let calls: u64 = metrics.scripts.iter().map(|s| s.calls()).sum();
    let (user_s, sys_s) = process_cpu();
    let rfc = |t: SystemTime| humantime::format_rfc3339_millis(t).to_string();
    let scripts = scripts_of(metrics);
    let thresholds = crate::report::thresholds::evaluate(&plan.thresholds, &scripts);
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
        target,
        server_version: before.as_ref().map(|b| b.server_version.clone()),
        server_cpu_s: before.as_ref().zip(after.as_ref()).map(|(b, a)| a.used_cpu_s - b.used_cpu_s),
        memory_bytes_per_job: before
            .as_ref()
            .zip(after.as_ref())
            .filter(|_| enqueued > 0)
            .map(|(b, a)| (a.used_memory as f64 - b.used_memory as f64) / enqueued as f64),
        server_before: before,
        server_after: after,
        scripts,
        jobs: jobs_map(&all_jobs(metrics)),
        depths_end: driven.depths,
        check: None,
        history_bytes_per_job: None,
        thresholds,
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
fn failures(plan: &Plan, summary: &RunSummary, driven: &Driven) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(reason) = &driven.interrupted {
        out.push(format!("run interrupted: {reason}"));
    }
    let jobs = all_jobs(&driven.metrics);
    let corrupt = jobs[JobCounter::PayloadCorrupt.index()];
    if corrupt > 0 {
        out.push(format!("I4 payload-intact: {corrupt} claimed payloads differ from what was enqueued"));
    }
    for threshold in summary.thresholds.iter().filter(|t| !t.passed) {
        out.push(threshold.describe());
    }
    // Without any [thresholds], a run whose calls failed never passes (report::gates).
    let intent = gates::Intent { producers: plan.producers.count > 0, consumers: plan.consumers.count > 0 };
    let rate_gated = |script: &str| {
        plan.thresholds.iter().any(|t| match &t.metric {
            ThresholdMetric::ErrorRate { script: None } => true,
            ThresholdMetric::ErrorRate { script: Some(s) } => s == script,
            _ => false,
        })
    };
    out.extend(gates::failures(&summary.scripts, &summary.jobs, intent, rate_gated));
    let dup = jobs[JobCounter::DuplicateAccepted.index()];
    if dup > 0 {
        out.push(format!("I8 duplicate-enqueue: {dup} re-used ids were accepted as new jobs"));
    }
    // A run without consumers (an enqueue-only benchmark) has nothing to drain.
    if !summary.drained && !summary.interrupted && plan.consumers.count > 0 {
        let left = driven.depths.map(|d| d.unfinished()).unwrap_or(0);
        out.push(format!("drain incomplete: {left} jobs unfinished after the drain limit"));
    }
    out
}
