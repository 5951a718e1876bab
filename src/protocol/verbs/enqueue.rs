//! `enqueue` and `enqueue_delayed`: a new job row, pending or delayed.

use crate::protocol::client::{int_reply, EchoClient};
use crate::protocol::error::CallError;
use crate::protocol::keyspace::{JobId, QueueKeys};
use crate::protocol::script::Script;
use crate::protocol::wire::Wire;

/// What an enqueue did (PROTOCOL.md: reply 1 or 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnqueueReply {
    /// A new row was born (reply 1).
    Enqueued,
    /// The row already existed and was left untouched (reply 0).
    Duplicate,
}

fn enqueue_reply(script: Script, value: &redis::Value) -> Result<EnqueueReply, CallError> {
    match int_reply(script, value)? {
        1 => Ok(EnqueueReply::Enqueued),
        0 => Ok(EnqueueReply::Duplicate),
        n => Err(CallError::Reply(format!("{} replied {n}, expected 0 or 1", script.name()))),
    }
}

impl<W: Wire> EchoClient<W> {
    /// Runs `enqueue`: KEYS job, pending; ARGV id, payload (bytes, verbatim), priority
    /// (0 = highest; sent only when `Some`, the script's default is 0).
    ///
    /// Errors: `EMQKIND`/`EMQARG` as [`CallError::Emq`], or a transport error.
    pub async fn enqueue(
        &mut self,
        keys: &QueueKeys,
        id: &JobId,
        payload: &[u8],
        priority: Option<u64>,
    ) -> Result<EnqueueReply, CallError> {
        let cmd = self.evalsha(Script::Enqueue, 2);
        cmd.arg(keys.job_key_arg(id)).arg(&keys.pending).arg(id.as_bytes()).arg(payload);
        if let Some(priority) = priority {
            cmd.arg(priority);
        }
        let value = self.call(Script::Enqueue).await?;
        enqueue_reply(Script::Enqueue, &value)
    }

    /// Runs `enqueue_delayed`: KEYS job, delayed; ARGV id, payload, delay_ms (the job is due at
    /// the server's time + `delay_ms` milliseconds).
    ///
    /// Errors: `EMQKIND`/`EMQARG` as [`CallError::Emq`], or a transport error.
    pub async fn enqueue_delayed(
        &mut self,
        keys: &QueueKeys,
        id: &JobId,
        payload: &[u8],
        delay_ms: u64,
    ) -> Result<EnqueueReply, CallError> {
        let cmd = self.evalsha(Script::EnqueueDelayed, 2);
        cmd.arg(keys.job_key_arg(id)).arg(&keys.delayed).arg(id.as_bytes()).arg(payload).arg(delay_ms);
        let value = self.call(Script::EnqueueDelayed).await?;
        enqueue_reply(Script::EnqueueDelayed, &value)
    }
}
