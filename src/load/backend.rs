//! The verbs the driver speaks. Producers, consumers and maintenance call these, never key
//! names, so another wire protocol (seed 002's BullMQ-compatible layout) can later be driven
//! by the same load, histograms and checker by implementing [`QueueOps`] once more.

use crate::protocol::{CallError, Claimed, CompleteReply, EchoClient, EnqueueReply, FailArgs, FailReply, JobId};
use crate::protocol::{QueueKeys, Script, Wire};
use std::future::Future;
use std::rc::Rc;

/// One queue protocol as the load driver sees it. Queues are addressed by index into the
/// run's queue list. Futures need not be `Send`: each load thread runs its own runtime.
///
/// Every method returns the protocol's typed reply or a [`CallError`] whose
/// [`code`](CallError::code) is counted per script.
pub trait QueueOps: Clone + 'static {
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
    ) -> impl Future<Output = Result<Vec<Claimed>, CallError>>;
    /// Completes a job held with fencing token `token`.
    fn complete(
        &mut self,
        queue: usize,
        id: JobId,
        token: u64,
    ) -> impl Future<Output = Result<CompleteReply, CallError>>;
    /// Fails the attempt held with `token`.
    fn fail(
        &mut self,
        queue: usize,
        id: JobId,
        token: u64,
        args: FailArgs<'static>,
    ) -> impl Future<Output = Result<FailReply, CallError>>;
    /// Renews the lease held with `token` to `lease_ms` from now.
    fn extend(
        &mut self,
        queue: usize,
        id: JobId,
        token: u64,
        lease_ms: u64,
    ) -> impl Future<Output = Result<(), CallError>>;
    /// Stores a progress note on the job held with `token`.
    fn progress(
        &mut self,
        queue: usize,
        id: JobId,
        token: u64,
        note: &[u8],
    ) -> impl Future<Output = Result<(), CallError>>;
    /// Returns up to `limit` expired leases to pending, or to failed once they used
    /// `max_attempts` claims (0: never); replies how many moved.
    fn reap(&mut self, queue: usize, limit: u32, max_attempts: u32) -> impl Future<Output = Result<u64, CallError>>;
    /// Moves up to `limit` due delayed jobs to pending; replies how many.
    fn promote(&mut self, queue: usize, limit: u32) -> impl Future<Output = Result<u64, CallError>>;
}

/// The EchoMQ v1 implementation: a pipelined client (either transport) plus the keys of every
/// queue of the run.
#[derive(Clone)]
pub struct EchoOps<W: Wire> {
    client: EchoClient<W>,
    queues: Rc<[QueueKeys]>,
}

impl<W: Wire> EchoOps<W> {
    /// Wraps `client` for the run's `queues`.
    pub fn new(client: EchoClient<W>, queues: Rc<[QueueKeys]>) -> EchoOps<W> {
        EchoOps { client, queues }
    }
}

/// The script each verb runs, for recording.
pub fn script_of_enqueue(delayed: bool) -> Script {
    if delayed {
        Script::EnqueueDelayed
    } else {
        Script::Enqueue
    }
}

impl<W: Wire> QueueOps for EchoOps<W> {
    async fn enqueue(
        &mut self,
        queue: usize,
        id: JobId,
        payload: &[u8],
        priority: Option<u64>,
    ) -> Result<EnqueueReply, CallError> {
        self.client.enqueue(&self.queues[queue], &id, payload, priority).await
    }
    async fn enqueue_delayed(
        &mut self,
        queue: usize,
        id: JobId,
        payload: &[u8],
        delay_ms: u64,
    ) -> Result<EnqueueReply, CallError> {
        self.client.enqueue_delayed(&self.queues[queue], &id, payload, delay_ms).await
    }
    async fn claim(&mut self, queue: usize, lease_ms: u64, count: u32) -> Result<Vec<Claimed>, CallError> {
        self.client.claim(&self.queues[queue], lease_ms, count).await
    }
    async fn complete(&mut self, queue: usize, id: JobId, token: u64) -> Result<CompleteReply, CallError> {
        self.client.complete(&self.queues[queue], &id, token).await
    }
    async fn fail(
        &mut self,
        queue: usize,
        id: JobId,
        token: u64,
        args: FailArgs<'static>,
    ) -> Result<FailReply, CallError> {
        self.client.fail(&self.queues[queue], &id, token, args).await
    }
    async fn extend(&mut self, queue: usize, id: JobId, token: u64, lease_ms: u64) -> Result<(), CallError> {
        self.client.extend(&self.queues[queue], &id, token, lease_ms).await
    }
    async fn progress(&mut self, queue: usize, id: JobId, token: u64, note: &[u8]) -> Result<(), CallError> {
        self.client.progress(&self.queues[queue], &id, token, note).await
    }
    async fn reap(&mut self, queue: usize, limit: u32, max_attempts: u32) -> Result<u64, CallError> {
        self.client.reap(&self.queues[queue], limit, max_attempts).await
    }
    async fn promote(&mut self, queue: usize, limit: u32) -> Result<u64, CallError> {
        self.client.promote(&self.queues[queue], limit).await
    }
}
