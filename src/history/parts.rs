//! A history read back from `history.bin` in parts by job number, so checking it never holds
//! more of it than one part: part `i` of `n` holds every event of the jobs whose number is
//! `i` modulo `n` (a job's events are never split), each part sorted like a merged
//! [`History`]. A history that fits the memory it is given is one part, merged in memory;
//! a larger one is decoded stream by stream into `n` files of varint records in a temporary
//! folder (beside the history, about 2.5 times its size in all: each record stands alone,
//! without the deltas of the history's own encoding), and each part is read back, sorted and
//! handed out in turn. A folder left by a check that was killed is removed by the next one.
//!
//! Claims whose outcome is unknown ([`UNKNOWN_JOB`]) belong to no job: every part gets them,
//! as a whole history has them.

use super::buffer::{decode_version, put_varint as put};
use super::event::{Event, Kind, Outcome, UNKNOWN_JOB};
use super::file::{self, HistoryFileError};
use super::{History, HistoryHeader};
use rayon::prelude::*;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// The fewest bytes one event takes in a stream (a fenced call of an encoding without a worker:
/// kind, job delta, token, send-time delta, duration, one byte each): a file of `b` bytes holds
/// at most `b / 5` events.
const MIN_EVENT_BYTES: u64 = 5;

/// The most parts a history is cut into (one open file each while it is cut).
pub const MAX_PARTS: usize = 256;

/// The most bytes one event takes in a part file (see [`encode`]).
const RECORD_MAX: usize = 2 + 10 * 9;

/// The prefix of a part folder's name; the process id follows, so a folder whose process is
/// gone is known to be left over.
const FOLDER_PREFIX: &str = ".history-parts.";

/// A history to check part by part (see the module doc).
pub struct HistoryParts {
    header: HistoryHeader,
    store: Store,
    /// Unknown-outcome claims, handed to every part (files only; a whole history has its own).
    unknown: Vec<Event>,
    /// Encoded size of the history, bytes.
    encoded_bytes: u64,
    /// Only the jobs enqueued into these queues (indices into the header's list), when set.
    keep: Option<Vec<u16>>,
}

enum Store {
    /// One part, merged in memory.
    Whole(History),
    /// `paths.len()` parts, one file each in `_dir` (removed with it).
    Files { _dir: tempfile::TempDir, paths: Vec<PathBuf> },
}

impl From<History> for HistoryParts {
    /// One part: a history already merged in memory.
    fn from(history: History) -> HistoryParts {
        let encoded_bytes = history.encoded_bytes;
        HistoryParts {
            header: history.header.clone(),
            store: Store::Whole(history),
            unknown: Vec::new(),
            encoded_bytes,
            keep: None,
        }
    }
}

/// How many parts a history file of `file_bytes` needs for its events (at most one per
/// [`MIN_EVENT_BYTES`], each `size_of::<Event>()` in memory) to take at most `budget_bytes`
/// per part: 1 up to [`MAX_PARTS`].
pub fn parts_for(file_bytes: u64, budget_bytes: u64) -> usize {
    let events = file_bytes / MIN_EVENT_BYTES;
    let bytes = events.saturating_mul(std::mem::size_of::<Event>() as u64);
    (bytes.div_ceil(budget_bytes.max(1)) as usize).clamp(1, MAX_PARTS)
}

impl HistoryParts {
    /// Reads the history file at `path` so that each part's events take about `budget_bytes`
    /// of memory at most ([`parts_for`]); the part files of a history that needs more than one
    /// go to a temporary folder in `spill_dir` (removed when this is dropped).
    ///
    /// Errors: the file's ([`file::load`]'s), a stream that does not decode
    /// ([`HistoryFileError::Decode`], naming the stream), and I/O on the part files.
    pub fn read(path: &Path, budget_bytes: u64, spill_dir: &Path) -> Result<HistoryParts, HistoryFileError> {
        let io = |at: &Path| {
            let at = at.to_path_buf();
            move |source| HistoryFileError::Io { path: at.clone(), source }
        };
        let size = file::history_bytes(path)?;
        let count = parts_for(size, budget_bytes);
        if count == 1 {
            let (header, streams) = file::load(path)?;
            let history = History::merge(header, &streams).map_err(|e| undecodable(path, None, e))?;
            return Ok(HistoryParts::from(history));
        }
        remove_left_over(spill_dir);
        let dir = tempfile::Builder::new()
            .prefix(&format!("{FOLDER_PREFIX}{}.", std::process::id()))
            .tempdir_in(spill_dir)
            .map_err(io(spill_dir))?;
        let paths: Vec<PathBuf> = (0..count).map(|i| dir.path().join(format!("part-{i:03}.bin"))).collect();
        let mut outs = paths
            .iter()
            .map(|p| std::fs::File::create(p).map(|f| BufWriter::with_capacity(1 << 16, f)).map_err(io(p)))
            .collect::<Result<Vec<_>, _>>()?;
        let mut unknown = Vec::new();
        let mut encoded_bytes = 0u64;
        let mut stream = 0u32;
        let mut record = [0u8; RECORD_MAX];
        let header = file::each_stream(path, |version, bytes| {
            encoded_bytes += bytes.len() as u64;
            let events = decode_version(&bytes, version).map_err(|e| undecodable(path, Some(stream), e))?;
            for e in events {
                if e.job == UNKNOWN_JOB {
                    unknown.push((e, stream));
                    continue;
                }
                let part = e.job as usize % count;
                let len = encode(&e, stream, &mut record);
                outs[part].write_all(&record[..len]).map_err(io(&paths[part]))?;
            }
            stream += 1;
            Ok(())
        })?;
        // Only this process reads them, before it ends: flushed, not synced.
        for (out, at) in outs.into_iter().zip(&paths) {
            out.into_inner().map_err(|e| e.into_error()).map_err(io(at))?;
        }
        // A streamed file's header comes last: the shards are known only now.
        let unknown = unknown
            .into_iter()
            .map(|(e, s)| Event { shard: header.stream_shards.get(s as usize).copied(), ..e })
            .collect();
        Ok(HistoryParts { header, store: Store::Files { _dir: dir, paths }, unknown, encoded_bytes, keep: None })
    }

    /// What the history file says about its run.
    pub fn header(&self) -> &HistoryHeader {
        &self.header
    }

    /// How many parts [`each`](Self::each) hands out.
    pub fn count(&self) -> usize {
        match &self.store {
            Store::Whole(_) => 1,
            Store::Files { paths, .. } => paths.len(),
        }
    }

    /// Encoded size of the history, bytes.
    pub fn encoded_bytes(&self) -> u64 {
        self.encoded_bytes
    }

    /// Keeps only the jobs enqueued into one of the queues `keep` ([`History::keep_queues`],
    /// applied to each part as it is handed out).
    pub fn keep_queues(&mut self, keep: &[u16]) {
        match &mut self.store {
            Store::Whole(history) => history.keep_queues(keep),
            Store::Files { .. } => self.keep = Some(keep.to_vec()),
        }
    }

    /// Hands each part to `f` in turn, as `f(index, count, part)`: part `index` holds every
    /// event of the jobs whose number is `index` modulo `count`, and every unknown-outcome
    /// claim. Stops at `f`'s first error.
    ///
    /// Errors: I/O reading a part file back; `f`'s own.
    pub fn each<E: From<HistoryFileError>>(
        &self,
        mut f: impl FnMut(usize, usize, &History) -> Result<(), E>,
    ) -> Result<(), E> {
        let (_dir, paths) = match &self.store {
            Store::Whole(history) => return f(0, 1, history),
            Store::Files { _dir, paths } => (_dir, paths),
        };
        for (index, at) in paths.iter().enumerate() {
            let mut part = self.read_part(at)?;
            if let Some(keep) = &self.keep {
                part.keep_queues(keep);
            }
            f(index, paths.len(), &part)?;
        }
        Ok(())
    }

    /// One part file read back and sorted, with the unknown-outcome claims.
    fn read_part(&self, at: &Path) -> Result<History, HistoryFileError> {
        let bytes = std::fs::read(at).map_err(|source| HistoryFileError::Io { path: at.to_path_buf(), source })?;
        let mut events = Vec::with_capacity(bytes.len() / 16 + self.unknown.len());
        let mut from = 0;
        while from < bytes.len() {
            let (event, stream, len) = decode(&bytes[from..]).ok_or_else(|| HistoryFileError::Truncated {
                path: at.to_path_buf(),
                size: bytes.len() as u64,
                expected: format!("an event record at byte {from} (the part file is corrupt from there)"),
            })?;
            let shard = self.header.stream_shards.get(stream as usize).copied();
            events.push(Event { shard, ..event });
            from += len;
        }
        events.extend_from_slice(&self.unknown);
        events.par_sort_unstable_by_key(|e| (e.job, e.sent_us, e.done_us));
        Ok(History { header: self.header.clone(), events, encoded_bytes: self.encoded_bytes })
    }
}

/// Removes the part folders in `dir` whose process is gone (a check killed before it
/// removed its own); what cannot be removed stays.
fn remove_left_over(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(FOLDER_PREFIX)) else { continue };
        let Some(pid) = rest.split('.').next().and_then(|p| p.parse::<u32>().ok()) else { continue };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A stream that does not decode (`stream`: 0-based, in file order, when known), as the file
/// error naming it.
fn undecodable(path: &Path, stream: Option<u32>, e: super::DecodeError) -> HistoryFileError {
    let which = stream.map_or("a stream".to_string(), |s| format!("stream {}", s + 1));
    HistoryFileError::Decode { path: path.to_path_buf(), which, source: e }
}

/// The LEB128 varint at `bytes[*at..]`, moving `at` past it; `None` when cut or too long.
fn get(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*at)?;
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

/// `e` (from stream `stream`) as a part file's record in `out`; returns its length. A byte
/// `kind << 5 | outcome`, a flags byte (bit 0: a worker, bit 1: a holder), then varints: job,
/// queue, token, the worker and the holder (when there are), the stream, the id's time, the send time and the reply
/// time's zigzag difference from it. About 18 bytes for a claim or a complete, 25 for an
/// enqueue.
fn encode(e: &Event, stream: u32, out: &mut [u8; RECORD_MAX]) -> usize {
    out[0] = (e.kind as u8) << 5 | e.outcome.bits();
    out[1] = u8::from(e.worker.is_some()) | u8::from(e.holder.is_some()) << 1;
    let mut at = 2;
    at = put(out, at, u64::from(e.job));
    at = put(out, at, u64::from(e.queue));
    at = put(out, at, u64::from(e.token));
    if let Some(worker) = e.worker {
        at = put(out, at, u64::from(worker));
    }
    if let Some(holder) = e.holder {
        at = put(out, at, holder.get());
    }
    at = put(out, at, u64::from(stream));
    at = put(out, at, e.id_ms);
    at = put(out, at, e.sent_us);
    let took = e.done_us.wrapping_sub(e.sent_us) as i64;
    put(out, at, ((took << 1) ^ (took >> 63)) as u64)
}

/// The record at the start of `bytes`: its event (no shard yet), its stream and its length;
/// `None` when it is cut or its kind, outcome or a number is not one this build writes.
fn decode(bytes: &[u8]) -> Option<(Event, u32, usize)> {
    let (&head, &flags) = (bytes.first()?, bytes.get(1)?);
    let mut at = 2;
    let mut next = || get(bytes, &mut at);
    let job = u32::try_from(next()?).ok()?;
    let queue = u16::try_from(next()?).ok()?;
    let token = u32::try_from(next()?).ok()?;
    let worker = if flags & 1 == 1 { Some(u32::try_from(next()?).ok()?) } else { None };
    let holder = if flags & 2 == 2 { Some(std::num::NonZeroU64::new(next()?)?) } else { None };
    let stream = u32::try_from(next()?).ok()?;
    let id_ms = next()?;
    let sent_us = next()?;
    let zig = next()?;
    let took = ((zig >> 1) as i64) ^ -((zig & 1) as i64);
    let event = Event {
        job,
        kind: Kind::from_bits(head >> 5)?,
        outcome: Outcome::from_bits(head & 0x1f)?,
        token,
        queue,
        id_ms,
        sent_us,
        done_us: sent_us.wrapping_add(took as u64),
        worker,
        holder,
        shard: None,
    };
    Some((event, stream, at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{HistoryBuf, HistoryHeader};
    use crate::lua::ErrorCode;
    use std::time::{Duration, Instant};

    /// Two threads' streams: 40 jobs each enqueued, claimed and completed (thread 1 with a
    /// refusal and a fail), plus one unknown-outcome claim per thread.
    fn streams() -> Vec<Vec<u8>> {
        let start = Instant::now();
        let at = |us: u64| start + Duration::from_micros(us);
        (0..2u32)
            .flat_map(|thread| {
                let mut buf = HistoryBuf::new(start);
                for job in (0..40).map(|j| j * 2 + thread) {
                    let t = u64::from(job) * 100;
                    buf.push_enqueue(
                        job,
                        Kind::Enqueue,
                        Outcome::Ok,
                        0xdead_beef,
                        (job % 3) as u16,
                        1_700_000_000_000 + t,
                        at(t),
                        5,
                    );
                    buf.push(job, Kind::Claim, Outcome::Ok, 1, Some(thread * 7), at(t + 10), 5);
                    if thread == 1 && job % 5 == 0 {
                        buf.push(job, Kind::Fail, Outcome::Refused(ErrorCode::Fence), 1, Some(9), at(t + 20), 5);
                        buf.push(job, Kind::Fail, Outcome::Alt, 1, None, at(t + 25), 5);
                    } else {
                        buf.push(job, Kind::Complete, Outcome::Ok, 1, Some(thread * 7), at(t + 30), 5);
                    }
                }
                buf.push(UNKNOWN_JOB, Kind::Claim, Outcome::Unknown, 0, None, at(9_000 + u64::from(thread)), 2);
                buf.take()
            })
            .collect()
    }

    fn header() -> HistoryHeader {
        HistoryHeader {
            queues: vec!["a".into(), "b".into(), "c".into()],
            stream_shards: vec![4, 5],
            ..HistoryHeader::for_tests(80)
        }
    }

    /// Every part's events, in part order.
    fn parts_events(parts: &HistoryParts) -> Vec<(usize, usize, Vec<Event>)> {
        let mut out = Vec::new();
        parts
            .each(|index, count, part| {
                out.push((index, count, part.events.clone()));
                Ok::<(), HistoryFileError>(())
            })
            .unwrap();
        out
    }

    #[test]
    fn parts_hold_each_job_whole_in_one_part_and_every_unknown_claim() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.bin");
        file::save(&path, &header(), &streams()).unwrap();
        let whole = History::merge(header(), &streams()).unwrap();

        let parts = HistoryParts::read(&path, 200, dir.path()).unwrap();
        assert!(parts.count() > 3, "{} parts", parts.count());
        assert_eq!(parts.encoded_bytes(), whole.encoded_bytes);
        let read = parts_events(&parts);
        assert_eq!(read.len(), parts.count());
        let mut known = Vec::new();
        for (index, count, events) in &read {
            let (unknown, jobs): (Vec<&Event>, Vec<&Event>) = events.iter().partition(|e| e.job == UNKNOWN_JOB);
            assert!(jobs.iter().all(|e| e.job as usize % count == *index), "part {index}");
            // Sorted as a merged history is, the unknown claims last, with their shards.
            assert!(events.windows(2).all(|w| (w[0].job, w[0].sent_us) <= (w[1].job, w[1].sent_us)));
            assert_eq!(unknown.iter().map(|e| e.shard).collect::<Vec<_>>(), [Some(4), Some(5)]);
            known.extend(jobs.into_iter().copied());
        }
        known.sort_by_key(|e| (e.job, e.sent_us, e.done_us));
        let whole_known: Vec<Event> = whole.events.iter().filter(|e| e.job != UNKNOWN_JOB).copied().collect();
        assert_eq!(known, whole_known, "every event once, worker, outcome and shard kept");

        // A budget the history fits: one part, as merged in memory.
        let one = HistoryParts::read(&path, 1 << 30, dir.path()).unwrap();
        assert_eq!(one.count(), 1);
        assert_eq!(parts_events(&one), vec![(0, 1, whole.events.clone())]);
        // The part files live only as long as the parts.
        drop(parts);
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(left, ["history.bin"]);
    }

    #[test]
    fn a_subset_of_queues_is_kept_in_every_part() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.bin");
        file::save(&path, &header(), &streams()).unwrap();
        let mut parts = HistoryParts::read(&path, 200, dir.path()).unwrap();
        parts.keep_queues(&[1]);
        for (_, _, events) in parts_events(&parts) {
            let enqueues = events.iter().filter(|e| e.kind == Kind::Enqueue);
            assert!(enqueues.clone().all(|e| e.queue == 1));
            let jobs: std::collections::HashSet<u32> = enqueues.map(|e| e.job).collect();
            assert!(events.iter().all(|e| e.job == UNKNOWN_JOB || jobs.contains(&e.job)));
        }
    }

    #[test]
    fn the_part_count_follows_the_file_size_and_the_budget() {
        let event = std::mem::size_of::<Event>() as u64;
        assert_eq!(parts_for(0, 1), 1);
        assert_eq!(parts_for(5 * 1000, 1000 * event), 1);
        assert_eq!(parts_for(5 * 1001, 1000 * event), 2);
        assert_eq!(parts_for(u64::MAX, 1), MAX_PARTS);
    }

    #[test]
    fn records_round_trip_every_field() {
        let e = Event {
            job: 0xfeed_f00d,
            kind: Kind::Progress,
            outcome: Outcome::Refused(ErrorCode::State),
            token: 77,
            queue: 65_000,
            id_ms: u64::MAX - 3,
            sent_us: 1 << 40,
            done_us: (1 << 40) + 9,
            worker: Some(0),
            holder: None,
            shard: None,
        };
        let mut out = [0u8; RECORD_MAX];
        let len = encode(&e, 12, &mut out);
        assert_eq!(decode(&out[..len]), Some((e, 12, len)));
        assert_eq!(decode(&out[..len - 1]), None, "a record cut short");
        let claim = Event { kind: Kind::Claim, outcome: Outcome::Ok, holder: std::num::NonZeroU64::new(u64::MAX), ..e };
        let len = encode(&claim, 3, &mut out);
        assert_eq!(decode(&out[..len]), Some((claim, 3, len)), "a claim keeps its holder");
        let none = Event { worker: None, outcome: Outcome::Unknown, done_us: e.sent_us - 5, ..e };
        let len = encode(&none, 0, &mut out);
        assert_eq!(decode(&out[..len]), Some((none, 0, len)), "a reply read before the send");
        out[0] = (Kind::Retire as u8) << 5 | 30;
        assert_eq!(decode(&out[..len]), None, "an unknown outcome");
    }
}
