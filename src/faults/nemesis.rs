//! The nemesis: injects the scenario's `[[faults]]` during the load phase (Jepsen's nemesis
//! is the model), one at a time in time order, and records each one's span.
//!
//! It runs on a thread of its own with its own control connections, so a frozen server or a
//! long restart never stalls the coordinator's depth polling (and the reverse: a coordinator
//! waiting on a frozen server cannot delay the thaw). A restarted embedded server is started
//! from this thread, which lives as long as the [`Nemesis`] handle, so the kernel's
//! "die with the parent" tie (see `server::process`) does not end the server early.
//!
//! A fault that lasts (pause, freeze, maxmemory) is undone when its duration is over, or at
//! once when the load phase ends or the run stops: the run never leaves a server frozen,
//! paused or short of memory. One due while another lasts starts when that one ends.

use super::kinds;
use super::record::{FaultSpan, SpanKind};
use crate::keyspace::QueueKeys;
use crate::plane::Plane;
use crate::scenario::FaultPlan;
use crate::server::{EmbeddedCluster, EmbeddedServer};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot, watch};

/// The client name of this process's load connections (CLIENT SETNAME),
/// `emq-bench-load-<pid>`, so `kill-connections` kills this run's load connections and
/// nobody else's (not even another emq-bench run's on other queues of the same server).
pub fn load_client_name() -> &'static str {
    static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NAME.get_or_init(|| format!("emq-bench-load-{}", std::process::id()))
}

/// At most this many faults fire in one run (a 100 ms `every` over a 2 h soak is 72 000).
pub const MAX_FIRED: usize = 100_000;

/// A handle on the nemesis thread. Clones share it; the thread ends when the last is dropped
/// (or [`Nemesis::join`]ed).
#[derive(Clone)]
pub struct Nemesis {
    commands: mpsc::UnboundedSender<Command>,
    thread: Arc<Mutex<Option<std::thread::JoinHandle<()>>>>,
}

struct Command {
    start: Instant,
    until: Duration,
    end: watch::Receiver<bool>,
    spans: oneshot::Sender<Vec<FaultSpan>>,
}

/// The processes the harness started, for the faults that act on them; `None` for what it did
/// not start.
#[derive(Default)]
pub struct Processes {
    /// The embedded server (`freeze`, `restart`, `failover`), shared with the session.
    pub server: Option<Arc<Mutex<EmbeddedServer>>>,
    /// The replica started for `failover` (owned by the nemesis from then on).
    pub replica: Option<EmbeddedServer>,
    /// The embedded cluster (`kill-primary`, a `lag`), shared with the session, which stops
    /// every node at its end (one the nemesis restarted included).
    pub cluster: Option<Arc<Mutex<EmbeddedCluster>>>,
}

/// One run's schedule under way: [`Running::finish`] ends it and returns the spans.
pub struct Running {
    end: watch::Sender<bool>,
    spans: oneshot::Receiver<Vec<FaultSpan>>,
}

impl Running {
    /// Asks the nemesis to stop injecting now (a fault that lasts is undone at once); cheap,
    /// does not wait.
    pub fn stop(&self) {
        let _ = self.end.send(true);
    }

    /// Stops the schedule and returns the span of every fault injected, in order.
    pub async fn finish(self) -> Vec<FaultSpan> {
        self.stop();
        self.spans.await.unwrap_or_default()
    }
}

impl Nemesis {
    /// Starts the nemesis thread for `faults`: its own connections to every node of `plane`,
    /// the run's `queues` (in the plan's order: a fault's `queue` indexes them) and the
    /// `processes` the harness started.
    ///
    /// Panics when the OS cannot start a thread.
    pub fn start(faults: Vec<FaultPlan>, plane: &Plane, queues: Vec<QueueKeys>, processes: Processes) -> Nemesis {
        let Processes { server, replica, cluster } = processes;
        let (commands, mut received) = mpsc::unbounded_channel::<Command>();
        let plane = plane.clone();
        let thread = crate::side_thread::spawn("emq-nemesis", move || {
            async move {
                // Opened once; when it fails, every schedule reports one `nemesis` span saying
                // so (and the run fails: no fault was injected).
                let own = plane.open_again().await.map_err(|e| e.to_string());
                let target = kinds::FaultTarget {
                    plane: std::cell::RefCell::new(own.as_ref().ok().cloned()),
                    queues: &queues,
                    server: server.as_deref(),
                    replica: std::cell::RefCell::new(replica),
                    cluster: cluster.as_deref(),
                };
                while let Some(command) = received.recv().await {
                    let spans = match &own {
                        Ok(_) => run_schedule(&faults, &target, command.start, command.until, command.end).await,
                        Err(err) => vec![FaultSpan {
                            kind: SpanKind::Nemesis,
                            applied: false,
                            from_s: 0.0,
                            to_s: 0.0,
                            count: 0,
                            detail: format!("no fault injected: its connections failed: {err}"),
                            effects: None,
                            queue: None,
                        }],
                    };
                    let _ = command.spans.send(spans);
                }
            }
        });
        Nemesis { commands, thread: Arc::new(Mutex::new(Some(thread))) }
    }

    /// Ends the thread and waits for it (it stops the replica it owns on the way out), so the
    /// servers' shutdown does not race this process's exit. Call it on the last handle; a
    /// handle still held elsewhere keeps the thread waiting for commands.
    pub async fn join(self) {
        self.join_within(Duration::MAX).await;
    }

    /// As [`join`](Self::join), for at most `limit`: a thread still busy then (undoing a
    /// fault on a server that does not answer) is left behind, not waited for, so it holds
    /// neither this call nor the process's exit (no blocking task is left to the runtime).
    /// True when the thread ended in time.
    pub async fn join_within(self, limit: Duration) -> bool {
        let thread = self.thread.lock().expect("nemesis thread").take();
        drop(self);
        let Some(thread) = thread else { return true };
        let deadline = Instant::now().checked_add(limit);
        while !thread.is_finished() {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let _ = thread.join();
        true
    }

    /// Starts injecting: times count from `start`; nothing fires at or after `until` (the end
    /// of the load phase; `Duration::MAX` when the run is bounded by jobs).
    pub fn begin(&self, start: Instant, until: Duration) -> Running {
        let (end_tx, end) = watch::channel(false);
        let (spans_tx, spans) = oneshot::channel();
        let _ = self.commands.send(Command { start, until, end, spans: spans_tx });
        Running { end: end_tx, spans }
    }
}

/// Fires every fault of `faults` due before `until`, in time order, until `end` turns true.
async fn run_schedule(
    faults: &[FaultPlan],
    target: &kinds::FaultTarget<'_>,
    start: Instant,
    until: Duration,
    mut end: watch::Receiver<bool>,
) -> Vec<FaultSpan> {
    let mut due: Vec<(Duration, usize)> = faults
        .iter()
        .enumerate()
        .flat_map(|(i, f)| f.times(until, MAX_FIRED).into_iter().map(move |t| (t, i)))
        .collect();
    due.sort();
    due.truncate(MAX_FIRED);
    let mut spans = Vec::new();
    for (at, i) in due {
        let ended = tokio::select! {
            _ = tokio::time::sleep_until((start + at).into()) => false,
            _ = end.wait_for(|e| *e) => true,
        };
        if ended || *end.borrow() {
            break;
        }
        spans.push(kinds::inject(&faults[i], target, start, &mut end).await);
    }
    spans
}

/// Waits `d`, or less when `end` turns true; true when it was cut short.
pub(crate) async fn hold(d: Duration, end: &mut watch::Receiver<bool>) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(d) => false,
        _ = end.wait_for(|e| *e) => true,
    }
}
