//! `moveToActive`: take the next job and lock it (docs/bullmq-mapping.md 3.2).

use super::data::decode_data;
use super::keys::BullKeys;
use super::pack::{self, arg_written};
use super::policy::{claim_fail_step, Backoff, FailStep};
use crate::keyspace::JobId;
use crate::lua::Script;
use crate::queue::Holder;
use crate::resp::client::ScriptClient;
use crate::resp::error::CallError;
use crate::resp::wire::Wire;
use redis::Value;

/// One job moveToActive handed out, read from the job's hash in its reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BullClaimed {
    /// The job's id.
    pub id: JobId,
    /// The payload: [`decode_data`] of the `data` field; when `data` is no JSON string of
    /// base64 (a job someone else wrote), the field's bytes verbatim, so the payload check
    /// reports it rather than the claim losing a locked job.
    pub payload: Vec<u8>,
    /// The lock token this claim took (`<id>:lock` holds it until the lock expires): every
    /// finish, retry and extend of this claim sends it.
    pub lock: Holder,
    /// `ats`, attempts started, this claim included (1 on the first claim; stalls count too):
    /// the per-claim counter the history records as the claim's token.
    pub ats: u32,
    /// `atm`, attempts made (finished) before this claim (0 when the field is absent).
    pub atm: u32,
    /// `priority` (0 = none).
    pub priority: u32,
    /// `defa` was set: the stalled check found the job stalled more than `maxStalledCount`
    /// times; BullMQ's worker fails such a job at once, unprocessed and without retry.
    pub deferred_failure: bool,
}

impl BullClaimed {
    /// The step a failure of this claim takes: [`fail_step`](super::fail_step) of its `atm`, or
    /// [`FailStep::Fail`] for a deferred failure (the worker's UnrecoverableError).
    pub fn fail_step(&self, max_attempts: u32, backoff: Backoff) -> FailStep {
        claim_fail_step(self.atm, self.deferred_failure, max_attempts, backoff)
    }
}

impl<W: Wire> ScriptClient<W> {
    /// Runs `moveToActive`: KEYS wait, active, prioritized, events, stalled, limiter, delayed,
    /// paused, meta, pc, marker; ARGV key prefix, timestamp (client ms), msgpack `{token:
    /// lock, lockDuration: lock_ms, limiter: nil}`. The lock is `SET <id>:lock <token> PX
    /// lock_ms` on the server's clock: the lease.
    ///
    /// It first promotes due delayed jobs (score ≤ (timestamp + 1) × 0x1000 − 1) to wait or
    /// prioritized; then takes the head of `wait`, else the lowest `prioritized`: at most one
    /// job per call.
    ///
    /// Returns the job, or `None` when nothing is ready (a paused queue too). Errors: a reply
    /// of another shape, or an id that is no emq-bench [`JobId`] ([`CallError::Reply`]; the
    /// job is then locked by `lock` until it expires), or transport.
    pub async fn move_to_active(
        &mut self,
        keys: &BullKeys,
        lock: Holder,
        lock_ms: u64,
    ) -> Result<Option<BullClaimed>, CallError> {
        let cmd = self.evalsha(Script::MoveToActive, 11);
        cmd.arg(&keys.wait).arg(&keys.active).arg(&keys.prioritized).arg(&keys.events).arg(&keys.stalled);
        cmd.arg(&keys.limiter).arg(&keys.delayed).arg(&keys.paused).arg(&keys.meta).arg(&keys.pc);
        cmd.arg(&keys.marker).arg(&keys.prefix).arg(super::client_ms());
        arg_written(cmd, |w| {
            pack::map(w, 3)?;
            pack::str(w, "token")?;
            pack::str_bytes(w, lock.as_bytes())?;
            pack::str(w, "lockDuration")?;
            pack::uint(w, lock_ms)?;
            pack::str(w, "limiter")?;
            pack::nil(w)
        });
        let value = self.call(Script::MoveToActive).await?;
        parse_claim(value, lock)
    }
}

fn bad(what: impl std::fmt::Debug) -> CallError {
    CallError::Reply(format!("moveToActive replied {what:?}, expected [fields, id, 0, 0] or [0, 0, 0, due]"))
}

/// Reads `[HGETALL of the job, id, 0, 0]`, or `None` for `[0, 0, limit_ttl, next_due]`.
/// Takes the `data` bytes out of the reply; nothing else is copied.
fn parse_claim(value: Value, lock: Holder) -> Result<Option<BullClaimed>, CallError> {
    let Value::Array(mut reply) = value else { return Err(bad(value)) };
    if reply.len() != 4 {
        return Err(bad(reply));
    }
    let fields = match std::mem::replace(&mut reply[0], Value::Nil) {
        Value::Int(0) => return Ok(None),
        Value::Array(fields) => fields,
        other => return Err(bad(other)),
    };
    let id = match &reply[1] {
        Value::BulkString(id) => JobId::parse(id).map_err(|e| CallError::Reply(e.to_string()))?,
        other => return Err(bad(other)),
    };
    let mut job = BullClaimed { id, payload: Vec::new(), lock, ats: 0, atm: 0, priority: 0, deferred_failure: false };
    let mut data = None;
    let mut pairs = fields.into_iter();
    while let (Some(Value::BulkString(name)), Some(value)) = (pairs.next(), pairs.next()) {
        let Value::BulkString(value) = value else { return Err(bad(value)) };
        match &name[..] {
            b"data" => data = Some(value),
            b"ats" => job.ats = number(&value)?,
            b"atm" => job.atm = number(&value)?,
            b"priority" => job.priority = number(&value)?,
            b"defa" => job.deferred_failure = true,
            _ => {}
        }
    }
    let data = data.ok_or_else(|| bad("a job hash without data"))?;
    job.payload = decode_data(&data).unwrap_or(data);
    Ok(Some(job))
}

/// A hash field holding a decimal count.
fn number(field: &[u8]) -> Result<u32, CallError> {
    std::str::from_utf8(field).ok().and_then(|s| s.parse().ok()).ok_or_else(|| bad(String::from_utf8_lossy(field)))
}
