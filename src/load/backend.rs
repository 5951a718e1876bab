//! The verbs the driver speaks. Producers, consumers and maintenance call these, never key
//! names, so another wire protocol (seed 002's BullMQ-compatible layout) can later be driven
//! by the same load, histograms and checker by implementing [`QueueOps`] once more.

use super::maintenance::Chore;
use crate::protocol::{
    enqueue_reply, CallError, Claimed, CompleteReply, EchoClient, EnqueueFrames, EnqueueReply, FailArgs, FailReply,
    JobId, ReplyLane,
};
use crate::protocol::{QueueKeys, Redirect, RedirectKind, Script, ScriptRegistry, Wire};
use crate::scenario::Plan;
use redis::Value;
use std::cell::Cell;
use std::future::Future;
use std::rc::Rc;

/// One queue protocol as the load driver sees it. Queues are addressed by index into the
/// run's queue list. Futures need not be `Send`: each load thread runs its own runtime.
///
/// Every method returns the protocol's typed reply or a [`CallError`] whose
/// [`code`](CallError::code) is counted per script.
pub trait QueueOps: Clone + 'static {
    /// The fencing token a claim hands out and every fenced call carries: EchoMQ's `u64`
    /// (the attempt number), BullMQ's lock token.
    type Token: Copy + std::fmt::Debug + 'static;
    /// A lane of one node's connection ([`Wire::Lane`]): where a producer's queued enqueues
    /// ([`QueueOps::queue_enqueue`]) come back, in order, with their times.
    type Lane: ReplyLane;
    /// True when an enqueue's reply says whether the id was new (EchoMQ: 1 or 0). BullMQ
    /// answers a repeated job id with the id, as it answers a new one: its replies read as
    /// [`EnqueueReply::Enqueued`], and the producer records a deliberate duplicate as
    /// refused by what it sent; that it changed nothing is the checker's to prove (I8).
    const REPORTS_DUPLICATES: bool = true;
    /// The maintenance chores the protocol needs, each run on its own interval (EchoMQ: reap
    /// and promote; BullMQ: the stalled-jobs check only, as its claim promotes due jobs).
    const CHORES: &'static [Chore];

    /// The script an enqueue with these options runs, for recording.
    fn enqueue_script(delay_ms: Option<u64>, priority: Option<u64>) -> Script;
    /// The script each other verb runs, for recording. A failure's script may depend on the
    /// attempt ([`fail_script`](QueueOps::fail_script)).
    fn script(verb: Verb) -> Script;
    /// The script a failure of the attempt held with `token` runs with `args` (BullMQ's client
    /// decides between retry, delay and a final failure before it calls).
    fn fail_script(&self, token: &Self::Token, args: &FailArgs<'_>) -> Script;
    /// True when a claim with `token` must be failed at once, unprocessed (BullMQ: the
    /// stalled check deferred the failure of a job stalled past its limit, `defa`).
    fn must_fail(_token: &Self::Token) -> bool {
        false
    }
    /// The attempt number the history records for `token` (invariant I5 checks that a job's
    /// attempts run 1, 2, 3, ...).
    fn attempt(token: &Self::Token) -> u32;

    /// One lane per node (by node index), for one producer's window.
    fn enqueue_lanes(&self) -> Vec<Self::Lane>;

    /// Queues the enqueue of a new job (delayed by `delay_ms` when `Some`, else with
    /// `priority`) on the lane of its queue's node now, and returns that node (index into the
    /// run's nodes and `lanes`): the producers' pipelined path. The reply comes back on that
    /// lane; [`enqueue_reply`](QueueOps::enqueue_reply) reads it. Nothing is followed: a
    /// redirect or NOSCRIPT reply comes back as that error ([`needs_redo`]), and the caller
    /// redoes the call with [`redo_enqueue`](QueueOps::redo_enqueue). The payload,
    /// `payload_len` bytes, is appended by `write_payload` where it is sent from.
    #[allow(clippy::too_many_arguments)] // the enqueue's own arguments, plus the window's lanes
    fn queue_enqueue(
        &mut self,
        lanes: &mut [Self::Lane],
        queue: usize,
        id: &JobId,
        payload_len: usize,
        write_payload: impl FnOnce(&mut Vec<u8>),
        priority: Option<u64>,
        delay_ms: Option<u64>,
    ) -> usize;

    /// Reads the reply of a queued enqueue that ran `script`. `id` mints the job's id when the
    /// reply must name it (BullMQ's does, EchoMQ's 1 or 0 does not): a producer keeps no id
    /// per request in flight.
    ///
    /// Errors: the lane's error, or a reply of another shape as [`CallError::Reply`].
    fn enqueue_reply(
        script: Script,
        id: impl FnOnce() -> JobId,
        reply: Result<Value, CallError>,
    ) -> Result<EnqueueReply, CallError>;

    /// Redoes an enqueue that was queued on node `node` and answered with `err`, a redirect
    /// or NOSCRIPT ([`needs_redo`]): a redirect is followed as the routed path follows one
    /// (counted, the route updated on MOVED, ASKING sent after ASK, the pause after TRYAGAIN),
    /// then the call goes the routed way, which reloads a lost script. `delay_ms` `Some` redoes
    /// an `enqueue_delayed`.
    #[allow(clippy::too_many_arguments)] // the queued call's own arguments, plus where it went
    fn redo_enqueue(
        &mut self,
        node: usize,
        err: CallError,
        queue: usize,
        id: JobId,
        payload: &[u8],
        priority: Option<u64>,
        delay_ms: Option<u64>,
    ) -> impl Future<Output = Result<EnqueueReply, CallError>>;

    /// Adds a new pending job (`priority` 0 = highest; `None` = the protocol default).
    fn enqueue(
        &mut self,
        queue: usize,
        id: JobId,
        payload: &[u8],
        priority: Option<u64>,
    ) -> impl Future<Output = Result<EnqueueReply, CallError>>;
    /// Adds a new job due after `delay_ms` milliseconds.
    fn enqueue_delayed(
        &mut self,
        queue: usize,
        id: JobId,
        payload: &[u8],
        delay_ms: u64,
    ) -> impl Future<Output = Result<EnqueueReply, CallError>>;
    /// Claims up to `count` jobs with a lease of `lease_ms` milliseconds.
    fn claim(
        &mut self,
        queue: usize,
        lease_ms: u64,
        count: u32,
    ) -> impl Future<Output = Result<Vec<Claimed<Self::Token>>, CallError>>;
    /// Completes a job held with fencing token `token`.
    fn complete(
        &mut self,
        queue: usize,
        id: JobId,
        token: Self::Token,
    ) -> impl Future<Output = Result<CompleteReply, CallError>>;
    /// Fails the attempt held with `token`.
    fn fail(
        &mut self,
        queue: usize,
        id: JobId,
        token: Self::Token,
        args: FailArgs<'static>,
    ) -> impl Future<Output = Result<FailReply, CallError>>;
    /// Renews the lease held with `token` to `lease_ms` from now.
    fn extend(
        &mut self,
        queue: usize,
        id: JobId,
        token: Self::Token,
        lease_ms: u64,
    ) -> impl Future<Output = Result<(), CallError>>;
    /// Stores a progress note on the job held with `token`.
    fn progress(
        &mut self,
        queue: usize,
        id: JobId,
        token: Self::Token,
        note: &[u8],
    ) -> impl Future<Output = Result<(), CallError>>;
    /// Returns up to `limit` expired leases to pending, or to failed once they used
    /// `max_attempts` claims (0: never); replies how many moved.
    fn reap(&mut self, queue: usize, limit: u32, max_attempts: u32) -> impl Future<Output = Result<u64, CallError>>;
    /// Moves up to `limit` due delayed jobs to pending; replies how many.
    fn promote(&mut self, queue: usize, limit: u32) -> impl Future<Output = Result<u64, CallError>>;
}

/// How a load thread builds protocol `Self`'s verbs over transport `W`: one `match` on the
/// run's protocol and transport picks the pair, and everything below is monomorphised.
pub trait Driver<W: Wire>: QueueOps {
    /// What the thread's verbs share, built once per thread: the protocol's keys of the run's
    /// queues, and whatever else its calls need (BullMQ: the jobs' retry policy, the lock
    /// token minter).
    type Shared: Clone + 'static;
    /// The shared part for load thread `thread` of a run of `plan` on `queues` (in order), whose
    /// scripts are `registry`'s.
    fn shared(queues: &[QueueKeys], registry: &ScriptRegistry, plan: &Plan, thread: usize) -> Self::Shared;
    /// The verbs over `clients` (one per node, in the routes' node order).
    fn new(clients: Vec<EchoClient<W>>, routes: Rc<Routes>, shared: Self::Shared) -> Self;
}

impl<W: Wire> Driver<W> for EchoOps<W> {
    /// The queues' keys and their pre-framed enqueue pieces, by queue index.
    type Shared = (Rc<[QueueKeys]>, Rc<[EnqueueFrames]>);
    fn shared(queues: &[QueueKeys], registry: &ScriptRegistry, _plan: &Plan, _thread: usize) -> Self::Shared {
        (queues.iter().cloned().collect(), queues.iter().map(|keys| EnqueueFrames::new(keys, registry)).collect())
    }
    fn new(clients: Vec<EchoClient<W>>, routes: Rc<Routes>, (queues, frames): Self::Shared) -> Self {
        EchoOps { clients, routes, queues, frames }
    }
}

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
                        $crate::load::backend::follow(&$ops.routes, &mut $ops.clients, queue, node, &redirect).await
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
    clients: &mut [EchoClient<W>],
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
/// ([`QueueOps::redo_enqueue`]): the redirect's target, followed as the routed path follows
/// one, or `node` itself after NOSCRIPT; `None` for a redirect to a node unknown to the run.
pub(crate) async fn redo_node<W: Wire>(
    routes: &Routes,
    clients: &mut [EchoClient<W>],
    queue: usize,
    node: usize,
    err: &CallError,
) -> Option<usize> {
    match err {
        CallError::Redirect(redirect) => follow(routes, clients, queue, node, redirect).await,
        _ => Some(node),
    }
}

/// The EchoMQ v1.1 implementation: one pipelined client per node (either transport), the
/// thread's routes, and the keys of every queue of the run.
#[derive(Clone)]
pub struct EchoOps<W: Wire> {
    clients: Vec<EchoClient<W>>,
    routes: Rc<Routes>,
    queues: Rc<[QueueKeys]>,
    /// Each queue's pre-framed enqueue pieces, by queue index.
    frames: Rc<[EnqueueFrames]>,
}

/// True for the replies a queued call ([`QueueOps::queue_enqueue`]) does not follow itself: a
/// redirect (the cluster moved the queue's slot) or NOSCRIPT (the server lost its scripts). The
/// script did not run; the call is redone on the routed path, which follows and reloads.
pub fn needs_redo(err: &CallError) -> bool {
    matches!(err, CallError::Redirect(_) | CallError::NoScript(_))
}

/// The verbs besides enqueue, by what they do: [`QueueOps::script`] names the script each
/// runs in a protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// Take pending jobs with a lease.
    Claim,
    /// Finish a held job.
    Complete,
    /// Fail a held attempt (the protocol may pick the script per attempt).
    Fail,
    /// Renew a held lease.
    Extend,
    /// Store a progress note.
    Progress,
    /// Return expired leases (BullMQ: the stalled-jobs check).
    Reap,
    /// Move due delayed jobs.
    Promote,
}

impl<W: Wire> QueueOps for EchoOps<W> {
    type Token = u64;
    type Lane = W::Lane;
    const CHORES: &'static [Chore] = &[Chore::Reap, Chore::Promote];

    fn enqueue_script(delay_ms: Option<u64>, _priority: Option<u64>) -> Script {
        if delay_ms.is_some() {
            Script::EnqueueDelayed
        } else {
            Script::Enqueue
        }
    }

    fn script(verb: Verb) -> Script {
        match verb {
            Verb::Claim => Script::Claim,
            Verb::Complete => Script::Complete,
            Verb::Fail => Script::Fail,
            Verb::Extend => Script::Extend,
            Verb::Progress => Script::Progress,
            Verb::Reap => Script::Reap,
            Verb::Promote => Script::Promote,
        }
    }

    fn fail_script(&self, _token: &u64, _args: &FailArgs<'_>) -> Script {
        Script::Fail
    }

    fn attempt(token: &u64) -> u32 {
        *token as u32
    }

    fn enqueue_lanes(&self) -> Vec<W::Lane> {
        self.clients.iter().map(EchoClient::lane).collect()
    }

    fn queue_enqueue(
        &mut self,
        lanes: &mut [W::Lane],
        queue: usize,
        id: &JobId,
        payload_len: usize,
        write_payload: impl FnOnce(&mut Vec<u8>),
        priority: Option<u64>,
        delay_ms: Option<u64>,
    ) -> usize {
        let node = self.routes.node(queue);
        let frames = &self.frames[queue];
        self.clients[node].queue_enqueue(&mut lanes[node], frames, id, payload_len, write_payload, priority, delay_ms);
        node
    }

    fn enqueue_reply(
        script: Script,
        _id: impl FnOnce() -> JobId,
        reply: Result<Value, CallError>,
    ) -> Result<EnqueueReply, CallError> {
        // An integer reply (the usual one) owns nothing, yet a match on it still ends in an
        // out-of-line drop of the reply on every enqueue: forgotten instead.
        if let Ok(Value::Int(n)) = reply {
            std::mem::forget(reply);
            return match n {
                1 => Ok(EnqueueReply::Enqueued),
                0 => Ok(EnqueueReply::Duplicate),
                n => enqueue_reply(script, &Value::Int(n)),
            };
        }
        enqueue_reply(script, &reply?)
    }

    async fn redo_enqueue(
        &mut self,
        node: usize,
        err: CallError,
        queue: usize,
        id: JobId,
        payload: &[u8],
        priority: Option<u64>,
        delay_ms: Option<u64>,
    ) -> Result<EnqueueReply, CallError> {
        let Some(start) = redo_node(&self.routes, &mut self.clients, queue, node, &err).await else { return Err(err) };
        routed!(self, queue, start, |c, keys| c.send_enqueue(keys, &id, payload, priority, delay_ms))
    }

    async fn enqueue(
        &mut self,
        queue: usize,
        id: JobId,
        payload: &[u8],
        priority: Option<u64>,
    ) -> Result<EnqueueReply, CallError> {
        routed!(self, queue, |c, keys| c.enqueue(keys, &id, payload, priority))
    }
    async fn enqueue_delayed(
        &mut self,
        queue: usize,
        id: JobId,
        payload: &[u8],
        delay_ms: u64,
    ) -> Result<EnqueueReply, CallError> {
        routed!(self, queue, |c, keys| c.enqueue_delayed(keys, &id, payload, delay_ms))
    }
    async fn claim(&mut self, queue: usize, lease_ms: u64, count: u32) -> Result<Vec<Claimed<u64>>, CallError> {
        routed!(self, queue, |c, keys| c.claim(keys, lease_ms, count))
    }
    async fn complete(&mut self, queue: usize, id: JobId, token: u64) -> Result<CompleteReply, CallError> {
        routed!(self, queue, |c, keys| c.complete(keys, &id, token))
    }
    async fn fail(
        &mut self,
        queue: usize,
        id: JobId,
        token: u64,
        args: FailArgs<'static>,
    ) -> Result<FailReply, CallError> {
        routed!(self, queue, |c, keys| c.fail(keys, &id, token, args))
    }
    async fn extend(&mut self, queue: usize, id: JobId, token: u64, lease_ms: u64) -> Result<(), CallError> {
        routed!(self, queue, |c, keys| c.extend(keys, &id, token, lease_ms))
    }
    async fn progress(&mut self, queue: usize, id: JobId, token: u64, note: &[u8]) -> Result<(), CallError> {
        routed!(self, queue, |c, keys| c.progress(keys, &id, token, note))
    }
    async fn reap(&mut self, queue: usize, limit: u32, max_attempts: u32) -> Result<u64, CallError> {
        routed!(self, queue, |c, keys| c.reap(keys, limit, max_attempts))
    }
    async fn promote(&mut self, queue: usize, limit: u32) -> Result<u64, CallError> {
        routed!(self, queue, |c, keys| c.promote(keys, limit))
    }
}
