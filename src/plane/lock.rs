//! The run lock: a lease key per queue (`emq-lock:{q}`, SET NX PX with the run's id), renewed
//! while the run lives and deleted at its end, so a second run started on the same queues is
//! refused instead of both corrupting each other. A run that dies leaves it to expire.

use super::{Plane, PlaneError, Route};
use crate::keyspace::QueueKeys;
use crate::resp::CallError;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The lease's length; renewed every third of it.
pub const LOCK_TTL: Duration = Duration::from_secs(30);

/// Extends the lease only while it is still ours (compare and set); takes it again when it
/// is gone (a server restarted without persistence, or its data lost: no other run holds it,
/// and the checker reports what else was lost), replying 2.
const RENEW: &str = "local holder = redis.call('GET', KEYS[1]) \
    if holder == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end \
    if holder == false then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 2 end \
    return 0";
/// Deletes the lease only while it is still ours.
const RELEASE: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then \
    return redis.call('DEL', KEYS[1]) else return 0 end";

/// The run id under which every shard of a `shared` fleet (and its merge) holds the queues'
/// lock: the group's (its barrier refuses shards of another configuration).
pub fn fleet_run_id(group: &str) -> String {
    format!("emq-bench fleet {group}")
}

/// The held locks of one run. The renewal runs on a thread of its own with its own
/// connections, so a long check (rayon, blocking the command's runtime) cannot let a lease
/// expire. Dropping it stops the renewal (the leases then expire); [`RunLock::release`]
/// deletes them at once.
pub struct RunLock {
    plane: Plane,
    keys: Vec<QueueKeys>,
    /// The leases this process created (the others it joined: a `shared` fleet's, held by
    /// another of its shards); [`RunLock::release`] deletes only these.
    created: Vec<QueueKeys>,
    run_id: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    renewer: Option<std::thread::JoinHandle<()>>,
    lost: Arc<Mutex<Vec<String>>>,
}

impl RunLock {
    /// Takes the lock of every queue of `queues` for `run_id`, or none of them; a lease
    /// already held, even under the same id, is another run's.
    ///
    /// Errors: [`PlaneError::Locked`] naming the first queue another run holds, its holder and
    /// how long its lease still runs; [`PlaneError::Call`] when a command fails (the locks
    /// created so far are released first in both cases).
    pub async fn acquire(plane: &Plane, queues: &[QueueKeys], run_id: &str) -> Result<RunLock, PlaneError> {
        RunLock::take_all(plane, queues, run_id, false).await
    }

    /// [`RunLock::acquire`] for a `shared` fleet's shard or merge (`run_id` from
    /// [`fleet_run_id`]): a lease that `run_id` already holds is joined, renewed by this
    /// process too and never deleted by [`RunLock::release`].
    ///
    /// Errors: as [`RunLock::acquire`].
    pub async fn join_or_acquire(plane: &Plane, queues: &[QueueKeys], run_id: &str) -> Result<RunLock, PlaneError> {
        RunLock::take_all(plane, queues, run_id, true).await
    }

    async fn take_all(
        plane: &Plane,
        queues: &[QueueKeys],
        run_id: &str,
        may_join: bool,
    ) -> Result<RunLock, PlaneError> {
        let (mut held, mut created): (Vec<QueueKeys>, Vec<QueueKeys>) = (Vec::new(), Vec::new());
        for keys in queues {
            match take(plane, keys, run_id, may_join).await {
                Ok(joined) => {
                    held.push(keys.clone());
                    if !joined {
                        created.push(keys.clone());
                    }
                }
                Err(err) => {
                    release(plane, &created, run_id).await;
                    return Err(err);
                }
            }
        }
        let lost = Arc::new(Mutex::new(Vec::new()));
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let renewer = {
            let (plane, keys, run_id, lost) = (plane.clone(), held.clone(), run_id.to_string(), lost.clone());
            std::thread::Builder::new()
                .name("emq-lock".into())
                .spawn(move || renew_thread(plane, keys, run_id, lost, stopped))
                .map_err(|e| PlaneError::Call(CallError::Connection(format!("cannot start the lock renewer: {e}"))))?
        };
        Ok(RunLock {
            plane: plane.clone(),
            keys: held,
            created,
            run_id: run_id.to_string(),
            stop: Some(stop),
            renewer: Some(renewer),
            lost,
        })
    }

    /// The run id the locks hold.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Leases that were found lost while the run held them (another run took the queue, or
    /// the renewal failed past the lease's length), one line each; empty when all held.
    pub fn lost(&self) -> Vec<String> {
        self.lost.lock().expect("lock state").clone()
    }

    /// True when this process created every lease it holds (none was joined).
    pub fn created_all(&self) -> bool {
        self.created.len() == self.keys.len()
    }

    /// Stops the renewal and deletes the locks this process created that are still its run's
    /// (a joined lease is left to the process that ends the fleet, or to expire).
    pub async fn release(self) {
        self.release_where(false).await;
    }

    /// Stops the renewal and deletes every lock still held under the run's id, joined ones
    /// included: a `shared` fleet's merge ends the fleet's lease.
    pub async fn release_all(self) {
        self.release_where(true).await;
    }

    async fn release_where(mut self, joined_too: bool) {
        self.stop.take();
        if let Some(renewer) = self.renewer.take() {
            let _ = tokio::task::spawn_blocking(move || renewer.join()).await;
        }
        let keys = if joined_too { &self.keys } else { &self.created };
        release(&self.plane, keys, &self.run_id).await;
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        // Dropping the sender ends the renewal thread at its next wake-up.
        self.stop.take();
    }
}

/// `SET NX PX` of one queue's lock, following its slot: `false` when created, `true` when
/// joined (`may_join` and the lease already holds `run_id`).
async fn take(plane: &Plane, keys: &QueueKeys, run_id: &str, may_join: bool) -> Result<bool, PlaneError> {
    let taken: Option<String> = plane
        .on_queue(keys, |mut conn| async move {
            redis::cmd("SET")
                .arg(&keys.lock)
                .arg(run_id)
                .arg("NX")
                .arg("PX")
                .arg(LOCK_TTL.as_millis() as u64)
                .query_async(&mut conn)
                .await
                .map_err(|e| CallError::from_redis(&e))
        })
        .await?;
    if taken.is_some() {
        return Ok(false);
    }
    let mut conn = plane.conn_for(keys);
    let holder: Option<String> =
        redis::cmd("GET").arg(&keys.lock).query_async(&mut conn).await.map_err(|e| CallError::from_redis(&e))?;
    // Another shard of the same `shared` fleet took it: the lease is the fleet's, renewed by
    // every shard that holds it.
    if may_join && holder.as_deref() == Some(run_id) {
        return Ok(true);
    }
    let ttl_ms: i64 =
        redis::cmd("PTTL").arg(&keys.lock).query_async(&mut conn).await.map_err(|e| CallError::from_redis(&e))?;
    Err(PlaneError::Locked {
        queue: keys.queue.to_string(),
        key: keys.lock.clone(),
        holder: holder.unwrap_or_else(|| "(released just now)".into()),
        ttl_ms: ttl_ms.max(0) as u64,
    })
}

fn renew_thread(
    plane: Plane,
    keys: Vec<QueueKeys>,
    run_id: String,
    lost: Arc<Mutex<Vec<String>>>,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) {
    let say = |line: String| lost.lock().expect("lock state").push(line);
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => return say(format!("the run lock could not be renewed: {e}")),
    };
    runtime.block_on(async {
        // Every wait on the server is cut short by the stop, so that `release` never waits on
        // a server that does not answer (one frozen while these connections open).
        let plane = tokio::select! {
            opened = plane.open_again() => match opened {
                Ok(plane) => plane,
                Err(e) => return say(format!("the run lock could not be renewed: {e}")),
            },
            _ = &mut stopped => return,
        };
        let mut last_renewed = std::time::Instant::now();
        loop {
            tokio::select! {
                _ = &mut stopped => return,
                _ = tokio::time::sleep(LOCK_TTL / 3) => {}
            }
            let mut all = true;
            for keys in &keys {
                let renewed = tokio::select! {
                    renewed = renew(&plane, keys, &run_id) => renewed,
                    _ = &mut stopped => return,
                };
                match renewed {
                    Ok(1) => {}
                    // Taken again, but in between another run could have held it: the verdict
                    // cannot rest on the queue having been this run's alone.
                    Ok(2) => say(format!(
                        "queue {}: the run lock {} had vanished (the server lost its data?) and was taken again",
                        keys.queue, keys.lock
                    )),
                    Ok(_) => {
                        say(format!(
                            "queue {}: the run lock {} was no longer this run's (another run may have used the queue)",
                            keys.queue, keys.lock
                        ));
                        return;
                    }
                    Err(_) => all = false,
                }
            }
            if all {
                last_renewed = std::time::Instant::now();
            } else if last_renewed.elapsed() >= LOCK_TTL {
                say(format!("the run lock could not be renewed for {} s: it may have expired", LOCK_TTL.as_secs()));
                return;
            }
        }
    });
}

/// Extends one queue's lease; 1 when it was still ours, 2 when it was gone and is ours
/// again, 0 when another run holds it.
async fn renew(plane: &Plane, keys: &QueueKeys, run_id: &str) -> Result<i64, CallError> {
    compare_and_set(plane, keys, RENEW, run_id, Some(LOCK_TTL.as_millis() as u64)).await
}

async fn release(plane: &Plane, keys: &[QueueKeys], run_id: &str) {
    for keys in keys {
        let _ = compare_and_set(plane, keys, RELEASE, run_id, None).await;
    }
}

/// Runs one of the lease's compare-and-set scripts (`RENEW`, `RELEASE`) on `keys`' lock with
/// `run_id` and, for a renewal, the new TTL in ms, following the lock's slot; replies 1 when
/// the lease was still `run_id`'s.
async fn compare_and_set(
    plane: &Plane,
    keys: &QueueKeys,
    script: &str,
    run_id: &str,
    ttl_ms: Option<u64>,
) -> Result<i64, CallError> {
    plane
        .on_queue(keys, |mut conn| async move {
            let mut cmd = redis::cmd("EVAL");
            cmd.arg(script).arg(1).arg(&keys.lock).arg(run_id);
            if let Some(ttl) = ttl_ms {
                cmd.arg(ttl);
            }
            cmd.query_async(&mut conn).await.map_err(|e| CallError::from_redis(&e))
        })
        .await
}
