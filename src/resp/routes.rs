//! Cluster routing of one load thread's calls: which node serves a queue, and following the
//! redirects (MOVED, ASK, TRYAGAIN) a slot migration answers with.

use crate::resp::{CallError, Redirect, RedirectKind, ScriptClient, Wire};
use std::cell::Cell;

/// The queue → node table of one load thread, shared by its lanes (`Rc`, one thread): a
/// queue's calls go to the node that owns its slot; a MOVED updates the table, an ASK sends one
/// call elsewhere, a TRYAGAIN (keys split mid-migration) waits and resends. Each followed
/// redirect is counted here, never as an error or as throughput.
pub struct Routes {
    node_of_queue: Vec<Cell<usize>>,
    nodes: Vec<(String, u16)>,
    redirects: Cell<u64>,
}

impl Routes {
    /// The table for queues placed on `node_of_queue` (indices into `nodes`, host and port).
    pub fn new(node_of_queue: &[usize], nodes: Vec<(String, u16)>) -> Routes {
        Routes { node_of_queue: node_of_queue.iter().map(|&n| Cell::new(n)).collect(), nodes, redirects: Cell::new(0) }
    }

    /// Redirects followed since the last call (the thread's flusher moves them into its counters).
    pub fn take_redirects(&self) -> u64 {
        self.redirects.take()
    }

    pub(crate) fn node(&self, queue: usize) -> usize {
        self.node_of_queue[queue].get()
    }

    /// Where to send next after `redirect` from node `from`; `None` for a node unknown to the
    /// run (no connection to it).
    pub(crate) fn follow(&self, queue: usize, from: usize, redirect: &Redirect) -> Option<usize> {
        self.redirects.set(self.redirects.get() + 1);
        if redirect.kind == RedirectKind::TryAgain {
            return Some(self.node(queue));
        }
        // An empty host means the node we talked to.
        let host = if redirect.host.is_empty() { self.nodes[from].0.as_str() } else { redirect.host.as_str() };
        let to = self.nodes.iter().position(|(h, p)| h == host && *p == redirect.port)?;
        if redirect.kind == RedirectKind::Moved {
            self.node_of_queue[queue].set(to);
        }
        Some(to)
    }
}

/// Redirects one call may follow before its last one is reported as an error: with the 2 ms
/// TRYAGAIN pause, a migration may keep a queue's keys split for about 5 s.
pub(crate) const MAX_REDIRECTS: u32 = 2500;
/// The wait before resending after TRYAGAIN (the migration of the slot's keys is under way).
pub(crate) const TRYAGAIN_PAUSE: std::time::Duration = std::time::Duration::from_millis(2);

/// Runs `$call` with `$client` (the queue's node's client, or `$start`'s) and `$keys`,
/// following redirects ([`follow`]). `$ops` has `clients`, `routes` and `queues` fields (the
/// queue's keys of its protocol).
macro_rules! routed {
    ($ops:ident, $queue:expr, |$client:ident, $keys:ident| $call:expr) => {{
        let queue = $queue;
        routed!($ops, queue, $ops.routes.node(queue), |$client, $keys| $call)
    }};
    ($ops:ident, $queue:expr, $start:expr, |$client:ident, $keys:ident| $call:expr) => {{
        let queue = $queue;
        let mut node = $start;
        let mut tries = 0u32;
        loop {
            let $keys = &$ops.queues[queue];
            let $client = &mut $ops.clients[node];
            match $call.await {
                Err(CallError::Redirect(redirect)) if tries < MAX_REDIRECTS => {
                    tries += 1;
                    let Some(next) =
                        $crate::resp::routes::follow(&$ops.routes, &mut $ops.clients, queue, node, &redirect).await
                    else {
                        break Err(CallError::Redirect(redirect));
                    };
                    node = next;
                }
                other => break other,
            }
        }
    }};
}
pub(crate) use routed;

/// Follows `redirect`, the reply of node `from` to a call on `queue`: counts it, updates the
/// route on MOVED, has the next call to the new node sent after ASKING on ASK, pauses on
/// TRYAGAIN; returns the node to resend to, `None` for a node unknown to the run.
pub(crate) async fn follow<W: Wire>(
    routes: &Routes,
    clients: &mut [ScriptClient<W>],
    queue: usize,
    from: usize,
    redirect: &Redirect,
) -> Option<usize> {
    let next = routes.follow(queue, from, redirect)?;
    match redirect.kind {
        RedirectKind::Ask => clients[next].ask_next(),
        RedirectKind::TryAgain => tokio::time::sleep(TRYAGAIN_PAUSE).await,
        RedirectKind::Moved => {}
    }
    Some(next)
}

/// Where a redo of a call queued on node `node` and answered with `err` starts
/// ([`QueueOps::redo_enqueue`](crate::queue::QueueOps::redo_enqueue)): the redirect's target, followed as the routed path follows
/// one, or `node` itself after NOSCRIPT; `None` for a redirect to a node unknown to the run.
pub(crate) async fn redo_node<W: Wire>(
    routes: &Routes,
    clients: &mut [ScriptClient<W>],
    queue: usize,
    node: usize,
    err: &CallError,
) -> Option<usize> {
    match err {
        CallError::Redirect(redirect) => follow(routes, clients, queue, node, redirect).await,
        _ => Some(node),
    }
}
