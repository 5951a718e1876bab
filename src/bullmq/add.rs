//! `addStandardJob`, `addDelayedJob`, `addPrioritizedJob`: a new job (docs/bullmq-mapping.md 3.1).

use super::codes::{code_of, refused};
use super::data::{encode_data, encoded_len};
use super::keys::BullKeys;
use super::pack::{self, arg_written};
use super::policy::Backoff;
use crate::keyspace::JobId;
use crate::lua::Script;
use crate::resp::client::ScriptClient;
use crate::resp::error::CallError;
use crate::resp::request::Request;
use crate::resp::wire::Wire;
use redis::Value;

/// The job name every emq-bench add sends (BullMQ's `name`; the official worker passes it to
/// the processor, the scripts only store it).
pub const JOB_NAME: &str = "emq";

/// The options of one add, as BullMQ's client packs them into ARGV 3 (`job.py` `Job.__init__`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AddOpts {
    /// `opts.delay`, ms after the add's timestamp (client clock); > 0 → addDelayedJob.
    pub delay_ms: u64,
    /// `opts.priority`: 0 = none (the `wait` list, served before any prioritized job), else
    /// 1 (highest) ..= 2 097 152 (lowest: BullMQ's client refuses more, since the score
    /// `priority × 2^32 + counter` would lose precision); > 0 without delay → addPrioritizedJob.
    pub priority: u32,
    /// `opts.lifo`: addStandardJob puts the job at the head of `wait` (RPUSH), and a retry
    /// goes back to the head too; addPrioritizedJob and delayed promotion ignore it.
    pub lifo: bool,
    /// `opts.attempts`: attempts allowed in all (the official worker retries while
    /// `atm + 1 < attempts`; 0 and 1 both mean one attempt).
    pub attempts: u32,
    /// `opts.backoff`, ms.
    pub backoff: Backoff,
}

impl AddOpts {
    /// The script BullMQ's client calls for these options (`scripts.py` `addJob`): delay
    /// first, then priority, else the standard add.
    pub fn script(&self) -> Script {
        if self.delay_ms > 0 {
            Script::AddDelayedJob
        } else if self.priority > 0 {
            Script::AddPrioritizedJob
        } else {
            Script::AddStandardJob
        }
    }
}

/// What an add did, as far as its reply tells.
///
/// BullMQ replies with the job's id both for a new job and for a duplicate custom id
/// (`handleDuplicatedJob` returns `jobId .. ""`, writes no job field and XADDs a
/// `duplicated` event instead of `added`/`waiting`): the reply cannot tell them apart, so this
/// says only what is certain. Whether it was a duplicate is the caller's knowledge (it chose
/// to send an id again: [`as_enqueue`](AddReply::as_enqueue)), and the checker's (the row
/// kept the first add's fields; the stream has one `duplicated` event per duplicate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddReply {
    /// The script answered with the id sent: a job with this id exists now, new or an earlier
    /// one whose hash still existed (then nothing of it changed).
    Accepted,
}

impl AddReply {
    /// The EchoMQ-shaped reply, from what the caller knows: `resent` = the id was sent before
    /// and accepted then (the producer's deliberate duplicate). The reply itself cannot
    /// tell, so a redo after an unknown outcome reads as [`EnqueueReply::Enqueued`] here.
    ///
    /// [`EnqueueReply::Enqueued`]: crate::queue::EnqueueReply::Enqueued
    pub fn as_enqueue(self, resent: bool) -> crate::queue::EnqueueReply {
        match (self, resent) {
            (AddReply::Accepted, false) => crate::queue::EnqueueReply::Enqueued,
            (AddReply::Accepted, true) => crate::queue::EnqueueReply::Duplicate,
        }
    }
}

/// Reads an add's reply: the id sent → [`AddReply::Accepted`]; `-5`/`-7` → their refusal
/// (flows only: emq-bench sends no parent); anything else, another id included (a
/// deduplication holder's, never asked for), is [`CallError::Reply`].
pub fn add_reply(script: Script, id: &JobId, value: &Value) -> Result<AddReply, CallError> {
    match value {
        Value::BulkString(got) if got == id.as_bytes() => Ok(AddReply::Accepted),
        Value::SimpleString(got) if got.as_bytes() == id.as_bytes() => Ok(AddReply::Accepted),
        Value::Int(n) if code_of(*n).is_some() => Err(refused(code_of(*n).expect("checked"))),
        other => Err(CallError::Reply(format!("{} replied {other:?}, expected the id {id}", script.name()))),
    }
}

impl<W: Wire> ScriptClient<W> {
    /// Runs the add BullMQ's client picks for `opts` ([`AddOpts::script`]), with `id` as the
    /// custom job id, name [`JOB_NAME`], `data` = [`encode_data`] of `payload`, and the
    /// client's clock (ms) as `timestamp`.
    ///
    /// - addStandardJob: KEYS wait, paused, meta, id, completed, delayed, active, events, marker.
    /// - addDelayedJob: KEYS marker, meta, id, delayed, completed, events.
    /// - addPrioritizedJob: KEYS marker, meta, id, prioritized, delayed, completed, active,
    ///   events, pc.
    /// - ARGV (all three): 1 msgpack `[prefix, id, name, timestamp, nil × 5]`, 2 `data`, 3
    ///   msgpack `{jobId, attempts, delay, backoff, priority?, lifo?}`, 4 the timestamp
    ///   (standard), delay (delayed) or priority (prioritized), which the scripts never read
    ///   but BullMQ's client sends.
    ///
    /// Returns [`AddReply::Accepted`] (a duplicate id too: see there). Errors: `-5`/`-7` as
    /// [`CallError::Emq`] (parents only), another reply as [`CallError::Reply`], or transport.
    pub async fn add_job(
        &mut self,
        keys: &BullKeys,
        id: &JobId,
        payload: &[u8],
        opts: &AddOpts,
    ) -> Result<AddReply, CallError> {
        let script = opts.script();
        frame_add(self.evalsha(script, script.numkeys().expect("a BullMQ script")), keys, id, payload, opts);
        let value = self.call(script).await?;
        add_reply(script, id, &value)
    }

    /// Queues [`add_job`](Self::add_job) on `lane`, one of this client's connection's lanes,
    /// now; returns which script it runs. Its reply comes back on the lane ([`add_reply`]
    /// reads it): the producers' pipelined window. Nothing is followed: a NOSCRIPT or redirect
    /// reply comes back as that error, and the caller redoes the call with `add_job`.
    pub fn queue_add_job(
        &mut self,
        lane: &mut W::Lane,
        keys: &BullKeys,
        id: &JobId,
        payload: &[u8],
        opts: &AddOpts,
    ) -> Script {
        let script = opts.script();
        frame_add(self.evalsha(script, script.numkeys().expect("a BullMQ script")), keys, id, payload, opts);
        self.queue_scratch(lane);
        script
    }
}

/// Appends the add's KEYS and ARGV (see [`ScriptClient::add_job`]) to `cmd`.
fn frame_add(cmd: &mut Request, keys: &BullKeys, id: &JobId, payload: &[u8], opts: &AddOpts) {
    match opts.script() {
        Script::AddDelayedJob => {
            cmd.arg(&keys.marker).arg(&keys.meta).arg(&keys.id).arg(&keys.delayed);
            cmd.arg(&keys.completed).arg(&keys.events);
        }
        Script::AddPrioritizedJob => {
            cmd.arg(&keys.marker).arg(&keys.meta).arg(&keys.id).arg(&keys.prioritized).arg(&keys.delayed);
            cmd.arg(&keys.completed).arg(&keys.active).arg(&keys.events).arg(&keys.pc);
        }
        _ => {
            cmd.arg(&keys.wait).arg(&keys.paused).arg(&keys.meta).arg(&keys.id).arg(&keys.completed);
            cmd.arg(&keys.delayed).arg(&keys.active).arg(&keys.events).arg(&keys.marker);
        }
    }
    let timestamp = super::client_ms();
    arg_written(cmd, |w| {
        pack::array(w, 9)?;
        pack::str(w, &keys.prefix)?;
        pack::str_bytes(w, id.as_bytes())?;
        pack::str(w, JOB_NAME)?;
        pack::uint(w, timestamp)?;
        // parent key, parent dependencies key, parent, repeat job key, deduplication key.
        (0..5).try_for_each(|_| pack::nil(w))
    });
    cmd.arg_with(encoded_len(payload.len()), |out| encode_data(payload, out));
    arg_written(cmd, |w| {
        let pairs = 4 + u32::from(opts.priority > 0) + u32::from(opts.lifo);
        pack::map(w, pairs)?;
        pack::str(w, "jobId")?;
        pack::str_bytes(w, id.as_bytes())?;
        pack::str(w, "attempts")?;
        pack::uint(w, u64::from(opts.attempts))?;
        pack::str(w, "delay")?;
        pack::uint(w, opts.delay_ms)?;
        // Always present, nil without a backoff, as the client's Backoffs.normalize leaves it.
        pack::str(w, "backoff")?;
        match opts.backoff.type_name() {
            None => pack::nil(w)?,
            Some(kind) => {
                pack::map(w, 2)?;
                pack::str(w, "type")?;
                pack::str(w, kind)?;
                pack::str(w, "delay")?;
                pack::uint(w, opts.backoff.base_ms())?;
            }
        }
        if opts.priority > 0 {
            pack::str(w, "priority")?;
            pack::uint(w, u64::from(opts.priority))?;
        }
        if opts.lifo {
            pack::str(w, "lifo")?;
            pack::bool(w, true)?;
        }
        Ok(())
    });
    match opts.script() {
        Script::AddDelayedJob => cmd.arg(opts.delay_ms),
        Script::AddPrioritizedJob => cmd.arg(opts.priority),
        _ => cmd.arg(timestamp),
    };
}
