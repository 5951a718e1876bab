//! Reads what the server holds for the run's queues into a compact [`ServerState`]: `ZCARD`
//! and `ZRANGE` chunks of the five location sets, `HGETALL` of every row they name (each
//! reduced to a [`Row`] at once, so no payload bytes are kept), and SCAN with the queue's own
//! pattern (never KEYS) only when `DBSIZE` says the node holds keys the sets did not lead to
//! (docs/protocol.md "The keyspace"). The reads use a connection of their own ([`super::rows`]).
//!
//! The scan is meant for a quiesced queue (after a run or a drain): it is not a snapshot, so a
//! queue that changes while it is read can look inconsistent, or (see [`scan`]) hide a key.

use super::rows::KeyReader;
use super::state::{Location, QueueState, Row, ServerState, StateField};
use crate::keyspace::{JobId, QueueKeys};
use crate::net::Control;
use crate::plane::Route;
use crate::resp::pipe::open_stream;
use crate::resp::CallError;
use redis::aio::ConnectionLike;
use redis::Value;

/// SCAN `COUNT` per call: large, so a million keys take about a hundred round trips.
pub const SCAN_COUNT: u64 = 10_000;
/// Members read per `ZRANGE key start stop` chunk.
pub const RANGE_CHUNK: usize = 10_000;

/// The fields every row is born with (docs/protocol.md "The job record"), in birth order.
pub const BORN_FIELDS: [&str; 3] = ["state", "attempts", "payload"];
/// The fields later transitions may add (docs/protocol.md "The job record"; `holder` from
/// v1.2); any other field is foreign.
pub const LATER_FIELDS: [&str; 4] = ["last_error", "progress", "group", "holder"];

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
///
/// Panics for BullMQ's own locations (`wait`, `prioritized`, `paused`), which EchoMQ's keyspace
/// has no key for; callers pass members of [`Location::ALL`].
pub fn set_key(keys: &QueueKeys, loc: Location) -> &str {
    match loc {
        Location::Pending => &keys.pending,
        Location::Delayed => &keys.delayed,
        Location::Active => &keys.active,
        Location::Completed => &keys.completed,
        Location::Failed => &keys.failed,
        Location::Wait | Location::Prioritized | Location::Paused => {
            unreachable!("BullMQ's {} is no EchoMQ location set", loc.name())
        }
    }
}

/// Scans every queue of `queues`, in order, each on the node `router` names, into one
/// [`ServerState`].
///
/// Each queue's location sets are read with the row of every member ([`KeyReader`]). Whether
/// the queue is SCANned too depends on its node's `DBSIZE`:
/// - more keys than the sets could lead to (their members, the set keys, the run locks):
///   another tenant's keys, or rows in no set; every queue on that node is SCANned while its
///   sets are read (the same connection, each row read once);
/// - otherwise the sets are read first, and the node's queues are SCANned afterwards only when
///   `DBSIZE`, read before and again after, differs from the keys found (the rows and set keys
///   read, the run locks): when all three are equal, the node holds no other key, so no row
///   lies outside the sets and no key is stray, and the SCAN (a large share of the check's
///   server CPU) is skipped.
///
/// A denied or failed `DBSIZE` or `EXISTS`, or a `DBSIZE` that moved, means SCAN. Only keys the
/// reads saw are counted (a set key only by its `ZCARD` or WRONGTYPE, a row key by its
/// `HGETALL`), so each counted key exists; on a quiesced queue an equal count therefore leaves
/// no key unseen. A queue written to while it is checked can hide a violation from the count
/// for as long as writes and unknown keys balance: check after the run or a drain.
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
    // Per queue: its node, connection and set sizes; per node: a connection, the most keys
    // the sets can lead to, and the keys found (both summed over the node's queues).
    let mut plans = Vec::with_capacity(queues.len());
    let mut nodes: Vec<Node> = Vec::new();
    for (keys, queue) in queues.iter().zip(state.queues.iter_mut()) {
        let control = router.conn_for(keys);
        if state.now_ms.is_none() {
            let time: Result<(u64, u64), _> = redis::cmd("TIME").query_async(&mut control.clone()).await;
            state.now_ms = time.ok().map(|(s, us)| s * 1000 + us / 1000);
        }
        let sizes = set_sizes(&mut control.clone(), keys, queue).await?;
        // Sets with members, and set keys of another type (the only strays filed so far).
        let set_keys = sizes.len() + queue.stray_keys.len();
        let members: usize = sizes.iter().map(|(_, n)| n).sum();
        let at = control.connector().host_port();
        let node = match nodes.iter().position(|node| node.at == at) {
            Some(node) => node,
            None => {
                nodes.push(Node { at, control: control.clone(), most: 0, found: 0, size: None });
                nodes.len() - 1
            }
        };
        // + 1: the run lock, if it is there.
        nodes[node].most = nodes[node].most.saturating_add(members + set_keys + 1);
        plans.push((node, control, sizes, set_keys));
    }
    for node in &mut nodes {
        node.size = dbsize(&node.control).await;
    }
    let mut readers = Vec::with_capacity(queues.len());
    for ((keys, queue), (node, control, sizes, set_keys)) in queues.iter().zip(state.queues.iter_mut()).zip(plans) {
        let mut reader = KeyReader::new(keys, queue, &sizes);
        let scan_now = nodes[node].size.is_none_or(|size| size > nodes[node].most);
        if scan_now {
            reader.scan_too();
        }
        reader.run(&mut open_reader_stream(&control).await?, control.opts().response_timeout).await?;
        if !scan_now {
            let lock = redis::cmd("EXISTS").arg(&keys.lock).query_async::<usize>(&mut control.clone()).await;
            let found = lock.map_or(usize::MAX / 2, |lock| lock + set_keys + reader.row_keys_found());
            nodes[node].found = nodes[node].found.saturating_add(found);
            readers.push((node, control, reader));
        }
    }
    // DBSIZE again: a key created while the sets were read (an enqueue, a lock taken or
    // renewed) and counted in `found` would otherwise stand in for an unknown key.
    for node in &mut nodes {
        if dbsize(&node.control).await != node.size {
            node.size = None;
        }
    }
    for (node, control, mut reader) in readers {
        if nodes[node].size != Some(nodes[node].found) {
            reader.scan_too();
            reader.run(&mut open_reader_stream(&control).await?, control.opts().response_timeout).await?;
        }
    }
    for queue in &mut state.queues {
        queue.stray_keys.sort_unstable();
        queue.stray_keys.dedup();
        queue.stray_members.sort_unstable_by(|a, b| (a.0.bit(), &a.1).cmp(&(b.0.bit(), &b.1)));
    }
    Ok(state)
}

/// `DBSIZE` of `control`'s node; `None` when denied or failed.
async fn dbsize(control: &Control) -> Option<usize> {
    redis::cmd("DBSIZE").query_async::<usize>(&mut control.clone()).await.ok()
}

/// One node's keys, for the decision to SCAN (see [`scan`]).
struct Node {
    at: (String, u16),
    control: Control,
    /// The most keys the sets of the node's queues can lead to.
    most: usize,
    /// The keys found by reading those sets (queues read without SCAN only).
    found: usize,
    /// `DBSIZE`; `None` when denied or failed.
    size: Option<usize>,
}

/// A connection for a [`KeyReader`], to `control`'s node with its options (no scripts loaded).
async fn open_reader_stream(control: &Control) -> Result<crate::net::Stream, CallError> {
    open_stream(control.connector(), &control.opts(), None).await
}

/// What one `HGETALL` reply holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reduced {
    /// A row, reduced.
    Row(Row),
    /// An empty reply: no such key (a member whose row is gone, or a key deleted between SCAN
    /// and HGETALL).
    Absent,
    /// An error reply (WRONGTYPE) or not a field/value list: the key is not a HASH.
    NotAHash,
}

/// Reduces one `HGETALL` reply of job `id` to a [`Row`]. The payload is verified against `id`
/// ([`Row::take_payload`]: identity + CRC-32 header) and dropped; only its length and header CRC
/// are kept.
pub fn reduce_row(id: &JobId, reply: &Value) -> Reduced {
    reduce_reply(reply, |pairs| reduce_pairs(id, pairs))
}

/// Hands the field/value pairs of one `HGETALL` reply (RESP2 array or RESP3 map) to `reduce`;
/// [`Reduced::Absent`] for an empty reply, [`Reduced::NotAHash`] for any other shape. A `None`
/// pair is a field or value that is not a bulk string.
pub(super) fn reduce_reply<'a>(
    reply: &'a Value,
    reduce: impl FnOnce(&mut dyn Iterator<Item = Option<(&'a [u8], &'a [u8])>>) -> Reduced,
) -> Reduced {
    match reply {
        Value::Array(items) if items.is_empty() => Reduced::Absent,
        Value::Map(pairs) if pairs.is_empty() => Reduced::Absent,
        // RESP2: field, value, field, value, ...
        Value::Array(items) if items.len() % 2 == 0 => {
            reduce(&mut items.chunks_exact(2).map(|pair| bulk_pair(&pair[0], &pair[1])))
        }
        // RESP3: a map.
        Value::Map(pairs) => reduce(&mut pairs.iter().map(|(name, value)| bulk_pair(name, value))),
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
    let mut row = Row::empty();
    for pair in pairs {
        let Some((name, value)) = pair else { return Reduced::NotAHash };
        match name {
            b"state" => row.state = parse_state(value),
            b"attempts" => row.attempts = Some(parse_attempts(value)),
            b"payload" => row.take_payload(id, value),
            b"last_error" => {
                row.has_last_error = true;
                row.stalled = value == b"stalled";
            }
            b"progress" => row.has_progress = true,
            // The holder (v1.2) is the fence's business; the history's claims tell claims apart.
            b"group" | b"holder" => {}
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
/// the raw text. Also BullMQ's counters (`ats`, `atm`, `stc`) and times.
pub(super) fn parse_attempts(value: &[u8]) -> Result<u64, String> {
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
            Value::ServerError(err) if err.code() == "WRONGTYPE" => {
                queue.stray_keys.push(set_key(keys, loc).to_string())
            }
            // NOPERM, LOADING, MOVED...: the set was not read, so nothing can be said of it.
            Value::ServerError(err) => return Err(CallError::from_redis(&err.into())),
            other => return Err(CallError::Reply(format!("ZCARD {}: {other:?}", set_key(keys, loc)))),
        }
    }
    Ok(sizes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::{JobIdGen, QueueName};
    use crate::payload::{header_crc, PayloadCheck, PayloadPool};

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
            bulk(b"holder"),
            bulk(b"0000000100000002"),
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
