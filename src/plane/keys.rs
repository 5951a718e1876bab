//! The run's own keys on the target: refuse to start on existing ones, delete them at the end,
//! never touch another key and never flush a database. Every command names keys of one queue
//! only (one hash tag, one slot), so it works on a cluster node that owns that slot.

use super::{PlaneError, Route};
use crate::keyspace::QueueKeys;
use crate::resp::CallError;
use redis::aio::ConnectionLike;

/// SCAN `COUNT` per call: large, so a big keyspace is walked in few round trips.
const SCAN_COUNT: u64 = 10_000;

/// SCAN `COUNT` per call of a deletion: the page it returns is the next UNLINK, so this is
/// also about the keys one round trip deletes. Small pages: each round trip holds the server
/// (and a shared deployment's other clients) for less time, and on the server scripts/setup
/// installs they delete faster in all than pages of 10 000 (docs/performance-log.md).
const DELETE_SCAN_COUNT: u64 = 2_000;

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
            deleted += delete_queue(conn, keys, |_| {}).await?;
        }
    }
    Ok(deleted)
}

/// Deletes every key of queue `keys`; returns how many. Touches no other key and never
/// flushes the database.
///
/// One SCAN cursor walks the keyspace once: each round trip is one pipeline of the UNLINK of
/// the page the last SCAN returned and the SCAN of the next page, so walking and deleting
/// share round trips and the work is linear in the keyspace (a walk restarted from cursor 0
/// after each UNLINK would revisit the emptied buckets every time, quadratic in all). SCAN may
/// return a key twice (the table resizes as keys go); the count is UNLINK's, which counts a
/// key only when it removed it. SCAN returns every key that exists for the whole walk, so no
/// key of the queue that existed when the walk began is left, unless another client wrote it
/// back. `on_batch` hears the queue's count so far after every UNLINK.
///
/// Errors: the first failed round trip; the keys deleted before it are what `on_batch` last
/// heard.
pub async fn delete_queue<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    mut on_batch: impl FnMut(u64),
) -> Result<u64, CallError> {
    let pattern = keys.scan_pattern();
    let scan = |cursor: u64| {
        let mut cmd = redis::cmd("SCAN");
        cmd.arg(cursor).arg("MATCH").arg(&pattern).arg("COUNT").arg(DELETE_SCAN_COUNT);
        cmd
    };
    let fail = |e: redis::RedisError| CallError::from_redis(&e);
    let mut deleted = 0;
    // `None` once the walk has come back to cursor 0.
    let mut cursor = Some(0u64);
    let mut page: Vec<String> = Vec::new();
    loop {
        let (unlinked, next): (u64, Option<(u64, Vec<String>)>) = match (page.is_empty(), cursor) {
            (true, None) => return Ok(deleted),
            (true, Some(at)) => (0, Some(scan(at).query_async(conn).await.map_err(fail)?)),
            (false, None) => (redis::cmd("UNLINK").arg(&page).query_async(conn).await.map_err(fail)?, None),
            (false, Some(at)) => {
                let mut pipe = redis::pipe();
                pipe.cmd("UNLINK").arg(&page).add_command(scan(at));
                let (unlinked, next) = pipe.query_async(conn).await.map_err(fail)?;
                (unlinked, Some(next))
            }
        };
        if !page.is_empty() {
            deleted += unlinked;
            on_batch(deleted);
        }
        page.clear();
        if let Some((at, found)) = next {
            page = found;
            cursor = (at != 0).then_some(at);
        }
    }
}
