//! `retryJob` and `moveToDelayed`: a failed attempt that will be retried, and
//! [`ScriptClient::move_to_failed`], which picks the script as BullMQ's client does
//! (docs/bullmq-mapping.md 3.4).

use super::claim::BullClaimed;
use super::codes::zero_or_refusal;
use super::finish::failure_fields;
use super::keys::BullKeys;
use super::pack::arg_written;
use super::policy::{Backoff, FailStep};
use crate::lua::Script;
use crate::resp::client::ScriptClient;
use crate::resp::error::CallError;
use crate::resp::wire::Wire;

/// How a job is retried: its options as the add packed them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RetryPolicy {
    /// `opts.attempts` (0 and 1 both mean one attempt).
    pub max_attempts: u32,
    /// `opts.backoff`.
    pub backoff: Backoff,
    /// `opts.lifo`: a retry goes back to the head of wait (`RPUSH`), as the client sends it.
    pub lifo: bool,
}

impl<W: Wire> ScriptClient<W> {
    /// Fails `job`'s attempt with `reason` as BullMQ's client does (`job.py` `moveToFailed`):
    /// [`BullClaimed::fail_step`] decides, then [`retry_job`](Self::retry_job),
    /// [`move_to_delayed`](Self::move_to_delayed) or
    /// [`move_to_failed_final`](Self::move_to_failed_final) runs. Returns the step taken (its
    /// [`FailStep::script`] is the one that ran).
    ///
    /// Errors: the chosen script's.
    pub async fn move_to_failed(
        &mut self,
        keys: &BullKeys,
        job: &BullClaimed,
        policy: &RetryPolicy,
        reason: &str,
    ) -> Result<FailStep, CallError> {
        let step = job.fail_step(policy.max_attempts, policy.backoff);
        self.take_fail_step(keys, job, step, policy, reason).await?;
        Ok(step)
    }

    /// Runs the script of `step`, a decision already made (by [`BullClaimed::fail_step`], or
    /// by a client that draws each failure's delay itself): [`retry_job`](Self::retry_job),
    /// [`move_to_delayed`](Self::move_to_delayed) or
    /// [`move_to_failed_final`](Self::move_to_failed_final), with `policy`'s lifo and attempts.
    ///
    /// Errors: the script's.
    pub async fn take_fail_step(
        &mut self,
        keys: &BullKeys,
        job: &BullClaimed,
        step: FailStep,
        policy: &RetryPolicy,
        reason: &str,
    ) -> Result<(), CallError> {
        match step {
            FailStep::Retry => self.retry_job(keys, job, policy.lifo, reason).await?,
            FailStep::Delay(ms) => self.move_to_delayed(keys, job, ms, reason).await?,
            FailStep::Fail => self.move_to_failed_final(keys, job, policy.max_attempts, reason).await?,
        }
        Ok(())
    }

    /// Runs `retryJob`: KEYS active, wait, paused, the job key, meta, events, delayed,
    /// prioritized, pc, marker, stalled; ARGV key prefix, timestamp (client ms), `"RPUSH"`
    /// (head of wait) with `lifo` else `"LPUSH"` (tail), id, token, msgpack fields
    /// `[failedReason, reason, stacktrace, "[]"]`.
    ///
    /// It promotes due delayed jobs first (even when it then refuses); the job goes back to
    /// wait, or to prioritized by its `priority`; `atm` + 1; the lock deleted. Errors
    /// ([`CallError::Emq`]): `JobNotExist` (-1), `JobLockMismatch` (-6), `JobLockNotExist`
    /// (-2), `JobNotInState` (-3); or transport.
    pub async fn retry_job(
        &mut self,
        keys: &BullKeys,
        job: &BullClaimed,
        lifo: bool,
        reason: &str,
    ) -> Result<(), CallError> {
        let cmd = self.evalsha(Script::RetryJob, 11);
        cmd.arg(&keys.active).arg(&keys.wait).arg(&keys.paused).arg_concat(&keys.job_key_parts(&job.id));
        cmd.arg(&keys.meta).arg(&keys.events).arg(&keys.delayed).arg(&keys.prioritized).arg(&keys.pc);
        cmd.arg(&keys.marker).arg(&keys.stalled);
        cmd.arg(&keys.prefix).arg(super::client_ms()).arg(if lifo { "RPUSH" } else { "LPUSH" });
        cmd.arg(job.id.as_bytes()).arg(&job.lock.as_bytes()[..]);
        arg_written(cmd, |w| failure_fields(w, reason));
        let value = self.call(Script::RetryJob).await?;
        zero_or_refusal(Script::RetryJob, &value)
    }

    /// Runs `moveToDelayed`: KEYS marker, active, prioritized, delayed, the job key, events,
    /// meta, stalled, wait, limiter, paused, pc; ARGV key prefix, timestamp (client ms), id,
    /// token, `delay_ms`, skip-attempt `"0"`, msgpack fields `[failedReason, reason,
    /// stacktrace, "[]"]`, fetch next `"0"`.
    ///
    /// The job goes to `delayed` at score `(timestamp + delay_ms) × 0x1000 + n`, its `delay`
    /// field = `delay_ms`; `atm` + 1; the lock deleted. Errors: as
    /// [`retry_job`](Self::retry_job).
    pub async fn move_to_delayed(
        &mut self,
        keys: &BullKeys,
        job: &BullClaimed,
        delay_ms: u64,
        reason: &str,
    ) -> Result<(), CallError> {
        let cmd = self.evalsha(Script::MoveToDelayed, 12);
        cmd.arg(&keys.marker).arg(&keys.active).arg(&keys.prioritized).arg(&keys.delayed);
        cmd.arg_concat(&keys.job_key_parts(&job.id)).arg(&keys.events).arg(&keys.meta).arg(&keys.stalled);
        cmd.arg(&keys.wait).arg(&keys.limiter).arg(&keys.paused).arg(&keys.pc);
        cmd.arg(&keys.prefix).arg(super::client_ms()).arg(job.id.as_bytes()).arg(&job.lock.as_bytes()[..]);
        cmd.arg(delay_ms).arg("0");
        arg_written(cmd, |w| failure_fields(w, reason));
        cmd.arg("0");
        let value = self.call(Script::MoveToDelayed).await?;
        zero_or_refusal(Script::MoveToDelayed, &value)
    }
}
