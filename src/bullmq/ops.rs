//! BullMQ behind the load's protocol seam: [`QueueOps`] over BullMQ's own scripts, called as
//! its clients call them (`bullmq/`, docs/bullmq-mapping.md). Producers add with the
//! opts mix, consumers take one job per `moveToActive` under a lock of the scenario's lease,
//! finish with the lock token (a stale one is refused), fail as BullMQ's client decides
//! (retry, delay by the backoff, or fail for good), and maintenance runs the stalled-jobs
//! check on the reap interval. BullMQ promotes due delayed jobs inside `moveToActive`, so it
//! has no promote chore.

use super::{
    add_reply, claim_fail_step, AddOpts, AddReply, Backoff, BullClaimed, BullKeys, FailStep, Holder, HolderMint,
    RetryPolicy,
};
use crate::keyspace::{JobId, QueueKeys};
use crate::lua::Script;
use crate::queue::{
    Chore, Claimed, CompleteReply, Driver, EnqueueReply, FailArgs, FailReply, FinishedSet, QueueOps, Verb,
};
use crate::resp::routes::{lane_node, redo_node, routed, Routes, MAX_REDIRECTS};
use crate::resp::{CallError, ScriptClient, ScriptRegistry, Wire};
use crate::scenario::{self, Plan};
use redis::Value;
use std::cell::RefCell;
use std::rc::Rc;

/// BullMQ's fencing token: the claim's lock token, with what its job hash said at the claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BullToken {
    /// The lock token `moveToActive` set on `<id>:lock`; every finish, retry and extend
    /// carries it.
    pub lock: Holder,
    /// `ats` after the claim: attempts started, one per claim (stalls included), so 1, 2, 3
    /// as EchoMQ's attempt numbers are: what the history records (I5).
    pub ats: u32,
    /// `atm` at the claim: attempts finished before this one (stalls excluded), which
    /// BullMQ's client decides a retry from.
    pub atm: u32,
    /// The stalled check flagged the job `defa`: this claim must fail it at once.
    pub deferred: bool,
}

/// What a thread's BullMQ verbs share.
pub struct BullShared {
    /// The keys of the run's queues, in order.
    queues: Rc<[BullKeys]>,
    /// The thread's lock tokens, unique per claim.
    tokens: RefCell<HolderMint>,
    /// The jobs' `attempts` and `backoff` (written into each job's opts at add time; the
    /// failure policy reads the same values).
    policy: RetryPolicy,
    /// The stalled check's guard lifetime, ms: the reap interval.
    check_ms: u64,
    /// Each failure's delay is the one the consumer drew (a weighted backoff), not BullMQ's
    /// formula of the job's opts.
    drawn: bool,
}

/// The BullMQ implementation: one pipelined client per node, the thread's routes, and what
/// the thread's verbs share.
pub struct BullOps<W: Wire> {
    clients: Vec<ScriptClient<W>>,
    routes: Rc<Routes>,
    queues: Rc<[BullKeys]>,
    shared: Rc<BullShared>,
    /// The payload of a queued add, built here before it is base64-encoded into the command
    /// (its capacity is reused: no allocation per add once grown).
    payload: Vec<u8>,
    /// A progress note as the JSON string BullMQ's clients store.
    note: Vec<u8>,
}

impl<W: Wire> Clone for BullOps<W> {
    fn clone(&self) -> Self {
        BullOps {
            clients: self.clients.clone(),
            routes: self.routes.clone(),
            queues: self.queues.clone(),
            shared: self.shared.clone(),
            payload: Vec::new(),
            note: Vec::new(),
        }
    }
}

/// The scenario's backoff as BullMQ's: its exponential backoff has no cap, so `max` is not
/// applied (the run warns).
pub fn backoff_of(backoff: &scenario::Backoff) -> Backoff {
    match *backoff {
        scenario::Backoff::None => Backoff::None,
        scenario::Backoff::Fixed(d) => Backoff::Fixed(d.as_millis() as u64),
        scenario::Backoff::Exponential { base, .. } => Backoff::Exponential(base.as_millis() as u64),
        // BullMQ has no drawn backoff: the harness, as the client, draws each failure's delay
        // (`BullShared::drawn`), and the job's opts carry none.
        scenario::Backoff::Weighted { .. } => Backoff::None,
    }
}

/// BullMQ's lowest priority (its client refuses more; `AddOpts::priority`).
const MAX_PRIORITY: u64 = 2_097_152;

impl<W: Wire> BullOps<W> {
    /// The add's options for a job with `priority` (EchoMQ's scale: 0 = highest, which is
    /// BullMQ's standard job, served before any prioritized one) or `delay_ms`.
    fn add_opts(&self, priority: Option<u64>, delay_ms: Option<u64>) -> AddOpts {
        AddOpts {
            delay_ms: delay_ms.unwrap_or(0),
            priority: priority.unwrap_or(0).min(MAX_PRIORITY) as u32,
            lifo: self.shared.policy.lifo,
            attempts: self.shared.policy.max_attempts,
            backoff: self.shared.policy.backoff,
        }
    }

    /// The claim as `bullmq`'s verbs take it (no payload: finishes never send it).
    fn claimed(id: JobId, token: BullToken) -> BullClaimed {
        BullClaimed {
            id,
            payload: Vec::new(),
            lock: token.lock,
            ats: token.ats,
            atm: token.atm,
            priority: 0,
            deferred_failure: token.deferred,
        }
    }

    /// The add of a job with `priority` or `delay_ms` ([`add_opts`](Self::add_opts)) on the
    /// routed path, starting at node `start`: the awaited enqueues and the redo of a queued one.
    async fn add(
        &mut self,
        queue: usize,
        start: usize,
        id: JobId,
        payload: &[u8],
        priority: Option<u64>,
        delay_ms: Option<u64>,
    ) -> Result<EnqueueReply, CallError> {
        let opts = self.add_opts(priority, delay_ms);
        let reply: Result<AddReply, CallError> =
            routed!(self, queue, start, |c, keys| c.add_job(keys, &id, payload, &opts));
        reply.map(|r| r.as_enqueue(false))
    }

    /// What a failure of the claim with `token` does, as BullMQ's client decides it: from
    /// the attempts made and the job's backoff, or the delay the consumer drew (`args`).
    fn step(&self, token: &BullToken, args: &FailArgs<'_>) -> FailStep {
        let policy = &self.shared.policy;
        let backoff = if self.shared.drawn { Backoff::Fixed(args.backoff_ms) } else { policy.backoff };
        claim_fail_step(token.atm, token.deferred, policy.max_attempts, backoff)
    }
}

impl<W: Wire> Driver<W> for BullOps<W> {
    type Shared = Rc<BullShared>;

    fn shared(queues: &[QueueKeys], _registry: &ScriptRegistry, plan: &Plan, thread: usize) -> Rc<BullShared> {
        Rc::new(BullShared {
            queues: queues.iter().map(|q| BullKeys::new(q.queue.clone())).collect(),
            tokens: RefCell::new(HolderMint::new(plan.shard.as_ref().map_or(0, |s| s.index as u16), thread as u16)),
            policy: RetryPolicy {
                max_attempts: plan.producers.max_attempts,
                backoff: backoff_of(&plan.consumers.backoff),
                lifo: false,
            },
            check_ms: plan.maintenance.reap.as_millis().max(1) as u64,
            drawn: matches!(plan.consumers.backoff, scenario::Backoff::Weighted { .. }),
        })
    }

    fn new(clients: Vec<ScriptClient<W>>, routes: Rc<Routes>, shared: Rc<BullShared>) -> Self {
        BullOps { clients, routes, queues: shared.queues.clone(), shared, payload: Vec::new(), note: Vec::new() }
    }
}

impl<W: Wire> QueueOps for BullOps<W> {
    type Token = BullToken;
    type Lane = W::Lane;
    const REPORTS_DUPLICATES: bool = false;
    const CHORES: &'static [Chore] = &[Chore::Reap];

    fn enqueue_script(delay_ms: Option<u64>, priority: Option<u64>) -> Script {
        AddOpts {
            delay_ms: delay_ms.unwrap_or(0),
            priority: priority.unwrap_or(0).min(MAX_PRIORITY) as u32,
            ..AddOpts::default()
        }
        .script()
    }

    fn script(verb: Verb) -> Script {
        match verb {
            Verb::Claim => Script::MoveToActive,
            Verb::Complete | Verb::Fail => Script::MoveToFinished,
            Verb::Extend => Script::ExtendLock,
            Verb::Progress => Script::UpdateProgress,
            Verb::Reap => Script::MoveStalledJobsToWait,
            Verb::Promote => unreachable!("BullMQ has no promote chore (CHORES): moveToActive promotes"),
            Verb::Clean => unreachable!("BullMQ has no clean chore (CHORES): a scenario with one is refused"),
        }
    }

    fn fail_script(&self, token: &BullToken, args: &FailArgs<'_>) -> Script {
        self.step(token, args).script()
    }

    /// Every script a failure may run, whatever the share: a job stalled past its limit is
    /// failed anyway ([`QueueOps::must_fail`]), and the client picks a retry, a delay or a
    /// final failure per attempt.
    fn fail_scripts(_fail: crate::scenario::Fraction) -> Vec<Script> {
        vec![Script::MoveToFinished, Script::RetryJob, Script::MoveToDelayed]
    }

    fn must_fail(token: &BullToken) -> bool {
        token.deferred
    }

    fn attempt(token: &BullToken) -> u32 {
        token.ats
    }

    fn holder(token: &BullToken) -> Option<u64> {
        Some(token.lock.value())
    }

    fn enqueue_lanes(&self) -> Vec<W::Lane> {
        self.clients.iter().map(ScriptClient::lane).collect()
    }

    fn queue_enqueue(
        &mut self,
        lanes: &mut [W::Lane],
        queue: usize,
        id: &JobId,
        _payload_len: usize,
        write_payload: impl FnOnce(&mut Vec<u8>),
        priority: Option<u64>,
        delay_ms: Option<u64>,
    ) -> usize {
        let opts = self.add_opts(priority, delay_ms);
        self.payload.clear();
        write_payload(&mut self.payload);
        let node = lane_node(self.routes.node(queue), lanes.len().min(self.clients.len()));
        self.clients[node].queue_add_job(&mut lanes[node], &self.queues[queue], id, &self.payload, &opts);
        node
    }

    /// An add's reply as an enqueue's: [`QueueOps::REPORTS_DUPLICATES`] is false for BullMQ.
    fn enqueue_reply(
        script: Script,
        id: impl FnOnce() -> JobId,
        reply: Result<Value, CallError>,
    ) -> Result<EnqueueReply, CallError> {
        add_reply(script, &id(), &reply?).map(|r| r.as_enqueue(false))
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
        let start = redo_node(&self.routes, &mut self.clients, queue, node, &err).await;
        self.add(queue, start, id, payload, priority, delay_ms).await
    }

    async fn enqueue(
        &mut self,
        queue: usize,
        id: JobId,
        payload: &[u8],
        priority: Option<u64>,
    ) -> Result<EnqueueReply, CallError> {
        self.add(queue, self.routes.node(queue), id, payload, priority, None).await
    }

    async fn enqueue_delayed(
        &mut self,
        queue: usize,
        id: JobId,
        payload: &[u8],
        delay_ms: u64,
    ) -> Result<EnqueueReply, CallError> {
        self.add(queue, self.routes.node(queue), id, payload, None, Some(delay_ms)).await
    }

    /// One job at most: `moveToActive` takes one per call, whatever `count` asks.
    async fn claim(&mut self, queue: usize, lease_ms: u64, _count: u32) -> Result<Vec<Claimed<BullToken>>, CallError> {
        let lock = self.shared.tokens.borrow_mut().mint();
        let job = routed!(self, queue, |c, keys| c.move_to_active(keys, lock, lease_ms))?;
        Ok(job
            .map(|job| {
                let token = BullToken { lock: job.lock, ats: job.ats, atm: job.atm, deferred: job.deferred_failure };
                Claimed { id: job.id, payload: job.payload, token, priority: u64::from(job.priority) }
            })
            .into_iter()
            .collect())
    }

    async fn complete(&mut self, queue: usize, id: JobId, token: BullToken) -> Result<CompleteReply, CallError> {
        let job = Self::claimed(id, token);
        let max_attempts = self.shared.policy.max_attempts;
        routed!(self, queue, |c, keys| c.move_to_completed(keys, &job, max_attempts))?;
        Ok(CompleteReply::Completed)
    }

    async fn fail(
        &mut self,
        queue: usize,
        id: JobId,
        token: BullToken,
        args: FailArgs<'static>,
    ) -> Result<FailReply, CallError> {
        let job = Self::claimed(id, token);
        let policy = self.shared.policy;
        let step = self.step(&token, &args);
        routed!(self, queue, |c, keys| c.take_fail_step(keys, &job, step, &policy, args.error))?;
        Ok(match step {
            FailStep::Retry | FailStep::Delay(_) => FailReply::Retry,
            FailStep::Fail => FailReply::Failed,
        })
    }

    async fn extend(&mut self, queue: usize, id: JobId, token: BullToken, lease_ms: u64) -> Result<(), CallError> {
        routed!(self, queue, |c, keys| c.extend_lock(keys, &id, &token.lock, lease_ms))
    }

    /// BullMQ's updateProgress takes no lock token: `token` is not sent. The note is stored as
    /// the JSON string its clients send.
    async fn progress(&mut self, queue: usize, id: JobId, _token: BullToken, note: &[u8]) -> Result<(), CallError> {
        let mut json = std::mem::take(&mut self.note);
        json.clear();
        json.push(b'"');
        json.extend_from_slice(note);
        json.push(b'"');
        let result = routed!(self, queue, |c, keys| c.update_progress(keys, &id, &json));
        self.note = json;
        result
    }

    /// The stalled-jobs check, `max_attempts` as its maxStalledCount; replies how many jobs it
    /// moved back to wait (a job past the count is among them, flagged for failure).
    async fn reap(&mut self, queue: usize, _limit: u32, max_attempts: u32) -> Result<u64, CallError> {
        let check_ms = self.shared.check_ms;
        let reply = routed!(self, queue, |c, keys| c.move_stalled_jobs_to_wait(keys, max_attempts, check_ms))?;
        Ok((reply.moved.len() + reply.foreign) as u64)
    }

    /// Never called: BullMQ has no promote chore ([`QueueOps::CHORES`]); `moveToActive`
    /// promotes due delayed jobs itself. A call is the driver's bug.
    async fn promote(&mut self, _queue: usize, _limit: u32) -> Result<u64, CallError> {
        unreachable!("BullMQ has no promote chore (CHORES): moveToActive promotes")
    }

    /// Never called: BullMQ has no clean chore ([`QueueOps::CHORES`]), and a scenario that
    /// asks for retention with BullMQ is refused (`maintenance.clean`). A call is the driver's
    /// bug.
    async fn clean(
        &mut self,
        _queue: usize,
        _set: FinishedSet,
        _age_ms: u64,
        _limit: u32,
    ) -> Result<Vec<JobId>, CallError> {
        unreachable!("BullMQ has no clean chore (CHORES): a scenario with one is refused")
    }
}
