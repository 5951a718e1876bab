//! `enqueue` and `enqueue_delayed`: a new job row, pending or delayed.

use crate::protocol::client::{int_reply, EchoClient};
use crate::protocol::error::CallError;
use crate::protocol::keyspace::{JobId, QueueKeys};
use crate::protocol::script::Script;
use crate::protocol::wire::Wire;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

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

/// An enqueue queued by [`EchoClient::queue_enqueue`]: its reply, decoded.
pub struct EnqueueCall<P> {
    pending: P,
    script: Script,
}

impl<P: Future<Output = Result<redis::Value, CallError>> + Unpin> Future for EnqueueCall<P> {
    type Output = Result<EnqueueReply, CallError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let script = self.script;
        Pin::new(&mut self.pending).poll(cx).map(|value| enqueue_reply(script, &value?))
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
        self.frame_enqueue(keys, id, payload.len(), |out| out.extend_from_slice(payload), priority);
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
        self.frame_enqueue_delayed(keys, id, payload.len(), |out| out.extend_from_slice(payload), delay_ms);
        let value = self.call(Script::EnqueueDelayed).await?;
        enqueue_reply(Script::EnqueueDelayed, &value)
    }

    /// Queues `enqueue` (`delay_ms` `None`) or `enqueue_delayed` on the connection now and
    /// returns its reply to await later: the producers' pipelined path, with as many in flight
    /// as the caller holds. Nothing is followed: a NOSCRIPT or redirect reply comes back as
    /// that error, and the caller redoes the call with [`enqueue`](Self::enqueue) /
    /// [`enqueue_delayed`](Self::enqueue_delayed). The payload, `payload_len` bytes, is
    /// appended by `write_payload` straight into the command (no copy of it).
    ///
    /// Panics when `write_payload` appends another number of bytes than `payload_len`.
    pub fn queue_enqueue(
        &mut self,
        keys: &QueueKeys,
        id: &JobId,
        payload_len: usize,
        write_payload: impl FnOnce(&mut Vec<u8>),
        priority: Option<u64>,
        delay_ms: Option<u64>,
    ) -> EnqueueCall<W::Pending> {
        let script = match delay_ms {
            Some(delay_ms) => {
                self.frame_enqueue_delayed(keys, id, payload_len, write_payload, delay_ms);
                Script::EnqueueDelayed
            }
            None => {
                self.frame_enqueue(keys, id, payload_len, write_payload, priority);
                Script::Enqueue
            }
        };
        EnqueueCall { pending: self.queue_scratch(), script }
    }

    fn frame_enqueue(
        &mut self,
        keys: &QueueKeys,
        id: &JobId,
        payload_len: usize,
        write_payload: impl FnOnce(&mut Vec<u8>),
        priority: Option<u64>,
    ) {
        let cmd = self.evalsha(Script::Enqueue, 2);
        cmd.arg_job_key(keys, id).arg(&keys.pending).arg(id.as_bytes());
        cmd.arg_with(payload_len, write_payload);
        if let Some(priority) = priority {
            cmd.arg(priority);
        }
    }

    fn frame_enqueue_delayed(
        &mut self,
        keys: &QueueKeys,
        id: &JobId,
        payload_len: usize,
        write_payload: impl FnOnce(&mut Vec<u8>),
        delay_ms: u64,
    ) {
        let cmd = self.evalsha(Script::EnqueueDelayed, 2);
        cmd.arg_job_key(keys, id).arg(&keys.delayed).arg(id.as_bytes());
        cmd.arg_with(payload_len, write_payload).arg(delay_ms);
    }
}
