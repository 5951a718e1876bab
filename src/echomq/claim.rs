//! `claim`: pop up to `count` pending jobs and lease them; each claim hands out a fencing token.

use super::Fence;
use crate::keyspace::{JobId, QueueKeys};
use crate::lua::Script;
use crate::queue::{Claimed, Holder};
use crate::resp::client::ScriptClient;
use crate::resp::error::CallError;
use crate::resp::wire::Wire;
use redis::Value;

impl<W: Wire> ScriptClient<W> {
    /// Runs `claim` without a holder (a v1.1 call): KEYS pending, active; ARGV job-key prefix,
    /// lease_ms, count (1..=1000). The lease deadline is the server's time + `lease_ms`
    /// milliseconds. A v1.2 script deletes any `holder` a claimed row carries.
    ///
    /// Returns one [`Claimed`] per job, possibly none. Errors: `EMQARG`, a reply of another
    /// shape ([`CallError::Reply`], also for an id the host-side gate refuses), or transport.
    pub async fn claim(&mut self, keys: &QueueKeys, lease_ms: u64, count: u32) -> Result<Vec<Claimed>, CallError> {
        let value = self.claim_call(keys, lease_ms, count, None).await?;
        parse_claims(value, |token| token)
    }

    /// [`claim`](Self::claim) as `holder` (docs/protocol.md v1.2): each claimed row records it,
    /// and each job's [`Fence`] carries it for the claim's later fenced calls. Errors: as
    /// `claim`.
    pub async fn claim_as(
        &mut self,
        keys: &QueueKeys,
        lease_ms: u64,
        count: u32,
        holder: Holder,
    ) -> Result<Vec<Claimed<Fence>>, CallError> {
        let value = self.claim_call(keys, lease_ms, count, Some(holder)).await?;
        parse_claims(value, |token| Fence { token, holder: Some(holder) })
    }

    async fn claim_call(
        &mut self,
        keys: &QueueKeys,
        lease_ms: u64,
        count: u32,
        holder: Option<Holder>,
    ) -> Result<Value, CallError> {
        let cmd = self.evalsha(Script::Claim, 2);
        cmd.arg(&keys.pending).arg(&keys.active).arg(&keys.job_prefix).arg(lease_ms).arg(count);
        if let Some(holder) = &holder {
            cmd.arg(&holder.as_bytes()[..]);
        }
        self.call(Script::Claim).await
    }
}

fn bad(what: impl std::fmt::Debug) -> CallError {
    CallError::Reply(format!("claim replied {what:?}, expected an array of [id, payload, token, priority]"))
}

/// The claims of a reply, each token made a `T` by `fence`.
fn parse_claims<T>(value: Value, fence: impl Fn(u64) -> T) -> Result<Vec<Claimed<T>>, CallError> {
    let Value::Array(entries) = value else { return Err(bad(value)) };
    let mut claimed = Vec::with_capacity(entries.len());
    for entry in entries {
        let Value::Array(fields) = entry else { return Err(bad(entry)) };
        let [id, payload, token, priority]: [Value; 4] = fields.try_into().map_err(bad)?;
        let (Value::BulkString(id), Value::BulkString(payload), Value::Int(token), Value::Int(priority)) =
            (id, payload, token, priority)
        else {
            return Err(bad("an entry of the wrong shape"));
        };
        let id = JobId::parse(&id).map_err(|e| CallError::Reply(e.to_string()))?;
        let token = u64::try_from(token).map_err(|_| bad(token))?;
        let priority = u64::try_from(priority).map_err(|_| bad(priority))?;
        claimed.push(Claimed { id, payload, token: fence(token), priority });
    }
    Ok(claimed)
}
