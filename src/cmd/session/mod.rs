//! A prepared target that one or more repetitions run against: the resolved plan, the
//! embedded server (or the target URL resolved with its flags), the control connection, the
//! target's topology and the run lock. `run` (also `--repeat`) and
//! `ab` both drive their repetitions through [`Session::rep`].

pub mod judge;
pub mod writers;

use super::Outcome;
use crate::check::{self, format_violations, CheckOutcome};
use crate::cli::{RunArgs, UNWISE_TIMEOUT};
use crate::error::AppError;
use crate::faults::{self, Nemesis};
use crate::history::{History, HistoryHeader};
use crate::load::run::{drive, DriveOptions, Driven};
use crate::load::stop::{Interruption, StopSignal};
use crate::metrics::{JobCounter, RunMetrics};
use crate::output::Progress;
use crate::probe::Probe;
use crate::protocol::ids::run_tag;
use crate::protocol::{release, ConnectOptions, Protocol, QueueKeys, QueueName, Script, ScriptRegistry};
use crate::report::rates::ProducerRates;
use crate::report::run_summary::SCHEMA_VERSION;
use crate::report::run_summary::SUMMARY_FILE;
use crate::report::run_summary::{all_jobs, jobs_map, scripts_of, HarnessCpu, RunSummary, TargetInfo};
use crate::report::{format_table, write_all, write_json, DepthSample, RunResults};
use crate::scenario::{self, FaultKind, Plan, TargetPlan};
use crate::server::{EmbeddedServer, ServerOptions};
use crate::target::{self, Connector, InfoSnapshot, Plane, Route, RunLock, Target, Topology};
use crate::verdict::{KeptBecause, KeysFate, Verdict};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;
use writers::run_writers;

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
    if plan.protocol == Protocol::BullMq {
        if plan.consumers.batch > 1 {
            out.push(format!(
                "consumers.batch = {}: BullMQ's moveToActive takes one job per call, so each claim takes one",
                plan.consumers.batch
            ));
        }
        if let scenario::Backoff::Exponential { max, .. } = plan.consumers.backoff {
            out.push(format!(
                "consumers.backoff.exponential.max = {}: BullMQ's exponential backoff has no cap (2^attempts made x base)",
                humantime::format_duration(max)
            ));
        }
    }
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
    embedded: Option<Arc<Mutex<EmbeddedServer>>>,
    nemesis: Option<Nemesis>,
    plane: Plane,
    connect: ConnectOptions,
    lock: Option<RunLock>,
    args: RunArgs,
}

impl Session {
    /// Resolves the scenario and flags, reads the script directories `lua_dirs` (one registry
    /// each, in order; `None` is the protocol's default, [`Protocol::default_dir`]), starts the embedded server (or resolves the target URL with its auth
    /// and TLS flags), connects, reads the topology, takes the run lock of every queue, and
    /// refuses (or with `--force` deletes) existing keys of the run's queues. Input is checked
    /// before any server starts. Errors: scenario, scripts, server and target errors, a queue
    /// locked by another run (exit 2).
    pub async fn open(
        args: &RunArgs,
        lua_dirs: &[Option<&Path>],
    ) -> Result<(Session, Vec<Arc<ScriptRegistry>>), AppError> {
        let mut plan = scenario::load(&args.scenario)?.with_overrides(args.duration, args.seed)?;
        for warning in warnings(args, &plan) {
            eprintln!("emq-bench: warning: {warning}");
        }
        let protocol = plan.protocol;
        let registries = lua_dirs
            .iter()
            .map(|dir| {
                let dir = dir.unwrap_or(Path::new(protocol.default_dir()));
                ScriptRegistry::for_protocol(protocol, dir).map(Arc::new)
            })
            .collect::<Result<Vec<_>, _>>()?;
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
        // A pause or freeze as long as --give-up would end the run as unreachable: no soak.
        if let Some(fault) = plan
            .faults
            .iter()
            .find(|f| matches!(f.kind, FaultKind::Pause | FaultKind::Freeze) && f.duration >= args.give_up)
        {
            return Err(AppError::Usage(format!(
                "{}: a {} of {} would outlast --give-up ({}): the run would end as unreachable; \
                 shorten it or raise --give-up",
                args.scenario.display(),
                fault.kind.name(),
                humantime::format_duration(fault.duration),
                humantime::format_duration(args.give_up)
            )));
        }
        if let scenario::Stop::Duration(load) = plan.stop {
            for fault in plan.faults.iter().filter(|f| f.count_before(load) == 0) {
                eprintln!(
                    "emq-bench: warning: the {} fault at {} never fires: the load phase is {} long",
                    fault.kind.name(),
                    humantime::format_duration(fault.first),
                    humantime::format_duration(load)
                );
            }
        }
        // The scenario was checked without the flags: --url rules out the faults that act on
        // the embedded server's process.
        if let Some(fault) = plan.faults.iter().find(|f| f.kind.needs_embedded() && url_given.is_some()) {
            return Err(AppError::Usage(format!(
                "{}: a {} fault needs the embedded server, and --url names another (the harness can only \
                 freeze or restart a server it started)",
                args.scenario.display(),
                fault.kind.name()
            )));
        }
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
        // Only a kill-connections fault needs the load's connections named (CLIENT SETNAME,
        // which a least-privilege user may not be allowed).
        let client_name =
            plan.faults.iter().any(|f| f.kind == FaultKind::KillConnections).then(faults::load_client_name);
        let connect = ConnectOptions {
            response_timeout: args.timeout,
            transport: args.transport,
            client_name,
            ..ConnectOptions::default()
        };
        // The control connections stay unnamed: a kill-connections fault must not kill them.
        let plane = Plane::open(&connector, ConnectOptions { client_name: None, ..connect }).await?;
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
        // A failover needs a replica to fail over to: started now, in sync before the clock starts.
        let replica = match (&embedded, plan.faults.iter().any(|f| f.kind == FaultKind::Failover)) {
            (Some(primary), true) => Some(start_replica(&server_options(&plan, args), primary.port(), connect).await?),
            _ => None,
        };
        let embedded = embedded.map(|server| Arc::new(Mutex::new(server)));
        let nemesis =
            (!plan.faults.is_empty()).then(|| Nemesis::start(plan.faults.clone(), &plane, embedded.clone(), replica));
        let session =
            Session { plan, queues, topology, embedded, nemesis, plane, connect, lock: Some(lock), args: args.clone() };
        Ok((session, registries))
    }

    /// Releases the run lock (the locks otherwise expire within [`target::lock::LOCK_TTL`]).
    /// After an abort (`stop`) the lock is left to expire: releasing it waits on the server,
    /// which may be the very thing that does not answer.
    pub async fn close(mut self, stop: &StopSignal) {
        if let Some(lock) = self.lock.take() {
            if !stop.is_aborted() {
                lock.release().await;
            }
        }
        // After an abort the nemesis gets as long as the load's own end gave it (a fault it
        // cannot undo on a server that does not answer must not hold the exit).
        if let Some(nemesis) = self.nemesis.take() {
            match stop.is_aborted() {
                true => {
                    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), nemesis.join()).await;
                }
                false => nemesis.join().await,
            }
        }
    }

    /// Runs one repetition with the scripts of `registry` (read from `lua_dir`) into `dir`:
    /// drive, check, write the results folder (summary.json first: it is small and says the
    /// most), then delete the run's keys unless `keep`. A stop signal ends the load early; a
    /// second one (an abort) also skips the check and the cleanup. The keys are kept whenever
    /// the folder could not be written completely, so `emq-bench check` can still look.
    ///
    /// Errors: a failed key deletion (the server went away after the check). Load, check and
    /// write failures are reported in the result (exit 1), never lose the folder.
    pub async fn rep(
        &mut self,
        registry: Arc<ScriptRegistry>,
        lua_dir: &Path,
        dir: &Path,
        keep: bool,
        stop: StopSignal,
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
        // The server's side of the same seconds, on connections and a thread of its own.
        let probe = Probe::start(&self.plane, crate::probe::EVERY);
        let mut depth_log: Vec<DepthSample> = Vec::new();
        let opts = DriveOptions {
            registry: registry.clone(),
            threads: args.threads as usize,
            connect: self.connect,
            give_up: args.give_up,
            nemesis: self.nemesis.clone(),
        };
        let driven = drive(plan.clone(), opts, self.plane.clone(), queues.clone(), stop.clone(), |live, depths| {
            if let Some(depths) = depths {
                depth_log.push(DepthSample { t_s: crate::probe::epoch_secs(SystemTime::now()), depths });
            }
            progress.update(live, depths)
        })
        .await;
        progress.finish();
        let mut server = probe.finish().await;
        server.rebase(driven.metrics.start_wall);
        let zero = crate::probe::epoch_secs(driven.metrics.start_wall);
        depth_log.iter_mut().for_each(|d| d.t_s -= zero);
        let aborted = stop.is_aborted();

        // A slot may have moved during the run: read the map again before the check and cleanup.
        if let Some(Err(err)) = stop.unless_aborted(self.plane.refresh()).await {
            unavailable.push(format!("the slot map after the run: {err}"));
        }
        let after = match before {
            Some(_) => {
                stop.unless_aborted(node_info(&self.plane, &mut topology, "after", &mut unavailable)).await.flatten()
            }
            None => None,
        };
        let target = TargetInfo {
            url: self.plane.seed().connector().target().display(),
            topology,
            tls: self.plane.seed().tls_info(),
            unavailable,
            embedded: self.embedded.is_some(),
            protocol: registry.protocol().name(),
            lua_dir: lua_dir.display().to_string(),
            // The release beside the scripts (`<install>/commands`), else the one scripts/setup
            // installed (an edited copy elsewhere is compared with it).
            bullmq: (registry.protocol() == Protocol::BullMq)
                .then(|| {
                    registry
                        .dir()
                        .parent()
                        .and_then(|install| release::bullmq_release(&registry, install))
                        .or_else(|| release::bullmq_release(&registry, Path::new(release::BULLMQ_INSTALL)))
                })
                .flatten(),
            script_sha1: registry
                .scripts()
                .iter()
                .map(|s| (s.name().to_string(), registry.sha(*s).to_string()))
                .collect(),
        };
        let header = history_header(&plan, &driven);
        let checked = match stop.unless_aborted(check_run(&header, &driven, &self.plane, &queues, args.no_check)).await
        {
            Some(checked) => checked,
            None => Err("the run was aborted".to_string()),
        };
        let check_error = checked.as_ref().err().cloned();
        let checked = checked.ok().flatten();
        let mut jobs = all_jobs(&driven.metrics);
        if let Some(outcome) = &checked {
            // reap's reply counts stall failures among the reaped; the scan tells them apart.
            jobs[JobCounter::FailedByStall.index()] = outcome.failed_by_stall;
        }
        // A lease lost mid-run means another run may be on these queues now: its keys are not
        // ours to delete, and this run's verdict cannot stand.
        let lost = self.lock.as_ref().map(RunLock::lost).unwrap_or_default();
        let keys = if keep {
            KeysFate::Kept(KeptBecause::Keep)
        } else if aborted {
            KeysFate::Kept(KeptBecause::Aborted)
        } else if driven.depths.is_none() {
            KeysFate::Kept(KeptBecause::EndUnreadable)
        } else if !lost.is_empty() {
            KeysFate::Kept(KeptBecause::LockLost)
        } else if check_error.is_some() {
            KeysFate::Kept(KeptBecause::CheckNotRun)
        } else {
            KeysFate::Deleted
        };

        // Assemble and judge: summary.json says everything, its verdict included.
        let observed = Observed { target, before, after, jobs, server: server.summary(), checked: checked.as_ref() };
        let mut summary = summarize(&plan, &args, &driven, observed, keys);
        let rules = judge::Rules::of(&plan, keep);
        let mut facts = facts_of(&summary, &driven, args.timeout);
        facts.check = match (&check_error, &summary.check) {
            (Some(reason), _) => judge::CheckFate::NotRun(reason.clone()),
            (None, Some(check)) => judge::CheckFate::Ran { violations: check.violations_total },
            (None, None) => judge::CheckFate::Skipped,
        };
        facts.lock_lost = lost;
        facts.kept_hint = judge::KeptKeysHint {
            embedded: self.embedded.is_some(),
            url: summary.target.url.clone(),
            queues: plan.queues.clone(),
        };
        summary.verdict = judge::judge(&facts, &rules);

        // Write: every file of the folder through one seam, summary.json first and history.bin
        // last. A file not written keeps the keys (the evidence) and is itself a finding.
        let write_errors = write_all(
            dir,
            &RunResults {
                summary: &summary,
                metrics: &driven.metrics,
                server: &server,
                depths: &depth_log,
                invariants: checked.as_ref().map(|outcome| &outcome.report),
                history: (&header, &driven.streams),
            },
            &run_writers(),
        );
        if !write_errors.is_empty() {
            if !summary.keys.is_kept() {
                summary.keys = KeysFate::Kept(KeptBecause::FolderIncomplete);
            }
            summary.write_errors = write_errors.clone();
            facts.write_errors = write_errors;
            amend(dir, &mut summary, &mut facts, &rules);
        }
        // Clean up: the run's keys, unless kept.
        if !summary.keys.is_kept() {
            for keys in &queues {
                if let Err(err) = target::delete_queue(&mut self.plane.conn_for(keys), keys).await {
                    // The folder said "deleted": it says what happened instead.
                    let why = KeptBecause::DeletionFailed(format!("queue {}: {err}", keys.queue));
                    summary.keys = KeysFate::Kept(why);
                    amend(dir, &mut summary, &mut facts, &rules);
                    break;
                }
            }
        }

        // Render: the table, then the verdict's lines (main prints them after FAIL).
        let table = render_table(&summary, &plan, checked.as_ref(), dir);
        let failures = summary.verdict.lines();
        let outcome = if summary.verdict.passed { Outcome::Success } else { Outcome::Failed };
        Ok((RunResult { dir: dir.to_path_buf(), summary, table, outcome, failures }, driven.metrics))
    }
}

/// What the end of a run observed besides the drive itself, for [`summarize`].
struct Observed<'a> {
    target: TargetInfo,
    before: Option<InfoSnapshot>,
    after: Option<InfoSnapshot>,
    /// The job counters of the whole run, the check's stall failures in.
    jobs: [u64; JobCounter::COUNT],
    server: crate::probe::ServerSamples,
    checked: Option<&'a CheckOutcome>,
}

/// What the judge reads of `summary` and `driven`; the end's own facts (check, lock, hint)
/// are the caller's to add. `timeout` widens the seconds a fault explains failures in.
fn facts_of(summary: &RunSummary, driven: &Driven, timeout: std::time::Duration) -> judge::Facts {
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
        keys: Some(summary.keys.clone()),
        write_errors: summary.write_errors.clone(),
        ..judge::Facts::default()
    }
}

/// Judges again after the end found more (files not written, keys not deleted) and rewrites
/// summary.json with it: best effort, as the small file may still fit where large ones did not.
fn amend(dir: &Path, summary: &mut RunSummary, facts: &mut judge::Facts, rules: &judge::Rules) {
    facts.keys = Some(summary.keys.clone());
    summary.verdict = judge::judge(facts, rules);
    let _ = write_json(&dir.join(SUMMARY_FILE), summary);
}

/// The terminal's table of a finished run: the target, one row per script, the jobs, the
/// redirects, the producers' rates, the faults, the check and the folder.
fn render_table(summary: &RunSummary, plan: &Plan, checked: Option<&CheckOutcome>, dir: &Path) -> String {
    let jobs = jobs_array(&summary.jobs);
    let mut table = format!("target: {}, {}\n", summary.target.url, summary.target.topology.describe());
    table.push_str(&format_table(&summary.scripts, &jobs, summary.warmup_secs));
    let redirects = jobs[JobCounter::Redirects.index()];
    if redirects > 0 || summary.target.topology.kind == target::topology::Kind::Cluster {
        table.push_str(&format!("cluster redirects followed (MOVED, ASK, TRYAGAIN): {redirects}\n"));
    }
    if let Some(rates) = &summary.producers {
        table.push_str(&rates.line());
        table.push('\n');
    }
    table.push_str(&summary.faults.footer());
    if let Some(outcome) = checked {
        let names: Vec<&str> = plan.queues.iter().map(String::as_str).collect();
        table.push_str(&outcome.report.summary_line(&names));
        table.push('\n');
        if !outcome.report.is_clean() {
            table.push_str(&format_violations(&outcome.report.violations));
        }
    }
    table.push_str(&format!("results: {}\n", dir.display()));
    table
}

/// summary.json's job counters back in [`JobCounter`] order (absent ones 0).
fn jobs_array(jobs: &std::collections::BTreeMap<&'static str, u64>) -> [u64; JobCounter::COUNT] {
    let mut out = [0; JobCounter::COUNT];
    for counter in JobCounter::ALL {
        out[counter.index()] = jobs.get(counter.name()).copied().unwrap_or(0);
    }
    out
}

/// The history's header for `driven`.
fn history_header(plan: &Plan, driven: &Driven) -> HistoryHeader {
    HistoryHeader {
        seed: plan.seed,
        run_tag: run_tag(plan.seed),
        queues: plan.queues.clone(),
        drained: driven.drained,
        issued: driven.issued,
        max_attempts: plan.producers.max_attempts,
        must_finish: plan.consumers.count > 0 && driven.interrupted.is_none(),
        protocol: plan.protocol,
    }
}

/// Checks every invariant against the server and the run's history (merged in memory; the
/// file is written afterwards with the rest of the folder). Returns the outcome (None with
/// `--no-check`: `check --history` can run later), or why the check could not run.
async fn check_run(
    header: &HistoryHeader,
    driven: &Driven,
    plane: &Plane,
    queues: &[QueueKeys],
    no_check: bool,
) -> Result<Option<CheckOutcome>, String> {
    if no_check {
        return Ok(None);
    }
    if driven.depths.is_none() {
        return Err("the server could not be read at the end of the run".to_string());
    }
    let history = History::merge(header.clone(), &driven.streams).map_err(|e| e.to_string())?;
    check::check(plane, queues, Some(&history)).await.map(Some).map_err(|e| e.to_string())
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
        .map(|q| {
            QueueName::new(q)
                .map(|name| QueueKeys::for_protocol(name, plan.protocol))
                .map_err(|e| AppError::Usage(e.to_string()))
        })
        .collect()
}

/// How long a new replica may take to sync with its primary.
const REPLICA_SYNC_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

/// Starts an embedded server with `options` as a replica of the embedded primary on
/// `primary_port` (REPLICAOF), and waits until its link to the primary is up.
///
/// Errors: the server does not start, or does not sync within [`REPLICA_SYNC_WITHIN`].
async fn start_replica(
    options: &ServerOptions,
    primary_port: u16,
    connect: ConnectOptions,
) -> Result<EmbeddedServer, AppError> {
    let replica = EmbeddedServer::start(options)?;
    let connector = Connector::new(Target::resolve(&replica.url(), &target::TargetFlags::default(), |_| None)?)?;
    let mut conn = target::Control::connect(&connector, ConnectOptions { client_name: None, ..connect })
        .await
        .map_err(AppError::Prepare)?;
    let call = |e: redis::RedisError| AppError::Prepare(crate::protocol::CallError::from_redis(&e));
    redis::cmd("REPLICAOF").arg("127.0.0.1").arg(primary_port).exec_async(&mut conn).await.map_err(call)?;
    let deadline = std::time::Instant::now() + REPLICA_SYNC_WITHIN;
    loop {
        let info: String = redis::cmd("INFO").arg("replication").query_async(&mut conn).await.map_err(call)?;
        if info.lines().any(|l| l.trim() == "master_link_status:up") {
            return Ok(replica);
        }
        if std::time::Instant::now() > deadline {
            return Err(AppError::Usage(format!(
                "the replica for the failover fault (port {}) did not sync with the primary within {REPLICA_SYNC_WITHIN:?}",
                replica.port()
            )));
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

fn server_options(plan: &Plan, args: &RunArgs) -> ServerOptions {
    let mut config: Vec<(String, String)> = match &plan.target {
        TargetPlan::Embedded { options } => options.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        TargetPlan::Url(_) => Vec::new(),
    };
    config.extend(args.server.server_config.iter().cloned());
    ServerOptions { binary: args.server.server_bin.clone(), config, port: None }
}

/// What a run, `--repeat` or `ab` writes into its folder besides the run's own files (the
/// [`run_writers`]): a folder that holds any of them holds an earlier run's results, which a
/// new run must not mix its own into.
const OTHER_ENTRIES: [&str; 8] =
    ["merged.json", "compare.json", "compare.md", "compare.html", "rep-001", "A", "B", "warmup"];

/// Checks `--out` before any server is touched: it is created when missing (exit 2 when it
/// cannot be), and refused (exit 2) when it already holds an earlier run's results.
///
/// Errors: [`AppError::Usage`] naming the folder and what is in it.
pub fn check_out(out: Option<&Path>) -> Result<(), AppError> {
    let Some(dir) = out else { return Ok(()) };
    std::fs::create_dir_all(dir)
        .map_err(|e| AppError::Usage(format!("--out {}: cannot be created: {e}", dir.display())))?;
    let run_files = crate::report::writer::files(&run_writers());
    if let Some(found) = run_files.iter().chain(&OTHER_ENTRIES).find(|name| dir.join(name).exists()) {
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

/// summary.json of a finished run, assembled once: the drive's figures, what the end observed,
/// the keys' fate; the verdict is the judge's to fill in.
fn summarize(plan: &Plan, args: &RunArgs, driven: &Driven, observed: Observed, keys: KeysFate) -> RunSummary {
    let Observed { target, before, after, jobs, server, checked } = observed;
    let metrics = &driven.metrics;
    let mut scenario = plan.scenario.clone();
    scenario.target = scenario.target.redacted();
    let enqueued = jobs[JobCounter::Enqueued.index()];
    let history_bytes: usize = driven.streams.iter().map(Vec::len).sum();
    let history_bytes_per_job = (enqueued > 0).then(|| history_bytes as f64 / enqueued as f64);
    let same_process = !driven.faults.injected.iter().any(|f| f.kind == "restart" || f.kind == "failover");
    let calls: u64 = metrics.scripts.iter().map(|s| s.calls()).sum();
    let (user_s, sys_s) = crate::metrics::cpu::cpu_seconds(crate::metrics::cpu::CpuOf::Process);
    let rfc = |t: SystemTime| humantime::format_rfc3339_millis(t).to_string();
    let mut scripts = scripts_of(metrics);
    // The producers' scripts are rated over the load phase (after warmup), the rest over the
    // whole measured run.
    crate::report::over_load_phase(&mut scripts, driven.load_secs - metrics.warmup_intervals as f64);
    let thresholds = crate::report::thresholds::evaluate(&plan.thresholds, &scripts);
    let producers = plan.producers.open_loop.map(|open| {
        let late = all_jobs(metrics)[JobCounter::LateSends.index()];
        let jobs_bounded = matches!(plan.stop, scenario::Stop::Jobs(_));
        let (load, sent, never) = (driven.load_secs, driven.sent, driven.never_sent);
        ProducerRates::new(open.rate_per_sec, load, sent, never, late, jobs_bounded, driven.busy.clone())
    });
    RunSummary {
        schema_version: SCHEMA_VERSION,
        tool: format!("emq-bench {}", env!("CARGO_PKG_VERSION")),
        name: plan.name.clone(),
        seed: plan.seed,
        scenario,
        started: rfc(driven.started),
        ended: rfc(driven.ended),
        interrupted: driven.interrupted.is_some(),
        interrupt_reason: driven.interrupted.as_ref().map(ToString::to_string),
        interrupt_kind: driven.interrupted.as_ref().map(Interruption::kind),
        faults: driven.faults.clone(),
        keys,
        verdict: Verdict::of(Vec::new()),
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
        depths_end: driven.depths,
        check: checked.map(|outcome| outcome.summary(true)),
        history_bytes_per_job,
        thresholds,
        server_samples: Some(server),
        harness: HarnessCpu {
            threads: args.threads as usize,
            user_s,
            sys_s,
            us_per_request: if calls > 0 { (user_s + sys_s) * 1e6 / calls as f64 } else { 0.0 },
        },
    }
}
