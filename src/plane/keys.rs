//! The run's own keys on the target: refuse to start on existing ones, delete them at the end,
//! never touch another key and never flush a database. Every command names keys of one queue
//! only (one hash tag, one slot), so it works on a cluster node that owns that slot.

use super::{PlaneError, Route};
use crate::keyspace::QueueKeys;
use crate::resp::CallError;
use redis::aio::ConnectionLike;

/// SCAN `COUNT` per call: large, so a big keyspace is walked in few round trips.
const SCAN_COUNT: u64 = 10_000;

/// Every key of queue `keys` (SCAN with the queue's pattern; never KEYS). Stops after `limit`.
pub async fn queue_keys<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    limit: usize,
) -> Result<Vec<String>, CallError> {
    let mut cursor: u64 = 0;
    let mut found = Vec::new();
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(keys.scan_pattern())
            .arg("COUNT")
            .arg(SCAN_COUNT)
            .query_async(conn)
            .await
            .map_err(|e| CallError::from_redis(&e))?;
        found.extend(batch);
        if next == 0 || found.len() >= limit {
            found.truncate(limit);
            return Ok(found);
        }
        cursor = next;
    }
}

/// Refuses (or, with `force`, deletes) keys the run's queues already have, each queue on its node.
///
/// Errors: [`PlaneError::KeysExist`] naming the first such queue when `force` is false.
pub async fn ensure_clean<R: Route>(router: &R, queues: &[QueueKeys], force: bool) -> Result<u64, PlaneError> {
    let mut deleted = 0;
    for keys in queues {
        let conn = &mut router.conn_for(keys);
        if !force {
            if let Some(example) = queue_keys(conn, keys, 1).await?.into_iter().next() {
                return Err(PlaneError::KeysExist { queue: keys.queue.to_string(), example });
            }
        } else {
            deleted += delete_queue(conn, keys).await?;
        }
    }
    Ok(deleted)
}

/// Deletes every key of queue `keys` with UNLINK in batches; returns how many. Touches no
/// other key and never flushes the database.
pub async fn delete_queue<C: ConnectionLike>(conn: &mut C, keys: &QueueKeys) -> Result<u64, CallError> {
    let mut deleted = 0;
    loop {
        let batch = queue_keys(conn, keys, SCAN_COUNT as usize).await?;
        if batch.is_empty() {
            return Ok(deleted);
        }
        let n: u64 = redis::cmd("UNLINK").arg(&batch).query_async(conn).await.map_err(|e| CallError::from_redis(&e))?;
        deleted += n;
    }
}
