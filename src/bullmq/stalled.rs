//! `moveStalledJobsToWait`: BullMQ's stalled-jobs check, the reaper (docs/bullmq-mapping.md 3.6).

use super::keys::BullKeys;
use crate::keyspace::JobId;
use crate::lua::Script;
use crate::resp::client::ScriptClient;
use crate::resp::error::CallError;
use crate::resp::wire::Wire;
use redis::Value;

/// What one stalled check did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StalledReply {
    /// The jobs moved back to the head of wait (their lock had expired while they were
    /// candidates). Those past `maxStalledCount` are among them, flagged with `defa`: the
    /// check fails none itself; their next claim carries
    /// [`deferred_failure`](super::BullClaimed::deferred_failure) and must fail them.
    pub moved: Vec<JobId>,
    /// Ids moved back that are no emq-bench [`JobId`] (jobs another client added).
    pub foreign: usize,
}

impl<W: Wire> ScriptClient<W> {
    /// Runs `moveStalledJobsToWait`: KEYS stalled, wait, active, stalled-check, meta, paused,
    /// marker, events, repeat; ARGV `max_stalled` (maxStalledCount), key prefix, timestamp
    /// (client ms), `check_ms` (the guard's lifetime: the worker's stalledInterval).
    ///
    /// **Two calls per stall.** While `stalled-check` exists (set `PX check_ms` by the
    /// previous call) it returns at once with nothing. Otherwise it moves every candidate in
    /// `stalled` whose lock is gone back to wait (`stc` + 1; `defa` set when `stc` >
    /// `max_stalled`), then makes every job now in `active` a candidate for the next call. So
    /// a job is moved back by the first call that runs at least `check_ms` after the call that
    /// marked it and after its lock expired: between one and two intervals after the expiry.
    ///
    /// Errors: a reply that is no array of ids ([`CallError::Reply`]), or transport.
    pub async fn move_stalled_jobs_to_wait(
        &mut self,
        keys: &BullKeys,
        max_stalled: u32,
        check_ms: u64,
    ) -> Result<StalledReply, CallError> {
        let cmd = self.evalsha(Script::MoveStalledJobsToWait, 9);
        cmd.arg(&keys.stalled).arg(&keys.wait).arg(&keys.active).arg(&keys.stalled_check).arg(&keys.meta);
        cmd.arg(&keys.paused).arg(&keys.marker).arg(&keys.events).arg(&keys.repeat);
        cmd.arg(max_stalled).arg(&keys.prefix).arg(super::client_ms()).arg(check_ms);
        let bad = |what: &dyn std::fmt::Debug| {
            CallError::Reply(format!("moveStalledJobsToWait replied {what:?}, expected an array of ids"))
        };
        let Value::Array(ids) = self.call(Script::MoveStalledJobsToWait).await? else {
            return Err(bad(&"no array"));
        };
        let mut reply = StalledReply::default();
        for id in &ids {
            let Value::BulkString(id) = id else { return Err(bad(id)) };
            match JobId::parse(id) {
                Ok(id) => reply.moved.push(id),
                Err(_) => reply.foreign += 1,
            }
        }
        Ok(reply)
    }
}
