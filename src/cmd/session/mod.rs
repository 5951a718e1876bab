//! A prepared target that one or more repetitions run against: the resolved plan, the
//! embedded server (or the target URL resolved with its flags), the control connection, the
//! target's topology and the run lock. `run` (also `--repeat`) and
//! `ab` both drive their repetitions through [`Session::rep`].

mod assemble;
mod clean_up;
mod effects;
mod every_second;
mod folder;
pub mod judge;
mod live_check;
mod observe;
pub mod options;
pub(crate) mod render;
pub mod writers;

pub use folder::{check_out, results_dir};
pub use options::RunOptions;

use super::CommandOutcome;
use crate::bullmq::release;
use crate::check::CheckOutcome;
use crate::error::AppError;
use crate::exposition::Board;
use crate::faults::{Nemesis, Processes};
use crate::history::file::HistoryFileError;
use crate::history::spool::{HistorySpool, SpoolTotals};
use crate::history::HistoryParts;
use crate::keyspace::QueueKeys;
use crate::load::coordinator::{drive, DriveOptions, Driven, FleetDrain};
use crate::load::stop::StopSignal;
use crate::lua::Protocol;
use crate::metrics::{Cumulative, JobCounter, RunMetrics};
use crate::net::{ConnectOptions, Connector, Endpoint, InfoSnapshot, Topology};
use crate::output::Progress;
use crate::plane::barrier::ClockOffset;
use crate::plane::{self, Plane, PlaneError, RunLock};
use crate::probe::{Probe, ServerSeries};
use crate::report::gates::GateResult;
use crate::report::growth::{Growth, GrowthSampler};
use crate::report::live::LiveFolder;
use crate::report::run_summary::{all_jobs, RunSummary, TargetInfo};
use crate::report::{write_all, DepthSample, RunResults};
use crate::resp::ScriptRegistry;
use crate::scenario::{FaultKind, Plan};
use crate::server::{EmbeddedCluster, EmbeddedServer};
use crate::verdict::{KeptBecause, KeysFate};
use every_second::EverySecond;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;
use writers::run_writers;

/// The run's history in its results folder (written as it is recorded).
pub const HISTORY_FILE: &str = "history.bin";

/// What one repetition prints and returns.
pub struct RepResult {
    /// The results folder.
    pub dir: PathBuf,
    /// summary.json's content.
    pub summary: RunSummary,
    /// The table (stdout).
    pub table: String,
    /// Success or failure (interrupted, a violation, a failed threshold, ...).
    pub outcome: CommandOutcome,
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

    /// Runs one repetition with the scripts of `registry` (read from its directory) into `dir`:
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
        dir: &Path,
        keep: bool,
        stop: StopSignal,
    ) -> Result<(RepResult, RunMetrics), AppError> {
        self.restore_cluster().await?;
        plane::ensure_clean(&self.plane, &self.queues, false).await?;
        // INFO may be denied to a least-privilege user: the run goes on without server figures.
        let mut target = self.target_info(&registry);
        let before =
            observe::node_info(&self.plane, &mut target.topology, observe::When::Before, &mut target.unavailable).await;
        let fleet_start = self.wait_for_fleet(&registry, &stop).await?;
        self.open_folder(dir)?;
        let (recording, stop) = self.start_recording(dir, stop)?;
        let mut loaded = self.load(&registry, dir, target.clone(), fleet_start.as_ref(), &recording, &stop).await;
        let end_clock = self.fleet_end_clock(fleet_start.as_ref(), loaded.driven.metrics.start_wall, &stop).await;
        let after = self.observe_after(before.is_some(), &mut target, &stop).await;
        let checked = self.check(recording, &mut loaded.driven, dir, &stop).await;
        let jobs = self.final_jobs(&loaded.driven, checked.outcome.as_ref());
        let lock_lost = self.lock.as_ref().map(RunLock::lost).unwrap_or_default();
        let keys = self.keys_fate(keep, stop.is_aborted(), &loaded, &checked, !lock_lost.is_empty());
        let ended = Ended { loaded, checked, target, before, after, fleet_start, end_clock, jobs, lock_lost };
        let mut assembled = self.assemble(&ended, keys, keep);
        let junit = self.write_folder(dir, &ended, &mut assembled).await;
        Ok(self.render(dir, ended, assembled, junit))
    }

    /// Starts again the embedded cluster's nodes that a fault of an earlier repetition killed
    /// ([`EmbeddedCluster::restore`]), so every repetition's faults meet a primary with its
    /// replicas, not a cluster worn down by the kills before (a primary left without a replica
    /// is never failed over: its slots stay down).
    ///
    /// Errors: a node that does not start again, or a cluster that does not settle.
    async fn restore_cluster(&self) -> Result<(), AppError> {
        let Some(cluster) = &self.cluster else { return Ok(()) };
        let restarted = cluster.lock().expect("cluster").restore()?;
        if restarted > 0 {
            // The slot map and the replicas the load connects to, read again: a node that was
            // dead when they were last read is a replica now.
            let _ = self.plane.refresh().await;
            if !self.options.quiet {
                let line = format!("started again {restarted} node(s) a fault killed before this run");
                crate::output::note("cluster", &line);
            }
        }
        Ok(())
    }

    /// Whether the target is a server or cluster this process started (its keys' hint and the
    /// results say so).
    fn embedded_target(&self) -> bool {
        self.embedded.is_some() || self.cluster.is_some()
    }

    /// The target as a repetition with `registry`'s scripts describes it, topology and
    /// unavailable figures as the session knows them before the run (the run's end adds its own).
    fn target_info(&self, registry: &ScriptRegistry) -> TargetInfo {
        TargetInfo {
            url: self.target_url(),
            topology: self.topology.clone(),
            tls: self.plane.seed().tls_info(),
            unavailable: Vec::new(),
            embedded: self.embedded_target(),
            protocol: registry.protocol().name().to_string(),
            durability: self.options.plan.durability.to_string(),
            lua_dir: registry.dir().display().to_string(),
            // The release beside the scripts (`<install>/commands`), else the one scripts/setup
            // installed (an edited copy elsewhere is compared with it).
            bullmq: (registry.protocol() == Protocol::BullMq)
                .then(|| {
                    registry
                        .dir()
                        .parent()
                        .and_then(|install| release::bullmq_release(registry, install))
                        .or_else(|| release::bullmq_release(registry, Path::new(release::BULLMQ_INSTALL)))
                })
                .flatten(),
            script_sha1: registry.scripts().map(|s| (s.name().to_string(), registry.sha(s).to_string())).collect(),
        }
    }

    /// A fleet's shard waits here for the others (before its folder exists: a shard that
    /// cannot start leaves nothing that looks like a run). Returns the fleet's start and the
    /// configuration the shards agreed on; `None` outside a fleet.
    ///
    /// Errors: stopped at the barrier, the barrier refused this shard or failed on the server.
    async fn wait_for_fleet(
        &self,
        registry: &ScriptRegistry,
        stop: &StopSignal,
    ) -> Result<Option<FleetStart>, AppError> {
        let Some(fleet) = &self.options.fleet else { return Ok(None) };
        // Shards that run other scripts must not be merged as one fleet: the scripts'
        // SHA-1s join the configuration every shard must agree on.
        let mut me = fleet.barrier.clone();
        if !fleet.mixed_scripts {
            let shas: Vec<&str> = registry.scripts().map(|s| registry.sha(s)).collect();
            me.config = format!("{}-{:08x}", me.config, crc32fast::hash(shas.join(",").as_bytes()));
        }
        let say = |line: &str| eprintln!("emq-bench: {line}");
        match plane::barrier::wait(&self.plane, &me, stop.stopped(), say).await {
            Ok(Some(start)) => Ok(Some((start, me.config))),
            Ok(None) => Err(AppError::Usage(format!(
                "fleet {}: stopped at the barrier before the fleet started; nothing ran",
                me.group
            ))),
            Err(plane::barrier::BarrierError::Plane(err)) => Err(err.into()),
            Err(err) => Err(AppError::Usage(err.to_string())),
        }
    }

    /// Creates the results folder `dir` with a copy of the scenario.
    ///
    /// Errors: the folder or the copy could not be written.
    fn open_folder(&self, dir: &Path) -> Result<(), AppError> {
        let opts = &self.options;
        std::fs::create_dir_all(dir).map_err(|source| AppError::Io { path: dir.display().to_string(), source })?;
        folder::copy_scenario(&opts.scenario_path, &opts.settings, opts.plan.scenario.target.url.as_deref(), dir)
    }

    /// Starts the run's history file in `dir` and the live check the history feeds; returns
    /// them with the stop signal the load follows (`stop`, or `--fail-fast`'s own).
    /// The history goes to disk as it is recorded: the run's memory holds none it closed, and
    /// a run killed outright leaves all of it up to about a second before the kill.
    ///
    /// Errors: the history file or the live check's thread could not be started.
    fn start_recording(&self, dir: &Path, stop: StopSignal) -> Result<(Recording, StopSignal), AppError> {
        let (opts, plan) = (&self.options, &self.options.plan);
        let history_path = dir.join(HISTORY_FILE);
        let header_at_start = observe::history_header(plan, opts.keep_history, None);
        let (live, spooling) = live_check::start(opts, plan, dir, &header_at_start)?;
        // A file that cannot be made in the folder just created is the machine's failure, not
        // the user's input: exit 1, as the folder's own.
        let spool = HistorySpool::start_with(&history_path, &header_at_start, spooling)
            .map_err(|e| AppError::History(e.to_string()))?;
        let stop = live_check::stop_signal(stop, live.as_ref(), opts.fail_fast);
        Ok((Recording { history_path, spool, live }, stop))
    }

    /// Drives the load into `dir` with the per-second files, the server probe and the metrics
    /// endpoint beside it, and ends them all: what the load left.
    async fn load(
        &self,
        registry: &Arc<ScriptRegistry>,
        dir: &Path,
        target: TargetInfo,
        fleet_start: Option<&FleetStart>,
        recording: &Recording,
        stop: &StopSignal,
    ) -> Loaded {
        let (opts, plan) = (&self.options, &self.options.plan);
        let live_folder = start_live_folder(plan, dir, target);
        let progress = Progress::new(opts.quiet, opts.progress_every);
        // The server's side of the same seconds, on connections and a thread of its own.
        // The rows go to server.csv as they are taken only where the folder streams its
        // seconds (it writes them once the first second has come).
        let row_tap = live_folder.intervals().is_some().then(|| live_folder.server_rows());
        let probe = Probe::start(&self.plane, crate::probe::EVERY, Some(dir), row_tap);
        if let Some(board) = &self.board {
            board.watch_server(probe.latest());
            if let Some(live) = &recording.live {
                board.watch_violations(live.findings.clone());
            }
        }
        let drive_options = DriveOptions {
            registry: registry.clone(),
            threads: opts.threads,
            connect: opts.connect,
            give_up: opts.give_up,
            nemesis: self.nemesis.clone(),
            start_at: fleet_start.map(|(start, _)| start.local_t0()),
            fleet_drain: self.fleet_drain(fleet_start),
            history_spill: Some(recording.spool.spill()),
            interval_tap: live_folder.intervals(),
            expose_totals: self.board.is_some(),
        };
        let mut every_second = EverySecond {
            plan,
            dir,
            progress: &progress,
            board: self.board.clone(),
            server_rows: probe.latest(),
            live_depths: live_folder.depths(),
            last_tick: None,
            depth_log: Vec::new(),
            growth: GrowthSampler::default(),
        };
        let (plane, queues) = (self.plane.clone(), self.queues.clone());
        let mut driven = drive(plan.clone(), drive_options, plane, queues, stop.clone(), |live, depths| {
            every_second.second(live, depths)
        })
        .await;
        progress.finish();
        if let Some(board) = &self.board {
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
        let EverySecond { mut depth_log, growth, .. } = every_second;
        let zero = crate::probe::epoch_secs(driven.metrics.start_wall);
        depth_log.iter_mut().for_each(|d| d.t_s -= zero);
        let growth = growth.growth(driven.metrics.warmup_intervals as f64, driven.load_secs);
        Loaded { driven, server, depth_log, growth, streamed_errors }
    }

    /// A `shared` fleet's shard drains with the fleet: who it is, and when the fleet started.
    fn fleet_drain(&self, fleet_start: Option<&FleetStart>) -> Option<FleetDrain> {
        let plan = &self.options.plan;
        match (&plan.shard, fleet_start) {
            (Some(shard), Some((start, _))) if plan.shares_queues() => Some(FleetDrain {
                group: shard.group.clone(),
                t0_ms: start.t0_ms,
                index: shard.index,
                produces: shard.producers.count > 0,
                producing_shards: self.options.fleet.as_ref().map_or(1, |f| f.producing_shards),
            }),
            _ => None,
        }
    }

    /// A `shared` fleet's merge puts every shard's events on the server's clock: the offset
    /// measured again at the end gives the drift of this machine's clock over the run (with
    /// the seconds since `start_wall` it was measured at). `None` elsewhere or after an abort.
    async fn fleet_end_clock(
        &self,
        fleet_start: Option<&FleetStart>,
        start_wall: SystemTime,
        stop: &StopSignal,
    ) -> Option<(ClockOffset, f64)> {
        let plan = &self.options.plan;
        match (&plan.shard, fleet_start) {
            (Some(shard), Some(_)) if plan.shares_queues() && !stop.is_aborted() => {
                let conn = self.plane.conn_for_key(&plane::barrier::keys(&shard.group)[0]);
                let after_s = SystemTime::now().duration_since(start_wall).unwrap_or_default();
                plane::barrier::clock_offset(&conn).await.ok().map(|clock| (clock, after_s.as_secs_f64()))
            }
            _ => None,
        }
    }

    /// The server after the run, into `target`: the slot map (a slot may have moved during
    /// the run: the check and cleanup need the map as it is now) and, when the run read them
    /// before (`read_before`), the nodes' INFO.
    async fn observe_after(
        &self,
        read_before: bool,
        target: &mut TargetInfo,
        stop: &StopSignal,
    ) -> Option<InfoSnapshot> {
        if let Some(Err(err)) = stop.unless_aborted(self.plane.refresh()).await {
            target.unavailable.push(format!("the slot map after the run: {err}"));
        }
        if !read_before {
            return None;
        }
        let info = observe::node_info(&self.plane, &mut target.topology, observe::When::After, &mut target.unavailable);
        stop.unless_aborted(info).await.flatten()
    }

    /// Finishes the history file (whole from here on) and the live check it fed, then runs the
    /// end check on the history read back and attributes the injected faults' effects.
    async fn check(&self, recording: Recording, driven: &mut Driven, dir: &Path, stop: &StopSignal) -> Checked {
        let (opts, plan) = (&self.options, &self.options.plan);
        let aborted = stop.is_aborted();
        let header = observe::history_header(plan, opts.keep_history, Some(driven));
        // The history's last chunks and its final header: history.bin is whole from here on.
        let spooled = recording.spool.finish(std::mem::take(&mut driven.streams), &header);
        // The writer has ended, so has the live check's input: its last write of
        // invariants.json comes before the end check's.
        let failed_fast = recording.live.is_some_and(|live| live.finish(opts.fail_fast, &mut driven.interrupted));
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
                HistoryParts::read(&recording.history_path, opts.check_memory_bytes, dir).map_err(|e| e.to_string())
            }
        };
        let queue_time = history.as_ref().ok().and_then(|h| crate::report::queue_time::time_in_queue(h).ok());
        let history_ref = history.as_ref().map_err(String::as_str);
        let checked = match stop
            .unless_aborted(observe::check_run(history_ref, driven, &self.plane, &self.queues, no_check))
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
        let error = checked.as_ref().err().cloned();
        Checked {
            history_path: recording.history_path,
            spooled,
            failed_fast,
            queue_time,
            outcome: checked.ok().flatten(),
            error,
            attributed,
        }
    }

    /// The job counters of the whole run, with the check's count of stall failures (reap's
    /// reply counts them among the reaped; the scan tells them apart); the metrics endpoint's
    /// last figures say the same.
    fn final_jobs(&self, driven: &Driven, checked: Option<&CheckOutcome>) -> [u64; JobCounter::COUNT] {
        let mut jobs = all_jobs(&driven.metrics);
        if let Some(outcome) = checked {
            jobs[JobCounter::FailedByStall.index()] = outcome.failed_by_stall;
        }
        if let Some(board) = &self.board {
            // summary.json's jobs exactly: the check's scan filled in failed_by_stall.
            board.finish(Cumulative::of(&driven.metrics.scripts, jobs), driven.depths);
        }
        jobs
    }

    /// The keys' fate as the run's end decides it ([`judge::keys_fate`]). A lease lost mid-run
    /// (`lock_lost`) means another run may be on these queues now: its keys are not ours to
    /// delete. A file the run could not write as it went (the history, a per-second file)
    /// leaves the folder incomplete whatever else follows, and the keys its evidence.
    fn keys_fate(&self, keep: bool, aborted: bool, loaded: &Loaded, checked: &Checked, lock_lost: bool) -> KeysFate {
        judge::keys_fate(&judge::KeysEnd {
            keep,
            aborted,
            end_unreadable: loaded.driven.depths.is_none(),
            lock_lost,
            fleet_check: self.options.plan.shares_queues(),
            folder_incomplete: checked.spooled.is_err() || !loaded.streamed_errors.is_empty(),
            check_not_run: checked.error.is_some(),
            failed_fast: checked.failed_fast,
        })
    }

    /// summary.json of the ended run with the judge's verdict, and what the verdict was
    /// judged from (the folder's writing may amend it).
    fn assemble(&self, ended: &Ended, keys: KeysFate, keep: bool) -> Assembled {
        let (opts, plan) = (&self.options, &self.options.plan);
        let driven = &ended.loaded.driven;
        let shard = assemble::shard_record(
            plan,
            ended.fleet_start.as_ref(),
            driven.metrics.start_wall,
            ended.end_clock,
            opts.check,
        );
        let observed = assemble::Observed {
            target: ended.target.clone(),
            before: ended.before.clone(),
            after: ended.after.clone(),
            jobs: ended.jobs,
            server: ended.loaded.server.summary(),
            checked: ended.checked.outcome.as_ref(),
            shard,
            depths: &ended.loaded.depth_log,
            queue_time: ended.checked.queue_time.as_ref(),
            history_bytes: ended.checked.spooled.as_ref().map_or(0, |totals| totals.stream_bytes),
            growth: ended.loaded.growth.clone(),
        };
        let mut summary = assemble::summarize(plan, opts, driven, observed, keys);
        let rules = judge::Rules::of(plan, keep);
        let end = assemble::EndFacts {
            check_error: ended.checked.error.clone(),
            lock_lost: ended.lock_lost.clone(),
            kept_hint: judge::KeptKeysHint {
                embedded: self.embedded_target(),
                url: summary.target.url.clone(),
                queues: plan.queues.clone(),
            },
        };
        let facts = assemble::facts_of(&summary, driven, opts.timeout(), end);
        summary.verdict = Some(judge::judge(&facts, &rules));
        let gates = judge::gates(&facts, &rules);
        Assembled { summary, facts, rules, gates }
    }

    /// Writes every file of the folder `dir` through one seam, summary.json first and
    /// history.bin last, then cleans up the run's keys unless they are kept; returns the run's
    /// junit.xml document. A file not written keeps the keys (the evidence) and is itself a
    /// finding; either amends the verdict.
    async fn write_folder(&self, dir: &Path, ended: &Ended, assembled: &mut Assembled) -> crate::ci::junit::Report {
        let Assembled { summary, facts, rules, gates } = assembled;
        let mut write_errors = write_all(dir, &ended.results(summary, &self.options.plan, gates), &run_writers());
        write_errors.extend(ended.loaded.streamed_errors.iter().cloned());
        if let Err(err) = &ended.checked.spooled {
            write_errors.push(format!("cannot write {}: {err}", ended.checked.history_path.display()));
        }
        if let Err(err) = &ended.checked.attributed {
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
            assemble::amend(dir, summary, facts, rules);
            amended = true;
        }
        // Clean up: the run's keys, unless kept. The folder says `deleting` until it ends,
        // then what became of them.
        if !summary.keys_kept() {
            let progress = crate::output::Deletion::start(self.options.quiet, self.options.progress_every);
            clean_up::clean_up(&self.plane, &self.queues, dir, summary, &progress).await;
            assemble::amend(dir, summary, facts, rules);
            amended = true;
        }
        let results = ended.results(summary, &self.options.plan, gates);
        // What CI reads says the verdict summary.json says, amended or not (best effort, as the
        // amend itself: where these cannot be rewritten, the folder's write errors say why).
        if amended {
            let _ = write_all(dir, &results, &crate::ci::run::verdict_writers());
        }
        // A repeated run's folder combines its repetitions' junit.xml.
        crate::ci::run::junit(&results.judged())
    }

    /// The repetition's result: the table, then the verdict's lines (main prints them after
    /// FAIL), with the run's measurement.
    fn render(
        &self,
        dir: &Path,
        ended: Ended,
        assembled: Assembled,
        junit: crate::ci::junit::Report,
    ) -> (RepResult, RunMetrics) {
        let summary = assembled.summary;
        let table = render::render_table(&summary, &self.options.plan, ended.checked.outcome.as_ref(), dir);
        let failures = summary.verdict.as_ref().map(crate::verdict::Verdict::lines).unwrap_or_default();
        let outcome = if summary.passed() == Some(true) { CommandOutcome::Success } else { CommandOutcome::Failed };
        (RepResult { dir: dir.to_path_buf(), summary, table, outcome, failures, junit }, ended.loaded.driven.metrics)
    }
}

/// A fleet's start as the barrier gave it, with the configuration every shard agreed on.
type FleetStart = (plane::barrier::Start, String);

/// The per-second files and a running summary.json as the run goes, so a run killed outright
/// leaves a folder that renders; `target` as the run's start knows it.
fn start_live_folder(plan: &Plan, dir: &Path, target: TargetInfo) -> LiveFolder {
    let mut scenario = plan.scenario.clone();
    scenario.target = scenario.target.redacted();
    let at_start = RunSummary::at_start(&plan.name, plan.seed, Some(scenario), target);
    let stages = plan.producers.open_loop.as_ref().and_then(|open| open.stages.clone());
    LiveFolder::start(dir, at_start, stages)
}

/// The history being written and the live check it feeds, as a repetition starts them.
struct Recording {
    /// history.bin in the results folder.
    history_path: PathBuf,
    spool: HistorySpool,
    live: Option<live_check::Started>,
}

/// What the load left once it and everything beside it ended.
struct Loaded {
    driven: Driven,
    /// The server sampled every second, on the run's clock.
    server: ServerSeries,
    /// The queues' depths read each second, s since the run start.
    depth_log: Vec<DepthSample>,
    /// The soak's growth over the load.
    growth: Option<Growth>,
    /// The per-second files not written or read back, one line each.
    streamed_errors: Vec<String>,
}

/// The history's end and the invariant check's.
struct Checked {
    history_path: PathBuf,
    /// The history file finished, or why it could not be.
    spooled: Result<SpoolTotals, HistoryFileError>,
    /// `--fail-fast` stopped the run at a violation the live check found.
    failed_fast: bool,
    /// Each claimed job's wait in the queue, µs (`None`: the history was not read).
    queue_time: Option<hdrhistogram::Histogram<u64>>,
    /// The check's outcome, when it ran.
    outcome: Option<CheckOutcome>,
    /// Why the asked-for check could not run.
    error: Option<String>,
    /// The injected faults' effects attributed, or why they could not be.
    attributed: Result<(), HistoryFileError>,
}

/// Everything a repetition's end observed, for its results.
struct Ended {
    loaded: Loaded,
    checked: Checked,
    target: TargetInfo,
    before: Option<InfoSnapshot>,
    after: Option<InfoSnapshot>,
    fleet_start: Option<FleetStart>,
    end_clock: Option<(ClockOffset, f64)>,
    jobs: [u64; JobCounter::COUNT],
    /// The run-lock leases lost while the run held them.
    lock_lost: Vec<String>,
}

impl Ended {
    /// The finished model of the folder's files with `summary` as it stands.
    fn results<'a>(&'a self, summary: &'a RunSummary, plan: &'a Plan, gates: &'a [GateResult]) -> RunResults<'a> {
        RunResults {
            summary,
            metrics: &self.loaded.driven.metrics,
            server: &self.loaded.server,
            depths: &self.loaded.depth_log,
            invariants: self.checked.outcome.as_ref().map(|outcome| &outcome.report),
            stages: plan.producers.open_loop.as_ref().and_then(|open| open.stages.as_ref()),
            gates,
        }
    }
}

/// summary.json with its verdict, and what the verdict is judged from.
struct Assembled {
    summary: RunSummary,
    facts: judge::Facts,
    rules: judge::Rules,
    gates: Vec<GateResult>,
}
