//! `moveToFinished`: complete a locked job, or fail it for good (docs/bullmq-mapping.md 3.3).

use super::claim::BullClaimed;
use super::codes::zero_or_refusal;
use super::keys::BullKeys;
use super::pack::{self, arg_written};
use crate::lua::Script;
use crate::resp::client::ScriptClient;
use crate::resp::error::CallError;
use crate::resp::request::Request;
use crate::resp::wire::Wire;

/// The return value every emq-bench completion stores (`returnvalue`, JSON as BullMQ's
/// clients send it): small and constant, so a completion formats nothing.
pub const RETURN_VALUE: &str = r#"{"by":"emq-bench"}"#;

/// Which end a moveToFinished call writes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum End<'a> {
    /// `completed`, `returnvalue` = [`RETURN_VALUE`].
    Completed,
    /// `failed`, `failedReason` = the JSON string of the reason.
    Failed(&'a str),
}

impl<W: Wire> ScriptClient<W> {
    /// Runs `moveToFinished` to complete `job`: KEYS wait, active, prioritized, events, stalled,
    /// limiter, delayed, paused, meta, pc, completed, the job key, metrics:completed, marker;
    /// ARGV id, timestamp (client ms), `"returnvalue"`, [`RETURN_VALUE`], `"completed"`, fetch
    /// next `""` (never), key prefix, msgpack `{token, keepJobs: {count: -1}, limiter: nil,
    /// lockDuration: 0, attempts: max_attempts, attemptsMade: atm, maxMetricsSize: "", fpof,
    /// cpof, idof, rdof: false}` (the Python worker's map; keepJobs −1 keeps every finished job
    /// for the checker, as `removeOnComplete` false does).
    ///
    /// The job is kept in `completed` at the timestamp with `returnvalue` and `finishedOn`;
    /// `atm` + 1; the lock deleted. Errors ([`CallError::Emq`], checked in this order):
    /// `JobNotExist` (-1), `JobPendingDependencies` (-4), `JobHasFailedChildren` (-9),
    /// `JobLockMismatch` (-6: another claim holds the lock), `JobLockNotExist` (-2: the lock
    /// expired or an earlier finish released it; a retried completion gets this too),
    /// `JobNotInState` (-3: not in active, with the lock already deleted); or transport.
    pub async fn move_to_completed(
        &mut self,
        keys: &BullKeys,
        job: &BullClaimed,
        max_attempts: u32,
    ) -> Result<(), CallError> {
        frame_finish(self.evalsha(Script::MoveToFinished, 14), keys, job, max_attempts, End::Completed);
        let value = self.call(Script::MoveToFinished).await?;
        zero_or_refusal(Script::MoveToFinished, &value)
    }

    /// Runs `moveToFinished` to fail `job` for good with `reason`: as
    /// [`move_to_completed`](Self::move_to_completed) with the failed set and
    /// metrics:failed, ARGV `"failedReason"`, the JSON string of `reason`, `"failed"`, and
    /// ARGV 9 the msgpack fields `[failedReason, reason, stacktrace, "[]"]` (what the Python
    /// client's `moveToFailed` sends). `max_attempts` is compared with the new `atm` for the
    /// `retries-exhausted` event.
    ///
    /// The job is kept in `failed`, `defa` cleared. Errors: as `move_to_completed` without -4/-9.
    pub async fn move_to_failed_final(
        &mut self,
        keys: &BullKeys,
        job: &BullClaimed,
        max_attempts: u32,
        reason: &str,
    ) -> Result<(), CallError> {
        frame_finish(self.evalsha(Script::MoveToFinished, 14), keys, job, max_attempts, End::Failed(reason));
        let value = self.call(Script::MoveToFinished).await?;
        zero_or_refusal(Script::MoveToFinished, &value)
    }
}

/// Appends moveToFinished's KEYS and ARGV for `end`.
pub(crate) fn frame_finish(cmd: &mut Request, keys: &BullKeys, job: &BullClaimed, max_attempts: u32, end: End<'_>) {
    let (target, metrics, target_name) = match end {
        End::Completed => (&keys.completed, &keys.metrics_completed, "completed"),
        End::Failed(_) => (&keys.failed, &keys.metrics_failed, "failed"),
    };
    cmd.arg(&keys.wait).arg(&keys.active).arg(&keys.prioritized).arg(&keys.events).arg(&keys.stalled);
    cmd.arg(&keys.limiter).arg(&keys.delayed).arg(&keys.paused).arg(&keys.meta).arg(&keys.pc).arg(target);
    cmd.arg_concat(&keys.job_key_parts(&job.id)).arg(metrics).arg(&keys.marker);
    cmd.arg(job.id.as_bytes()).arg(super::client_ms());
    match end {
        End::Completed => {
            cmd.arg("returnvalue").arg(RETURN_VALUE);
        }
        End::Failed(reason) => {
            cmd.arg("failedReason");
            arg_written(cmd, |w| pack::json_str(w, reason));
        }
    }
    cmd.arg(target_name).arg("").arg(&keys.prefix);
    arg_written(cmd, |w| {
        pack::map(w, 11)?;
        pack::str(w, "token")?;
        pack::str_bytes(w, job.lock.as_bytes())?;
        pack::str(w, "keepJobs")?;
        pack::map(w, 1)?;
        pack::str(w, "count")?;
        pack::sint(w, -1)?;
        pack::str(w, "limiter")?;
        pack::nil(w)?;
        // Read only to fetch the next job, which these calls never ask for.
        pack::str(w, "lockDuration")?;
        pack::uint(w, 0)?;
        pack::str(w, "attempts")?;
        pack::uint(w, u64::from(max_attempts))?;
        pack::str(w, "attemptsMade")?;
        pack::uint(w, u64::from(job.atm))?;
        pack::str(w, "maxMetricsSize")?;
        pack::str(w, "")?;
        ["fpof", "cpof", "idof", "rdof"].iter().try_for_each(|flag| {
            pack::str(w, flag)?;
            pack::bool(w, false)
        })
    });
    if let End::Failed(reason) = end {
        arg_written(cmd, |w| failure_fields(w, reason));
    }
}

/// Writes the fields-to-update ARGV of a failure: msgpack `[failedReason, <reason>,
/// stacktrace, "[]"]`, the flat array the Python client's `moveToFailed` sends (its stack
/// trace list, empty here: emq-bench's failures are chosen, not raised).
pub(crate) fn failure_fields(w: &mut dyn std::io::Write, reason: &str) -> std::io::Result<()> {
    pack::array(w, 4)?;
    pack::str(w, "failedReason")?;
    pack::str(w, reason)?;
    pack::str(w, "stacktrace")?;
    pack::str(w, "[]")
}
