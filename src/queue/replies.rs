//! What a protocol's verbs answer the load with: one vocabulary for both protocols, so the
//! producers, consumers and histories read EchoMQ's and BullMQ's outcomes alike. The shapes
//! are EchoMQ's replies (docs/protocol.md "The scripts"); BullMQ's verbs translate theirs to them.

use crate::keyspace::JobId;

/// What an enqueue did (docs/protocol.md: reply 1 or 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnqueueReply {
    /// A new row was born (reply 1).
    Enqueued,
    /// The row already existed and was left untouched (reply 0).
    Duplicate,
}

/// What a complete did (docs/protocol.md: reply 1 or 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompleteReply {
    /// The job moved from active to completed (reply 1).
    Completed,
    /// The job was already completed with this same token: a safe retry (reply 0).
    AlreadyCompleted,
}

/// What a fail did (docs/protocol.md: the string `retry` or `failed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailReply {
    /// attempts < max_attempts: back to pending, or to delayed when backoff_ms > 0.
    Retry,
    /// attempts reached max_attempts: the job is failed for good.
    Failed,
}

/// The policy arguments of a `fail` call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailArgs<'a> {
    /// Text stored in the row's `last_error` field.
    pub error: &'a str,
    /// Attempts allowed in all (≥ 1); the job fails for good when `attempts` reaches it.
    pub max_attempts: u32,
    /// Retry delay in ms; 0 sends the retry straight back to pending.
    pub backoff_ms: u64,
    /// The retry's pending score (0 = highest).
    pub priority: u64,
}

/// One claimed job: for EchoMQ the entry `[id, payload, token, priority]` of the claim reply.
/// `T` is the protocol's fencing token: EchoMQ's `u64`, BullMQ's lock token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimed<T = u64> {
    /// The job's id.
    pub id: JobId,
    /// The stored payload bytes.
    pub payload: Vec<u8>,
    /// The fencing token: EchoMQ's is the job's `attempts` after this claim (1 on the first
    /// claim).
    pub token: T,
    /// The pending score the job had (0 = highest).
    pub priority: u64,
}
