//! EchoMQ's verbs: the scripts of `lua/` behind [`QueueOps`].

use super::{enqueue_reply, EnqueueFrames, Fence};
use crate::keyspace::{JobId, QueueKeys};
use crate::lua::Script;
use crate::queue::{
    Chore, Claimed, CompleteReply, Driver, EnqueueReply, FailArgs, FailReply, FinishedSet, HolderMint, QueueOps, Verb,
};
use crate::resp::routes::{lane_node, redo_node, routed, Routes, MAX_REDIRECTS};
use crate::resp::{CallError, ScriptClient, ScriptRegistry, Wire};
use crate::scenario::Plan;
use redis::Value;
use std::cell::RefCell;
use std::rc::Rc;

/// The EchoMQ implementation: one pipelined client per node (either transport), the thread's
/// routes, the keys of every queue of the run, and the thread's holders (v1.2: each claim call
/// is made as a holder of its own, which its fenced calls present).
#[derive(Clone)]
pub struct EchoOps<W: Wire> {
    clients: Vec<ScriptClient<W>>,
    routes: Rc<Routes>,
    queues: Rc<[QueueKeys]>,
    /// Each queue's pre-framed enqueue pieces, by queue index.
    frames: Rc<[EnqueueFrames]>,
    /// The thread's holders, one minted per claim call: unique across threads and fleet shards.
    holders: Rc<RefCell<HolderMint>>,
}

impl<W: Wire> Driver<W> for EchoOps<W> {
    /// The queues' keys and their pre-framed enqueue pieces, by queue index, and the thread's
    /// holder minter.
    type Shared = (Rc<[QueueKeys]>, Rc<[EnqueueFrames]>, Rc<RefCell<HolderMint>>);
    fn shared(queues: &[QueueKeys], registry: &ScriptRegistry, plan: &Plan, thread: usize) -> Self::Shared {
        let shard = plan.shard.as_ref().map_or(0, |s| s.index as u16);
        (
            queues.iter().cloned().collect(),
            queues.iter().map(|keys| EnqueueFrames::new(keys, registry)).collect(),
            Rc::new(RefCell::new(HolderMint::new(shard, thread as u16))),
        )
    }
    fn new(clients: Vec<ScriptClient<W>>, routes: Rc<Routes>, (queues, frames, holders): Self::Shared) -> Self {
        EchoOps { clients, routes, queues, frames, holders }
    }
}

impl<W: Wire> QueueOps for EchoOps<W> {
    type Token = Fence;
    type Lane = W::Lane;
    const CHORES: &'static [Chore] = &[Chore::Reap, Chore::Promote, Chore::Clean];

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
            Verb::Clean => Script::Clean,
        }
    }

    fn fail_script(&self, _token: &Fence, _args: &FailArgs<'_>) -> Script {
        Script::Fail
    }

    fn attempt(token: &Fence) -> u32 {
        token.token as u32
    }

    fn holder(token: &Fence) -> Option<u64> {
        token.holder.map(|h| h.value())
    }

    fn enqueue_lanes(&self) -> Vec<W::Lane> {
        self.clients.iter().map(ScriptClient::lane).collect()
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
        let node = lane_node(self.routes.node(queue), lanes.len().min(self.clients.len()));
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
        let start = redo_node(&self.routes, &mut self.clients, queue, node, &err).await;
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
    async fn claim(&mut self, queue: usize, lease_ms: u64, count: u32) -> Result<Vec<Claimed<Fence>>, CallError> {
        let holder = self.holders.borrow_mut().mint();
        routed!(self, queue, |c, keys| c.claim_as(keys, lease_ms, count, holder))
    }
    async fn complete(&mut self, queue: usize, id: JobId, token: Fence) -> Result<CompleteReply, CallError> {
        routed!(self, queue, |c, keys| c.complete(keys, &id, token))
    }
    async fn fail(
        &mut self,
        queue: usize,
        id: JobId,
        token: Fence,
        args: FailArgs<'static>,
    ) -> Result<FailReply, CallError> {
        routed!(self, queue, |c, keys| c.fail(keys, &id, token, args))
    }
    async fn extend(&mut self, queue: usize, id: JobId, token: Fence, lease_ms: u64) -> Result<(), CallError> {
        routed!(self, queue, |c, keys| c.extend(keys, &id, token, lease_ms))
    }
    async fn progress(&mut self, queue: usize, id: JobId, token: Fence, note: &[u8]) -> Result<(), CallError> {
        routed!(self, queue, |c, keys| c.progress(keys, &id, token, note))
    }
    async fn reap(&mut self, queue: usize, limit: u32, max_attempts: u32) -> Result<u64, CallError> {
        routed!(self, queue, |c, keys| c.reap(keys, limit, max_attempts))
    }
    async fn promote(&mut self, queue: usize, limit: u32) -> Result<u64, CallError> {
        routed!(self, queue, |c, keys| c.promote(keys, limit))
    }
    async fn clean(
        &mut self,
        queue: usize,
        set: FinishedSet,
        age_ms: u64,
        limit: u32,
    ) -> Result<Vec<JobId>, CallError> {
        routed!(self, queue, |c, keys| c.clean(keys, set, age_ms, limit))
    }
}
