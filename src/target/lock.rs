//! The run lock: a lease key per queue (`emq-lock:{q}`, SET NX PX with the run's id), renewed
//! while the run lives and deleted at its end, so a second run started on the same queues is
//! refused instead of both corrupting each other. A run that dies leaves it to expire.

use super::control::Control;
use super::TargetError;
use crate::protocol::{CallError, QueueKeys};
use std::time::Duration;

/// The lease's length; renewed every third of it.
pub const LOCK_TTL: Duration = Duration::from_secs(30);

/// Extends the lease only while it is still ours (compare and set).
const RENEW: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then \
    return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end";
/// Deletes the lease only while it is still ours.
const RELEASE: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then \
    return redis.call('DEL', KEYS[1]) else return 0 end";

/// The held locks of one run. Dropping it stops the renewal (the leases then expire);
/// [`RunLock::release`] deletes them at once.
pub struct RunLock {
    control: Control,
    keys: Vec<String>,
    run_id: String,
    renewer: tokio::task::JoinHandle<()>,
}

impl RunLock {
    /// Takes the lock of every queue of `queues` for `run_id`, or none of them.
    ///
    /// Errors: [`TargetError::Locked`] naming the first queue another run holds, its holder and
    /// how long its lease still runs; [`TargetError::Call`] when a command fails.
    pub async fn acquire(control: &Control, queues: &[QueueKeys], run_id: &str) -> Result<RunLock, TargetError> {
        let mut conn = control.clone();
        let mut held: Vec<String> = Vec::new();
        for keys in queues {
            let taken: Option<String> = redis::cmd("SET")
                .arg(&keys.lock)
                .arg(run_id)
                .arg("NX")
                .arg("PX")
                .arg(LOCK_TTL.as_millis() as u64)
                .query_async(&mut conn)
                .await
                .map_err(|e| CallError::from_redis(&e))?;
            if taken.is_none() {
                let holder: Option<String> =
                    redis::cmd("GET").arg(&keys.lock).query_async(&mut conn).await.map_err(|e| CallError::from_redis(&e))?;
                let ttl_ms: i64 =
                    redis::cmd("PTTL").arg(&keys.lock).query_async(&mut conn).await.map_err(|e| CallError::from_redis(&e))?;
                release(&mut conn, &held, run_id).await;
                return Err(TargetError::Locked {
                    queue: keys.queue.to_string(),
                    key: keys.lock.clone(),
                    holder: holder.unwrap_or_else(|| "(released just now)".into()),
                    ttl_ms: ttl_ms.max(0) as u64,
                });
            }
            held.push(keys.lock.clone());
        }
        let renewer = tokio::spawn(renew_loop(control.clone(), held.clone(), run_id.to_string()));
        Ok(RunLock { control: control.clone(), keys: held, run_id: run_id.to_string(), renewer })
    }

    /// The run id the locks hold.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Stops the renewal and deletes the locks that are still this run's.
    pub async fn release(self) {
        self.renewer.abort();
        let mut conn = self.control.clone();
        release(&mut conn, &self.keys, &self.run_id).await;
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        self.renewer.abort();
    }
}

async fn renew_loop(mut conn: Control, keys: Vec<String>, run_id: String) {
    let mut ticker = tokio::time::interval(LOCK_TTL / 3);
    ticker.tick().await;
    loop {
        ticker.tick().await;
        for key in &keys {
            // A failed renewal (server briefly away) is retried at the next tick; the lease
            // outlives two missed ones.
            let _: Result<i64, _> = redis::cmd("EVAL")
                .arg(RENEW)
                .arg(1)
                .arg(key)
                .arg(&run_id)
                .arg(LOCK_TTL.as_millis() as u64)
                .query_async(&mut conn)
                .await;
        }
    }
}

async fn release(conn: &mut Control, keys: &[String], run_id: &str) {
    for key in keys {
        let _: Result<i64, _> = redis::cmd("EVAL").arg(RELEASE).arg(1).arg(key).arg(run_id).query_async(conn).await;
    }
}
