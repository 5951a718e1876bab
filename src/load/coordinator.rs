//! The coordinator: starts the load threads and the reporter, moves the run through its phases
//! (load → drain → stop), watches queue depths, and returns the finished measurement.
//!
//! Phases: producers run for `duration` (or until `jobs` are issued); then the drain lets
//! consumers finish every job (pending, delayed and active all empty) or gives up after
//! `drain`; then everything stops. A stop signal ends the load at once; an abort also cuts
//! short the waits on the server that follow.

use super::context::{Phase, RunShared};
use super::stop::{Interruption, StopSignal};
use super::thread::{run_thread, Go, ThreadSpec};
use crate::faults::nemesis::Running;
use crate::faults::{FaultSpan, FaultsSeen, Nemesis, SpanKind};
use crate::keyspace::{Depth, QueueKeys, DEPTH_SCRIPT};
use crate::metrics::host::{HostReading, HostWindow};
use crate::metrics::{LiveSnapshot, Reporter, RunMetrics};
use crate::net::{ConnectOptions, Connector};
use crate::plane::Plane;
use crate::resp::{CallError, ScriptRegistry};
use crate::scenario::{Plan, Stop};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::{oneshot, watch};

/// How to drive the load.
#[derive(Clone)]
pub struct DriveOptions {
    /// The scripts.
    pub registry: Arc<ScriptRegistry>,
    /// Load threads, each with its own current-thread runtime (≥ 1).
    pub threads: usize,
    /// Connection settings.
    pub connect: ConnectOptions,
    /// How long the target may stay unreachable (every depth read failing) before the run
    /// gives up, ends as interrupted and writes its results (`--give-up`).
    pub give_up: Duration,
    /// The nemesis that injects the scenario's `[[faults]]` during the load phase.
    pub nemesis: Option<Nemesis>,
    /// When to start, on this process's clock (a fleet's `t0`): the threads connect first,
    /// then the clock starts at this moment (at once when it has passed). `None`: as soon as
    /// every thread has connected.
    pub start_at: Option<SystemTime>,
    /// Set in a `shared` fleet: the producers of other shards fill the queues this process's
    /// consumers drain, so the drain ends only once every producing shard says it is done.
    pub fleet_drain: Option<FleetDrain>,
    /// Where the load threads hand their history as they record it (the run's `history.bin`);
    /// `None`: each thread keeps its history and returns it in [`Driven::streams`].
    pub history_spill: Option<crate::history::spool::HistorySpill>,
    /// Where each measured interval goes as it closes (the per-second files written as the
    /// run goes); `None`: only [`Driven::metrics`] holds them.
    pub interval_tap: Option<std::sync::mpsc::Sender<crate::metrics::ClosedInterval>>,
    /// The live snapshot also carries the totals so far in fixed buckets (the metrics
    /// endpoint's; [`Reporter::expose_totals`]).
    pub expose_totals: bool,
}

/// How one shard of a `shared` fleet learns that the fleet's producers are done
/// ([`crate::plane::barrier::producers_done`]).
#[derive(Debug, Clone)]
pub struct FleetDrain {
    /// The fleet's name.
    pub group: String,
    /// The fleet's `t0`, ms on the server's clock.
    pub t0_ms: u64,
    /// This shard's index.
    pub index: u32,
    /// True when this shard runs producers (it says so when they are done).
    pub produces: bool,
    /// How many of the fleet's shards run producers.
    pub producing_shards: u32,
}

/// Jobs still in the queues: pending, delayed and active summed over the run's queues.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Depths {
    /// Members of every `pending` set.
    pub pending: u64,
    /// Members of every `delayed` set.
    pub delayed: u64,
    /// Members of every `active` set.
    pub active: u64,
    /// Members of every `completed` set.
    pub completed: u64,
    /// Members of every `failed` set.
    pub failed: u64,
}

impl Depths {
    /// Jobs not yet finished.
    pub fn unfinished(&self) -> u64 {
        self.pending + self.delayed + self.active
    }
}

/// What a drive produced.
pub struct Driven {
    /// The finished measurement.
    pub metrics: RunMetrics,
    /// Wall-clock start and end.
    pub started: SystemTime,
    /// Wall-clock end.
    pub ended: SystemTime,
    /// Why the run ended early, if it did (a stop signal, the target unreachable past the
    /// give-up window, a load thread error).
    pub interrupted: Option<Interruption>,
    /// Faults injected and seen (a run that rode through them is not interrupted).
    pub faults: FaultsSeen,
    /// True when the drain finished every job before its time limit.
    pub drained: bool,
    /// Queue depths at the end (None when the server could not be read).
    pub depths: Option<Depths>,
    /// The load threads' history streams, each thread's as one or more chunks (see
    /// `history::buffer`).
    pub streams: Vec<Vec<u8>>,
    /// Job numbers handed out (`0..issued`; the last ones may not have been drawn or sent).
    pub issued: u64,
    /// The load phase's length, s (from the start to the drain, or to an early end).
    pub load_secs: f64,
    /// Producer sends made (new jobs and duplicates, ok or not), the whole run.
    pub sent: u64,
    /// Open-loop sends due before the load phase ended but never made.
    pub never_sent: u64,
    /// Each load thread's CPU share of its running time, 0..1, by thread index.
    pub busy: Vec<f64>,
    /// Each load thread's wait for a CPU while runnable, a share of its running time, 0..1, by
    /// thread index (`None` where the kernel keeps no run delay).
    pub waited: Vec<Option<f64>>,
    /// The harness's host over the load phase: the process's CPU, the host's CPU pressure and
    /// load average.
    pub host: HostWindow,
}

/// Reads the depth of every place of `queues` ([`QueueKeys::depth_keys`]): one atomic read per
/// queue, on the node that owns it (one consistent reading of its places: a job moving between
/// two of them, by reap, retry or promote, would otherwise be counted in neither). Never across
/// queues: one call may only name keys of one slot on a cluster. The read is a script with its
/// keys declared ([`DEPTH_SCRIPT`]), not MULTI/EXEC: a transaction hides a MOVED/ASK/TRYAGAIN
/// behind EXECABORT, a script reports it, and the plane follows it.
pub async fn depths(plane: &Plane, queues: &[QueueKeys]) -> Result<Depths, CallError> {
    let mut d = Depths::default();
    for q in queues {
        for (depth, n) in queue_places(plane, q).await? {
            *match depth {
                Depth::Pending => &mut d.pending,
                Depth::Delayed => &mut d.delayed,
                Depth::Active => &mut d.active,
                Depth::Completed => &mut d.completed,
                Depth::Failed => &mut d.failed,
            } += n;
        }
    }
    Ok(d)
}

/// The keys queue `q` holds on the server as its places count them: each job row its places
/// hold, and each place that holds any (a sorted set or list exists only while not empty). For
/// EchoMQ this is every key of the queue, as long as each row sits in exactly one place (I2);
/// for BullMQ, whose jobs have more keys than their row and whose queue has keys that are no
/// place, it is a lower bound. One read per queue, nothing walked.
pub async fn queue_keys_counted(plane: &Plane, q: &QueueKeys) -> Result<u64, CallError> {
    let places = queue_places(plane, q).await?;
    Ok(places.iter().map(|&(_, n)| n + u64::from(n > 0)).sum())
}

/// Each place of `q` ([`QueueKeys::depth_keys`]) with its member count, read at once.
async fn queue_places(plane: &Plane, q: &QueueKeys) -> Result<Vec<(Depth, u64)>, CallError> {
    let places = q.depth_keys();
    let counts = plane
        .on_queue(q, |mut conn| {
            let places = &places;
            async move {
                let mut cmd = redis::cmd("EVAL");
                cmd.arg(DEPTH_SCRIPT).arg(places.len());
                for (_, key, _) in places {
                    cmd.arg(key);
                }
                for &(_, _, list) in places {
                    cmd.arg(if list { "l" } else { "z" });
                }
                let counts: Vec<u64> = cmd.query_async(&mut conn).await.map_err(|e| CallError::from_redis(&e))?;
                Ok(counts)
            }
        })
        .await?;
    if counts.len() != places.len() {
        return Err(CallError::Reply(format!("the depth read replied {counts:?}, expected {} counts", places.len())));
    }
    Ok(places.iter().zip(counts).map(|((depth, _, _), n)| (*depth, n)).collect())
}

/// True once every producing shard of a `shared` fleet has said its producers are done;
/// says so first for this shard (once, `said`). A failed call is "not yet": the drain's time
/// limit still ends the wait.
async fn fleet_producers_done(plane: &Plane, fleet: &FleetDrain, said: &mut bool, drain: Duration) -> bool {
    use crate::plane::barrier;
    if fleet.produces && !*said {
        *said = barrier::producers_done(plane, &fleet.group, fleet.t0_ms, fleet.index, drain).await.is_ok();
        if !*said {
            return false;
        }
    }
    barrier::shards_done_producing(plane, &fleet.group, fleet.t0_ms)
        .await
        .is_ok_and(|done| done >= fleet.producing_shards)
}

/// Drives `plan` against the target until it finishes or `stop` is asked for.
///
/// `plane` is the coordinator's own control plane (depth polling). `progress` is called
/// about once a second with the live snapshot and the latest depths. Errors: none once load
/// has started; a load thread's connect failure ends the run as interrupted, with the reason.
pub async fn drive(
    plan: Arc<Plan>,
    opts: DriveOptions,
    plane: Plane,
    queues: Vec<QueueKeys>,
    stop: StopSignal,
    mut progress: impl FnMut(&LiveSnapshot, Option<Depths>),
) -> Driven {
    let shared = Arc::new(RunShared::default());
    shared.producers_live.store(plan.producers.count as usize, Ordering::Relaxed);
    let (stop_tx, stop_rx) = watch::channel(false);
    let spawned = spawn_threads(&plan, &opts, &plane, &queues, &shared, stop_rx);
    let mut interrupted = wait_ready(spawned.readies, opts.start_at, &stop).await;
    let started = SystemTime::now();
    let start = Instant::now();
    let host_start = HostReading::now();
    let (reporter, live, faults_running) = go(&plan, &opts, start, spawned.gos, interrupted.is_none());
    let driving = Driving { plan: &plan, opts: &opts, plane: &plane, queues: &queues, shared: &shared, stop: &stop };
    let mut polling = Polling::new(driving, start);
    if interrupted.is_none() {
        interrupted = polling.run(&live, &mut progress, faults_running.as_ref()).await;
    }
    let end = Instant::now();
    let _ = shared.load_end.set(end);
    shared.advance(Phase::Stop);
    let _ = stop_tx.send(true);
    // A fault still lasting (a freeze, a pause) is undone now, before anything waits on the server.
    if let Some(running) = &faults_running {
        running.stop();
    }
    let streams = join_threads(spawned.threads, &shared, &stop, &mut interrupted).await;
    let metrics = reporter.await.expect("reporter task").finish(end);
    // A streak still in progress ends with the load.
    polling.unreachable.reached(start, end);
    let depths = read_end(&plane, &queues, opts.give_up, &stop, &mut interrupted).await;
    // The nemesis undoes a lasting fault (maxmemory, pause, freeze) before it reports: waited
    // for, also after an abort (2 s at most then), so the run does not exit with it in place.
    let injected = match faults_running {
        Some(running) if stop.is_aborted() => {
            tokio::time::timeout(Duration::from_secs(2), running.finish()).await.unwrap_or_default()
        }
        Some(running) => running.finish().await,
        None => Vec::new(),
    };
    let reconnects = all_reconnects(&metrics);
    let faults = FaultsSeen::build(injected, std::mem::take(&mut polling.unreachable.spans), &metrics, reconnects);
    let drained = polling.drained;
    // Set at the drain, or at the loop's end when the run ended in its load phase.
    let load_secs = (*shared.load_end.get().unwrap_or(&end) - start).as_secs_f64();
    let mut busy = std::mem::take(&mut *shared.busy.lock().expect("busy"));
    busy.sort_by_key(|(index, _, _)| *index);
    let host = host_start.until(&polling.host_at_load_end.take().unwrap_or_else(HostReading::now));
    Driven {
        metrics,
        started,
        ended: SystemTime::now(),
        interrupted,
        faults,
        drained,
        depths,
        streams,
        issued: shared.issued.load(Ordering::Relaxed),
        load_secs,
        sent: shared.sent.load(Ordering::Relaxed),
        never_sent: shared.never_sent.load(Ordering::Relaxed),
        waited: busy.iter().map(|(_, _, w)| *w).collect(),
        busy: busy.into_iter().map(|(_, b, _)| b).collect(),
        host,
    }
}

/// The load threads as they are spawned: each one's handle, the sender of its start and the
/// receiver of its readiness (connected, scripts loaded, or why not).
struct Spawned {
    threads: Vec<std::thread::JoinHandle<Vec<Vec<u8>>>>,
    gos: Vec<oneshot::Sender<Go>>,
    readies: Vec<oneshot::Receiver<Result<(), CallError>>>,
}

/// Spawns `opts.threads` load threads (at least one), which connect at once and wait for
/// their [`Go`]; `stop` tells them the load has ended.
fn spawn_threads(
    plan: &Arc<Plan>,
    opts: &DriveOptions,
    plane: &Plane,
    queues: &[QueueKeys],
    shared: &Arc<RunShared>,
    stop: watch::Receiver<bool>,
) -> Spawned {
    let mut spawned = Spawned { threads: Vec::new(), gos: Vec::new(), readies: Vec::new() };
    let thread_queues: Arc<[QueueKeys]> = queues.iter().cloned().collect();
    // Every load connection goes where the plane's do: one connector per node, each queue to
    // the node that owns its slot.
    // A cluster's replicas too, after the primaries: a failover promotes one, and the load
    // then already has its connections (and its lanes) to it.
    let mut nodes: Vec<Connector> = plane.nodes().iter().map(|n| n.connector().clone()).collect();
    for (host, port) in plane.replicas() {
        match plane.seed().connector().at(&host, port) {
            Ok(connector) => nodes.push(connector),
            Err(_) => continue,
        }
    }
    let nodes: Arc<[Connector]> = nodes.into();
    let is_cluster = plane.topology().kind == crate::net::topology::Kind::Cluster;
    let placement: Arc<[usize]> = queues.iter().map(|q| plane.node_of(q)).collect();
    for index in 0..opts.threads.max(1) {
        let spec = ThreadSpec {
            index,
            threads: opts.threads.max(1),
            nodes: nodes.clone(),
            placement: placement.clone(),
            connect: ConnectOptions { refuse_when_unreachable: is_cluster, ..opts.connect },
            registry: opts.registry.clone(),
            plan: plan.clone(),
            shared: shared.clone(),
            queues: thread_queues.clone(),
            history_spill: opts.history_spill.clone(),
        };
        let stop = stop.clone();
        let (ready_tx, ready_rx) = oneshot::channel();
        let (go_tx, go_rx) = oneshot::channel();
        let handle = std::thread::Builder::new()
            .name(format!("emq-load-{index}"))
            .spawn(move || run_thread(spec, ready_tx, go_rx, stop))
            .expect("spawn load thread");
        spawned.threads.push(handle);
        spawned.gos.push(go_tx);
        spawned.readies.push(ready_rx);
    }
    spawned
}

/// Waits until every thread has connected (and loaded the scripts), then until `start_at`
/// (a fleet's agreed moment): the clock starts after both. Returns why the run cannot start:
/// a thread that could not connect or died, or a stop meanwhile.
async fn wait_ready(
    readies: Vec<oneshot::Receiver<Result<(), CallError>>>,
    start_at: Option<SystemTime>,
    stop: &StopSignal,
) -> Option<Interruption> {
    let mut interrupted = None;
    for ready in readies {
        // A stop while the threads connect (a frozen server holds a connect up to the reply
        // timeout) ends the run before it starts.
        let ready = tokio::select! {
            ready = ready => ready,
            _ = stop.stopped() => {
                interrupted.get_or_insert(Interruption::Stopped);
                break;
            }
        };
        match ready {
            Ok(Ok(())) => {}
            Ok(Err(err)) => {
                interrupted.get_or_insert_with(|| Interruption::Connect(err.to_string()));
            }
            Err(_) => {
                interrupted.get_or_insert(Interruption::ThreadDied);
            }
        }
    }
    // A fleet's shards start together: connected, each waits for the agreed moment.
    if let (None, Some(at)) = (&interrupted, start_at) {
        if let Ok(wait) = at.duration_since(SystemTime::now()) {
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = stop.stopped() => { interrupted = Some(Interruption::Stopped); }
            }
        }
    }
    interrupted
}

/// Starts the clock at `start`: the reporter that gathers the threads' intervals, and, when
/// the run `starts`, each thread's [`Go`] and the nemesis's faults. Returns the reporter's
/// task, its live snapshot and the running faults.
fn go(
    plan: &Plan,
    opts: &DriveOptions,
    start: Instant,
    gos: Vec<oneshot::Sender<Go>>,
    starts: bool,
) -> (tokio::task::JoinHandle<Reporter>, watch::Receiver<LiveSnapshot>, Option<Running>) {
    let (mut reporter, sink) = Reporter::new(start, plan.warmup);
    if let Some(tap) = opts.interval_tap.clone() {
        reporter.tap_closed(tap);
    }
    if opts.expose_totals {
        reporter.expose_totals();
    }
    let live = reporter.live();
    let reporter = tokio::spawn(reporter.run());
    // Without a start, no Go for anyone: threads that did connect see their Go dropped and end.
    if !starts {
        return (reporter, live, None);
    }
    for go in gos {
        let _ = go.send(Go { start, sink: sink.clone() });
    }
    let until = match plan.stop {
        Stop::Duration(d) => d,
        Stop::Jobs(_) => Duration::MAX,
    };
    (reporter, live, opts.nemesis.as_ref().map(|n| n.begin(start, until)))
}

/// Waits for every load thread to end (an abort tells them to stop waiting for replies still
/// in flight) and returns their history streams; a thread that died interrupts the run.
async fn join_threads(
    threads: Vec<std::thread::JoinHandle<Vec<Vec<u8>>>>,
    shared: &Arc<RunShared>,
    stop: &StopSignal,
    interrupted: &mut Option<Interruption>,
) -> Vec<Vec<u8>> {
    let abort_watch = {
        let (shared, stop) = (shared.clone(), stop.clone());
        tokio::spawn(async move {
            stop.aborted().await;
            shared.aborted.store(true, Ordering::Relaxed);
        })
    };
    let mut streams = Vec::new();
    for handle in threads {
        match tokio::task::spawn_blocking(move || handle.join()).await {
            Ok(Ok(thread_streams)) => streams.extend(thread_streams),
            _ => {
                interrupted.get_or_insert(Interruption::ThreadDied);
            }
        }
    }
    abort_watch.abort();
    streams
}

/// The last depth reading, which decides whether the run can be checked: a server restarting
/// at the very end gets a few seconds (at most the give-up window) to come back. An abort
/// reads nothing and makes the run's interruption [`Interruption::Aborted`]; a reading that
/// failed interrupts the run as [`Interruption::EndUnreadable`] unless something else did.
async fn read_end(
    plane: &Plane,
    queues: &[QueueKeys],
    give_up: Duration,
    stop: &StopSignal,
    interrupted: &mut Option<Interruption>,
) -> Option<Depths> {
    let patience = give_up.min(END_READ_PATIENCE);
    let depths = match stop.unless_aborted(end_depths(plane, queues, patience)).await {
        Some(read) => read,
        None => Err(CallError::Connection("not read: the run was aborted".into())),
    };
    if stop.is_aborted() {
        *interrupted = Some(Interruption::Aborted);
    }
    match depths {
        Ok(d) => Some(d),
        Err(err) => {
            interrupted.get_or_insert_with(|| Interruption::EndUnreadable(err.to_string()));
            None
        }
    }
}

/// The coordinator's loop from the clock's start to the load's end, polled every 50 ms: the
/// load phase until its stop condition, then the drain until the queues are empty or its time
/// limit passes. Its state is what the loop learns as it goes.
struct Polling<'a> {
    /// What the loop reads and does not change.
    drive: Driving<'a>,
    /// The clock's start.
    start: Instant,
    /// The drain finished every job before its time limit.
    drained: bool,
    /// A `shared` fleet's shard: whether it has said its producers are done.
    said_done: bool,
    /// A `shared` fleet's shard: the fleet's jobs in the queues (finished or not) at the last
    /// reading that changed it.
    fleet_total: Option<u64>,
    /// When `fleet_total` last changed.
    fleet_grew: Instant,
    /// Readings in a row that found the queues empty.
    empty_readings: u32,
    /// The last depth reading (`None` when it failed).
    last_depths: Option<Depths>,
    /// When the drain's clock started (a `shared` fleet restarts it while the fleet's jobs grow).
    drain_started: Option<Instant>,
    /// The target's reachability: spans of failed depth reads.
    unreachable: Unreachable,
    /// When `progress` is next called.
    next_progress: Instant,
    /// The harness's host read as the load phase ended (the drain's idling is not the load's).
    host_at_load_end: Option<HostReading>,
}

/// What the polling loop reads: the run's plan and options, the coordinator's plane and the
/// run's queues, the state it shares with the load threads, the stop signal.
struct Driving<'a> {
    plan: &'a Plan,
    opts: &'a DriveOptions,
    plane: &'a Plane,
    queues: &'a [QueueKeys],
    shared: &'a RunShared,
    stop: &'a StopSignal,
}

impl<'a> Polling<'a> {
    /// The loop's state at the clock's `start`: nothing learnt yet.
    fn new(drive: Driving<'a>, start: Instant) -> Polling<'a> {
        Polling {
            drive,
            start,
            drained: false,
            said_done: false,
            fleet_total: None,
            fleet_grew: Instant::now(),
            empty_readings: 0,
            last_depths: None,
            drain_started: None,
            unreachable: Unreachable::default(),
            next_progress: start + Duration::from_secs(1),
            host_at_load_end: None,
        }
    }

    /// Polls until the load ends: `None` when it ended as planned (its phases ran their
    /// course), else why it ended early. `progress` is called about once a second; the
    /// nemesis's `faults` stop with the load phase.
    async fn run(
        &mut self,
        live: &watch::Receiver<LiveSnapshot>,
        progress: &mut impl FnMut(&LiveSnapshot, Option<Depths>),
        faults: Option<&Running>,
    ) -> Option<Interruption> {
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        loop {
            tokio::select! {
                _ = self.drive.stop.stopped() => return Some(Interruption::Stopped),
                _ = tick.tick() => {}
            }
            let now = Instant::now();
            let phase = self.drive.shared.phase();
            if phase == Phase::Drain || now >= self.next_progress {
                match self.read_depths(now).await {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(gave_up) => return Some(gave_up),
                }
            }
            if now >= self.next_progress {
                progress(&live.borrow(), self.last_depths);
                self.next_progress += Duration::from_secs(1);
            }
            match phase {
                Phase::Load => {
                    if self.load_done(now).await {
                        self.begin_drain(now, faults);
                    }
                }
                Phase::Drain => {
                    if self.drain_done(now).await {
                        return None;
                    }
                }
                Phase::Stop => return None,
            }
        }
    }

    /// Reads the queues' depths (at `now`, the poll's time): `Ok(true)` read or failed within
    /// the give-up window, `Ok(false)` cut short by a stop (a frozen server must not hold the
    /// loop for a reply timeout), `Err` the target unreachable for the whole window.
    async fn read_depths(&mut self, now: Instant) -> Result<bool, Interruption> {
        let read = tokio::select! {
            read = depths(self.drive.plane, self.drive.queues) => read,
            _ = self.drive.stop.stopped() => return Ok(false),
        };
        match read {
            Ok(d) => {
                self.last_depths = Some(d);
                self.unreachable.reached(self.start, Instant::now());
            }
            Err(err) => {
                self.last_depths = None;
                let since = self.unreachable.failed(now, &err);
                if Instant::now().duration_since(since) >= self.drive.opts.give_up {
                    return Err(Interruption::GaveUp {
                        window: self.drive.opts.give_up,
                        since_s: (since - self.start).as_secs_f64(),
                        error: err.to_string(),
                    });
                }
            }
        }
        Ok(true)
    }

    /// Whether the load phase is over at `now`: its duration passed, or its job budget sent.
    async fn load_done(&mut self, now: Instant) -> bool {
        match self.drive.plan.stop {
            Stop::Duration(d) => now >= self.start + d,
            // A `shared` fleet's load phase ends with the fleet's producers, not this
            // shard's: a shard of consumers only has none of its own.
            Stop::Jobs(_) => {
                let own_done = self.drive.shared.producers_live.load(Ordering::Relaxed) == 0;
                let opts = self.drive.opts;
                match (&opts.fleet_drain, own_done) {
                    (Some(fleet), true) => {
                        let heard = self.fleet_producers_done(fleet).await;
                        // A producing shard that died never says so: once the jobs in
                        // the queues stop growing for the drain's length, go on.
                        let total = self.fleet_jobs();
                        if total != self.fleet_total {
                            self.fleet_total = total;
                            self.fleet_grew = now;
                        }
                        heard || now >= self.fleet_grew + self.drive.plan.drain
                    }
                    (_, own_done) => own_done,
                }
            }
        }
    }

    /// Ends the load phase at `now`: the producers stop and the drain's clock starts.
    fn begin_drain(&mut self, now: Instant, faults: Option<&Running>) {
        // The instant producers are told to stop: what the never-sent count and the
        // producers' rate window are measured against. A job budget's last producer
        // has set it already, at its last reply (`producer::run`).
        let _ = self.drive.shared.load_end.set(Instant::now());
        self.host_at_load_end = Some(HostReading::now());
        self.drive.shared.advance(Phase::Drain);
        self.drain_started = Some(now);
        // Faults belong to the load phase: the drain shows whether the run recovers.
        if let Some(running) = faults {
            running.stop();
        }
    }

    /// Whether the drain is over at `now`: the queues found empty twice in a row once the
    /// producers are done (then `drained`), the producers done without consumers to drain, or
    /// the drain's time limit passed.
    async fn drain_done(&mut self, now: Instant) -> bool {
        let mut producers_done = self.drive.shared.producers_live.load(Ordering::Relaxed) == 0;
        let opts = self.drive.opts;
        if let (Some(fleet), true) = (&opts.fleet_drain, producers_done) {
            let heard = self.fleet_producers_done(fleet).await;
            producers_done = heard;
            // While the fleet's producers still send (the jobs in the queues, finished
            // or not, still grow), the drain's clock waits for them: a jobs budget ends
            // at different moments on different shards. Once nothing grows the clock
            // runs, so a producing shard that died cannot hold the drain.
            let total = self.fleet_jobs();
            if !heard && total.is_some() && total != self.fleet_total {
                self.fleet_total = total;
                self.drain_started = Some(now);
            }
        }
        // Two empty readings in a row (50 ms apart): one reading may fall between a
        // reply the server sent and the consumer that has yet to read it.
        let empty = producers_done && self.last_depths.is_some_and(|d| d.unfinished() == 0);
        self.empty_readings = if empty { self.empty_readings + 1 } else { 0 };
        if self.empty_readings >= 2 {
            self.drained = true;
            return true;
        }
        // Without consumers there is nothing to drain: stop once the producers are done.
        let no_consumers = self.drive.plan.consumers.count == 0;
        (no_consumers && producers_done) || self.drain_started.is_some_and(|t| now >= t + self.drive.plan.drain)
    }

    /// Whether every producing shard of the fleet is done, cut short (false) by a stop, as the
    /// depth read is.
    async fn fleet_producers_done(&mut self, fleet: &FleetDrain) -> bool {
        tokio::select! {
            heard = fleet_producers_done(self.drive.plane, fleet, &mut self.said_done, self.drive.plan.drain) => heard,
            _ = self.drive.stop.stopped() => false,
        }
    }

    /// The fleet's jobs in the queues, finished or not, at the last reading.
    fn fleet_jobs(&self) -> Option<u64> {
        self.last_depths.map(|d| d.unfinished() + d.completed + d.failed)
    }
}

/// How long the last depth reading may keep failing before the run is called unreadable.
const END_READ_PATIENCE: Duration = Duration::from_secs(5);

/// The last depth reading, retried every 250 ms for `patience`.
async fn end_depths(plane: &Plane, queues: &[QueueKeys], patience: Duration) -> Result<Depths, CallError> {
    let until = Instant::now() + patience;
    loop {
        match depths(plane, queues).await {
            Ok(d) => return Ok(d),
            Err(err) if Instant::now() >= until => return Err(err),
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

fn all_reconnects(metrics: &RunMetrics) -> u64 {
    let i = crate::metrics::JobCounter::Reconnects.index();
    metrics.jobs[i] + metrics.warmup_jobs[i]
}

/// The coordinator's view of the target's reachability: spans of failed depth reads.
#[derive(Default)]
struct Unreachable {
    /// The current streak: when it began and the last error.
    since: Option<(Instant, String)>,
    spans: Vec<FaultSpan>,
}

impl Unreachable {
    /// A read failed at `now`; returns when the current streak began.
    fn failed(&mut self, now: Instant, err: &CallError) -> Instant {
        let streak = self.since.get_or_insert_with(|| (now, String::new()));
        streak.1 = err.to_string();
        streak.0
    }

    /// A read succeeded at `now`: a streak in progress becomes a span.
    fn reached(&mut self, start: Instant, now: Instant) {
        if let Some((since, error)) = self.since.take() {
            self.spans.push(FaultSpan {
                kind: SpanKind::Unreachable,
                applied: true,
                from_s: (since - start).as_secs_f64(),
                to_s: (now - start).as_secs_f64(),
                count: 0,
                detail: error,
                effects: None,
                queue: None,
            });
        }
    }
}
