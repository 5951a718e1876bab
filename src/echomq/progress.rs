//! `progress`: store a progress note on an active job, fenced by its token.

use super::Fence;
use crate::keyspace::{JobId, QueueKeys};
use crate::lua::Script;
use crate::resp::client::{int_reply, ScriptClient};
use crate::resp::error::CallError;
use crate::resp::wire::Wire;

impl<W: Wire> ScriptClient<W> {
    /// Runs `progress`: KEYS job; ARGV id, token, progress (opaque bytes, stored in the row's
    /// `progress` field), [holder] (a bare `u64` is a fence of the token alone).
    ///
    /// Errors: `EMQKIND`, `EMQARG`, `EMQNOJOB`, `EMQSTATE`, `EMQFENCE` as [`CallError::Emq`],
    /// a reply other than 1, or a transport error.
    pub async fn progress(
        &mut self,
        keys: &QueueKeys,
        id: &JobId,
        fence: impl Into<Fence>,
        progress: &[u8],
    ) -> Result<(), CallError> {
        let fence = fence.into();
        let cmd = self.evalsha(Script::Progress, 1);
        cmd.arg_concat(&keys.job_key_parts(id)).arg(id.as_bytes());
        fence.push_token(cmd);
        cmd.arg(progress);
        fence.push_holder(cmd);
        let value = self.call(Script::Progress).await?;
        match int_reply(Script::Progress, &value)? {
            1 => Ok(()),
            n => Err(CallError::Reply(format!("progress replied {n}, expected 1"))),
        }
    }
}
