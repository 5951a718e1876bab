//! `fail`: end an attempt with an error; retry (pending or delayed) or give up (failed).

use super::Fence;
use crate::keyspace::{JobId, QueueKeys};
use crate::lua::Script;
use crate::queue::{FailArgs, FailReply};
use crate::resp::client::ScriptClient;
use crate::resp::error::CallError;
use crate::resp::wire::Wire;
use redis::Value;

impl<W: Wire> ScriptClient<W> {
    /// Runs `fail`: KEYS job, active, pending, delayed, failed; ARGV id, token, error,
    /// max_attempts, backoff_ms, priority, [holder] (a bare `u64` is a fence of the token
    /// alone).
    ///
    /// Errors: `EMQKIND`, `EMQARG`, `EMQNOJOB`, `EMQSTATE`, `EMQFENCE` as [`CallError::Emq`],
    /// or a transport error.
    pub async fn fail(
        &mut self,
        keys: &QueueKeys,
        id: &JobId,
        fence: impl Into<Fence>,
        args: FailArgs<'_>,
    ) -> Result<FailReply, CallError> {
        let fence = fence.into();
        let cmd = self.evalsha(Script::Fail, 5);
        cmd.arg_concat(&keys.job_key_parts(id))
            .arg(&keys.active)
            .arg(&keys.pending)
            .arg(&keys.delayed)
            .arg(&keys.failed)
            .arg(id.as_bytes());
        fence.push_token(cmd);
        cmd.arg(args.error).arg(args.max_attempts).arg(args.backoff_ms).arg(args.priority);
        fence.push_holder(cmd);
        match self.call(Script::Fail).await? {
            Value::BulkString(s) if s == b"retry" => Ok(FailReply::Retry),
            Value::BulkString(s) if s == b"failed" => Ok(FailReply::Failed),
            Value::SimpleString(s) if s == "retry" => Ok(FailReply::Retry),
            Value::SimpleString(s) if s == "failed" => Ok(FailReply::Failed),
            other => Err(CallError::Reply(format!("fail replied {other:?}, expected retry or failed"))),
        }
    }
}
