//! Cluster routing of one load thread's calls: which node serves a queue, following the
//! redirects (MOVED, ASK, TRYAGAIN) a slot migration answers with, and following a failover:
//! a node that cannot be reached, or a cluster that answers CLUSTERDOWN or LOADING, makes the
//! thread read the slot map again from any node that answers and route the queue to its new
//! primary.

use crate::net::topology::parse_slots;
use crate::net::{ConnectOptions, Connector};
use crate::resp::{CallError, Redirect, RedirectKind, Request, ScriptClient, ScriptRegistry, Wire};
use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The queue → node table of one load thread, shared by its lanes (`Rc`, one thread): a
/// queue's calls go to the node that owns its slot; a MOVED updates the table, an ASK sends one
/// call elsewhere, a TRYAGAIN (keys split mid-migration) waits and resends, a node fault reads
/// the slot map again. Each followed redirect and each refusal waited out is counted here (apart),
/// never as an error or as throughput.
///
/// Nodes are only ever added (a promoted replica, a node a MOVED names), never removed, so a
/// node index stays valid for the whole run.
pub struct Routes {
    node_of_queue: Vec<Cell<usize>>,
    /// Each queue's slot (of its hash tag), to place it again from a fresh slot map.
    slot_of_queue: Vec<u16>,
    nodes: RefCell<Vec<(String, u16)>>,
    redirects: Cell<u64>,
    /// Refusals waited out since the last take: CLUSTERDOWN, then the others (LOADING, a node
    /// that could not be reached).
    refusals: Cell<(u64, u64)>,
    /// When the slot map was last read: a thread reads it at most every [`REFRESH_EVERY`].
    refreshed: Cell<Option<Instant>>,
    dial: Dial,
}

/// How a load thread opens a connection to a node it did not know at the start.
#[derive(Clone)]
pub struct Dial {
    /// A connector to any node (its settings, TLS and auth, carry over to the new node).
    pub connector: Connector,
    /// Connection settings.
    pub opts: ConnectOptions,
    /// The scripts to load on the new connection.
    pub registry: Arc<ScriptRegistry>,
}

impl Routes {
    /// The table for queues placed on `node_of_queue` (indices into `nodes`, host and port),
    /// whose slots are `slot_of_queue`; `dial` opens connections to nodes found later.
    pub fn new(node_of_queue: &[usize], slot_of_queue: Vec<u16>, nodes: Vec<(String, u16)>, dial: Dial) -> Routes {
        Routes {
            node_of_queue: node_of_queue.iter().map(|&n| Cell::new(n)).collect(),
            slot_of_queue,
            nodes: RefCell::new(nodes),
            redirects: Cell::new(0),
            refusals: Cell::new((0, 0)),
            refreshed: Cell::new(None),
            dial,
        }
    }

    /// Redirects followed since the last call (the thread's flusher moves them into its
    /// counters).
    pub fn take_redirects(&self) -> u64 {
        self.redirects.take()
    }

    /// Refusals waited out since the last call: (CLUSTERDOWN, the others: LOADING or a node
    /// that could not be reached).
    pub fn take_refusals(&self) -> (u64, u64) {
        self.refusals.take()
    }

    pub(crate) fn node(&self, queue: usize) -> usize {
        self.node_of_queue[queue].get()
    }

    /// Nodes known to the thread (the clients a verb set should have).
    pub(crate) fn node_count(&self) -> usize {
        self.nodes.borrow().len()
    }

    /// The index of the node at `host:port`, added when it is new.
    fn index_of(&self, host: &str, port: u16) -> usize {
        let mut nodes = self.nodes.borrow_mut();
        match nodes.iter().position(|(h, p)| h == host && *p == port) {
            Some(i) => i,
            None => {
                nodes.push((host.to_string(), port));
                nodes.len() - 1
            }
        }
    }

    /// Where to send next after `redirect` from node `from` (a node new to the run is added).
    pub(crate) fn follow(&self, queue: usize, from: usize, redirect: &Redirect) -> usize {
        self.redirects.set(self.redirects.get() + 1);
        if redirect.kind == RedirectKind::TryAgain {
            return self.node(queue);
        }
        // An empty host means the node we talked to.
        let host = if redirect.host.is_empty() { self.nodes.borrow()[from].0.clone() } else { redirect.host.clone() };
        let to = self.index_of(&host, redirect.port);
        if redirect.kind == RedirectKind::Moved {
            self.node_of_queue[queue].set(to);
        }
        to
    }

    /// Reads the slot map (CLUSTER SLOTS) from the first node that answers in time, starting
    /// after `failed`, and routes every queue to its slot's primary; at most once per
    /// [`REFRESH_EVERY`] per thread (the lanes that meet the same fault share one read).
    async fn refresh<W: Wire>(&self, clients: &mut Vec<ScriptClient<W>>, failed: usize) {
        let now = Instant::now();
        if self.refreshed.get().is_some_and(|at| now < at + REFRESH_EVERY) {
            return;
        }
        self.refreshed.set(Some(now));
        let request = Request::from_args(&["CLUSTER", "SLOTS"]);
        let known = self.node_count();
        for i in (1..=known).map(|k| (failed + k) % known) {
            if ensure_clients(self, clients).await.is_err() && i >= clients.len() {
                continue;
            }
            let host = self.nodes.borrow()[i].0.clone();
            let reply = tokio::time::timeout(REFRESH_TIMEOUT, clients[i].command(&request)).await;
            let Ok(Ok(reply)) = reply else { continue };
            let ranges = parse_slots(&reply, &host);
            if ranges.is_empty() {
                continue;
            }
            for (queue, slot) in self.slot_of_queue.iter().enumerate() {
                if let Some(range) = ranges.iter().find(|r| (r.start..=r.end).contains(slot)) {
                    let (host, port) = &range.primary;
                    self.node_of_queue[queue].set(self.index_of(host, *port));
                }
            }
            // Connections to the new nodes are opened as their first call needs them.
            return;
        }
    }
}

/// Opens a client to every node of `routes` that `clients` has none for yet (in order, so
/// the indices agree).
///
/// Errors: the first failed connect (the clients opened before it stay).
pub(crate) async fn ensure_clients<W: Wire>(
    routes: &Routes,
    clients: &mut Vec<ScriptClient<W>>,
) -> Result<(), CallError> {
    while clients.len() < routes.node_count() {
        let (host, port) = routes.nodes.borrow()[clients.len()].clone();
        let dial = &routes.dial;
        let connector = dial.connector.at(&host, port).map_err(|e| CallError::Unsent(e.to_string()))?;
        clients.push(ScriptClient::open(&connector, dial.opts, dial.registry.clone()).await?);
    }
    Ok(())
}

/// The lane a queued call for `node` goes on, of `lanes` (one per node known when the lanes
/// were made): its own, or for a node found since, the first; that node answers MOVED (or
/// cannot be reached), and the redo takes the routed path, which opens the new node's client.
pub(crate) fn lane_node(node: usize, lanes: usize) -> usize {
    if node < lanes {
        node
    } else {
        0
    }
}

/// How often one thread may read the slot map while its calls meet node faults.
const REFRESH_EVERY: Duration = Duration::from_millis(100);
/// How long a node gets to answer CLUSTER SLOTS before the next is asked.
const REFRESH_TIMEOUT: Duration = Duration::from_millis(500);
/// The wait before a call refused for now ([`CallError::is_refused_for_now`]) is sent again.
pub(crate) const FAULT_PAUSE: Duration = Duration::from_millis(50);
/// Refusals one call waits out before the last is reported: with [`FAULT_PAUSE`], about
/// 20 s, longer than a failover takes with the default node timeouts.
pub(crate) const MAX_FAULTS: u32 = 400;

/// Redirects one call may follow before its last one is reported as an error: with the 2 ms
/// TRYAGAIN pause, a migration may keep a queue's keys split for about 5 s.
pub(crate) const MAX_REDIRECTS: u32 = 2500;
/// The wait before resending after TRYAGAIN (the migration of the slot's keys is under way).
pub(crate) const TRYAGAIN_PAUSE: std::time::Duration = std::time::Duration::from_millis(2);

/// Runs `$call` with `$client` (the queue's node's client, or `$start`'s) and `$keys`,
/// following redirects ([`follow`]) and waiting out node faults ([`fault`]): a call whose
/// outcome is unknown (the connection failed after it was sent, no reply in time) is never
/// sent again, only the queue re-routed; one refused before it ran is resent. `$ops` has
/// `clients`, `routes` and `queues` fields (the queue's keys of its protocol).
macro_rules! routed {
    ($ops:ident, $queue:expr, |$client:ident, $keys:ident| $call:expr) => {{
        let queue = $queue;
        routed!($ops, queue, $ops.routes.node(queue), |$client, $keys| $call)
    }};
    ($ops:ident, $queue:expr, $start:expr, |$client:ident, $keys:ident| $call:expr) => {{
        let queue = $queue;
        let mut node = $start;
        let mut tries = 0u32;
        let mut faults = 0u32;
        loop {
            if node >= $ops.clients.len() {
                if let Err(err) = $crate::resp::routes::ensure_clients(&$ops.routes, &mut $ops.clients).await {
                    break Err(err);
                }
            }
            let $keys = &$ops.queues[queue];
            let $client = &mut $ops.clients[node];
            match $call.await {
                Err(CallError::Redirect(redirect)) if tries < MAX_REDIRECTS => {
                    tries += 1;
                    node = $crate::resp::routes::follow(&$ops.routes, &mut $ops.clients, queue, node, &redirect).await;
                }
                Err(err) if err.is_node_fault() && faults < $crate::resp::routes::MAX_FAULTS => {
                    faults += 1;
                    $crate::resp::routes::fault(&$ops.routes, &mut $ops.clients, node, &err).await;
                    if !err.is_refused_for_now() {
                        break Err(err);
                    }
                    node = $ops.routes.node(queue);
                }
                other => break other,
            }
        }
    }};
}
pub(crate) use routed;

/// Follows `redirect`, the reply of node `from` to a call on `queue`: counts it, updates the
/// route on MOVED, has the next call to the new node sent after ASKING on ASK, pauses on
/// TRYAGAIN; returns the node to resend to (a node new to the run gets its client as the
/// call needs it).
pub(crate) async fn follow<W: Wire>(
    routes: &Routes,
    clients: &mut [ScriptClient<W>],
    queue: usize,
    from: usize,
    redirect: &Redirect,
) -> usize {
    let next = routes.follow(queue, from, redirect);
    match redirect.kind {
        RedirectKind::Ask => {
            if let Some(client) = clients.get_mut(next) {
                client.ask_next();
            }
        }
        RedirectKind::TryAgain => tokio::time::sleep(TRYAGAIN_PAUSE).await,
        RedirectKind::Moved => {}
    }
    next
}

/// Reacts to `err`, a node fault ([`CallError::is_node_fault`]) of node `from`: reads the slot
/// map again (the node may have failed over), and before a resend (a refusal for now) pauses
/// [`FAULT_PAUSE`] and counts the refusal as waited out.
pub(crate) async fn fault<W: Wire>(routes: &Routes, clients: &mut Vec<ScriptClient<W>>, from: usize, err: &CallError) {
    routes.refresh(clients, from).await;
    if err.is_refused_for_now() {
        let (down, other) = routes.refusals.get();
        let cluster_down = matches!(err, CallError::Server(reply) if reply.starts_with("CLUSTERDOWN "));
        routes.refusals.set(if cluster_down { (down + 1, other) } else { (down, other + 1) });
        tokio::time::sleep(FAULT_PAUSE).await;
    }
}

/// Where a redo of a call queued on node `node` and answered with `err` starts
/// ([`QueueOps::redo_enqueue`](crate::queue::QueueOps::redo_enqueue)): the redirect's target,
/// followed as the routed path follows one; after a refusal for now, the queue's node once
/// the fault is waited out; `node` itself after NOSCRIPT.
pub(crate) async fn redo_node<W: Wire>(
    routes: &Routes,
    clients: &mut Vec<ScriptClient<W>>,
    queue: usize,
    node: usize,
    err: &CallError,
) -> usize {
    match err {
        CallError::Redirect(redirect) => follow(routes, clients, queue, node, redirect).await,
        err if err.is_refused_for_now() => {
            fault(routes, clients, node, err).await;
            routes.node(queue)
        }
        _ => node,
    }
}
