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
        self.send_enqueue(keys, id, payload, priority, None).await
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
        self.send_enqueue(keys, id, payload, None, Some(delay_ms)).await
    }

    /// Runs [`enqueue`](Self::enqueue) (`delay_ms` `None`, with `priority`) or
    /// [`enqueue_delayed`](Self::enqueue_delayed) (`delay_ms` `Some`; `priority` unused).
    ///
    /// Errors: as theirs.
    pub async fn send_enqueue(
        &mut self,
        keys: &QueueKeys,
        id: &JobId,
        payload: &[u8],
        priority: Option<u64>,
        delay_ms: Option<u64>,
    ) -> Result<EnqueueReply, CallError> {
        let script =
            self.frame_enqueue(keys, id, payload.len(), |out| out.extend_from_slice(payload), priority, delay_ms);
        let value = self.call(script).await?;
        enqueue_reply(script, &value)
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
        let script = self.frame_enqueue(keys, id, payload_len, write_payload, priority, delay_ms);
        EnqueueCall { pending: self.queue_scratch(), script }
    }

    /// Frames `enqueue` (KEYS job, pending; ARGV id, payload[, priority]) or, with `delay_ms`,
    /// `enqueue_delayed` (KEYS job, delayed; ARGV id, payload, delay_ms) in the scratch
    /// command; returns which script it is.
    fn frame_enqueue(
        &mut self,
        keys: &QueueKeys,
        id: &JobId,
        payload_len: usize,
        write_payload: impl FnOnce(&mut Vec<u8>),
        priority: Option<u64>,
        delay_ms: Option<u64>,
    ) -> Script {
        let (script, set) = match delay_ms {
            Some(_) => (Script::EnqueueDelayed, &keys.delayed),
            None => (Script::Enqueue, &keys.pending),
        };
        let cmd = self.evalsha(script, 2);
        cmd.arg_job_key(keys, id).arg(set).arg(id.as_bytes()).arg_with(payload_len, write_payload);
        match (delay_ms, priority) {
            (Some(delay_ms), _) => {
                cmd.arg(delay_ms);
            }
            (None, Some(priority)) => {
                cmd.arg(priority);
            }
            (None, None) => {}
        }
        script
    }
}
