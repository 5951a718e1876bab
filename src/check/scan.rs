//! Reads what the server holds for the run's queues into a compact [`ServerState`]: SCAN with
//! the queue's own pattern (never KEYS), pipelined `HGETALL` for the rows (each reduced to a
//! [`Row`] at once, so no payload bytes are kept) and pipelined `ZRANGE` chunks for the five
//! location sets (PROTOCOL.md "Keyspace").
//!
//! The scan is meant for a quiesced queue (after a run or a drain): it is not a snapshot, so a
//! queue that changes while it is read can look inconsistent.

use super::state::{Location, QueueState, Row, ServerState, StateField};
use crate::load::payload::{header_crc, verify};
use crate::protocol::{CallError, JobId, QueueKeys};
use crate::target::Route;
use redis::aio::ConnectionLike;
use redis::Value;
use std::collections::HashMap;
use std::sync::mpsc::{sync_channel, SyncSender};
use std::thread::JoinHandle;

/// SCAN `COUNT` per call: large, so a million keys take about a hundred round trips.
pub const SCAN_COUNT: u64 = 10_000;
/// Rows read per pipeline at most (one `HGETALL` each), about one SCAN page.
pub const ROW_BATCH: usize = 10_000;
/// Members read per `ZRANGE key start stop` chunk.
pub const RANGE_CHUNK: usize = 10_000;
/// `ZRANGE` chunks sent per pipeline.
const RANGES_PER_PIPELINE: usize = 10;

/// The fields every row is born with (PROTOCOL.md "The record"), in birth order.
pub const BORN_FIELDS: [&str; 3] = ["state", "attempts", "payload"];
/// The fields later transitions may add (PROTOCOL.md "The record"); any other field is foreign.
pub const LATER_FIELDS: [&str; 3] = ["last_error", "progress", "group"];

/// What a key under `emq:{q}:` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// One of the five location sets.
    Set(Location),
    /// A job row `emq:{q}:job:<id>` with a well-formed id.
    Row(JobId),
    /// Anything else (a row key with an ill-formed id included).
    Stray,
}

/// Classifies `key` (raw bytes, as SCAN returned it) among the keys of queue `keys`.
pub fn classify(keys: &QueueKeys, key: &[u8]) -> KeyKind {
    if let Some(id) = key.strip_prefix(keys.job_prefix.as_bytes()) {
        return JobId::parse(id).map_or(KeyKind::Stray, KeyKind::Row);
    }
    Location::ALL.into_iter().find(|loc| set_key(keys, *loc).as_bytes() == key).map_or(KeyKind::Stray, KeyKind::Set)
}

/// The key of location set `loc` of queue `keys`, e.g. `emq:{q}:completed`.
pub fn set_key(keys: &QueueKeys, loc: Location) -> &str {
    match loc {
        Location::Pending => &keys.pending,
        Location::Delayed => &keys.delayed,
        Location::Active => &keys.active,
        Location::Completed => &keys.completed,
        Location::Failed => &keys.failed,
    }
}

/// Scans every queue of `queues`, in order, each on the node `router` names, into one
/// [`ServerState`].
///
/// Errors: the first failed SCAN or pipeline (transport or server error), classified. A key
/// of the wrong type (a row that is not a HASH, a location set that is not a ZSET) is not an
/// error: it is recorded in [`QueueState::stray_keys`].
pub async fn scan<R: Route>(router: &R, queues: &[QueueKeys]) -> Result<ServerState, CallError> {
    let mut state = ServerState::default();
    for keys in queues {
        let conn = &mut router.conn_for(keys);
        if state.now_ms.is_none() {
            let time: Result<(u64, u64), _> = redis::cmd("TIME").query_async(conn).await;
            state.now_ms = time.ok().map(|(s, us)| s * 1000 + us / 1000);
        }
        state.queues.push(scan_queue(conn, keys).await?);
    }
    Ok(state)
}

/// Reduces rows and files them into the row table on a thread of its own, while the
/// connection reads the next batch (the reduction costs about as much as the read).
struct RowFiler {
    tx: SyncSender<(Vec<JobId>, Vec<Value>)>,
    thread: JoinHandle<(HashMap<JobId, Row>, Vec<JobId>)>,
}

impl RowFiler {
    /// Starts the filer with a row table sized for `capacity` rows.
    fn start(capacity: usize) -> RowFiler {
        // Two batches queued at most: the reader waits rather than piling up replies.
        let (tx, rx) = sync_channel::<(Vec<JobId>, Vec<Value>)>(2);
        let thread = std::thread::spawn(move || {
            let (mut rows, mut not_hashes) = (HashMap::with_capacity(capacity), Vec::new());
            for (ids, replies) in rx {
                // SCAN may list a key twice (rehashing): the second read replaces the first.
                for (id, reply) in ids.into_iter().zip(&replies) {
                    match reduce_row(&id, reply) {
                        Reduced::Row(row) => {
                            rows.insert(id, row);
                        }
                        Reduced::Absent => {}
                        Reduced::NotAHash => not_hashes.push(id),
                    }
                }
            }
            (rows, not_hashes)
        });
        RowFiler { tx, thread }
    }

    /// Hands over the `HGETALL` replies of `ids` (same order).
    fn file(&self, ids: Vec<JobId>, replies: Vec<Value>) {
        // The filer only stops when dropped, or by panicking (re-raised by `finish`).
        let _ = self.tx.send((ids, replies));
    }

    /// Waits for the filer: the row table, and the ids whose key is not a HASH.
    fn finish(self) -> (HashMap<JobId, Row>, Vec<JobId>) {
        drop(self.tx);
        self.thread.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }
}

/// Scans one queue: `ZCARD` of the location sets, then rounds of one pipeline each (the next
/// `SCAN` page plus `HGETALL`s of up to [`ROW_BATCH`] rows listed by earlier pages), then the
/// members of the location sets.
async fn scan_queue<C: ConnectionLike>(conn: &mut C, keys: &QueueKeys) -> Result<QueueState, CallError> {
    let mut queue = QueueState { queue: keys.queue.to_string(), ..QueueState::default() };
    let sizes = set_sizes(conn, keys, &mut queue).await?;
    // A consistent queue has one row per member: size the row table once.
    let filer = RowFiler::start(sizes.iter().map(|(_, n)| n).sum());
    let mut backlog = Vec::new();
    let pattern = keys.scan_pattern();
    let mut cursor = Some(0u64);
    while cursor.is_some() || !backlog.is_empty() {
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        if let Some(cursor) = cursor {
            pipe.cmd("SCAN").arg(cursor).arg("MATCH").arg(&pattern).arg("COUNT").arg(SCAN_COUNT);
        }
        let batch: Vec<JobId> = backlog.drain(backlog.len().saturating_sub(ROW_BATCH)..).collect();
        for id in &batch {
            pipe.cmd("HGETALL").arg(keys.job_key(id));
        }
        let mut replies: Vec<Value> = pipe.query_async(conn).await.map_err(|e| CallError::from_redis(&e))?;
        if replies.len() != usize::from(cursor.is_some()) + batch.len() {
            return Err(CallError::Reply(format!("{} replies to a pipeline of {}", replies.len(), batch.len())));
        }
        if cursor.is_some() {
            let (next, page) = scan_page(replies.remove(0))?;
            cursor = (next != 0).then_some(next);
            for key in page {
                match classify(keys, &key) {
                    KeyKind::Row(id) => backlog.push(id),
                    KeyKind::Set(_) => {}
                    KeyKind::Stray => queue.stray_keys.push(String::from_utf8_lossy(&key).into_owned()),
                }
            }
        }
        filer.file(batch, replies);
    }
    read_members(conn, keys, &sizes, &mut queue).await?;
    let (rows, not_hashes) = filer.finish();
    queue.rows = rows;
    queue.stray_keys.extend(not_hashes.iter().map(|id| keys.job_key(id)));
    queue.stray_keys.sort_unstable();
    queue.stray_keys.dedup();
    Ok(queue)
}

/// A `SCAN` reply: the next cursor and the page of keys.
fn scan_page(reply: Value) -> Result<(u64, Vec<Vec<u8>>), CallError> {
    if let Value::ServerError(err) = reply {
        return Err(CallError::from_redis(&err.into()));
    }
    redis::from_redis_value(reply).map_err(|e| CallError::Reply(format!("SCAN: {e}")))
}

/// What one `HGETALL` reply holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reduced {
    /// A row, reduced.
    Row(Row),
    /// An empty reply: no such key (deleted between SCAN and HGETALL).
    Absent,
    /// An error reply (WRONGTYPE) or not a field/value list: the key is not a HASH.
    NotAHash,
}

/// Reduces one `HGETALL` reply of job `id` to a [`Row`]. The payload is verified against `id`
/// ([`verify`]: identity + CRC-32 header) and dropped; only its length and header CRC are kept.
pub fn reduce_row(id: &JobId, reply: &Value) -> Reduced {
    match reply {
        Value::Array(items) if items.is_empty() => Reduced::Absent,
        Value::Map(pairs) if pairs.is_empty() => Reduced::Absent,
        // RESP2: field, value, field, value, ...
        Value::Array(items) if items.len() % 2 == 0 => {
            reduce_fields(id, items.chunks_exact(2).map(|pair| (&pair[0], &pair[1])))
        }
        // RESP3: a map.
        Value::Map(pairs) => reduce_fields(id, pairs.iter().map(|(name, value)| (name, value))),
        _ => Reduced::NotAHash,
    }
}

fn reduce_fields<'a>(id: &JobId, pairs: impl Iterator<Item = (&'a Value, &'a Value)>) -> Reduced {
    let mut row = Row {
        state: StateField::Missing,
        attempts: None,
        payload_len: None,
        payload_check: None,
        payload_crc: None,
        foreign_fields: Vec::new(),
        has_last_error: false,
        stalled: false,
        has_progress: false,
    };
    for (name, value) in pairs {
        let (Value::BulkString(name), Value::BulkString(value)) = (name, value) else { return Reduced::NotAHash };
        match name.as_slice() {
            b"state" => row.state = parse_state(value),
            b"attempts" => row.attempts = Some(parse_attempts(value)),
            b"payload" => {
                row.payload_len = Some(value.len());
                row.payload_check = Some(verify(id, value));
                row.payload_crc = header_crc(value);
            }
            b"last_error" => {
                row.has_last_error = true;
                row.stalled = value.as_slice() == b"stalled";
            }
            b"progress" => row.has_progress = true,
            b"group" => {}
            other => row.foreign_fields.push(String::from_utf8_lossy(other).into_owned()),
        }
    }
    row.foreign_fields.sort_unstable();
    Reduced::Row(row)
}

/// A `state` value: one of the five location names, or kept verbatim.
fn parse_state(value: &[u8]) -> StateField {
    Location::ALL
        .into_iter()
        .find(|loc| loc.name().as_bytes() == value)
        .map_or_else(|| StateField::Other(String::from_utf8_lossy(value).into_owned()), StateField::Known)
}

/// An `attempts` value: a canonical non-negative decimal integer (what `HINCRBY` writes), or
/// the raw text.
fn parse_attempts(value: &[u8]) -> Result<u64, String> {
    let raw = || String::from_utf8_lossy(value).into_owned();
    let canonical = !value.is_empty() && value.iter().all(u8::is_ascii_digit) && (value == b"0" || value[0] != b'0');
    if !canonical {
        return Err(raw());
    }
    std::str::from_utf8(value).ok().and_then(|s| s.parse().ok()).ok_or_else(raw)
}

/// `ZCARD` of the five location sets: the sizes of those that hold members. A set key of
/// another type goes to `queue.stray_keys`.
async fn set_sizes<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    queue: &mut QueueState,
) -> Result<Vec<(Location, usize)>, CallError> {
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    for loc in Location::ALL {
        pipe.cmd("ZCARD").arg(set_key(keys, loc));
    }
    let cards: Vec<Value> = pipe.query_async(conn).await.map_err(|e| CallError::from_redis(&e))?;
    let mut sizes = Vec::new();
    for (loc, card) in Location::ALL.into_iter().zip(cards) {
        match card {
            Value::Int(n) if n > 0 => sizes.push((loc, n as usize)),
            Value::Int(_) => {}
            // WRONGTYPE: a location-set key that is not a ZSET.
            _ => queue.stray_keys.push(set_key(keys, loc).to_string()),
        }
    }
    Ok(sizes)
}

/// Reads the members of the location sets of `sizes` into `queue.members` with pipelined
/// `ZRANGE key start stop` chunks of [`RANGE_CHUNK`], [`RANGES_PER_PIPELINE`] per pipeline;
/// `active` and `delayed` `WITHSCORES`, into `queue.deadlines`.
async fn read_members<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    sizes: &[(Location, usize)],
    queue: &mut QueueState,
) -> Result<(), CallError> {
    let key_of = |loc: Location| set_key(keys, loc).to_string();
    let scored = |loc: Location| matches!(loc, Location::Active | Location::Delayed);
    let ranges: Vec<(Location, usize)> =
        sizes.iter().flat_map(|&(loc, n)| (0..n).step_by(RANGE_CHUNK).map(move |start| (loc, start))).collect();
    queue.members.reserve(ranges.len() * RANGE_CHUNK);
    for group in ranges.chunks(RANGES_PER_PIPELINE) {
        let mut pipe = redis::pipe();
        for (loc, start) in group {
            pipe.cmd("ZRANGE").arg(key_of(*loc)).arg(*start).arg(start + RANGE_CHUNK - 1);
            if scored(*loc) {
                pipe.arg("WITHSCORES");
            }
        }
        let replies: Vec<Value> = pipe.query_async(conn).await.map_err(|e| CallError::from_redis(&e))?;
        for ((loc, _), reply) in group.iter().zip(replies) {
            let members: Vec<(Vec<u8>, Option<f64>)> = if scored(*loc) {
                let pairs: Vec<(Vec<u8>, f64)> =
                    redis::from_redis_value(reply).map_err(|e| CallError::Reply(format!("ZRANGE: {e}")))?;
                pairs.into_iter().map(|(m, s)| (m, Some(s))).collect()
            } else {
                let plain: Vec<Vec<u8>> =
                    redis::from_redis_value(reply).map_err(|e| CallError::Reply(format!("ZRANGE: {e}")))?;
                plain.into_iter().map(|m| (m, None)).collect()
            };
            for (member, score) in members {
                match JobId::parse(&member) {
                    Ok(id) => {
                        *queue.members.entry(id).or_insert(0) |= loc.bit();
                        if let Some(score) = score {
                            queue.deadlines.insert(id, score);
                        }
                    }
                    Err(_) => queue.stray_members.push((*loc, String::from_utf8_lossy(&member).into_owned())),
                }
            }
        }
    }
    queue.stray_members.sort_unstable_by(|a, b| (a.0.bit(), &a.1).cmp(&(b.0.bit(), &b.1)));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::payload::{PayloadCheck, PayloadPool};
    use crate::protocol::{JobIdGen, QueueName};

    fn bulk(s: &[u8]) -> Value {
        Value::BulkString(s.to_vec())
    }

    #[test]
    fn keys_are_classified_by_the_protocol_layout() {
        let keys = QueueKeys::new(QueueName::new("q").unwrap());
        let id = JobIdGen::new(1).next_id();
        assert_eq!(classify(&keys, keys.job_key(&id).as_bytes()), KeyKind::Row(id));
        assert_eq!(classify(&keys, b"emq:{q}:completed"), KeyKind::Set(Location::Completed));
        assert_eq!(classify(&keys, b"emq:{q}:pending"), KeyKind::Set(Location::Pending));
        for stray in [&b"emq:{q}:junk"[..], b"emq:{q}:job:JOBnope", b"emq:{q}:job:", b"emq:{q}:pending2"] {
            assert_eq!(classify(&keys, stray), KeyKind::Stray, "{}", String::from_utf8_lossy(stray));
        }
    }

    #[test]
    fn a_row_is_reduced_without_its_payload() {
        let mut ids = JobIdGen::new(2);
        let (id, other) = (ids.next_id(), ids.next_id());
        let mut payload = Vec::new();
        PayloadPool::new(2).build(&id, 64, &mut payload);
        let crc = header_crc(&payload).unwrap();
        let reply = Value::Array(vec![
            bulk(b"state"),
            bulk(b"active"),
            bulk(b"attempts"),
            bulk(b"2"),
            bulk(b"payload"),
            bulk(&payload),
            bulk(b"zeta"),
            bulk(b"1"),
            bulk(b"alpha"),
            bulk(b""),
            bulk(b"last_error"),
            bulk(b"boom"),
        ]);
        let Reduced::Row(row) = reduce_row(&id, &reply) else { panic!("not a row") };
        assert_eq!(row.state, StateField::Known(Location::Active));
        assert_eq!(row.attempts, Some(Ok(2)));
        assert_eq!(
            (row.payload_len, row.payload_check, row.payload_crc),
            (Some(64), Some(PayloadCheck::Intact), Some(crc))
        );
        assert_eq!(row.foreign_fields, vec!["alpha".to_string(), "zeta".to_string()]);
        assert!(row.has_last_error && !row.has_progress);
        let Reduced::Row(row) = reduce_row(&other, &reply) else { panic!("not a row") };
        assert_eq!(row.payload_check, Some(PayloadCheck::WrongId));
        assert_eq!(reduce_row(&id, &Value::Array(vec![])), Reduced::Absent);
        assert_eq!(reduce_row(&id, &Value::Int(3)), Reduced::NotAHash);
    }

    #[test]
    fn state_and_attempts_are_parsed_strictly() {
        assert_eq!(parse_state(b"failed"), StateField::Known(Location::Failed));
        assert_eq!(parse_state(b"Failed"), StateField::Other("Failed".into()));
        assert_eq!(parse_attempts(b"0"), Ok(0));
        assert_eq!(parse_attempts(b"17"), Ok(17));
        for bad in [&b""[..], b"-1", b"+1", b"01", b"1.0", b"x", b"99999999999999999999999"] {
            assert!(parse_attempts(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }
}
