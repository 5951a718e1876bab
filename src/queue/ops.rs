//! The verbs the driver speaks: the protocol seam. Producers, consumers and maintenance call
//! these, never key names, so each queue protocol (EchoMQ in `echomq/ops.rs`, BullMQ in
//! `bullmq/ops.rs`) is driven by the same load, histograms and checker by implementing
//! [`QueueOps`] and [`Driver`] once.

use super::chore::{Chore, FinishedSet};
use crate::keyspace::{JobId, QueueKeys};
use crate::lua::Script;
use crate::queue::{Claimed, CompleteReply, EnqueueReply, FailArgs, FailReply};
use crate::resp::routes::Routes;
use crate::resp::{CallError, ReplyLane, ScriptClient, ScriptRegistry, Wire};
use crate::scenario::Plan;
use redis::Value;
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
    /// The scripts a failed attempt may run when consumers fail `fail` of their attempts:
    /// the fail verb's, or none when the scenario fails none.
    fn fail_scripts(fail: crate::scenario::Fraction) -> Vec<Script> {
        if fail.get() > 0.0 {
            vec![Self::script(Verb::Fail)]
        } else {
            Vec::new()
        }
    }
    /// True when a claim with `token` must be failed at once, unprocessed (BullMQ: the
    /// stalled check deferred the failure of a job stalled past its limit, `defa`).
    fn must_fail(_token: &Self::Token) -> bool {
        false
    }
    /// The attempt number the history records for `token` (invariant I5 checks that a job's
    /// attempts run 1, 2, 3, ...).
    fn attempt(token: &Self::Token) -> u32;
    /// The holder the claim that made `token` presented, as the history records it
    /// ([`Holder::value`](super::Holder::value)); `None` for a claim made without one.
    fn holder(token: &Self::Token) -> Option<u64>;

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
    /// Removes up to `limit` jobs of `set` finished at least `age_ms` ago (the retention chore,
    /// [`Chore::Clean`]); replies the ids removed, oldest first.
    fn clean(
        &mut self,
        queue: usize,
        set: FinishedSet,
        age_ms: u64,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<JobId>, CallError>>;
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
    fn new(clients: Vec<ScriptClient<W>>, routes: Rc<Routes>, shared: Self::Shared) -> Self;
}

/// True for the replies a queued call ([`QueueOps::queue_enqueue`]) does not follow itself: a
/// redirect (the cluster moved the queue's slot), NOSCRIPT (the server lost its scripts), or a
/// refusal for now (its node unreachable, CLUSTERDOWN, LOADING: [`CallError::is_refused_for_now`]).
/// The script did not run; the call is redone on the routed path, which follows, reloads and
/// waits the fault out.
pub fn needs_redo(err: &CallError) -> bool {
    matches!(err, CallError::Redirect(_) | CallError::NoScript(_)) || err.is_refused_for_now()
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
    /// Remove finished jobs past the retention age.
    Clean,
}
