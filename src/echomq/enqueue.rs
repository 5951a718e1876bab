//! `enqueue` and `enqueue_delayed`: a new job row, pending or delayed.

use crate::keyspace::{JobId, QueueKeys, JOB_ID_LEN};
use crate::lua::Script;
use crate::queue::EnqueueReply;
use crate::resp::client::{int_reply, ScriptClient};
use crate::resp::error::CallError;
use crate::resp::lane::ReplyLane;
use crate::resp::registry::ScriptRegistry;
use crate::resp::request::{pack_arg_with, pack_int, Request};
use crate::resp::wire::Wire;

/// Reads `script`'s reply (`enqueue` or `enqueue_delayed`): 1 or 0.
///
/// Errors: another reply as [`CallError::Reply`].
pub fn enqueue_reply(script: Script, value: &redis::Value) -> Result<EnqueueReply, CallError> {
    match int_reply(script, value)? {
        1 => Ok(EnqueueReply::Enqueued),
        0 => Ok(EnqueueReply::Duplicate),
        n => Err(CallError::Reply(format!("{} replied {n}, expected 0 or 1", script.name()))),
    }
}

impl<W: Wire> ScriptClient<W> {
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
        let write = |out: &mut Vec<u8>| out.extend_from_slice(payload);
        let script = frame_enqueue(self.scratch(), keys, id, payload.len(), write, priority, delay_ms);
        let value = self.call(script).await?;
        enqueue_reply(script, &value)
    }

    /// Queues `enqueue` (`delay_ms` `None`) or `enqueue_delayed` on `lane`, one of this
    /// client's connection's lanes, now; returns which script it runs. Its reply comes back on
    /// the lane ([`enqueue_reply`] reads it): the producers' pipelined path, with as many in
    /// flight as the caller holds. Nothing is followed: a NOSCRIPT or redirect reply comes
    /// back as that error, and the caller redoes the call with [`enqueue`](Self::enqueue) /
    /// [`enqueue_delayed`](Self::enqueue_delayed). The payload, `payload_len` bytes, is
    /// appended by `write_payload` straight into the command (no copy of it).
    ///
    /// Panics when `write_payload` appends another number of bytes than `payload_len`.
    #[allow(clippy::too_many_arguments)] // the enqueue's own arguments, plus its lane and frames
    pub fn queue_enqueue(
        &self,
        lane: &mut W::Lane,
        frames: &EnqueueFrames,
        id: &JobId,
        payload_len: usize,
        write_payload: impl FnOnce(&mut Vec<u8>),
        priority: Option<u64>,
        delay_ms: Option<u64>,
    ) -> Script {
        let (script, frame) = match delay_ms {
            Some(_) => (Script::EnqueueDelayed, &frames.delayed),
            None => (Script::Enqueue, &frames.pending),
        };
        let option = option_arg(priority, delay_ms);
        lane.queue_packed(|out| {
            // Everything up to the payload in one copy of the pre-framed template, then the
            // id in its two places.
            let at = out.len();
            out.extend_from_slice(if option.is_some() { &frame.with_option } else { &frame.plain });
            out[at + frame.job_key_id..][..JOB_ID_LEN].copy_from_slice(id.as_bytes());
            out[at + frame.id_arg..][..JOB_ID_LEN].copy_from_slice(id.as_bytes());
            pack_arg_with(out, payload_len, write_payload);
            if let Some(option) = option {
                pack_int(out, option);
            }
        });
        script
    }
}

/// The fixed bytes of one queue's enqueue commands, framed once per run: everything before
/// the payload but the id, which goes in two places. What [`frame_enqueue`] frames argument by
/// argument, [`ScriptClient::queue_enqueue`] (the producers' path) copies at once: framing it
/// argument by argument, or even copying it in pieces, is a cost every enqueue would pay.
#[derive(Debug, Clone)]
pub struct EnqueueFrames {
    pending: SetFrame,
    delayed: SetFrame,
}

#[derive(Debug, Clone)]
struct SetFrame {
    /// `*7\r\n` (EVALSHA, its SHA, numkeys; KEYS job, set; ARGV id, payload), those framed
    /// up to the payload, with zeros where the id goes.
    plain: Vec<u8>,
    /// `plain` with `*8\r\n`: a priority or a delay follows the payload.
    with_option: Vec<u8>,
    /// Where the id goes in the job key (`emq:{q}:job:<id>`), bytes from the start.
    job_key_id: usize,
    /// Where the id argument goes, bytes from the start.
    id_arg: usize,
}

impl EnqueueFrames {
    /// The frames of `keys`' queue, for `registry`'s `enqueue` and `enqueue_delayed`.
    ///
    /// Panics when `registry` is another protocol's (a driver's bug).
    pub fn new(keys: &QueueKeys, registry: &ScriptRegistry) -> EnqueueFrames {
        let frame = |script: Script, set: &str| {
            let mut evalsha = Request::new();
            registry.push_evalsha(&mut evalsha, script, 2);
            let job_key_head = format!("${}\r\n{}", keys.job_prefix.len() + JOB_ID_LEN, keys.job_prefix);
            let set_then_id_head = format!("\r\n${}\r\n{set}\r\n${}\r\n", set.len(), JOB_ID_LEN);
            let id = [0u8; JOB_ID_LEN];
            // EVALSHA, the SHA, numkeys, two keys, the id and the payload; then the option.
            // Both headers are one digit long, so the id's places are the same in both.
            let template = |args: usize| {
                let mut bytes = format!("*{args}\r\n").into_bytes();
                bytes.extend_from_slice(evalsha.framed().0);
                bytes.extend_from_slice(job_key_head.as_bytes());
                let job_key_id = bytes.len();
                bytes.extend_from_slice(&id);
                bytes.extend_from_slice(set_then_id_head.as_bytes());
                let id_arg = bytes.len();
                bytes.extend_from_slice(&id);
                bytes.extend_from_slice(b"\r\n");
                (bytes, job_key_id, id_arg)
            };
            let (plain, job_key_id, id_arg) = template(7);
            let (with_option, ..) = template(8);
            SetFrame { plain, with_option, job_key_id, id_arg }
        };
        EnqueueFrames {
            pending: frame(Script::Enqueue, &keys.pending),
            delayed: frame(Script::EnqueueDelayed, &keys.delayed),
        }
    }
}

/// The optional last argument: the delay of a delayed enqueue, else the priority if any.
fn option_arg(priority: Option<u64>, delay_ms: Option<u64>) -> Option<u64> {
    delay_ms.or(priority)
}

/// Frames `enqueue` (KEYS job, pending; ARGV id, payload[, priority]) or, with `delay_ms`,
/// `enqueue_delayed` (KEYS job, delayed; ARGV id, payload, delay_ms) into the empty `cmd`,
/// with `registry`'s SHA; returns which script it is.
fn frame_enqueue(
    (cmd, registry): (&mut Request, &ScriptRegistry),
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
    registry.push_evalsha(cmd, script, 2);
    cmd.arg_concat(&keys.job_key_parts(id)).arg(set).arg(id.as_bytes()).arg_with(payload_len, write_payload);
    if let Some(option) = option_arg(priority, delay_ms) {
        cmd.arg(option);
    }
    script
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::{JobIdGen, QueueName};
    use crate::resp::pipe::PipeConn;

    /// The producers' framing from pre-built pieces sends the same bytes as the verb's own.
    #[test]
    fn pre_framed_enqueues_equal_the_framed_ones() {
        let registry = ScriptRegistry::from_dir(std::path::Path::new("lua")).unwrap();
        let keys = QueueKeys::new(QueueName::new("bench-7").unwrap());
        let frames = EnqueueFrames::new(&keys, &registry);
        let id = JobIdGen::new(1).next_id();
        let payload = b"0123456789abcdefghij-payload";
        for (priority, delay) in [(None, None), (Some(3), None), (None, Some(250)), (Some(1), Some(10))] {
            let (script, set) = match delay {
                Some(_) => (Script::EnqueueDelayed, &keys.delayed),
                None => (Script::Enqueue, &keys.pending),
            };
            let mut expected = Request::new();
            let write = |out: &mut Vec<u8>| out.extend_from_slice(payload);
            frame_enqueue((&mut expected, &registry), &keys, &id, payload.len(), write, priority, delay);
            let mut expected_packed = Vec::new();
            expected.write_packed(&mut expected_packed);
            let got = PipeConn::frame_for_test(|conn| {
                let client = ScriptClient::from_connection(conn, std::sync::Arc::new(registry.clone()));
                let mut lane = client.lane();
                let write = |out: &mut Vec<u8>| out.extend_from_slice(payload);
                let queued = client.queue_enqueue(&mut lane, &frames, &id, payload.len(), write, priority, delay);
                assert_eq!(queued, script);
            });
            assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(&expected_packed));
            // And both are what redis-rs packs for the same arguments.
            let mut cmd = redis::cmd("EVALSHA");
            cmd.arg(registry.sha(script)).arg(2).arg(keys.job_key(&id)).arg(set).arg(id.as_bytes()).arg(&payload[..]);
            match (delay, priority) {
                (Some(delay), _) => cmd.arg(delay),
                (None, Some(priority)) => cmd.arg(priority),
                (None, None) => &mut cmd,
            };
            assert_eq!(got, cmd.get_packed_command());
        }
    }
}
