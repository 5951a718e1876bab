//! `updateProgress`: store a job's progress (docs/bullmq-mapping.md 3.5).

use super::codes::zero_or_refusal;
use super::keys::BullKeys;
use crate::keyspace::JobId;
use crate::lua::Script;
use crate::resp::client::ScriptClient;
use crate::resp::error::CallError;
use crate::resp::wire::Wire;

impl<W: Wire> ScriptClient<W> {
    /// Runs `updateProgress`: KEYS the job key, events, meta; ARGV id, `progress` verbatim
    /// (BullMQ's clients send JSON, and the official `Job.fromJSON` parses it: send JSON, e.g.
    /// `b"42"`). HSETs `progress` and XADDs a `progress` event.
    ///
    /// **Not fenced**: BullMQ's script takes no token, so a stale worker's progress on an
    /// existing job is accepted. Errors: `JobNotExist` (-1) as [`CallError::Emq`], another
    /// reply as [`CallError::Reply`], or transport.
    pub async fn update_progress(&mut self, keys: &BullKeys, id: &JobId, progress: &[u8]) -> Result<(), CallError> {
        let cmd = self.evalsha(Script::UpdateProgress, 3);
        cmd.arg_concat(&keys.job_key_parts(id)).arg(&keys.events).arg(&keys.meta);
        cmd.arg(id.as_bytes()).arg(progress);
        let value = self.call(Script::UpdateProgress).await?;
        zero_or_refusal(Script::UpdateProgress, &value)
    }
}
