//! `extend`: renew the lease of an active job, fenced by its token.

use super::Fence;
use crate::keyspace::{JobId, QueueKeys};
use crate::lua::Script;
use crate::resp::client::{int_reply, ScriptClient};
use crate::resp::error::CallError;
use crate::resp::wire::Wire;

impl<W: Wire> ScriptClient<W> {
    /// Runs `extend`: KEYS job, active; ARGV id, token, lease_ms (new deadline = server time +
    /// `lease_ms` milliseconds), [holder] (a bare `u64` is a fence of the token alone).
    ///
    /// Errors: `EMQKIND`, `EMQARG`, `EMQNOJOB`, `EMQSTATE`, `EMQFENCE` as [`CallError::Emq`],
    /// a reply other than 1, or a transport error.
    pub async fn extend(
        &mut self,
        keys: &QueueKeys,
        id: &JobId,
        fence: impl Into<Fence>,
        lease_ms: u64,
    ) -> Result<(), CallError> {
        let fence = fence.into();
        let cmd = self.evalsha(Script::Extend, 2);
        cmd.arg_concat(&keys.job_key_parts(id)).arg(&keys.active).arg(id.as_bytes());
        fence.push_token(cmd);
        cmd.arg(lease_ms);
        fence.push_holder(cmd);
        let value = self.call(Script::Extend).await?;
        match int_reply(Script::Extend, &value)? {
            1 => Ok(()),
            n => Err(CallError::Reply(format!("extend replied {n}, expected 1"))),
        }
    }
}
