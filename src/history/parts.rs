//! A history read back from `history.bin` in parts by job number, so checking it never holds
//! more of it than one part: part `i` of `n` holds every event of the jobs whose number is
//! `i` modulo `n` (a job's events are never split), each part sorted like a merged
//! [`History`]. A history that fits the memory it is given is one part, merged in memory
//! as before; a larger one is decoded stream by stream into `n` files of fixed-size
//! records in a temporary folder (beside the history, where its folder has room for it),
//! and each part is read back, sorted and handed out in turn.
//!
//! Claims whose outcome is unknown ([`UNKNOWN_JOB`]) belong to no job: every part gets them,
//! as a whole history has them.

use super::buffer::decode_version;
use super::event::{Event, Kind, Outcome, UNKNOWN_JOB};
use super::file::{self, HistoryFileError};
use super::{History, HistoryHeader};
use rayon::prelude::*;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// The fewest bytes one event takes in a stream (a fenced call of an encoding without a worker:
/// kind, job delta, token, send-time delta, duration, one byte each): a file of `b` bytes holds
/// at most `b / 5` events.
const MIN_EVENT_BYTES: u64 = 5;

/// The most parts a history is cut into (one open file each while it is cut).
pub const MAX_PARTS: usize = 256;

/// Bytes of one event in a part file: job u32, kind u8, outcome u8, flags u8 (bit 0: a
/// worker), queue u16, token u32, worker u32, stream u32, id time u64, sent u64, done u64 (LE).
const RECORD: usize = 45;

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
    /// Errors: the file's ([`file::load`]'s), a stream that does not decode (as
    /// [`HistoryFileError::Truncated`], naming it), and I/O on the part files.
    pub fn read(path: &Path, budget_bytes: u64, spill_dir: &Path) -> Result<HistoryParts, HistoryFileError> {
        let io = |at: &Path| {
            let at = at.to_path_buf();
            move |source| HistoryFileError::Io { path: at.clone(), source }
        };
        let size = std::fs::metadata(path).map_err(io(path))?.len();
        let count = parts_for(size, budget_bytes);
        if count == 1 {
            let (header, streams) = file::load(path)?;
            let history = History::merge(header, &streams).map_err(|e| undecodable(path, e))?;
            return Ok(HistoryParts::from(history));
        }
        let dir = tempfile::Builder::new().prefix(".history-parts.").tempdir_in(spill_dir).map_err(io(spill_dir))?;
        let paths: Vec<PathBuf> = (0..count).map(|i| dir.path().join(format!("part-{i:03}.bin"))).collect();
        let mut outs = paths
            .iter()
            .map(|p| std::fs::File::create(p).map(|f| BufWriter::with_capacity(1 << 16, f)).map_err(io(p)))
            .collect::<Result<Vec<_>, _>>()?;
        let mut unknown = Vec::new();
        let mut encoded_bytes = 0u64;
        let mut stream = 0u32;
        let header = file::each_stream(path, |version, bytes| {
            encoded_bytes += bytes.len() as u64;
            let events = decode_version(&bytes, version).map_err(|e| undecodable(path, e))?;
            for e in events {
                if e.job == UNKNOWN_JOB {
                    unknown.push((e, stream));
                    continue;
                }
                let part = e.job as usize % count;
                outs[part].write_all(&encode(&e, stream)).map_err(io(&paths[part]))?;
            }
            stream += 1;
            Ok(())
        })?;
        for (out, at) in outs.into_iter().zip(&paths) {
            out.into_inner().map_err(|e| e.into_error()).and_then(|f| f.sync_data()).map_err(io(at))?;
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
        let io = |source| HistoryFileError::Io { path: at.to_path_buf(), source };
        let file = std::fs::File::open(at).map_err(io)?;
        let len = file.metadata().map_err(io)?.len() as usize;
        let mut input = BufReader::with_capacity(1 << 16, file);
        let mut events = Vec::with_capacity(len / RECORD + self.unknown.len());
        let mut record = [0u8; RECORD];
        for _ in 0..len / RECORD {
            input.read_exact(&mut record).map_err(io)?;
            let (event, stream) = decode(&record).ok_or_else(|| HistoryFileError::Truncated {
                path: at.to_path_buf(),
                size: len as u64,
                expected: format!("{RECORD}-byte event records (one does not decode)"),
            })?;
            let shard = self.header.stream_shards.get(stream as usize).copied();
            events.push(Event { shard, ..event });
        }
        events.extend_from_slice(&self.unknown);
        events.par_sort_unstable_by_key(|e| (e.job, e.sent_us, e.done_us));
        Ok(History { header: self.header.clone(), events, encoded_bytes: self.encoded_bytes })
    }
}

/// A stream that does not decode, as the file error naming it.
fn undecodable(path: &Path, e: super::DecodeError) -> HistoryFileError {
    HistoryFileError::Truncated {
        path: path.to_path_buf(),
        size: std::fs::metadata(path).map_or(0, |m| m.len()),
        expected: format!("streams that decode ({e})"),
    }
}

/// `e` (from stream `stream`) as a part file's record.
fn encode(e: &Event, stream: u32) -> [u8; RECORD] {
    let mut out = [0u8; RECORD];
    out[0..4].copy_from_slice(&e.job.to_le_bytes());
    out[4] = e.kind as u8;
    out[5] = e.outcome.bits();
    out[6] = u8::from(e.worker.is_some());
    out[7..9].copy_from_slice(&e.queue.to_le_bytes());
    out[9..13].copy_from_slice(&e.token.to_le_bytes());
    out[13..17].copy_from_slice(&e.worker.unwrap_or(0).to_le_bytes());
    out[17..21].copy_from_slice(&stream.to_le_bytes());
    out[21..29].copy_from_slice(&e.id_ms.to_le_bytes());
    out[29..37].copy_from_slice(&e.sent_us.to_le_bytes());
    out[37..45].copy_from_slice(&e.done_us.to_le_bytes());
    out
}

/// A record back as its event (no shard yet) and its stream; `None` when its kind or outcome
/// is not one this build writes.
fn decode(r: &[u8; RECORD]) -> Option<(Event, u32)> {
    let u32_at = |at: usize| u32::from_le_bytes([r[at], r[at + 1], r[at + 2], r[at + 3]]);
    let u64_at = |at: usize| u64::from_le_bytes(r[at..at + 8].try_into().expect("8 bytes"));
    let event = Event {
        job: u32_at(0),
        kind: Kind::from_bits(r[4])?,
        outcome: Outcome::from_bits(r[5])?,
        token: u32_at(9),
        queue: u16::from_le_bytes([r[7], r[8]]),
        id_ms: u64_at(21),
        sent_us: u64_at(29),
        done_us: u64_at(37),
        worker: (r[6] & 1 == 1).then(|| u32_at(13)),
        shard: None,
    };
    Some((event, u32_at(17)))
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
            shard: None,
        };
        assert_eq!(decode(&encode(&e, 12)), Some((e, 12)));
        let none = Event { worker: None, outcome: Outcome::Unknown, ..e };
        assert_eq!(decode(&encode(&none, 0)), Some((none, 0)));
        let mut bad = encode(&e, 0);
        bad[4] = 7;
        assert_eq!(decode(&bad), None, "an unknown kind");
    }
}
