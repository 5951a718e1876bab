//! `reap` and `promote`: the maintenance verbs that move jobs whose time has come.

use crate::keyspace::QueueKeys;
use crate::lua::Script;
use crate::resp::client::{int_reply, ScriptClient};
use crate::resp::error::CallError;
use crate::resp::wire::Wire;

impl<W: Wire> ScriptClient<W> {
    /// Runs `reap`: KEYS active, pending, failed; ARGV job-key prefix, limit, max_attempts.
    /// Looks at up to `limit` expired leases: each goes back to pending (attempts unchanged,
    /// priority 0) or, once its `attempts` reached `max_attempts` (> 0), to failed with
    /// `last_error = stalled` (PROTOCOL.md v1.1 "Poison jobs end"; 0 turns that off). Orphan
    /// members are dropped from active and not counted. Returns how many leases moved.
    ///
    /// Errors: `EMQARG`, a negative count ([`CallError::Reply`]), or a transport error.
    pub async fn reap(&mut self, keys: &QueueKeys, limit: u32, max_attempts: u32) -> Result<u64, CallError> {
        let cmd = self.evalsha(Script::Reap, 3);
        cmd.arg(&keys.active).arg(&keys.pending).arg(&keys.failed);
        cmd.arg(&keys.job_prefix).arg(limit).arg(max_attempts);
        self.count_call(Script::Reap).await
    }

    /// Runs `promote`: KEYS delayed, pending; ARGV job-key prefix, limit. Moves up to `limit`
    /// due delayed jobs to pending (priority 0) and returns how many; orphan members are
    /// dropped from delayed and not counted (PROTOCOL.md v1.1).
    ///
    /// Errors: `EMQARG`, a negative count ([`CallError::Reply`]), or a transport error.
    pub async fn promote(&mut self, keys: &QueueKeys, limit: u32) -> Result<u64, CallError> {
        let cmd = self.evalsha(Script::Promote, 2);
        cmd.arg(&keys.delayed).arg(&keys.pending).arg(&keys.job_prefix).arg(limit);
        self.count_call(Script::Promote).await
    }

    async fn count_call(&mut self, script: Script) -> Result<u64, CallError> {
        let value = self.call(script).await?;
        let n = int_reply(script, &value)?;
        u64::try_from(n).map_err(|_| CallError::Reply(format!("{} replied {n}, expected a count", script.name())))
    }
}
