//! One load thread: a current-thread tokio runtime with a `LocalSet`, its share of the
//! producers, consumers and (on thread 0) maintenance, and one recorder. A current-thread
//! runtime costs markedly less CPU per request than the multi-thread one.

use super::consumer;
use super::context::{RunShared, ThreadCtx, WallClock};
use super::maintenance::chore_loop;
use super::producer::{self, Producer};
use super::schedule::Schedule;
use crate::bullmq::BullOps;
use crate::echomq::EchoOps;
use crate::history::HistoryBuf;
use crate::keyspace::QueueKeys;
use crate::lua::Protocol;
use crate::metrics::{JobCounter, MetricsSink, Recorder};
use crate::net::{ConnectOptions, Connector, Control, Transport};
use crate::payload::PayloadPool;
use crate::queue::Driver;
use crate::resp::routes::{Dial, Routes};
use crate::resp::{CallError, PipeConn, ScriptClient, ScriptRegistry, Wire};
use crate::scenario::Plan;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{oneshot, watch};

/// What one load thread runs. Task `i` of a role runs on thread `i % threads`.
#[derive(Clone)]
pub struct ThreadSpec {
    /// This thread's number, `0..threads`.
    pub index: usize,
    /// Load threads in all.
    pub threads: usize,
    /// One connector per node (one for a standalone server), in the topology's order.
    pub nodes: Arc<[Connector]>,
    /// The node of each queue at the start (index into `nodes`).
    pub placement: Arc<[usize]>,
    /// Connection settings.
    pub connect: ConnectOptions,
    /// The scripts.
    pub registry: Arc<ScriptRegistry>,
    /// The resolved scenario.
    pub plan: Arc<Plan>,
    /// Run-wide atomics.
    pub shared: Arc<RunShared>,
    /// The run's queues, checked once by the caller; index = the queue number the verbs use.
    pub queues: Arc<[QueueKeys]>,
    /// Where the thread's history goes as it is recorded (`None`: kept until the end).
    pub history_spill: Option<crate::history::spool::HistorySpill>,
}

/// Sent to every thread once all have connected: the run starts now.
pub struct Go {
    /// The run start; open-loop intended times and intervals count from it.
    pub start: Instant,
    /// Where the thread's recorder sends its intervals.
    pub sink: MetricsSink,
}

/// The indices `0..count` that run on thread `index` of `threads`.
fn share(count: u32, index: usize, threads: usize) -> Vec<usize> {
    (0..count as usize).filter(|i| i % threads == index).collect()
}

/// Connections for `tasks` of a role on this thread: the role's connections split in
/// proportion to its tasks, at least one when there is any task.
fn connections_for(tasks: usize, total_tasks: u32, connections: u32) -> usize {
    if tasks == 0 {
        return 0;
    }
    ((connections as usize * tasks).div_ceil(total_tasks.max(1) as usize)).clamp(1, tasks)
}

/// `n` connection sets, each one connection per node.
async fn open<W: Wire>(spec: &ThreadSpec, n: usize) -> Result<Vec<Vec<ScriptClient<W>>>, CallError> {
    let mut sets = Vec::with_capacity(n);
    for _ in 0..n {
        let mut set = Vec::with_capacity(spec.nodes.len());
        for node in spec.nodes.iter() {
            set.push(ScriptClient::open(node, spec.connect, spec.registry.clone()).await?);
        }
        sets.push(set);
    }
    Ok(sets)
}

/// Runs the thread: connects, reports on `ready`, waits for [`Go`], then runs its lanes until
/// `stop` turns true, and returns its history streams (its chunks, [`HistoryBuf::take`]).
/// Connecting before the start keeps connection setup out of open-loop latencies. The
/// recorder's last interval is flushed on the way out.
pub fn run_thread(
    spec: ThreadSpec,
    ready: oneshot::Sender<Result<(), CallError>>,
    go: oneshot::Receiver<Go>,
    stop: watch::Receiver<bool>,
) -> Vec<Vec<u8>> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
    let local = tokio::task::LocalSet::new();
    let stream = match (spec.registry.protocol(), spec.connect.transport) {
        (Protocol::EchoMqV1, Transport::Pipe) => {
            local.block_on(&runtime, thread_main::<PipeConn, EchoOps<PipeConn>>(spec, ready, go, stop))
        }
        (Protocol::EchoMqV1, Transport::RedisRs) => {
            local.block_on(&runtime, thread_main::<Control, EchoOps<Control>>(spec, ready, go, stop))
        }
        (Protocol::BullMq, Transport::Pipe) => {
            local.block_on(&runtime, thread_main::<PipeConn, BullOps<PipeConn>>(spec, ready, go, stop))
        }
        (Protocol::BullMq, Transport::RedisRs) => {
            local.block_on(&runtime, thread_main::<Control, BullOps<Control>>(spec, ready, go, stop))
        }
    };
    // Dropping the LocalSet cancels every lane still running (in-flight requests are abandoned).
    drop(local);
    stream
}

async fn thread_main<W: Wire, Q: Driver<W>>(
    spec: ThreadSpec,
    ready: oneshot::Sender<Result<(), CallError>>,
    go: oneshot::Receiver<Go>,
    mut stop: watch::Receiver<bool>,
) -> Vec<Vec<u8>> {
    // A run stopped while this thread connects ends it here, not after the connect timeout.
    let connected = tokio::select! {
        connected = connect_all::<W>(&spec) => connected,
        _ = stop.wait_for(|stop| *stop) => return Vec::new(),
    };
    // Built before the start too: filling the pool takes milliseconds.
    let pool = PayloadPool::new(spec.plan.seed ^ spec.index as u64);
    let connected = match connected {
        Ok(all) => {
            let _ = ready.send(Ok(()));
            all
        }
        Err(err) => {
            let _ = ready.send(Err(err));
            return Vec::new();
        }
    };
    let shared = Q::shared(&connected.0, &spec.registry, &spec.plan, spec.index);
    // No Go means the coordinator gave up (another thread failed to connect).
    let Ok(Go { start, sink }) = go.await else { return Vec::new() };
    let plan = spec.plan.clone();
    let consumers = share(plan.consumers.count, spec.index, spec.threads);
    let ctx = Rc::new(ThreadCtx {
        plan: plan.clone(),
        shared: spec.shared.clone(),
        recorder: RefCell::new(Recorder::new(&sink)),
        pool,
        history: RefCell::new(match spec.history_spill.clone() {
            Some(spill) => HistoryBuf::spilling(start, spill),
            None => HistoryBuf::new(start),
        }),
        in_flight: std::cell::Cell::new(0),
        sends: std::cell::Cell::new(0),
        backlog: std::cell::Cell::new(0),
        wall: WallClock::now(),
        pacer: start_pacer(&plan, !consumers.is_empty()),
    });
    drop(sink);
    // Open-loop schedules start when the lanes do, not at the coordinator's start: the hand-off
    // to this thread must not count as latency of the first requests.
    let begin = Instant::now();
    let routes = connected.1.clone();
    spawn_lanes::<W, Q>(&ctx, &spec, connected, shared, begin);
    // The thread's CPU share over the load phase (what says whether the harness held a rate
    // back), read at the first flush after it: the drain's idling must not dilute it.
    // Its wait for a CPU over the same span (what says whether the host held the harness back).
    let delay_at_begin = crate::metrics::host::thread_run_delay_s();
    let load_busy = Rc::new(std::cell::Cell::new(None::<LoadBusy>));
    let busy_now = move || {
        let (user, sys) = crate::metrics::cpu::cpu_seconds(crate::metrics::cpu::CpuOf::Thread);
        let elapsed = begin.elapsed().as_secs_f64().max(1e-9);
        let waited = delay_at_begin
            .zip(crate::metrics::host::thread_run_delay_s())
            .map(|(a, b)| ((b - a) / elapsed).clamp(0.0, 1.0));
        ((user + sys) / elapsed, waited)
    };
    wait_for_stop(&ctx, &routes, &load_busy, busy_now, stop).await;
    // Lanes start nothing new once the phase is Stop; the requests already sent get their
    // replies read (and remembered) before the history is taken, up to the reply timeout.
    let deadline = Instant::now() + spec.connect.response_timeout + std::time::Duration::from_millis(100);
    let aborted = || ctx.shared.aborted.load(std::sync::atomic::Ordering::Relaxed);
    while ctx.in_flight.get() > 0 && Instant::now() < deadline && !aborted() {
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    hand_over_counts(&ctx, &routes);
    ctx.recorder.borrow_mut().flush_final();
    let streams = ctx.history.borrow_mut().take();
    ctx.shared.sent.fetch_add(ctx.sends.get(), std::sync::atomic::Ordering::Relaxed);
    ctx.shared.never_sent.fetch_add(ctx.backlog.get(), std::sync::atomic::Ordering::Relaxed);
    let (busy, waited) = load_busy.get().unwrap_or_else(busy_now);
    ctx.shared.busy.lock().expect("busy").push((spec.index, busy, waited));
    streams
}

/// The thread's timer: open-loop sends and the consumers' simulated work, polls and zombie
/// delays wake on a timerfd, not tokio's 1 ms wheel (see `pacer`). `None` when nothing is
/// timed (a closed loop without consumers) or the OS has no timerfd (said once).
fn start_pacer(plan: &Plan, consumes: bool) -> Option<super::pacer::Pacer> {
    let timed = plan.producers.open_loop.is_some() || consumes;
    let pacer = timed.then(super::pacer::Pacer::new).and_then(|made| match made {
        Ok(pacer) => Some(pacer),
        Err(err) => {
            eprintln!(
                "emq-bench: warning: no timerfd ({err}): open-loop sends and consumers' waits use tokio's 1 ms timer"
            );
            None
        }
    });
    if let Some(pacer) = &pacer {
        tokio::task::spawn_local(pacer.clone().drive());
    }
    pacer
}

/// Spawns this thread's share of the producers and consumer lanes, and the maintenance chores,
/// on the `connected` sets; `begin` is when the open-loop schedules start.
fn spawn_lanes<W: Wire, Q: Driver<W>>(
    ctx: &Rc<ThreadCtx>,
    spec: &ThreadSpec,
    connected: Connected<W>,
    shared: Q::Shared,
    begin: Instant,
) {
    let (keys, routes, pconns, cconns, mconn) = connected;
    let plan = &spec.plan;
    let producers = share(plan.producers.count, spec.index, spec.threads);
    let consumers = share(plan.consumers.count, spec.index, spec.threads);
    let seed = |role: u64, i: usize, lane: u32| plan.seed ^ (role << 56) ^ ((i as u64) << 20) ^ u64::from(lane);
    for (k, &p) in producers.iter().enumerate() {
        // Seeds and the schedule's phase follow the producer's index in the fleet.
        let slot = plan.producer_slot(p);
        let ops = Q::new(pconns[k % pconns.len()].clone(), routes.clone(), shared.clone());
        let schedule = match &plan.producers.open_loop {
            Some(open) => Schedule::for_producer(open, plan.producers.count, slot, begin, seed(1, slot.0, 0)),
            None => Schedule::Closed,
        };
        let producer = Producer::new(plan.id_seed(), schedule, seed(3, slot.0, 0));
        tokio::task::spawn_local(producer::run(ctx.clone(), producer, ops, plan.producers.pipeline as usize));
    }
    for (k, &c) in consumers.iter().enumerate() {
        let ops = Q::new(cconns[k % cconns.len()].clone(), routes.clone(), shared.clone());
        for lane in 0..plan.consumers.pipeline {
            let spread = c * plan.consumers.pipeline as usize + lane as usize;
            let seed = seed(4, plan.consumer_index(c), lane);
            tokio::task::spawn_local(consumer::lane(ctx.clone(), ops.clone(), spread, seed));
        }
    }
    // A `shared` fleet's chores run on one shard: the others' would only add load.
    if let Some(client) = mconn.into_iter().next().filter(|_| plan.runs_maintenance()) {
        let ops = Q::new(client, routes.clone(), shared.clone());
        for queue in 0..keys.len() {
            for &chore in Q::CHORES {
                if let Some(every) = chore.every(&plan.maintenance) {
                    tokio::task::spawn_local(chore_loop(ctx.clone(), ops.clone(), queue, chore, every));
                }
            }
        }
    }
}

/// A load thread's CPU share of the load phase, and its wait for a CPU as a share of it
/// (`None` where the kernel keeps no run delay).
type LoadBusy = (f64, Option<f64>);

/// Hands the counts kept outside the recorder to it: cluster redirects followed by the lanes,
/// cluster-down and refused replies waited out, reconnects (counted there, not per call).
fn hand_over_counts(ctx: &ThreadCtx, routes: &Routes) {
    ctx.bump(JobCounter::Redirects, routes.take_redirects());
    let (down, refused) = routes.take_refusals();
    ctx.bump(JobCounter::ClusterDown, down);
    ctx.bump(JobCounter::RefusedWaited, refused);
    ctx.bump(JobCounter::Reconnects, crate::net::connector::take_reconnects());
}

/// Flushes the thread's data every 250 ms until `stop` turns true (idle threads still hand
/// theirs over every second), and takes the load phase's CPU share (`busy_now`) into
/// `load_busy` at the first flush after it.
async fn wait_for_stop(
    ctx: &Rc<ThreadCtx>,
    routes: &Rc<Routes>,
    load_busy: &Rc<std::cell::Cell<Option<LoadBusy>>>,
    busy_now: impl Fn() -> LoadBusy + 'static,
    mut stop: watch::Receiver<bool>,
) {
    let flusher = {
        let (ctx, routes, load_busy) = (ctx.clone(), routes.clone(), load_busy.clone());
        async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_millis(250));
            loop {
                tick.tick().await;
                if load_busy.get().is_none() && ctx.phase() != super::context::Phase::Load {
                    load_busy.set(Some(busy_now()));
                }
                hand_over_counts(&ctx, &routes);
                let now = Instant::now();
                ctx.recorder.borrow_mut().maybe_flush(now);
                ctx.history.borrow_mut().spill_due(now);
            }
        }
    };
    // Waited for on a task of its own: the thread's root future (this one) is polled again at
    // every wake-up of any task on the thread, and a `select!` of the stop signal and the
    // flusher's interval there (a watch channel's `changed`, a timer poll and a random draw)
    // costs far more per wake-up than polling a join handle, the more so at shallower windows,
    // which wake more often per request.
    let waiting = tokio::task::spawn_local(async move {
        tokio::pin!(flusher);
        tokio::select! {
            _ = stop.wait_for(|stop| *stop) => {}
            _ = &mut flusher => {}
        }
    });
    if let Err(err) = waiting.await {
        if err.is_panic() {
            std::panic::resume_unwind(err.into_panic());
        }
    }
}

/// One connection per node.
type Set<W> = Vec<ScriptClient<W>>;
/// This thread's connections: (queue keys, routes, producer, consumer, maintenance connection sets).
type Connected<W> = (Rc<[QueueKeys]>, Rc<Routes>, Vec<Set<W>>, Vec<Set<W>>, Vec<Set<W>>);

async fn connect_all<W: Wire>(spec: &ThreadSpec) -> Result<Connected<W>, CallError> {
    let plan = spec.plan.clone();
    let queues: Rc<[QueueKeys]> = spec.queues.iter().cloned().collect();
    let producers = share(plan.producers.count, spec.index, spec.threads);
    let consumers = share(plan.consumers.count, spec.index, spec.threads);
    let pconns = open(spec, connections_for(producers.len(), plan.producers.count, plan.producers.connections)).await?;
    let cconns = open(spec, connections_for(consumers.len(), plan.consumers.count, plan.consumers.connections)).await?;
    let mconn = if spec.index == 0 { open(spec, 1).await? } else { Vec::new() };
    let nodes = spec.nodes.iter().map(|c| (c.endpoint().host.clone(), c.endpoint().port)).collect();
    let slots = spec.queues.iter().map(|q| crate::net::slot::slot(q.lock.as_bytes())).collect();
    let dial = Dial { connector: spec.nodes[0].clone(), opts: spec.connect, registry: spec.registry.clone() };
    let routes = Rc::new(Routes::new(&spec.placement, slots, nodes, dial));
    Ok((queues, routes, pconns, cconns, mconn))
}
