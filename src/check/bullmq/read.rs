//! Reads one BullMQ queue's keys into a [`QueueState`] (docs/bullmq-mapping.md section 6): the
//! sizes of the seven locations and `stalled` (one pipeline), their members (`LRANGE` / `ZRANGE`
//! chunks, pipelined), every key under `bull:{q}:` (SCAN, which also finds the lock keys and the
//! strays), then `HGETALL` of every job hash the lists, sets or SCAN named, [`ROWS_PER_PIPE`] per
//! pipeline, each reduced at once so no payload is kept.
//!
//! Through redis-rs on the control connection (like `set_sizes` in [`crate::check::scan()`]), not the
//! zero-copy [`KeyReader`](crate::check::rows::KeyReader), which knows EchoMQ's five ZSETs only:
//! correct first; a row costs microseconds of client CPU that way, so a million jobs take seconds
//! more.
//! Like EchoMQ's scan, it is meant for a quiesced queue: it is no snapshot.

use super::keys::{classify, prefix, BullKey};
use super::row::reduce_bull_row;
use crate::check::scan::{Reduced, RANGE_CHUNK, SCAN_COUNT};
use crate::check::state::{BullQueue, Location, QueueState, ServerState};
use crate::keyspace::{JobId, QueueKeys, QueueName};
use crate::plane::Route;
use crate::resp::CallError;
use redis::aio::ConnectionLike;
use redis::Value;
use std::collections::HashSet;

/// `HGETALL`s per pipeline: a round trip per thousand rows.
pub const ROWS_PER_PIPE: usize = 1_000;
/// `LRANGE`/`ZRANGE` chunks per pipeline.
const RANGES_PER_PIPE: usize = 8;

/// Reads every queue of `queues`, in order, each on the node `router` names for it, into one
/// [`ServerState`] whose queues carry [`QueueState::bull`]. Queue `Q`'s keys are `bull:{Q}:*`
/// (the official client's queue name `{Q}`); they share EchoMQ's `emq:{Q}:` hash tag, so the
/// route of `QueueKeys::new(Q)` is theirs.
///
/// Members and hashes whose id is not an emq-bench [`JobId`] are strays
/// ([`QueueState::stray_members`], [`QueueState::stray_keys`]), as are keys outside BullMQ's
/// layout ([`classify`]), a location key of the wrong type, and a job's lock or log key with no
/// job hash. `now_ms` is the server's `TIME` before the first queue (BullMQ's own times are the
/// client's clock, so it only dates the check).
///
/// Errors: the first failed read (transport or server error other than WRONGTYPE), classified.
pub async fn scan_bullmq<R: Route>(router: &R, queues: &[QueueName]) -> Result<ServerState, CallError> {
    let mut state = ServerState { queues: Vec::with_capacity(queues.len()), now_ms: None };
    for name in queues {
        let mut control = router.conn_for(&QueueKeys::new(name.clone()));
        if state.now_ms.is_none() {
            let time: Result<(u64, u64), _> = redis::cmd("TIME").query_async(&mut control).await;
            state.now_ms = time.ok().map(|(s, us)| s * 1000 + us / 1000);
        }
        state.queues.push(read_queue(&mut control, name).await?);
    }
    Ok(state)
}

fn failed(e: &redis::RedisError) -> CallError {
    CallError::from_redis(e)
}

/// Whether `loc` is a LIST (else a ZSET).
fn is_list(loc: Location) -> bool {
    matches!(loc, Location::Wait | Location::Paused | Location::Active)
}

/// Reads queue `name` over `conn`.
pub async fn read_queue<C: ConnectionLike>(conn: &mut C, name: &QueueName) -> Result<QueueState, CallError> {
    let prefix = prefix(name);
    let key = |suffix: &str| format!("{prefix}{suffix}");
    let mut queue = QueueState { queue: name.to_string(), ..QueueState::default() };
    let mut bull = BullQueue { prefix: prefix.clone(), ..BullQueue::default() };

    // Sizes: a location key of another type is a stray (WRONGTYPE), and is not read further.
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    for loc in Location::BULLMQ {
        pipe.cmd(if is_list(loc) { "LLEN" } else { "ZCARD" }).arg(key(loc.name()));
    }
    pipe.cmd("SCARD").arg(key("stalled"));
    let sizes: Vec<Value> = pipe.query_async(conn).await.map_err(|e| failed(&e))?;
    let (mut ranges, mut any_stalled) = (Vec::new(), false);
    for (loc, size) in Location::BULLMQ.into_iter().map(Some).chain([None]).zip(sizes) {
        let suffix = loc.map_or("stalled", Location::name);
        match size {
            Value::Int(n) if n > 0 => match loc {
                Some(loc) => ranges.extend((0..n as usize).step_by(RANGE_CHUNK).map(|at| (loc, at))),
                None => any_stalled = true,
            },
            Value::Int(_) => {}
            Value::ServerError(err) if err.code() == "WRONGTYPE" => queue.stray_keys.push(key(suffix)),
            Value::ServerError(err) => return Err(failed(&err.into())),
            other => return Err(CallError::Reply(format!("size of {}: {other:?}", key(suffix)))),
        }
    }

    // Members, in chunks; only `delayed`'s scores are kept (the due time, the score over 0x1000).
    for batch in ranges.chunks(RANGES_PER_PIPE) {
        let mut pipe = redis::pipe();
        for &(loc, at) in batch {
            let stop = at + RANGE_CHUNK - 1;
            if is_list(loc) {
                pipe.cmd("LRANGE").arg(key(loc.name())).arg(at).arg(stop);
            } else {
                pipe.cmd("ZRANGE").arg(key(loc.name())).arg(at).arg(stop);
                if loc == Location::Delayed {
                    pipe.arg("WITHSCORES");
                }
            }
        }
        let chunks: Vec<Vec<Value>> = pipe.query_async(conn).await.map_err(|e| failed(&e))?;
        for (&(loc, _), chunk) in batch.iter().zip(chunks) {
            take_members(&mut queue, &mut bull, loc, chunk)?;
        }
    }
    // `stalled` holds at most what `active` held at the last stalled check: one read.
    if any_stalled {
        let stalled: Vec<Vec<u8>> =
            redis::cmd("SMEMBERS").arg(key("stalled")).query_async(conn).await.map_err(|e| failed(&e))?;
        for member in stalled {
            match JobId::parse(&member) {
                Ok(id) => bull.stalled.push(id),
                Err(_) => bull.stray_stalled.push(String::from_utf8_lossy(&member).into_owned()),
            }
        }
    }

    // Every key: hashes no list names, locks, a job's other keys, strays.
    let mut hashes: Vec<JobId> = queue.members.keys().copied().collect();
    let mut named: HashSet<JobId> = hashes.iter().copied().collect();
    let (mut locks, mut parts) = (HashSet::new(), Vec::new());
    let mut cursor = 0u64;
    loop {
        let (next, page): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{prefix}*"))
            .arg("COUNT")
            .arg(SCAN_COUNT)
            .query_async(conn)
            .await
            .map_err(|e| failed(&e))?;
        for found in page {
            match classify(&prefix, &found) {
                BullKey::Job(id) => {
                    if named.insert(id) {
                        hashes.push(id);
                    }
                }
                BullKey::Lock(id) => {
                    locks.insert(id);
                }
                BullKey::JobPart(id) => parts.push((id, found)),
                BullKey::Location(_) | BullKey::Stalled | BullKey::Own => {}
                BullKey::Stray => queue.stray_keys.push(String::from_utf8_lossy(&found).into_owned()),
            }
        }
        if next == 0 {
            break;
        }
        cursor = next;
    }
    drop(named);

    // The job hashes.
    queue.rows.reserve(hashes.len());
    for batch in hashes.chunks(ROWS_PER_PIPE) {
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for id in batch {
            pipe.cmd("HGETALL").arg(job_key(&prefix, id));
        }
        let replies: Vec<Value> = pipe.query_async(conn).await.map_err(|e| failed(&e))?;
        for (id, reply) in batch.iter().zip(replies) {
            match &reply {
                Value::ServerError(err) if err.code() != "WRONGTYPE" => return Err(failed(&err.clone().into())),
                _ => {}
            }
            match reduce_bull_row(id, &reply) {
                Reduced::Row(row) => {
                    queue.rows.insert(*id, row);
                }
                Reduced::Absent => {}
                Reduced::NotAHash => queue.stray_keys.push(job_key(&prefix, id)),
            }
        }
    }
    // A lock or log key whose job hash is gone is a leftover: BullMQ deletes them together.
    for id in locks {
        match queue.rows.get_mut(&id).and_then(|row| row.bull.as_mut()) {
            Some(row) => row.has_lock = true,
            None => queue.stray_keys.push(format!("{}:lock", job_key(&prefix, &id))),
        }
    }
    for (id, found) in parts {
        if !queue.rows.contains_key(&id) {
            queue.stray_keys.push(String::from_utf8_lossy(&found).into_owned());
        }
    }
    queue.stray_keys.sort_unstable();
    queue.stray_keys.dedup();
    queue.stray_members.sort_unstable_by(|a, b| (a.0.bit(), &a.1).cmp(&(b.0.bit(), &b.1)));
    bull.stalled.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    bull.stray_stalled.sort_unstable();
    bull.repeated.sort_unstable_by(|a, b| (a.0.bit(), a.1.as_bytes()).cmp(&(b.0.bit(), b.1.as_bytes())));
    queue.bull = Some(Box::new(bull));
    Ok(queue)
}

/// `bull:{q}:<id>`.
fn job_key(prefix: &str, id: &JobId) -> String {
    let mut key = String::with_capacity(prefix.len() + id.as_str().len());
    key.push_str(prefix);
    key.push_str(id.as_str());
    key
}

/// Files one `LRANGE`/`ZRANGE` chunk of `loc`: memberships, ids a list holds twice, `delayed`'s
/// due times, and members that are not job ids.
fn take_members(
    queue: &mut QueueState,
    bull: &mut BullQueue,
    loc: Location,
    chunk: Vec<Value>,
) -> Result<(), CallError> {
    let step = if loc == Location::Delayed { 2 } else { 1 };
    let bad = || CallError::Reply(format!("range of {}{}: not a list of members", bull.prefix, loc.name()));
    if !chunk.len().is_multiple_of(step) {
        return Err(bad());
    }
    let mut items = chunk.into_iter();
    while let Some(member) = items.next() {
        let Value::BulkString(member) = member else { return Err(bad()) };
        let score = if step == 2 { Some(items.next().ok_or_else(bad)?) } else { None };
        let Ok(id) = JobId::parse(&member) else {
            queue.stray_members.push((loc, String::from_utf8_lossy(&member).into_owned()));
            continue;
        };
        if let Some(score) = score {
            let score: f64 = redis::from_redis_value(score).map_err(|_| bad())?;
            // The score is due_ms × 0x1000 + n, n < 0x1000 (docs/bullmq-mapping.md section 1).
            queue.deadlines.insert(id, (score / 4096.0).floor());
        }
        let mask = queue.members.entry(id).or_insert(0);
        if *mask & loc.bit() != 0 {
            bull.repeated.push((loc, id));
        }
        *mask |= loc.bit();
    }
    Ok(())
}
