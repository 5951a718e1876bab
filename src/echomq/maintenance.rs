//! `reap`, `promote` and `clean`: the maintenance verbs that move, or remove, jobs whose time
//! has come.

use crate::keyspace::{JobId, QueueKeys};
use crate::lua::Script;
pub use crate::queue::FinishedSet;
use crate::resp::client::{int_reply, ScriptClient};
use crate::resp::error::CallError;
use crate::resp::wire::Wire;
use redis::Value;

impl<W: Wire> ScriptClient<W> {
    /// Runs `reap`: KEYS active, pending, failed; ARGV job-key prefix, limit, max_attempts.
    /// Looks at up to `limit` expired leases: each goes back to pending (attempts unchanged,
    /// priority 0) or, once its `attempts` reached `max_attempts` (> 0), to failed with
    /// `last_error = stalled` (docs/protocol.md "Why v1.1"; 0 turns that off). Orphan
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
    /// dropped from delayed and not counted (docs/protocol.md "Why v1.1").
    ///
    /// Errors: `EMQARG`, a negative count ([`CallError::Reply`]), or a transport error.
    pub async fn promote(&mut self, keys: &QueueKeys, limit: u32) -> Result<u64, CallError> {
        let cmd = self.evalsha(Script::Promote, 2);
        cmd.arg(&keys.delayed).arg(&keys.pending).arg(&keys.job_prefix).arg(limit);
        self.count_call(Script::Promote).await
    }

    /// Runs `clean` (docs/protocol.md "The scripts", `clean`): KEYS the finished `set`; ARGV job-key
    /// prefix, age_ms, limit. Takes up to `limit` of the set's oldest members finished at least
    /// `age_ms` milliseconds ago (server time), removes them from the set and deletes the rows
    /// whose state is the set's. Returns the ids of the deleted rows, oldest first; a member
    /// without such a row leaves the set uncounted.
    ///
    /// Errors: `EMQARG` (`limit` 0, a key that is no finished set), a reply that is not an array
    /// of job ids ([`CallError::Reply`]), or a transport error.
    pub async fn clean(
        &mut self,
        keys: &QueueKeys,
        set: FinishedSet,
        age_ms: u64,
        limit: u32,
    ) -> Result<Vec<JobId>, CallError> {
        let cmd = self.evalsha(Script::Clean, 1);
        cmd.arg(set.key(keys)).arg(&keys.job_prefix).arg(age_ms).arg(limit);
        match self.call(Script::Clean).await? {
            Value::Array(ids) => ids
                .into_iter()
                .map(|id| match id {
                    Value::BulkString(id) => JobId::parse(&id).map_err(|e| CallError::Reply(e.to_string())),
                    other => Err(CallError::Reply(format!("clean replied {other:?} in its array, expected job ids"))),
                })
                .collect(),
            other => Err(CallError::Reply(format!("clean replied {other:?}, expected an array of job ids"))),
        }
    }

    async fn count_call(&mut self, script: Script) -> Result<u64, CallError> {
        let value = self.call(script).await?;
        let n = int_reply(script, &value)?;
        u64::try_from(n).map_err(|_| CallError::Reply(format!("{} replied {n}, expected a count", script.name())))
    }
}
