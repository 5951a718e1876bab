//! The per-thread, append-only history buffer: LEB128 varints with deltas, so an event costs
//! about 6–12 bytes (the budget is 64 bytes per job, retries included).
//!
//! A thread's history is a list of streams, one per chunk of at most [`CHUNK`] bytes: each
//! starts its deltas from zero, so it decodes on its own and is handed over and written as it
//! was recorded, never joined (joining would copy every byte once more into fresh pages, a
//! page fault per 4 KiB of history).
//!
//! Encoding of one event (version 5): a byte `kind << 5 | outcome`; the job number as a zigzag
//! varint delta from the previous event's; for enqueues the CRC-32 (4 bytes LE), the queue (a
//! varint) and the id's time part (a zigzag varint delta, ms, from the previous enqueue's),
//! otherwise the token and the worker (two varints), and for a claim its holder (a varint: 0
//! for none, else one more than the zigzag delta from the stream's previous claim holder, so
//! the jobs of one claim call and the next call's cost a byte each); the send time as a zigzag
//! varint delta (µs) from the previous event's; the duration (µs, a varint). Version 2 (older
//! files) has no worker, versions 2 to 4 no holder.

use super::event::{Event, Kind, Outcome};
use super::spool::HistorySpill;
use crate::metrics::elapsed_us;
use std::num::NonZeroU64;
use std::time::{Duration, Instant};

/// How often a buffer that spills hands over the chunk it is writing even when not full
/// ([`HistoryBuf::spill_due`]): what a run killed outright loses of its history.
const SPILL_EVERY: Duration = Duration::from_secs(1);

/// Bytes per chunk: the buffer grows by whole chunks, so appending never copies what was
/// recorded (a doubling Vec would copy it all at every growth, on the hot path). Each chunk is
/// one stream (see the module doc).
pub const CHUNK: usize = 1 << 20;

/// One load thread's history, owned by that thread (no lock).
pub struct HistoryBuf {
    start: Instant,
    /// The chunks filled so far, each a whole stream.
    full: Vec<Vec<u8>>,
    /// The chunk being written: `CHUNK` bytes allocated zeroed, `bytes[..at]` recorded. Events
    /// are encoded straight into it, not into a stack buffer zeroed and then copied, which
    /// would zero and copy every event once more.
    bytes: Vec<u8>,
    at: usize,
    last_job: u32,
    last_sent: u64,
    /// The instant `last_sent` was computed from: the replies of one pipelined write share
    /// their send time, so most events reuse it instead of converting again.
    last_sent_at: Instant,
    last_id_ms: u64,
    /// The last claim holder recorded in this stream, what the next one's delta starts from.
    last_holder: u64,
    events: u64,
    /// Where closed chunks go as they close (the run's `history.bin`); without it they stay
    /// in `full` until [`take`](HistoryBuf::take).
    spill: Option<HistorySpill>,
    /// When the last chunk was closed (or the buffer made).
    last_spill: Instant,
}

/// Appends `v` as a LEB128 varint at `buf[at..]`; returns the new end. `buf` has room for any
/// event (an enqueue at most 1 + 5 + 4 + 3 + 10 + 10 + 10 bytes, a claim 1 + 5 + 5 + 5 + 10 +
/// 10 + 10), so no bounds check fails.
#[inline]
pub(super) fn put_varint(buf: &mut [u8], mut at: usize, mut v: u64) -> usize {
    // Most fields are one byte (deltas of 0 and 1, queue 0): no loop for them.
    if v < 0x80 {
        buf[at] = v as u8;
        return at + 1;
    }
    while v >= 0x80 {
        buf[at] = (v as u8) | 0x80;
        v >>= 7;
        at += 1;
    }
    buf[at] = v as u8;
    at + 1
}

/// The longest encoded event, bytes.
const EVENT_MAX: usize = 64;

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// A chunk's `CHUNK` zeroed bytes, allocated untouched (calloc maps fresh zero pages: only
/// the pages written are faulted in).
fn new_chunk() -> Vec<u8> {
    vec![0; CHUNK]
}

impl HistoryBuf {
    /// An empty buffer whose times count from `start` (the run start).
    pub fn new(start: Instant) -> HistoryBuf {
        HistoryBuf {
            start,
            full: Vec::new(),
            bytes: new_chunk(),
            at: 0,
            last_job: 0,
            last_sent: 0,
            last_sent_at: start,
            last_id_ms: 0,
            last_holder: 0,
            events: 0,
            spill: None,
            last_spill: start,
        }
    }

    /// [`new`](Self::new), handing every chunk to `spill` as it closes: the buffer then holds
    /// only the chunk it is writing, whatever the run's length.
    pub fn spilling(start: Instant, spill: HistorySpill) -> HistoryBuf {
        HistoryBuf { spill: Some(spill), ..HistoryBuf::new(start) }
    }

    /// Closes the chunk being written when it holds anything and the last one closed
    /// [`SPILL_EVERY`] ago or more (a buffer that spills; once a second, off the hot path).
    pub fn spill_due(&mut self, now: Instant) {
        if self.spill.is_some() && self.at > 0 && now.saturating_duration_since(self.last_spill) >= SPILL_EVERY {
            self.next_chunk();
        }
    }

    /// Appends one event: the request was sent at `sent` and its reply read `dur_us` µs later
    /// (the service time the caller already computed for the histograms).
    #[inline]
    #[allow(clippy::too_many_arguments)] // one flat call on the hot path; each argument is one field
    pub fn push(
        &mut self,
        job: u32,
        kind: Kind,
        outcome: Outcome,
        token: u32,
        worker: Option<u32>,
        sent: Instant,
        dur_us: u64,
    ) {
        self.put(job, kind, outcome, token, worker.map_or(0, |w| u64::from(w) + 1), 0, None, sent, dur_us);
    }

    /// Appends a claim's event for one job it handed out, with the holder the claim presented
    /// ([`crate::queue::Holder::value`]; `None` for a claim made without one).
    #[inline]
    #[allow(clippy::too_many_arguments)] // one flat call on the hot path; each argument is one field
    pub fn push_claim(
        &mut self,
        job: u32,
        outcome: Outcome,
        token: u32,
        worker: Option<u32>,
        holder: Option<u64>,
        sent: Instant,
        dur_us: u64,
    ) {
        self.put(job, Kind::Claim, outcome, token, worker.map_or(0, |w| u64::from(w) + 1), 0, holder, sent, dur_us);
    }

    /// [`push`](Self::push) with the enqueued id's time part `id_ms` (ms since the Unix epoch;
    /// kept for enqueue kinds only). Always inlined: it runs once per reply recorded, and a
    /// call, prologue and epilogue would add a sizeable share to its own work.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)] // one flat call on the hot path; each argument is one field
    pub fn push_enqueue(
        &mut self,
        job: u32,
        kind: Kind,
        outcome: Outcome,
        token: u32,
        queue: u16,
        id_ms: u64,
        sent: Instant,
        dur_us: u64,
    ) {
        self.put(job, kind, outcome, token, u64::from(queue), id_ms, None, sent, dur_us);
    }

    /// Appends a decoded event again (its times counted from this buffer's start), as
    /// [`push`](Self::push) or [`push_enqueue`](Self::push_enqueue) recorded it: what re-encodes
    /// a history (a fleet's merge, the events the live check keeps).
    pub fn push_event(&mut self, e: &Event) {
        let sent = self.start + Duration::from_micros(e.sent_us);
        let dur_us = e.done_us.saturating_sub(e.sent_us);
        if matches!(e.kind, Kind::Enqueue | Kind::EnqueueDup) {
            self.push_enqueue(e.job, e.kind, e.outcome, e.token, e.queue, e.id_ms, sent, dur_us);
        } else if e.kind == Kind::Claim {
            self.push_claim(e.job, e.outcome, e.token, e.worker, e.holder.map(NonZeroU64::get), sent, dur_us);
        } else {
            self.push(e.job, e.kind, e.outcome, e.token, e.worker, sent, dur_us);
        }
    }

    /// Encodes one event: `place` is the queue of an enqueue kind, and for any other the worker
    /// plus one (0: no worker known); `holder` is written for claims only.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)] // one flat call on the hot path; each argument is one field
    fn put(
        &mut self,
        job: u32,
        kind: Kind,
        outcome: Outcome,
        token: u32,
        place: u64,
        id_ms: u64,
        holder: Option<u64>,
        sent: Instant,
        dur_us: u64,
    ) {
        if self.at + EVENT_MAX > CHUNK {
            self.next_chunk();
        }
        let sent_us = if sent == self.last_sent_at { self.last_sent } else { elapsed_us(self.start, sent) };
        // One bounds check for the event's room; the writes below stay inside it.
        let buf = &mut self.bytes[self.at..self.at + EVENT_MAX];
        buf[0] = ((kind as u8) << 5) | outcome.bits();
        let mut at = put_varint(buf, 1, zigzag(i64::from(job) - i64::from(self.last_job)));
        if matches!(kind, Kind::Enqueue | Kind::EnqueueDup) {
            buf[at..at + 4].copy_from_slice(&token.to_le_bytes());
            at = put_varint(buf, at + 4, place);
            at = put_varint(buf, at, zigzag(id_ms as i64 - self.last_id_ms as i64));
            self.last_id_ms = id_ms;
        } else {
            at = put_varint(buf, at, u64::from(token));
            at = put_varint(buf, at, place);
            if kind == Kind::Claim {
                // A delta of i64::MIN (holders 2^63 apart) has no room for the +1: recorded as none.
                let code = holder.and_then(|h| zigzag(h.wrapping_sub(self.last_holder) as i64).checked_add(1));
                at = put_varint(buf, at, code.unwrap_or(0));
                if let (Some(h), Some(_)) = (holder, code) {
                    self.last_holder = h;
                }
            }
        }
        at = put_varint(buf, at, zigzag(sent_us as i64 - self.last_sent as i64));
        at = put_varint(buf, at, dur_us);
        self.at += at;
        self.last_job = job;
        self.last_sent = sent_us;
        self.last_sent_at = sent;
        self.events += 1;
    }

    /// Closes the chunk being written as a stream and starts the next one, its deltas from zero
    /// (what [`decode`] starts from).
    #[cold]
    fn next_chunk(&mut self) {
        let mut full = std::mem::replace(&mut self.bytes, new_chunk());
        full.truncate(self.at);
        match &self.spill {
            Some(spill) => {
                if let Err(full) = spill.send(full) {
                    self.full.push(full);
                }
            }
            None => self.full.push(full),
        }
        self.last_spill = Instant::now();
        self.at = 0;
        self.last_job = 0;
        self.last_sent = 0;
        self.last_sent_at = self.start;
        self.last_id_ms = 0;
        self.last_holder = 0;
    }

    /// Encoded bytes so far.
    pub fn len(&self) -> usize {
        self.full.iter().map(Vec::len).sum::<usize>() + self.at
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes the encoded streams, oldest first, each decodable on its own ([`decode`]): the
    /// chunks as recorded, not copied; empty when nothing was recorded. Leaves the buffer empty.
    pub fn take(&mut self) -> Vec<Vec<u8>> {
        if self.at > 0 {
            self.next_chunk();
        }
        std::mem::take(&mut self.full)
    }

    /// Events appended so far.
    pub fn events(&self) -> u64 {
        self.events
    }
}

/// `events` encoded as this build records them: streams of at most [`CHUNK`] bytes, each
/// decoding on its own to the events in the order given (none when `events` is empty).
pub fn encode_events(events: &[Event]) -> Vec<Vec<u8>> {
    if events.is_empty() {
        return Vec::new();
    }
    let mut buf = HistoryBuf::new(Instant::now());
    events.iter().for_each(|e| buf.push_event(e));
    buf.take()
}

/// Why a history stream could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("history stream is corrupt at byte {offset}, in event {}: {what}", .event + 1)]
pub struct DecodeError {
    /// Byte offset in the stream.
    pub offset: usize,
    /// The 0-based index of the event that does not decode: as many whole events precede it.
    pub event: usize,
    /// What was wrong.
    pub what: &'static str,
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    /// Events decoded so far (the index of the one being read).
    event: usize,
}

impl Reader<'_> {
    fn error(&self, offset: usize, what: &'static str) -> DecodeError {
        DecodeError { offset, event: self.event, what }
    }

    fn byte(&mut self) -> Result<u8, DecodeError> {
        let b = *self.bytes.get(self.at).ok_or(self.error(self.at, "truncated"))?;
        self.at += 1;
        Ok(b)
    }

    fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(self.error(self.at, "varint too long"))
    }
}

/// The event encoding this build writes (3: fenced calls and claims carry their worker; 4:
/// the same bytes, and `clean`'s retirements, [`Kind::Retire`], use the last free kind, so a
/// kind more needs an encoding of its own; 5: claims carry their holder).
pub const EVENT_VERSION: u8 = 5;

/// Decodes one thread's stream, written in this build's encoding ([`EVENT_VERSION`]), into
/// events, in recording order.
///
/// Errors: [`DecodeError`] at the first malformed event.
pub fn decode(bytes: &[u8]) -> Result<Vec<Event>, DecodeError> {
    decode_version(bytes, EVENT_VERSION)
}

/// [`decode`] for a stream in event encoding `version` (2: no worker; 3 and 4: no holder; 5:
/// this build's).
///
/// Errors: [`DecodeError`] at the first malformed event.
pub fn decode_version(bytes: &[u8], version: u8) -> Result<Vec<Event>, DecodeError> {
    let with_worker = version >= 3;
    let with_holder = version >= 5;
    let mut last_holder = 0u64;
    let mut r = Reader { bytes, at: 0, event: 0 };
    let mut events = Vec::with_capacity(bytes.len() / 8);
    let (mut job, mut sent, mut id_ms) = (0i64, 0i64, 0i64);
    while r.at < bytes.len() {
        let start = r.at;
        let head = r.byte()?;
        let kind = Kind::from_bits(head >> 5).ok_or(r.error(start, "unknown kind"))?;
        let outcome = Outcome::from_bits(head & 31).ok_or(r.error(start, "unknown outcome"))?;
        job += unzigzag(r.varint()?);
        let (token, queue, ms) = if matches!(kind, Kind::Enqueue | Kind::EnqueueDup) {
            let crc = [r.byte()?, r.byte()?, r.byte()?, r.byte()?];
            let queue = r.varint()? as u16;
            id_ms += unzigzag(r.varint()?);
            (u32::from_le_bytes(crc), queue, id_ms as u64)
        } else {
            (r.varint()? as u32, 0, 0)
        };
        let worker = match matches!(kind, Kind::Enqueue | Kind::EnqueueDup) || !with_worker {
            true => None,
            false => match r.varint()? {
                0 => None,
                w => Some(u32::try_from(w - 1).map_err(|_| r.error(start, "worker out of range"))?),
            },
        };
        let holder = match kind == Kind::Claim && with_holder {
            false => None,
            true => match r.varint()? {
                0 => None,
                code => {
                    last_holder = last_holder.wrapping_add(unzigzag(code - 1) as u64);
                    NonZeroU64::new(last_holder)
                }
            },
        };
        sent += unzigzag(r.varint()?);
        let dur = r.varint()?;
        let job = u32::try_from(job).map_err(|_| r.error(start, "job number out of range"))?;
        let (sent_us, done_us) = (sent as u64, sent as u64 + dur);
        events.push(Event {
            job,
            kind,
            outcome,
            token,
            queue,
            id_ms: ms,
            sent_us,
            done_us,
            worker,
            holder,
            shard: None,
        });
        r.event += 1;
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lua::ErrorCode;
    use std::time::Duration;

    #[test]
    fn events_round_trip_and_stay_small() {
        let start = Instant::now();
        let mut buf = HistoryBuf::new(start);
        let at = |us: u64| start + Duration::from_micros(us);
        let mut expected = Vec::new();
        for job in 0..1000u32 {
            let t = u64::from(job) * 100;
            let id_ms = 1_764_000_000_000 + u64::from(job) / 3;
            buf.push_enqueue(job, Kind::Enqueue, Outcome::Ok, 0xdead_beef ^ job, 1, id_ms, at(t), 80);
            buf.push(job, Kind::Claim, Outcome::Ok, 1, Some(job % 7), at(t + 90), 5);
            buf.push(job, Kind::Complete, Outcome::Refused(ErrorCode::Fence), 1, Some(job % 7), at(t + 96), 3);
            expected.push(Event {
                job,
                kind: Kind::Enqueue,
                outcome: Outcome::Ok,
                token: 0xdead_beef ^ job,
                queue: 1,
                id_ms,
                sent_us: t,
                done_us: t + 80,
                worker: None,
                holder: None,
                shard: None,
            });
            expected.push(Event {
                job,
                kind: Kind::Claim,
                outcome: Outcome::Ok,
                token: 1,
                queue: 0,
                id_ms: 0,
                sent_us: t + 90,
                done_us: t + 95,
                worker: Some(job % 7),
                holder: None,
                shard: None,
            });
            expected.push(Event {
                job,
                kind: Kind::Complete,
                outcome: Outcome::Refused(ErrorCode::Fence),
                token: 1,
                queue: 0,
                id_ms: 0,
                sent_us: t + 96,
                done_us: t + 99,
                worker: Some(job % 7),
                holder: None,
                shard: None,
            });
        }
        buf.push(super::super::event::UNKNOWN_JOB, Kind::Claim, Outcome::Unknown, 0, None, at(5), 2);
        expected.push(Event {
            job: u32::MAX,
            kind: Kind::Claim,
            outcome: Outcome::Unknown,
            token: 0,
            queue: 0,
            id_ms: 0,
            sent_us: 5,
            done_us: 7,
            worker: None,
            holder: None,
            shard: None,
        });
        let streams = buf.take();
        assert_eq!(streams.len(), 1, "a few KB is one chunk");
        let bytes = &streams[0];
        assert_eq!(decode(bytes).unwrap(), expected);
        let per_job = bytes.len() as f64 / 1000.0;
        assert!(per_job < 30.0, "{per_job} bytes per job for 3 events");
    }

    /// A version 2 stream (older files) has no worker after a claim's token; it decodes with
    /// none, and the same bytes are not taken for version 3.
    #[test]
    fn version_2_events_decode_without_a_worker() {
        // claim (kind 2, outcome Ok = 0) of job 3, token 2, sent at 10 µs, 5 µs long.
        let v2 = [2u8 << 5, 6, 2, 20, 5];
        let events = decode_version(&v2, 2).unwrap();
        assert_eq!((events[0].job, events[0].token, events[0].worker), (3, 2, None));
        assert_eq!((events[0].sent_us, events[0].done_us), (10, 15));
        assert!(decode(&v2).is_err(), "read as version 3 it is cut short");
    }

    /// Claims carry their holders (a byte each within one claim call and to the next), other
    /// events none; a version 4 stream has no holder after a claim's worker and decodes with
    /// none.
    #[test]
    fn claims_carry_their_holders_and_version_4_streams_none() {
        let start = Instant::now();
        let mut buf = HistoryBuf::new(start);
        let minter = 3u64 << 32;
        let holders = [Some(minter | 1), Some(minter | 1), Some(minter | 2), None, Some(u64::MAX), Some(minter | 3)];
        for (job, holder) in holders.iter().enumerate() {
            buf.push_claim(job as u32, Outcome::Ok, 1, Some(4), *holder, start, 5);
            buf.push(job as u32, Kind::Complete, Outcome::Ok, 1, Some(4), start, 5);
        }
        let bytes = buf.take().remove(0);
        let events = decode(&bytes).unwrap();
        let claims: Vec<Option<u64>> =
            events.iter().filter(|e| e.kind == Kind::Claim).map(|e| e.holder.map(NonZeroU64::get)).collect();
        assert_eq!(claims, holders);
        assert!(events.iter().filter(|e| e.kind != Kind::Claim).all(|e| e.holder.is_none()));
        // Re-encoded (a merge, the kept events) they come back the same.
        assert_eq!(decode(&encode_events(&events).remove(0)).unwrap(), events);
        // claim of job 3, token 2, worker 4 (5), sent at 10 µs, 5 µs long: no holder in version 4.
        let v4 = [2u8 << 5, 6, 2, 5, 20, 5];
        let old = decode_version(&v4, 4).unwrap();
        assert_eq!((old[0].job, old[0].token, old[0].worker, old[0].holder), (3, 2, Some(4), None));
        assert!(decode(&v4).is_err(), "read as version 5 it is cut short");
    }

    #[test]
    fn streams_spanning_many_chunks_decode_whole() {
        let start = Instant::now();
        let mut buf = HistoryBuf::new(start);
        let n = 3 * CHUNK as u32 / 4; // a few chunks' worth of ~5-byte events
        for job in 0..n {
            buf.push(job, Kind::Progress, Outcome::Ok, 1, None, start, 0);
        }
        let streams = buf.take();
        assert!(streams.len() > 2 && streams.iter().all(|s| s.len() <= CHUNK));
        assert!(buf.take().is_empty(), "taken whole");
        // Each chunk decodes on its own, and in order they are every event recorded.
        let events: Vec<Event> = streams.iter().flat_map(|s| decode(s).unwrap()).collect();
        assert_eq!(events.len(), n as usize);
        assert!(events.iter().enumerate().all(|(i, e)| e.job == i as u32 && e.kind == Kind::Progress));
    }

    #[test]
    fn a_truncated_stream_is_an_error() {
        let start = Instant::now();
        let mut buf = HistoryBuf::new(start);
        buf.push(3, Kind::Claim, Outcome::Ok, 2, None, start, 0);
        let bytes = buf.take().remove(0);
        assert!(decode(&bytes[..bytes.len() - 1]).is_err());
    }
}
