//! BullMQ 2.26.0's scripts as emq-bench calls them (docs/bullmq-mapping.md says
//! which KEYS and ARGV each takes and what it replies). One file per verb, each a method on
//! [`ScriptClient`](crate::resp::ScriptClient) taking the queue's [`BullKeys`]: the client
//! already owns the connection, the registry's NOSCRIPT reload, the scratch request and the
//! queued path, and a wrapper would only forward to them. Beside the verbs, [`BullOps`] drives
//! them behind the load's seam ([`QueueOps`](crate::queue::QueueOps)), the job's `data` field
//! is written and read as BullMQ's clients do ([`data`]), and [`release`] says which published
//! release a run's scripts are.
//!
//! The hot calls (add, claim, complete) allocate nothing per request: keys are built once per
//! queue, job and lock keys framed from their pieces, MessagePack written in place by rmp
//! (`pack.rs`), the payload base64-encoded into the command. Every timestamp ARGV is the
//! client's clock in ms, as BullMQ's clients send it; only lock TTLs and the stalled-check
//! guard run on the server's clock.

mod add;
mod claim;
pub mod codes;
pub mod data;
mod extend;
mod finish;
mod keys;
mod ops;
mod pack;
mod policy;
mod progress;
pub mod release;
mod retry;
mod stalled;

/// BullMQ's lock token is a claim's [`Holder`], minted per thread as EchoMQ's are.
pub use crate::queue::{Holder, HolderMint};
pub use add::{add_reply, AddOpts, AddReply, JOB_NAME};
pub use claim::BullClaimed;
pub use finish::RETURN_VALUE;
pub use keys::BullKeys;
pub use ops::{backoff_of, BullOps, BullShared, BullToken};
pub use policy::{claim_fail_step, fail_step, Backoff, FailStep};
pub use retry::RetryPolicy;
pub use stalled::StalledReply;

/// The reason BullMQ's worker fails a job the stalled check flagged `defa` (stalled more than
/// maxStalledCount times): its `failedReason`, which the checker counts as failed by stall.
pub const STALLED_TOO_OFTEN: &str = "job stalled more than allowable limit";

/// The client's clock, ms since the Unix epoch: BullMQ's timestamp ARGV
/// (`round(time.time() * 1000)` in its Python client). 0 before 1970.
pub fn client_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}
