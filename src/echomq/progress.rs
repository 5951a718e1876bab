//! `progress`: store a progress note on an active job, fenced by its token.

use crate::keyspace::{JobId, QueueKeys};
use crate::lua::Script;
use crate::resp::client::{int_reply, ScriptClient};
use crate::resp::error::CallError;
use crate::resp::wire::Wire;

impl<W: Wire> ScriptClient<W> {
    /// Runs `progress`: KEYS job; ARGV id, token, progress (opaque bytes, stored in the row's
    /// `progress` field).
    ///
    /// Errors: `EMQKIND`, `EMQARG`, `EMQNOJOB`, `EMQSTATE`, `EMQFENCE` as [`CallError::Emq`],
    /// a reply other than 1, or a transport error.
    pub async fn progress(
        &mut self,
        keys: &QueueKeys,
        id: &JobId,
        token: u64,
        progress: &[u8],
    ) -> Result<(), CallError> {
        let cmd = self.evalsha(Script::Progress, 1);
        cmd.arg_concat(&keys.job_key_parts(id)).arg(id.as_bytes()).arg(token).arg(progress);
        let value = self.call(Script::Progress).await?;
        match int_reply(Script::Progress, &value)? {
            1 => Ok(()),
            n => Err(CallError::Reply(format!("progress replied {n}, expected 1"))),
        }
    }
}
