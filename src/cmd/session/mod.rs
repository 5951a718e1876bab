//! A prepared target that one or more repetitions run against: the resolved plan, the
//! embedded server (or the target URL resolved with its flags), the control connection, the
//! target's topology and the run lock. `run` (also `--repeat`) and
//! `ab` both drive their repetitions through [`Session::rep`].

mod assemble;
mod clean_up;
mod effects;
mod folder;
pub mod judge;
mod live_check;
mod observe;
pub mod options;
pub(crate) mod render;
pub mod writers;

pub use folder::{check_out, results_dir};
pub use options::RunOptions;

use super::Outcome;
use crate::bullmq::release;
use crate::error::AppError;
use crate::exposition::{Board, Tick};
use crate::faults::{Nemesis, Processes};
use crate::history::spool::HistorySpool;
use crate::history::HistoryParts;
use crate::keyspace::QueueKeys;
use crate::load::coordinator::{drive, DriveOptions, FleetDrain};
use crate::load::stop::StopSignal;
use crate::lua::Protocol;
use crate::metrics::{Cumulative, JobCounter, RunMetrics};
use crate::net::{ConnectOptions, Connector, Endpoint, Topology};
use crate::output::Progress;
use crate::plane::{self, Plane, PlaneError, RunLock};
use crate::probe::Probe;
use crate::report::growth::{folder_bytes, own_rss, GrowthSample, GrowthSampler};
use crate::report::live::LiveFolder;
use crate::report::run_summary::{all_jobs, RunSummary, TargetInfo};
use crate::report::{write_all, DepthSample, RunResults};
use crate::resp::ScriptRegistry;
use crate::scenario::{FaultKind, Plan};
use crate::server::{EmbeddedCluster, EmbeddedServer};
use crate::verdict::{KeptBecause, KeysFate};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;
use writers::run_writers;

/// The run's history in its results folder (written as it is recorded).
pub const HISTORY_FILE: &str = "history.bin";

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
    /// The run's `junit.xml` document (a repetition's, for `--repeat` to combine).
    pub junit: crate::ci::junit::Report,
}

/// The target and plan shared by the repetitions of one command.
pub struct Session {
    /// The run's queues.
    pub queues: Vec<QueueKeys>,
    /// The target's shape (standalone or cluster, its nodes).
    pub topology: Topology,
    embedded: Option<Arc<Mutex<EmbeddedServer>>>,
    /// The embedded cluster (`[target] cluster`), shared with the nemesis (which kills and
    /// restarts its nodes); every node is stopped when the last holder drops it.
    cluster: Option<Arc<Mutex<EmbeddedCluster>>>,
    nemesis: Option<Nemesis>,
    plane: Plane,
    lock: Option<RunLock>,
    /// The options the session was opened with (their plan with its final queues).
    options: RunOptions,
    /// The metrics endpoint's board, when `--metrics-addr` asked for one.
    board: Option<Arc<Board>>,
}

impl Session {
    /// Prepares the target for `options`: reads the script directories `lua_dirs` (one
    /// registry each, in order; `None` is the protocol's default, [`ScriptRegistry::default_for`]),
    /// starts the embedded server (or connects to the URL with its auth and TLS flags), reads
    /// the topology, loads every script on every node, takes the run lock of every queue, and
    /// refuses (or with `--force` deletes) existing keys of the run's queues. Input is checked
    /// before any server starts.
    ///
    /// Errors: scripts, server and target errors, a queue locked by another run (exit 2).
    pub async fn open(
        options: &RunOptions,
        lua_dirs: &[Option<&Path>],
    ) -> Result<(Session, Vec<Arc<ScriptRegistry>>), AppError> {
        for warning in options.warnings() {
            eprintln!("emq-bench: warning: {warning}");
        }
        let plan = (*options.plan).clone();
        let protocol = plan.protocol;
        let registries = lua_dirs
            .iter()
            .map(|dir| match dir {
                Some(dir) => ScriptRegistry::for_protocol(protocol, dir).map(Arc::new),
                None => ScriptRegistry::default_for(protocol).map(Arc::new),
            })
            .collect::<Result<Vec<_>, _>>()?;
        // Resolved before any server starts, so a bad URL or TLS file costs nothing.
        let flags = &options.flags;
        let resolved = match &options.url {
            Some(url) => Some(Connector::new(Endpoint::resolve(url, flags, |name| std::env::var(name).ok())?)?),
            None => None,
        };
        let cluster = match (&options.url, &options.cluster) {
            (None, Some(shape)) => Some(EmbeddedCluster::start(shape)?),
            _ => None,
        };
        let embedded = match (&options.url, &cluster) {
            (None, None) => Some(EmbeddedServer::start(&options.server)?),
            _ => None,
        };
        let connector = match resolved {
            Some(connector) => connector,
            None => {
                // A cluster is driven as a `--url` of one of its nodes would drive it.
                let url = match (&cluster, &embedded) {
                    (Some(cluster), _) => cluster.url(),
                    (None, embedded) => embedded.as_ref().expect("started").url(),
                };
                Connector::new(Endpoint::resolve(&url, flags, |_| None)?)?
            }
        };
        let connect = options.connect;
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
        // On a cluster, `queues = N` is spread over the primaries: the plan's final queues.
        let mut topology = plane.topology();
        let plan = match plan.queues_by_count() {
            Some(n) if topology.nodes.len() > 1 => {
                let names = plane::spread_names(n as usize, &topology, &plan.queue_prefix());
                plan.with_queues(names)
            }
            _ => plan,
        };
        let plan = Arc::new(plan);
        let queues = observe::queue_keys(&plan)?;
        for keys in &queues {
            topology.nodes[plane.node_of(keys)].queues.push(keys.queue.to_string());
        }
        // A `shared` fleet's shards hold the queues' lock together, under the fleet's id; any
        // other run's id is its own (two runs of one process in one second included).
        let lock = match &options.fleet {
            Some(fleet) if plan.shares_queues() => {
                RunLock::join_or_acquire(&plane, &queues, &plane::lock::fleet_run_id(&fleet.barrier.group)).await?
            }
            _ => {
                static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
                let run_id = format!(
                    "emq-bench pid {} run {} since {}",
                    std::process::id(),
                    RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                    humantime::format_rfc3339_seconds(SystemTime::now())
                );
                RunLock::acquire(&plane, &queues, &run_id).await?
            }
        };
        // A shard arriving after its fleet started is refused before --force deletes anything:
        // the keys it would delete are the evidence of the shard it replaces.
        if let Some(fleet) = options.fleet.as_ref().filter(|_| options.force) {
            let started = plane::barrier::started(&plane, &fleet.barrier.group).await.map_err(PlaneError::Call);
            match started {
                Ok(None) => {}
                Ok(Some(_)) => {
                    lock.release().await;
                    return Err(AppError::Usage(format!(
                        "fleet {}: has started without this shard; --force deletes nothing here (a shard restarted \
                         after the start cannot join)",
                        fleet.barrier.group
                    )));
                }
                Err(err) => {
                    lock.release().await;
                    return Err(err.into());
                }
            }
        }
        // A `shared` fleet's shard that joined the lease another shard took deletes nothing:
        // the keys may be that shard's fleet's, started or about to.
        let force = options.force && lock.created_all();
        if let Err(err) = plane::ensure_clean(&plane, &queues, force).await {
            lock.release().await;
            if options.force && !force {
                return Err(AppError::Usage(format!(
                    "{err}; --force deletes nothing here: another shard of this fleet holds the queues' lock (it \
                     cleans up; the keys may be the fleet's)"
                )));
            }
            return Err(err.into());
        }
        // A failover needs a replica to fail over to: started now, in sync before the clock starts.
        let replica = match (&embedded, plan.faults.iter().any(|f| f.kind == FaultKind::Failover)) {
            (Some(primary), true) => Some(observe::start_replica(&options.server, primary.port(), connect).await?),
            _ => None,
        };
        let embedded = embedded.map(|server| Arc::new(Mutex::new(server)));
        let cluster = cluster.map(|cluster| Arc::new(Mutex::new(cluster)));
        let nemesis = (!plan.faults.is_empty()).then(|| {
            let processes = Processes { server: embedded.clone(), replica, cluster: cluster.clone() };
            Nemesis::start(plan.faults.clone(), &plane, queues.clone(), processes)
        });
        let options = RunOptions { plan, ..options.clone() };
        let session =
            Session { queues, topology, embedded, cluster, nemesis, plane, lock: Some(lock), options, board: None };
        Ok((session, registries))
    }

    /// The resolved plan (flags applied, its queues final): the options' own, held once.
    pub fn plan(&self) -> &Arc<Plan> {
        &self.options.plan
    }

    /// Runs the next repetitions with `options` (a capacity probe's rate and length) on the
    /// session's target, queues and lock: the plan keeps the session's final queue names.
    pub fn set_options(&mut self, options: RunOptions) {
        let plan = (*options.plan).clone().with_queues(self.options.plan.queues.clone());
        self.options = RunOptions { plan: Arc::new(plan), ..options };
    }

    /// Posts every repetition's figures to `board` (the metrics endpoint's), from now on.
    pub fn expose(&mut self, board: Arc<Board>) {
        self.board = Some(board);
    }

    /// The target as results show it: `redis://user:***@host:port/db`, never the password.
    pub fn target_url(&self) -> String {
        self.plane.seed().connector().endpoint().display()
    }

    /// Releases the run lock (the locks otherwise expire within [`plane::lock::LOCK_TTL`]).
    /// After an abort (`stop`) the lock is left to expire: releasing it waits on the server,
    /// which may be the very thing that does not answer.
    pub async fn close(mut self, stop: &StopSignal) {
        if let Some(lock) = self.lock.take() {
            // A `shared` fleet's lock is the fleet's: the merge, which checks and deletes the
            // keys, releases it (else it expires).
            if !stop.is_aborted() && !self.options.plan.shares_queues() {
                lock.release().await;
            }
        }
        // After an abort the nemesis gets 2 s to end, as the load's own end gives it to undo a
        // lasting fault: one it cannot undo on a server that does not answer must not hold the
        // exit.
        if let Some(nemesis) = self.nemesis.take() {
            match stop.is_aborted() {
                true => {
                    nemesis.join_within(std::time::Duration::from_secs(2)).await;
                }
                false => nemesis.join().await,
            }
        }
    }

    /// Runs one repetition with the scripts of `registry` (read from `lua_dir`) into `dir`:
    /// drive, check, write the results folder (summary.json first: it is small and says the
    /// most; its keys say `deleting`), then delete the run's keys unless `keep` (the folder
    /// says `deleted` once they are gone). A stop signal ends the load early; a
    /// second one (an abort) also skips the check and the cleanup. The keys are kept whenever
    /// the folder could not be written completely, so `emq-bench check` can still look.
    ///
    /// Errors: keys of the run's queues at its start, a fleet's barrier, the folder not
    /// created. Load, check, write and cleanup failures are reported in the result (exit 1),
    /// never lose the folder.
    pub async fn rep(
        &mut self,
        registry: Arc<ScriptRegistry>,
        lua_dir: &Path,
        dir: &Path,
        keep: bool,
        stop: StopSignal,
    ) -> Result<(RunResult, RunMetrics), AppError> {
        let (plan, queues, opts) = (self.options.plan.clone(), self.queues.clone(), self.options.clone());
        plane::ensure_clean(&self.plane, &queues, false).await?;
        // INFO may be denied to a least-privilege user: the run goes on without server figures.
        let mut topology = self.topology.clone();
        let mut unavailable = Vec::new();
        let before = observe::node_info(&self.plane, &mut topology, observe::When::Before, &mut unavailable).await;
        // A fleet's shard waits here for the others (before its folder exists: a shard that
        // cannot start leaves nothing that looks like a run).
        let fleet_start = match &opts.fleet {
            Some(fleet) => {
                // Shards that run other scripts must not be merged as one fleet: the scripts'
                // SHA-1s join the configuration every shard must agree on.
                let mut me = fleet.barrier.clone();
                if !fleet.mixed_scripts {
                    let shas: Vec<&str> = registry.scripts().map(|s| registry.sha(s)).collect();
                    me.config = format!("{}-{:08x}", me.config, crc32fast::hash(shas.join(",").as_bytes()));
                }
                let say = |line: &str| eprintln!("emq-bench: {line}");
                match plane::barrier::wait(&self.plane, &me, stop.stopped(), say).await {
                    Ok(Some(start)) => Some((start, me.config)),
                    Ok(None) => {
                        return Err(AppError::Usage(format!(
                            "fleet {}: stopped at the barrier before the fleet started; nothing ran",
                            me.group
                        )))
                    }
                    Err(plane::barrier::BarrierError::Plane(err)) => return Err(err.into()),
                    Err(err) => return Err(AppError::Usage(err.to_string())),
                }
            }
            None => None,
        };
        std::fs::create_dir_all(dir).map_err(|source| AppError::Io { path: dir.display().to_string(), source })?;
        folder::copy_scenario(&opts.scenario_path, &opts.settings, plan.scenario.target.url.as_deref(), dir)?;
        // The history goes to disk as it is recorded: the run's memory holds none it closed,
        // and a run killed outright leaves all of it up to about a second before the kill.
        let history_path = dir.join(HISTORY_FILE);
        let header_at_start = observe::history_header(&plan, opts.keep_history, None);
        let (live, spooling) = live_check::start(&opts, &plan, dir, &header_at_start)?;
        let spool = HistorySpool::start_with(&history_path, &header_at_start, spooling)
            .map_err(|e| AppError::Usage(e.to_string()))?;
        let stop = live_check::stop_signal(stop, live.as_ref(), opts.fail_fast);
        // The per-second files and a running summary.json as the run goes, so a run killed
        // outright leaves a folder that renders.
        let live_folder = {
            let mut scenario = plan.scenario.clone();
            scenario.target = scenario.target.redacted();
            let target = TargetInfo {
                url: self.target_url(),
                protocol: registry.protocol().name().to_string(),
                durability: plan.durability.to_string(),
                embedded: self.embedded.is_some() || self.cluster.is_some(),
                ..TargetInfo::default()
            };
            let at_start = RunSummary::at_start(&plan.name, plan.seed, Some(scenario), target);
            let stages = plan.producers.open_loop.as_ref().and_then(|open| open.stages.clone());
            LiveFolder::start(dir, at_start, stages)
        };
        let live_depths = live_folder.depths();

        let progress = Progress::new(opts.quiet, opts.progress_every);
        // The server's side of the same seconds, on connections and a thread of its own.
        // The rows go to server.csv as they are taken only where the folder streams its
        // seconds (it writes them once the first second has come).
        let row_tap = live_folder.intervals().is_some().then(|| live_folder.server_rows());
        let probe = Probe::start(&self.plane, crate::probe::EVERY, Some(dir), row_tap);
        let board = self.board.clone();
        if let Some(board) = &board {
            board.watch_server(probe.latest());
            if let Some(live) = &live {
                board.watch_violations(live.findings.clone());
            }
        }
        let mut last_tick: Option<Tick> = None;
        let mut depth_log: Vec<DepthSample> = Vec::new();
        // The soak's growth: the server's memory (the probe's latest round), the harness's and
        // the results folder's, sampled every few seconds from the loop's once-a-second call.
        let mut growth = GrowthSampler::default();
        let server_rows = probe.latest();
        let drive_options = DriveOptions {
            registry: registry.clone(),
            threads: opts.threads,
            connect: opts.connect,
            give_up: opts.give_up,
            nemesis: self.nemesis.clone(),
            start_at: fleet_start.as_ref().map(|(start, _)| start.local_t0()),
            fleet_drain: match (&plan.shard, &fleet_start) {
                (Some(shard), Some((start, _))) if plan.shares_queues() => Some(FleetDrain {
                    group: shard.group.clone(),
                    t0_ms: start.t0_ms,
                    index: shard.index,
                    produces: shard.producers.count > 0,
                    producing_shards: opts.fleet.as_ref().map_or(1, |f| f.producing_shards),
                }),
                _ => None,
            },
            history_spill: Some(spool.spill()),
            interval_tap: live_folder.intervals(),
            expose_totals: board.is_some(),
        };
        let mut driven =
            drive(plan.clone(), drive_options, self.plane.clone(), queues.clone(), stop.clone(), |live, depths| {
                let t_s = live.elapsed.as_secs_f64();
                growth.offer(t_s, || GrowthSample {
                    t_s,
                    server_memory: {
                        let rows = server_rows.borrow();
                        let up: Vec<u64> =
                            rows.iter().filter_map(|r| Some(r.figures.as_ref()?.level.used_memory)).collect();
                        (!up.is_empty()).then(|| up.iter().sum())
                    },
                    client_rss: own_rss(),
                    results: folder_bytes(dir),
                });
                if let Some(depths) = depths {
                    depth_log.push(DepthSample { t_s: crate::probe::epoch_secs(SystemTime::now()), depths });
                    let _ = live_depths.send(DepthSample { t_s: live.elapsed.as_secs_f64(), depths });
                }
                if let Some(board) = &board {
                    let tick = Tick::of(&plan, live, depths, last_tick.as_ref());
                    board.post(tick.clone(), live.totals.clone());
                    last_tick = Some(tick);
                }
                progress.update(live, depths)
            })
            .await;
        progress.finish();
        if let Some(board) = &board {
            board.finish(Cumulative::of_run(&driven.metrics), driven.depths);
        }
        // Stopped before the final files are written: none of its writes comes after them.
        // The per-second series is read back from what it wrote (the run held none of it);
        // what it could not write or read back is missing from the folder.
        let streamed_errors = live_folder.finish(&mut driven.metrics);
        // The reconnect and unknown-outcome spans come from the series, whole only now.
        driven.faults.spans_again(&driven.metrics);
        let mut server = probe.finish(stop.is_aborted()).await;
        server.rebase(driven.metrics.start_wall);
        let zero = crate::probe::epoch_secs(driven.metrics.start_wall);
        depth_log.iter_mut().for_each(|d| d.t_s -= zero);
        let aborted = stop.is_aborted();
        // A `shared` fleet's merge puts every shard's events on the server's clock: the offset
        // measured again at the end gives the drift of this machine's clock over the run.
        let end_clock = match (&plan.shard, &fleet_start) {
            (Some(shard), Some(_)) if plan.shares_queues() && !aborted => {
                let conn = self.plane.conn_for_key(&plane::barrier::keys(&shard.group)[0]);
                let after_s = SystemTime::now().duration_since(driven.metrics.start_wall).unwrap_or_default();
                plane::barrier::clock_offset(&conn).await.ok().map(|clock| (clock, after_s.as_secs_f64()))
            }
            _ => None,
        };

        // A slot may have moved during the run: read the map again before the check and cleanup.
        if let Some(Err(err)) = stop.unless_aborted(self.plane.refresh()).await {
            unavailable.push(format!("the slot map after the run: {err}"));
        }
        let after = match before {
            Some(_) => stop
                .unless_aborted(observe::node_info(&self.plane, &mut topology, observe::When::After, &mut unavailable))
                .await
                .flatten(),
            None => None,
        };
        let target = TargetInfo {
            url: self.plane.seed().connector().endpoint().display(),
            topology,
            tls: self.plane.seed().tls_info(),
            unavailable,
            embedded: self.embedded.is_some() || self.cluster.is_some(),
            protocol: registry.protocol().name().to_string(),
            durability: self.options.plan.durability.to_string(),
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
            script_sha1: registry.scripts().map(|s| (s.name().to_string(), registry.sha(s).to_string())).collect(),
        };
        let header = observe::history_header(&plan, opts.keep_history, Some(&driven));
        // The history's last chunks and its final header: history.bin is whole from here on.
        let spooled = spool.finish(std::mem::take(&mut driven.streams), &header);
        let history_bytes = spooled.as_ref().map_or(0, |totals| totals.stream_bytes);
        // The writer has ended, so has the live check's input: its last write of
        // invariants.json comes before the end check's.
        let failed_fast = live.is_some_and(|live| live.finish(opts.fail_fast, &mut driven.interrupted));
        // A `shared` fleet's check needs every shard's history: the merge runs it.
        let no_check = !opts.check || plan.shares_queues();
        // The history for the check and the time each job waited in the queue, read back from
        // the file (in parts by job number when it is larger than --check-memory); a run without
        // the check reads none (reading it costs about as much per job as the load did, and
        // `--no-check` asks for the load's cost alone), so it has no time in queue.
        let history = match (aborted, no_check, &spooled) {
            (true, _, _) => Err("the run was aborted".to_string()),
            (false, true, _) => Err("the check was not asked for".to_string()),
            (false, false, Err(err)) => Err(format!("the history could not be written: {err}")),
            (false, false, Ok(_)) => {
                HistoryParts::read(&history_path, opts.check_memory_bytes, dir).map_err(|e| e.to_string())
            }
        };
        let queue_time = history.as_ref().ok().and_then(|h| crate::report::queue_time::time_in_queue(h).ok());
        let checked = match stop
            .unless_aborted(observe::check_run(
                history.as_ref().map_err(String::as_str),
                &driven,
                &self.plane,
                &queues,
                no_check,
            ))
            .await
        {
            Some(checked) => checked,
            None => Err("the run was aborted".to_string()),
        };
        // The failover table: what each injected fault did, from the history and the check.
        let mut attributed = Ok(());
        if let (Ok(history), Ok(Some(outcome))) = (&history, &checked) {
            attributed =
                effects::attribute(&mut driven.faults.injected, history, &driven.metrics, &outcome.report.violations);
        }
        drop(history);
        let check_error = checked.as_ref().err().cloned();
        let checked = checked.ok().flatten();
        let mut jobs = all_jobs(&driven.metrics);
        if let Some(outcome) = &checked {
            // reap's reply counts stall failures among the reaped; the scan tells them apart.
            jobs[JobCounter::FailedByStall.index()] = outcome.failed_by_stall;
        }
        if let Some(board) = &board {
            // summary.json's jobs exactly: the check's scan filled in failed_by_stall.
            board.finish(Cumulative::of(&driven.metrics.scripts, jobs), driven.depths);
        }
        // A lease lost mid-run means another run may be on these queues now: its keys are not
        // ours to delete, and this run's verdict cannot stand.
        let lost = self.lock.as_ref().map(RunLock::lost).unwrap_or_default();
        // A `shared` fleet's shard keeps them for the merge's check, unless a reason of its
        // own comes first: the merge then keeps them too. A file the run could not write as it
        // went (the history, a per-second file) leaves the folder incomplete whatever else
        // follows (the check cannot run without the history), and the keys its evidence.
        let keys = judge::keys_fate(&judge::KeysEnd {
            keep,
            aborted,
            end_unreadable: driven.depths.is_none(),
            lock_lost: !lost.is_empty(),
            fleet_check: plan.shares_queues(),
            folder_incomplete: spooled.is_err() || !streamed_errors.is_empty(),
            check_not_run: check_error.is_some(),
            failed_fast,
        });

        // Assemble and judge: summary.json says everything, its verdict included.
        let shard =
            assemble::shard_record(&plan, fleet_start.as_ref(), driven.metrics.start_wall, end_clock, opts.check);
        let observed = assemble::Observed {
            target,
            before,
            after,
            jobs,
            server: server.summary(),
            checked: checked.as_ref(),
            shard,
            depths: &depth_log,
            queue_time: queue_time.as_ref(),
            history_bytes,
            growth: growth.growth(driven.metrics.warmup_intervals as f64, driven.load_secs),
        };
        let mut summary = assemble::summarize(&plan, &opts, &driven, observed, keys);
        let rules = judge::Rules::of(&plan, keep);
        let end = assemble::EndFacts {
            check_error,
            lock_lost: lost,
            kept_hint: judge::KeptKeysHint {
                embedded: self.embedded.is_some() || self.cluster.is_some(),
                url: summary.target.url.clone(),
                queues: plan.queues.clone(),
            },
        };
        let mut facts = assemble::facts_of(&summary, &driven, opts.timeout(), end);
        summary.verdict = Some(judge::judge(&facts, &rules));
        let gates = judge::gates(&facts, &rules);

        // Write: every file of the folder through one seam, summary.json first and history.bin
        // last. A file not written keeps the keys (the evidence) and is itself a finding.
        // The finished model with the summary as it stands (the verdict may be amended below).
        macro_rules! results {
            ($summary:expr) => {
                RunResults {
                    summary: $summary,
                    metrics: &driven.metrics,
                    server: &server,
                    depths: &depth_log,
                    invariants: checked.as_ref().map(|outcome| &outcome.report),
                    stages: plan.producers.open_loop.as_ref().and_then(|open| open.stages.as_ref()),
                    gates: &gates,
                }
            };
        }
        let mut write_errors = write_all(dir, &results!(&summary), &run_writers());
        write_errors.extend(streamed_errors);
        if let Err(err) = &spooled {
            write_errors.push(format!("cannot write {}: {err}", history_path.display()));
        }
        if let Err(err) = attributed {
            write_errors.push(format!("the failover table has no effects: {err}"));
        }
        let mut amended = false;
        if !write_errors.is_empty() {
            if !summary.keys_kept() {
                summary.keys = Some(KeysFate::Kept(KeptBecause::FolderIncomplete));
                summary.cleanup = None;
            }
            summary.write_errors = write_errors.clone();
            facts.write_errors = write_errors;
            assemble::amend(dir, &mut summary, &mut facts, &rules);
            amended = true;
        }
        // Clean up: the run's keys, unless kept. The folder says `deleting` until it ends,
        // then what became of them.
        if !summary.keys_kept() {
            let progress = crate::output::Deletion::start(opts.quiet, opts.progress_every);
            clean_up::clean_up(&self.plane, &queues, dir, &mut summary, &progress).await;
            assemble::amend(dir, &mut summary, &mut facts, &rules);
            amended = true;
        }
        // What CI reads says the verdict summary.json says, amended or not (best effort, as the
        // amend itself: where these cannot be rewritten, the folder's write errors say why).
        if amended {
            let _ = write_all(dir, &results!(&summary), &crate::ci::run::verdict_writers());
        }
        // A repeated run's folder combines its repetitions' junit.xml.
        let junit = crate::ci::run::junit(&results!(&summary));

        // Render: the table, then the verdict's lines (main prints them after FAIL).
        let table = render::render_table(&summary, &plan, checked.as_ref(), dir);
        let failures = summary.verdict.as_ref().map(crate::verdict::Verdict::lines).unwrap_or_default();
        let outcome = if summary.passed() == Some(true) { Outcome::Success } else { Outcome::Failed };
        Ok((RunResult { dir: dir.to_path_buf(), summary, table, outcome, failures, junit }, driven.metrics))
    }
}
