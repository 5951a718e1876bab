//! The run lock: a lease key per queue (`emq-lock:{q}`, SET NX PX with the run's id), renewed
//! while the run lives and deleted at its end, so a second run started on the same queues is
//! refused instead of both corrupting each other. A run that dies leaves it to expire.

use super::plane::{Plane, Route};
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
    plane: Plane,
    keys: Vec<QueueKeys>,
    run_id: String,
    renewer: tokio::task::JoinHandle<()>,
}

impl RunLock {
    /// Takes the lock of every queue of `queues` for `run_id`, or none of them.
    ///
    /// Errors: [`TargetError::Locked`] naming the first queue another run holds, its holder and
    /// how long its lease still runs; [`TargetError::Call`] when a command fails.
    pub async fn acquire(plane: &Plane, queues: &[QueueKeys], run_id: &str) -> Result<RunLock, TargetError> {
        let mut held: Vec<QueueKeys> = Vec::new();
        for keys in queues {
            let mut conn = plane.conn_for(keys);
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
                release(plane, &held, run_id).await;
                return Err(TargetError::Locked {
                    queue: keys.queue.to_string(),
                    key: keys.lock.clone(),
                    holder: holder.unwrap_or_else(|| "(released just now)".into()),
                    ttl_ms: ttl_ms.max(0) as u64,
                });
            }
            held.push(keys.clone());
        }
        let renewer = tokio::spawn(renew_loop(plane.clone(), held.clone(), run_id.to_string()));
        Ok(RunLock { plane: plane.clone(), keys: held, run_id: run_id.to_string(), renewer })
    }

    /// The run id the locks hold.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Stops the renewal and deletes the locks that are still this run's.
    pub async fn release(self) {
        self.renewer.abort();
        release(&self.plane, &self.keys, &self.run_id).await;
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        self.renewer.abort();
    }
}

async fn renew_loop(plane: Plane, keys: Vec<QueueKeys>, run_id: String) {
    let mut ticker = tokio::time::interval(LOCK_TTL / 3);
    ticker.tick().await;
    loop {
        ticker.tick().await;
        for keys in &keys {
            // A failed renewal (server briefly away) is retried at the next tick; the lease
            // outlives two missed ones. A moved slot is followed (the plane re-reads the map).
            let _ = plane
                .on_queue(keys, |mut conn| {
                    let run_id = run_id.clone();
                    async move {
                        let renewed: Result<i64, _> = redis::cmd("EVAL")
                            .arg(RENEW)
                            .arg(1)
                            .arg(&keys.lock)
                            .arg(&run_id)
                            .arg(LOCK_TTL.as_millis() as u64)
                            .query_async(&mut conn)
                            .await;
                        renewed.map_err(|e| CallError::from_redis(&e))
                    }
                })
                .await;
        }
    }
}

async fn release(plane: &Plane, keys: &[QueueKeys], run_id: &str) {
    for keys in keys {
        let _ = plane
            .on_queue(keys, |mut conn| async move {
                let released: Result<i64, _> =
                    redis::cmd("EVAL").arg(RELEASE).arg(1).arg(&keys.lock).arg(run_id).query_async(&mut conn).await;
                released.map_err(|e| CallError::from_redis(&e))
            })
            .await;
    }
}
