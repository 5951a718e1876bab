//! `extendLock`: renew one job's lock (docs/bullmq-mapping.md 3.5).

use super::codes::refused;
use super::keys::BullKeys;
use crate::keyspace::JobId;
use crate::lua::{ErrorCode, Script};
use crate::queue::Holder;
use crate::resp::client::ScriptClient;
use crate::resp::error::CallError;
use crate::resp::wire::Wire;
use redis::Value;

impl<W: Wire> ScriptClient<W> {
    /// Runs `extendLock`: KEYS the lock key `<prefix><id>:lock`, stalled; ARGV token,
    /// `lock_ms`, id. When the lock holds `lock`, it is `SET` again with `PX lock_ms` (server
    /// clock) and the id leaves `stalled` (reply 1); it never looks at `active`.
    ///
    /// Errors: [`ErrorCode::NotExtended`] as [`CallError::Emq`] (reply 0: the lock expired,
    /// was released or is another claim's; an expired lock is never revived), another reply
    /// as [`CallError::Reply`], or transport.
    pub async fn extend_lock(
        &mut self,
        keys: &BullKeys,
        id: &JobId,
        lock: &Holder,
        lock_ms: u64,
    ) -> Result<(), CallError> {
        let cmd = self.evalsha(Script::ExtendLock, 2);
        cmd.arg_concat(&keys.lock_key_parts(id)).arg(&keys.stalled);
        cmd.arg(&lock.as_bytes()[..]).arg(lock_ms).arg(id.as_bytes());
        match self.call(Script::ExtendLock).await? {
            Value::Int(1) => Ok(()),
            Value::Int(0) => Err(refused(ErrorCode::NotExtended)),
            other => Err(CallError::Reply(format!("extendLock replied {other:?}, expected 1 or 0"))),
        }
    }
}
