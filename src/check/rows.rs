//! The reads of one queue on one handshaken connection of our own: the location sets'
//! members (`ZRANGE` chunks), one `HGETALL` per row they name, and, when the keyspace may hold
//! keys the sets do not name, `SCAN` pages and the rows they list. Commands keep flowing while
//! replies are read, and each reply is decoded in place (redis-protocol's zero-copy RESP2
//! decoder) and reduced at once, without a redis-rs `Value`.
//!
//! Why not the control connection: through redis-rs a row costs the client more CPU than the
//! server (a `Value` and an allocation per field, the combine parser), and each pipeline waits
//! for the previous one, so the server idles while the client parses. Here a row costs the
//! client a fraction of that plus its payload's CRC, and the server always has work queued.
//!
//! Flow control: at most [`RANGES_AHEAD`] `ZRANGE` chunks in flight and [`LISTED_AHEAD`] ids
//! waiting for their `HGETALL` before more members or SCAN pages are asked for; the `HGETALL`s
//! in flight are bounded by count ([`MAX_IN_FLIGHT`]) and by the reply bytes they may bring
//! ([`IN_FLIGHT_BYTES`] over the largest reply so far; the window opens from 4), so a queue
//! of 64 MiB payloads makes the server buffer about one reply, not gigabytes. Rows much larger
//! than every earlier one can still overshoot the byte bound once, by the window then open.

use super::scan::{classify, reduce_pairs, set_key, KeyKind, Reduced, RANGE_CHUNK, SCAN_COUNT};
use super::state::{Location, QueueState};
use crate::keyspace::{JobId, QueueKeys};
use crate::net::Stream;
use crate::resp::pipe::reply::error_reply;
use crate::resp::{CallError, Request};
use redis_protocol::resp2::decode::decode_range;
use redis_protocol::resp2::types::RangeFrame;
use std::collections::{HashSet, VecDeque};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

/// `ZRANGE` chunks in flight at most.
pub const RANGES_AHEAD: usize = 4;
/// Ids listed (by a set or a SCAN page) but not yet requested, past which no more are asked for.
pub const LISTED_AHEAD: usize = 2 * SCAN_COUNT as usize;
/// `HGETALL`s in flight at most: enough to keep the server busy across a round trip.
pub const MAX_IN_FLIGHT: usize = 8_000;
/// Reply bytes in flight at most (estimated from the largest reply so far): what the server
/// may have to buffer for this connection.
pub const IN_FLIGHT_BYTES: usize = 32 << 20;
/// `HGETALL`s in flight before any reply size is known.
const FIRST_WINDOW: usize = 4;
/// Socket read size.
const READ_CHUNK: usize = 1 << 20;

/// What the next reply answers, in send order.
enum Expect {
    Range(Location),
    Scan,
    Row(JobId),
}

/// Reads one queue into its [`QueueState`]: first the members of the location sets and their
/// rows ([`KeyReader::new`], [`KeyReader::run`]); and, when asked ([`KeyReader::scan_too`]) before
/// or after that run, SCAN pages with the queue's pattern and the rows they list that were not
/// read yet. Each row is read once, whichever of the two names it first.
pub struct KeyReader<'a> {
    keys: &'a QueueKeys,
    queue: &'a mut QueueState,
    /// `ZRANGE` chunks not sent yet: (set, first index).
    ranges: VecDeque<(Location, usize)>,
    ranges_in_flight: usize,
    /// The next SCAN cursor; `None` when not scanning or once SCAN said 0.
    cursor: Option<u64>,
    scan_in_flight: bool,
    /// Ids listed, not yet requested.
    listed: VecDeque<JobId>,
    /// Ids read that have no row (no key, or a key that is not a HASH).
    rowless: HashSet<JobId>,
    /// Ids listed since SCAN began (by a set or a page): while both list ids, a row is read
    /// once. Empty when not scanning (the membership map dedups the sets' ids).
    requested: HashSet<JobId>,
    scanning: bool,
    /// Row keys read that hold another type (each is also in `queue.stray_keys`).
    not_hashes: usize,
    expect: VecDeque<Expect>,
    /// Reused for every command framed.
    request: Request,
    rows_in_flight: usize,
    /// Replies to HGETALL so far, and the largest: they set the window.
    replies: usize,
    largest_reply: usize,
}

impl<'a> KeyReader<'a> {
    /// A reader of queue `keys` into `queue`, whose location sets hold `sizes` members (from
    /// ZCARD; the sets absent there are not read).
    pub fn new(keys: &'a QueueKeys, queue: &'a mut QueueState, sizes: &[(Location, usize)]) -> KeyReader<'a> {
        let members: usize = sizes.iter().map(|(_, n)| n).sum();
        queue.rows.reserve(members);
        queue.members.reserve(members);
        KeyReader {
            keys,
            queue,
            ranges: sizes.iter().flat_map(|&(loc, n)| (0..n).step_by(RANGE_CHUNK).map(move |at| (loc, at))).collect(),
            ranges_in_flight: 0,
            cursor: None,
            scan_in_flight: false,
            listed: VecDeque::new(),
            rowless: HashSet::new(),
            requested: HashSet::new(),
            scanning: false,
            not_hashes: 0,
            expect: VecDeque::new(),
            request: Request::new(),
            rows_in_flight: 0,
            replies: 0,
            largest_reply: 0,
        }
    }

    /// Makes the next [`KeyReader::run`] also SCAN the queue's keys, reading every row key it
    /// lists that was not read yet, and filing other keys as strays.
    pub fn scan_too(&mut self) {
        self.cursor = Some(0);
        self.scanning = true;
    }

    /// The row keys read that exist (rows, and keys of another type).
    pub fn row_keys_found(&self) -> usize {
        self.queue.rows.len() + self.not_hashes
    }

    /// Sends what is due and reads every reply over `stream` until nothing is left to ask.
    /// `timeout` bounds every wait for a reply (a write waits as long as the socket does, but
    /// ends with the read that timed out).
    ///
    /// Errors: a lost connection, a reply not within `timeout`, a malformed reply, an error reply
    /// to ZRANGE or SCAN, or one to HGETALL other than WRONGTYPE (MOVED, ASK, LOADING, ...: the
    /// read cannot be trusted), each as a [`CallError`].
    pub async fn run(&mut self, stream: &mut Stream, timeout: Duration) -> Result<(), CallError> {
        let (mut reader, mut writer) = tokio::io::split(stream);
        // The writer runs beside the reader (joined, same task), so a large write never stops
        // the replies from being read.
        let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
        let write = async move {
            while let Some(out) = rx.recv().await {
                writer.write_all(&out).await.map_err(|e| lost(&format!("write: {e}")))?;
                // TLS may hold encrypted bytes of what it accepted until flushed.
                writer.flush().await.map_err(|e| lost(&format!("write: {e}")))?;
            }
            Ok::<(), CallError>(())
        };
        let read = async move {
            let mut buf = Vec::with_capacity(READ_CHUNK);
            let mut start = 0;
            loop {
                let out = self.top_up();
                if !out.is_empty() && tx.send(out).is_err() {
                    // The writer failed: try_join! reports its error.
                    return Err(lost("the writer stopped"));
                }
                if self.expect.is_empty() {
                    return Ok(());
                }
                // Decoded bytes go once they are most of the buffer (what stays is part of one reply).
                if start > 0 && (start == buf.len() || start >= READ_CHUNK) {
                    buf.drain(..start);
                    start = 0;
                }
                buf.reserve(READ_CHUNK);
                match tokio::time::timeout(timeout, reader.read_buf(&mut buf)).await {
                    Err(_) => return Err(CallError::Timeout),
                    Ok(Err(e)) => return Err(lost(&e.to_string())),
                    Ok(Ok(0)) => return Err(lost("the server closed the connection")),
                    Ok(Ok(_)) => {}
                }
                loop {
                    let (frame, used) = match decode_range(&buf[start..]) {
                        Ok(Some(decoded)) => decoded,
                        Ok(None) => break,
                        Err(e) => return Err(CallError::Reply(format!("malformed reply from the server: {e:?}"))),
                    };
                    self.take(frame, &buf[start..start + used])?;
                    start += used;
                }
            }
        };
        // The first error ends both: a reader that timed out must not wait for a write that a
        // stalled server never accepts.
        tokio::try_join!(write, read).map(|_| ())
    }

    /// The HGETALLs allowed in flight now: [`IN_FLIGHT_BYTES`] over the largest reply so far,
    /// and at most four per reply read so far (so the window opens gradually, from
    /// [`FIRST_WINDOW`], before large rows are known).
    fn window(&self) -> usize {
        let by_bytes = IN_FLIGHT_BYTES / self.largest_reply.max(1);
        by_bytes.min(FIRST_WINDOW.max(4 * self.replies)).clamp(1, MAX_IN_FLIGHT)
    }

    /// Frames the commands the flow control allows: member chunks and the next SCAN page while
    /// few ids wait, and an HGETALL per waiting id.
    fn top_up(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        let window = self.window();
        let (request, keys) = (&mut self.request, self.keys);
        while self.listed.len() < LISTED_AHEAD && self.ranges_in_flight < RANGES_AHEAD {
            let Some((loc, at)) = self.ranges.pop_front() else { break };
            request.clear();
            request.arg("ZRANGE").arg(set_key(keys, loc)).arg(at).arg(at + RANGE_CHUNK - 1);
            if scored(loc) {
                request.arg("WITHSCORES");
            }
            request.write_packed(&mut out);
            self.expect.push_back(Expect::Range(loc));
            self.ranges_in_flight += 1;
        }
        if let (Some(cursor), false) = (self.cursor, self.scan_in_flight) {
            if self.listed.len() < LISTED_AHEAD {
                request.clear();
                request.arg("SCAN").arg(cursor).arg("MATCH").arg(keys.scan_pattern()).arg("COUNT").arg(SCAN_COUNT);
                request.write_packed(&mut out);
                self.expect.push_back(Expect::Scan);
                self.scan_in_flight = true;
            }
        }
        while self.rows_in_flight < window {
            let Some(id) = self.listed.pop_front() else { break };
            request.clear();
            request.arg("HGETALL").arg_concat(&keys.job_key_parts(&id));
            request.write_packed(&mut out);
            self.expect.push_back(Expect::Row(id));
            self.rows_in_flight += 1;
        }
        out
    }

    /// Whether row `id` was read or asked for already (in this run or an earlier one).
    fn read_already(&self, id: &JobId) -> bool {
        self.queue.rows.contains_key(id) || self.rowless.contains(id) || self.requested.contains(id)
    }

    /// Takes one reply; `raw` is its bytes, which `frame`'s ranges index.
    fn take(&mut self, frame: RangeFrame, raw: &[u8]) -> Result<(), CallError> {
        match self.expect.pop_front() {
            None => Err(CallError::Reply("a reply to no request".into())),
            Some(Expect::Range(loc)) => {
                self.ranges_in_flight -= 1;
                self.take_members(loc, frame, raw)
            }
            Some(Expect::Scan) => {
                self.scan_in_flight = false;
                let (next, page) = scan_page(frame, raw)?;
                self.cursor = (next != 0).then_some(next);
                for key in page {
                    match classify(self.keys, key) {
                        // SCAN may list a key twice (rehashing), and most rows were read by
                        // member already: each row is read once.
                        KeyKind::Row(id) if !self.read_already(&id) => {
                            self.requested.insert(id);
                            self.listed.push_back(id);
                        }
                        KeyKind::Row(_) | KeyKind::Set(_) => {}
                        KeyKind::Stray => self.queue.stray_keys.push(String::from_utf8_lossy(key).into_owned()),
                    }
                }
                Ok(())
            }
            Some(Expect::Row(id)) => {
                self.rows_in_flight -= 1;
                self.replies += 1;
                self.largest_reply = self.largest_reply.max(raw.len());
                match reduce_frame(&id, frame, raw)? {
                    Reduced::Row(row) => {
                        self.queue.rows.insert(id, row);
                    }
                    Reduced::Absent => {
                        self.rowless.insert(id);
                    }
                    Reduced::NotAHash => {
                        if self.rowless.insert(id) {
                            self.not_hashes += 1;
                            self.queue.stray_keys.push(self.keys.job_key(&id));
                        }
                    }
                }
                Ok(())
            }
        }
    }

    /// Files one `ZRANGE` chunk of set `loc`: memberships, deadlines, and each id seen for the
    /// first time listed for its row.
    fn take_members(&mut self, loc: Location, frame: RangeFrame, raw: &[u8]) -> Result<(), CallError> {
        if let Some(err) = error_reply(&frame, raw) {
            return Err(err);
        }
        let bad = || CallError::Reply(format!("ZRANGE {}: not a list of members", loc.name()));
        let RangeFrame::Array(items) = frame else { return Err(bad()) };
        let step = if scored(loc) { 2 } else { 1 };
        if items.len() % step != 0 {
            return Err(bad());
        }
        for entry in items.chunks_exact(step) {
            let RangeFrame::BulkString((start, end)) = entry[0] else { return Err(bad()) };
            let member = &raw[start..end];
            let Ok(id) = JobId::parse(member) else {
                self.queue.stray_members.push((loc, String::from_utf8_lossy(member).into_owned()));
                continue;
            };
            if let Some(RangeFrame::BulkString((start, end))) = entry.get(1) {
                let score =
                    std::str::from_utf8(&raw[*start..*end]).ok().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
                self.queue.deadlines.insert(id, score);
            }
            let mask = self.queue.members.entry(id).or_insert(0);
            if *mask == 0 && (!self.scanning || self.requested.insert(id)) {
                self.listed.push_back(id);
            }
            *mask |= loc.bit();
        }
        Ok(())
    }
}

/// The sets whose scores the checker reads: lease deadlines and due times.
fn scored(loc: Location) -> bool {
    matches!(loc, Location::Active | Location::Delayed)
}

fn lost(why: &str) -> CallError {
    CallError::Connection(format!("checker's key reader: {why}"))
}

/// A SCAN reply `[cursor, [key, ...]]`: the next cursor and the keys (slices of `raw`).
fn scan_page(frame: RangeFrame, raw: &[u8]) -> Result<(u64, Vec<&[u8]>), CallError> {
    if let Some(err) = error_reply(&frame, raw) {
        return Err(err);
    }
    let bad = || CallError::Reply("SCAN: not a [cursor, keys] reply".into());
    let RangeFrame::Array(mut parts) = frame else { return Err(bad()) };
    let (Some(RangeFrame::Array(page)), Some(RangeFrame::BulkString((start, end))), None) =
        (parts.pop(), parts.pop(), parts.pop())
    else {
        return Err(bad());
    };
    let cursor = std::str::from_utf8(&raw[start..end]).ok().and_then(|c| c.parse().ok()).ok_or_else(bad)?;
    let keys = page
        .into_iter()
        .map(|key| match key {
            RangeFrame::BulkString((start, end)) => Ok(&raw[start..end]),
            _ => Err(bad()),
        })
        .collect::<Result<_, _>>()?;
    Ok((cursor, keys))
}

/// One HGETALL reply: a row, no key, or a key that is not a HASH (WRONGTYPE).
fn reduce_frame(id: &JobId, frame: RangeFrame, raw: &[u8]) -> Result<Reduced, CallError> {
    if let RangeFrame::Error((start, end)) = frame {
        if raw[start..end].starts_with(b"WRONGTYPE ") {
            return Ok(Reduced::NotAHash);
        }
    }
    if let Some(err) = error_reply(&frame, raw) {
        return Err(err);
    }
    // Only WRONGTYPE says the key is there and not a HASH: any other shape is not an HGETALL
    // reply, and counting it as a key would let it stand in for a key the check never saw.
    let bad = || CallError::Reply(format!("HGETALL {}: not a field/value list", id.as_str()));
    let RangeFrame::Array(items) = frame else { return Err(bad()) };
    if items.is_empty() {
        return Ok(Reduced::Absent);
    }
    if items.len() % 2 != 0 || items.iter().any(|item| !matches!(item, RangeFrame::BulkString(_))) {
        return Err(bad());
    }
    let slice = |item: &RangeFrame| match item {
        RangeFrame::BulkString((start, end)) => Some(&raw[*start..*end]),
        _ => None,
    };
    Ok(reduce_pairs(id, items.chunks_exact(2).map(|pair| slice(&pair[0]).zip(slice(&pair[1])))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::{JobIdGen, QueueName};

    fn decoded(raw: &[u8]) -> RangeFrame {
        let (frame, used) = decode_range(raw).unwrap().unwrap();
        assert_eq!(used, raw.len());
        frame
    }

    #[test]
    fn scan_pages_and_rows_decode_from_the_raw_reply() {
        let raw = b"*2\r\n$3\r\n170\r\n*2\r\n$3\r\nabc\r\n$2\r\nde\r\n";
        let (cursor, keys) = scan_page(decoded(raw), raw).unwrap();
        assert_eq!((cursor, keys), (170, vec![&b"abc"[..], b"de"]));
        let raw = b"-ERR no\r\n";
        assert!(scan_page(decoded(raw), raw).is_err());

        let id = JobIdGen::new(3).next_id();
        let raw = b"*4\r\n$5\r\nstate\r\n$6\r\nfailed\r\n$8\r\nattempts\r\n$1\r\n3\r\n";
        let Reduced::Row(row) = reduce_frame(&id, decoded(raw), raw).unwrap() else { panic!("not a row") };
        assert_eq!(row.attempts, Some(Ok(3)));
        assert_eq!(reduce_frame(&id, decoded(b"*0\r\n"), b"*0\r\n").unwrap(), Reduced::Absent);
        let raw = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
        assert_eq!(reduce_frame(&id, decoded(raw), raw).unwrap(), Reduced::NotAHash);
        let raw = b"-MOVED 3999 127.0.0.1:6381\r\n";
        assert!(reduce_frame(&id, decoded(raw), raw).is_err());
        for raw in [&b"*2\r\n:1\r\n$1\r\nx\r\n"[..], b"*1\r\n$1\r\nx\r\n", b":3\r\n", b"$-1\r\n"] {
            assert!(reduce_frame(&id, decoded(raw), raw).is_err(), "{raw:?}");
        }
    }

    #[test]
    fn the_window_follows_the_reply_size() {
        let keys = QueueKeys::new(QueueName::new("q").unwrap());
        let mut queue = QueueState::default();
        let mut reader = KeyReader::new(&keys, &mut queue, &[(Location::Active, 3)]);
        assert_eq!(reader.window(), FIRST_WINDOW);
        (reader.replies, reader.largest_reply) = (10, 100);
        assert_eq!(reader.window(), 40);
        (reader.replies, reader.largest_reply) = (100_000, 100);
        assert_eq!(reader.window(), MAX_IN_FLIGHT);
        (reader.replies, reader.largest_reply) = (100_000, 64 << 20);
        assert_eq!(reader.window(), 1);
        // The first top-up asks for the members only; a SCAN only when asked for.
        let out = reader.top_up();
        assert_eq!(
            out,
            b"*5\r\n$6\r\nZRANGE\r\n$14\r\nemq:{q}:active\r\n$1\r\n0\r\n$4\r\n9999\r\n$10\r\nWITHSCORES\r\n"
        );
        assert!(reader.top_up().is_empty());
        reader.scan_too();
        let out = reader.top_up();
        assert!(out.starts_with(b"*6\r\n$4\r\nSCAN\r\n$1\r\n0\r\n$5\r\nMATCH\r\n$9\r\nemq:{q}:*\r\n"), "{out:?}");
    }
}
