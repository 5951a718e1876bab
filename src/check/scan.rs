//! Reads what the server holds for the run's queues into a compact [`ServerState`]: `ZCARD`
//! and `ZRANGE` chunks of the five location sets, `HGETALL` of every row they name (each
//! reduced to a [`Row`] at once, so no payload bytes are kept), and SCAN with the queue's own
//! pattern (never KEYS) only when `DBSIZE` says the node holds keys the sets did not lead to
//! (PROTOCOL.md "Keyspace"). The reads go over a connection of their own ([`super::rows`]).
//!
//! The scan is meant for a quiesced queue (after a run or a drain): it is not a snapshot, so a
//! queue that changes while it is read can look inconsistent.

use super::rows::KeyReader;
use super::state::{Location, QueueState, Row, ServerState, StateField};
use crate::load::payload::{header_crc, verify};
use crate::protocol::pipe::open_stream;
use crate::protocol::{CallError, JobId, QueueKeys};
use crate::target::{Control, Route};
use redis::aio::ConnectionLike;
use redis::Value;

/// SCAN `COUNT` per call: large, so a million keys take about a hundred round trips.
pub const SCAN_COUNT: u64 = 10_000;
/// Members read per `ZRANGE key start stop` chunk.
pub const RANGE_CHUNK: usize = 10_000;

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
/// Each queue's location sets are read first, with the row of every member ([`KeyReader`]).
/// Then, per node, `DBSIZE` is compared with the keys found: the rows and set keys read and
/// the queues' run locks. When they are equal, the node holds no other key, so there is no row
/// outside the sets and no stray key, and the SCAN is skipped (it cost the server ~1.1 of
/// ~3.7 s at a million jobs). Otherwise (another tenant's keys, a denied DBSIZE, a row in no
/// set) every queue on that node is SCANned for the keys not read yet.
///
/// Errors: the first failed read (transport or server error), classified. A key of the wrong
/// type (a row that is not a HASH, a location set that is not a ZSET) is not an error: it is
/// recorded in [`QueueState::stray_keys`].
pub async fn scan<R: Route>(router: &R, queues: &[QueueKeys]) -> Result<ServerState, CallError> {
    let mut state = ServerState {
        queues: queues
            .iter()
            .map(|keys| QueueState { queue: keys.queue.to_string(), ..QueueState::default() })
            .collect(),
        now_ms: None,
    };
    let mut now_ms = None;
    // Per queue: its node's connection and reader; per node: the keys found there.
    let mut readers = Vec::with_capacity(queues.len());
    let mut nodes: Vec<((String, u16), Control, usize)> = Vec::new();
    for (keys, queue) in queues.iter().zip(state.queues.iter_mut()) {
        let control = router.conn_for(keys);
        if now_ms.is_none() {
            let time: Result<(u64, u64), _> = redis::cmd("TIME").query_async(&mut control.clone()).await;
            now_ms = time.ok().map(|(s, us)| s * 1000 + us / 1000);
        }
        let sizes = set_sizes(&mut control.clone(), keys, queue).await?;
        // Sets with members, and set keys of another type (the only strays filed so far).
        let set_keys = sizes.len() + queue.stray_keys.len();
        let mut reader = KeyReader::new(keys, queue, &sizes);
        reader.run(&mut open_reader_stream(&control).await?, control.opts().response_timeout).await?;
        let lock: Result<usize, _> = redis::cmd("EXISTS").arg(&keys.lock).query_async(&mut control.clone()).await;
        let found = lock.map_or(usize::MAX / 2, |lock| lock + set_keys + reader.row_keys_found());
        let node = control.connector().endpoint();
        match nodes.iter_mut().find(|(at, _, _)| *at == node) {
            Some((_, _, keys_found)) => *keys_found = keys_found.saturating_add(found),
            None => nodes.push((node.clone(), control.clone(), found)),
        }
        readers.push((node, control, reader));
    }
    let mut complete = Vec::with_capacity(nodes.len());
    for (node, control, found) in &nodes {
        let size: Result<usize, _> = redis::cmd("DBSIZE").query_async(&mut control.clone()).await;
        complete.push((node.clone(), size.is_ok_and(|size| size == *found)));
    }
    for (node, control, mut reader) in readers {
        if !complete.iter().any(|(at, whole)| *at == node && *whole) {
            reader.scan_too();
            reader.run(&mut open_reader_stream(&control).await?, control.opts().response_timeout).await?;
        }
    }
    for queue in &mut state.queues {
        queue.stray_keys.sort_unstable();
        queue.stray_keys.dedup();
        queue.stray_members.sort_unstable_by(|a, b| (a.0.bit(), &a.1).cmp(&(b.0.bit(), &b.1)));
    }
    state.now_ms = now_ms;
    Ok(state)
}

/// A connection for a [`KeyReader`], to `control`'s node with its options (no scripts loaded).
async fn open_reader_stream(control: &Control) -> Result<crate::target::Stream, CallError> {
    open_stream(control.connector(), &control.opts(), None).await
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
            reduce_pairs(id, items.chunks_exact(2).map(|pair| bulk_pair(&pair[0], &pair[1])))
        }
        // RESP3: a map.
        Value::Map(pairs) => reduce_pairs(id, pairs.iter().map(|(name, value)| bulk_pair(name, value))),
        _ => Reduced::NotAHash,
    }
}

fn bulk_pair<'a>(name: &'a Value, value: &'a Value) -> Option<(&'a [u8], &'a [u8])> {
    match (name, value) {
        (Value::BulkString(name), Value::BulkString(value)) => Some((name, value)),
        _ => None,
    }
}

/// Reduces a row's field/value pairs (in reply order) to a [`Row`]; a `None` pair (a field or
/// value that is not a bulk string) means the reply is not a HASH's.
pub(super) fn reduce_pairs<'a>(id: &JobId, pairs: impl Iterator<Item = Option<(&'a [u8], &'a [u8])>>) -> Reduced {
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
    for pair in pairs {
        let Some((name, value)) = pair else { return Reduced::NotAHash };
        match name {
            b"state" => row.state = parse_state(value),
            b"attempts" => row.attempts = Some(parse_attempts(value)),
            b"payload" => {
                row.payload_len = Some(value.len());
                row.payload_check = Some(verify(id, value));
                row.payload_crc = header_crc(value);
            }
            b"last_error" => {
                row.has_last_error = true;
                row.stalled = value == b"stalled";
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
