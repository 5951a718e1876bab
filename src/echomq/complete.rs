//! `complete`: finish an active job, fenced by its token.

use super::Fence;
use crate::keyspace::{JobId, QueueKeys};
use crate::lua::Script;
use crate::queue::CompleteReply;
use crate::resp::client::{int_reply, ScriptClient};
use crate::resp::error::CallError;
use crate::resp::wire::Wire;

impl<W: Wire> ScriptClient<W> {
    /// Runs `complete`: KEYS job, active, completed; ARGV id, token, [holder] (a bare `u64` is
    /// a fence of the token alone).
    ///
    /// Errors: `EMQKIND`, `EMQARG`, `EMQNOJOB`, `EMQSTATE`, `EMQFENCE` (stale token, or another
    /// claim's holder) as [`CallError::Emq`], or a transport error.
    pub async fn complete(
        &mut self,
        keys: &QueueKeys,
        id: &JobId,
        fence: impl Into<Fence>,
    ) -> Result<CompleteReply, CallError> {
        let fence = fence.into();
        let cmd = self.evalsha(Script::Complete, 3);
        cmd.arg_concat(&keys.job_key_parts(id)).arg(&keys.active).arg(&keys.completed).arg(id.as_bytes());
        fence.push_token(cmd);
        fence.push_holder(cmd);
        let value = self.call(Script::Complete).await?;
        match int_reply(Script::Complete, &value)? {
            1 => Ok(CompleteReply::Completed),
            0 => Ok(CompleteReply::AlreadyCompleted),
            n => Err(CallError::Reply(format!("complete replied {n}, expected 0 or 1"))),
        }
    }
}
