//! The history written to disk as the run records it: each load thread hands over every chunk
//! it closes (a full one, or the one it closes each second), a writer thread of its own appends
//! it to `history.bin`, so the run's memory holds no history it has closed, and a run killed
//! outright leaves every chunk up to about a second before the kill on disk.
//!
//! The file is the streamed layout of [`super::file`] (magic `EMQHIST4`): a first header that
//! says the run has not ended (`complete: false`), the chunks as they come, and the final
//! header at the end. A file without its final header is a run that ended without one.

use super::file::{HistoryFileError, RECORD_HEADER, RECORD_STREAM, STREAMED_MAGIC};
use super::HistoryHeader;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the written part is synced to the disk: what a crash of the machine (not only of
/// the process) may lose, against one fsync per chunk.
const SYNC_EVERY: Duration = Duration::from_secs(5);

/// What the writer thread receives.
enum Spooled {
    /// One closed chunk, a stream of its own.
    Stream(Vec<u8>),
    /// The run's final header: the last record, then the thread ends.
    End(Box<HistoryHeader>),
}

/// Where the writer hands each chunk once it is written: a bounded channel to a reader of its
/// own (the live check). The writer never waits for it: a chunk the reader has no room for is
/// counted in `skipped` and dropped (the file has it).
pub struct ChunkTap {
    /// The reader's end.
    pub tx: mpsc::SyncSender<Vec<u8>>,
    /// Chunks dropped because the reader was behind.
    pub skipped: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

/// The load threads' side of the spool: cheap to clone, one per thread. A chunk sent after the
/// spool ended is dropped (and counted nowhere: the spool ends after every load thread did).
#[derive(Clone)]
pub struct HistorySpill {
    tx: mpsc::Sender<Spooled>,
}

impl HistorySpill {
    /// Hands a closed chunk to the writer; gives it back when the writer is gone.
    pub(crate) fn send(&self, chunk: Vec<u8>) -> Result<(), Vec<u8>> {
        self.tx.send(Spooled::Stream(chunk)).map_err(|mpsc::SendError(msg)| match msg {
            Spooled::Stream(chunk) => chunk,
            Spooled::End(_) => unreachable!("only streams are sent here"),
        })
    }
}

/// What the spool wrote, once it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpoolTotals {
    /// Encoded history written, bytes (the streams' bytes, no framing).
    pub stream_bytes: u64,
    /// Streams (chunks) written.
    pub streams: u64,
}

/// The writer of one run's `history.bin`.
pub struct HistorySpool {
    tx: mpsc::Sender<Spooled>,
    thread: JoinHandle<Result<SpoolTotals, HistoryFileError>>,
    path: PathBuf,
}

impl HistorySpool {
    /// Creates `path` (refusing one that exists), writes the magic and `header` (marked
    /// incomplete) and starts the writer thread.
    ///
    /// Errors: the file cannot be created or written ([`HistoryFileError::Io`], naming it).
    pub fn start(path: &Path, header: &HistoryHeader) -> Result<HistorySpool, HistoryFileError> {
        HistorySpool::start_tapped(path, header, None)
    }

    /// [`start`](Self::start), handing each chunk to `tap` once it is written.
    ///
    /// Errors: as [`start`](Self::start).
    pub fn start_tapped(
        path: &Path,
        header: &HistoryHeader,
        tap: Option<ChunkTap>,
    ) -> Result<HistorySpool, HistoryFileError> {
        let io = |source| HistoryFileError::Io { path: path.to_path_buf(), source };
        let file = File::options().write(true).create_new(true).open(path).map_err(io)?;
        let mut out = BufWriter::with_capacity(1 << 16, file);
        out.write_all(STREAMED_MAGIC).map_err(io)?;
        let first = HistoryHeader { complete: false, ..header.clone() };
        write_header(&mut out, &first).map_err(io)?;
        out.flush().map_err(io)?;
        let (tx, rx) = mpsc::channel();
        let owned = path.to_path_buf();
        let thread = std::thread::Builder::new()
            .name("history-spool".into())
            .spawn(move || write_loop(out, rx, &owned, tap))
            .map_err(io)?;
        Ok(HistorySpool { tx, thread, path: path.to_path_buf() })
    }

    /// A sender for one load thread.
    pub fn spill(&self) -> HistorySpill {
        HistorySpill { tx: self.tx.clone() }
    }

    /// Appends `streams` (what the load threads still held at their end), then the final
    /// `header`, syncs and closes the file. Call it after every load thread ended.
    ///
    /// Errors: the first write that failed during the run or now (a full disk), naming the
    /// file; every chunk after it was dropped, so the run's memory did not grow.
    pub fn finish(self, streams: Vec<Vec<u8>>, header: &HistoryHeader) -> Result<SpoolTotals, HistoryFileError> {
        for stream in streams.into_iter().filter(|s| !s.is_empty()) {
            let _ = self.tx.send(Spooled::Stream(stream));
        }
        let _ = self.tx.send(Spooled::End(Box::new(HistoryHeader { complete: true, ..header.clone() })));
        drop(self.tx);
        match self.thread.join() {
            Ok(written) => written,
            Err(_) => Err(HistoryFileError::Io {
                path: self.path,
                source: std::io::Error::other("the history writer thread panicked"),
            }),
        }
    }
}

/// `H` · u32 LE length · the header's JSON.
fn write_header(out: &mut impl Write, header: &HistoryHeader) -> std::io::Result<()> {
    let json = serde_json::to_vec(header).expect("a header serializes");
    out.write_all(&[RECORD_HEADER])?;
    out.write_all(&(json.len() as u32).to_le_bytes())?;
    out.write_all(&json)
}

/// The writer thread: appends every chunk as `S` · u64 LE length · bytes, flushed at once (the
/// page cache holds it when the process is killed) and synced every [`SYNC_EVERY`]. After a
/// failed write it keeps receiving (so the load threads never block or hold their chunks) and
/// drops what it receives.
fn write_loop(
    mut out: BufWriter<File>,
    rx: mpsc::Receiver<Spooled>,
    path: &Path,
    tap: Option<ChunkTap>,
) -> Result<SpoolTotals, HistoryFileError> {
    let io = |source| HistoryFileError::Io { path: path.to_path_buf(), source };
    let mut totals = SpoolTotals { stream_bytes: 0, streams: 0 };
    let mut failed: Option<std::io::Error> = None;
    let mut synced = Instant::now();
    for msg in rx {
        let end = matches!(msg, Spooled::End(_));
        let msg = match (msg, &tap) {
            // The tap reads the chunk whether or not the disk took it.
            (Spooled::Stream(chunk), Some(tap)) if failed.is_some() => {
                hand(tap, chunk);
                continue;
            }
            (msg, _) => msg,
        };
        if failed.is_some() {
            if end {
                break;
            }
            continue;
        }
        let written = match &msg {
            Spooled::Stream(chunk) => (|| {
                out.write_all(&[RECORD_STREAM])?;
                out.write_all(&(chunk.len() as u64).to_le_bytes())?;
                out.write_all(chunk)?;
                out.flush()
            })(),
            Spooled::End(header) => write_header(&mut out, header).and_then(|()| out.flush()),
        };
        match written {
            Ok(()) => {
                if let Spooled::Stream(chunk) = &msg {
                    totals.stream_bytes += chunk.len() as u64;
                    totals.streams += 1;
                }
            }
            Err(err) => failed = Some(err),
        }
        if synced.elapsed() >= SYNC_EVERY {
            if let Err(err) = out.get_ref().sync_data() {
                failed.get_or_insert(err);
            }
            synced = Instant::now();
        }
        if let (Spooled::Stream(chunk), Some(tap)) = (msg, &tap) {
            hand(tap, chunk);
        }
        // The final header is the last record, whatever a sender still held sends after it.
        if end {
            break;
        }
    }
    if let Some(err) = failed {
        return Err(io(err));
    }
    out.get_ref().sync_all().map_err(io)?;
    Ok(totals)
}

/// Hands `chunk` to the tap's reader, or counts it skipped when the reader is behind or gone.
fn hand(tap: &ChunkTap, chunk: Vec<u8>) {
    if tap.tx.try_send(chunk).is_err() {
        tap.skipped.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::file::load;
    use crate::history::{HistoryBuf, Kind, Outcome};

    fn header() -> HistoryHeader {
        HistoryHeader::for_tests(10)
    }

    /// A buffer that spills hands its chunks to the file as it closes them; the file reads
    /// back as the streams recorded, under the final header.
    #[test]
    fn a_spooled_history_reads_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.bin");
        let spool = HistorySpool::start(&path, &HistoryHeader { drained: false, ..header() }).unwrap();
        let start = std::time::Instant::now();
        let mut buf = HistoryBuf::spilling(start, spool.spill());
        for job in 1..=5 {
            buf.push(job, Kind::Progress, Outcome::Ok, 1, None, start, 0);
        }
        // A second later the chunk being written closes and goes to the file.
        buf.spill_due(start + Duration::from_secs(2));
        assert_eq!(buf.len(), 0, "nothing held once spilled");
        for job in 6..=8 {
            buf.push(job, Kind::Progress, Outcome::Ok, 1, None, start, 0);
        }
        let rest = buf.take();
        assert!(rest.is_empty(), "take spills too");
        let totals = spool.finish(rest, &header()).unwrap();
        assert_eq!(totals.streams, 2);
        let (read, streams) = load(&path).unwrap();
        assert_eq!(read, header());
        let events: Vec<u32> =
            streams.iter().flat_map(|s| crate::history::buffer::decode(s).unwrap()).map(|e| e.job).collect();
        assert_eq!(events, (1..=8).collect::<Vec<u32>>());
    }

    /// A file the run never finished (killed) reads up to its last whole record, under the
    /// start's header, marked incomplete; bytes cut anywhere never fail the read.
    #[test]
    fn a_killed_runs_history_reads_up_to_its_last_whole_record() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.bin");
        let spool = HistorySpool::start(&path, &header()).unwrap();
        let spill = spool.spill();
        spill.send(vec![0x60, 2, 1, 0, 0, 0]).unwrap();
        spill.send(vec![0x60, 4, 1, 0, 0, 0]).unwrap();
        // Dropped without its end: what a kill leaves.
        drop(spill);
        drop(spool);
        std::thread::sleep(Duration::from_millis(200));
        let bytes = std::fs::read(&path).unwrap();
        let (read, streams) = load(&path).unwrap();
        assert!(!read.complete, "{read:?}");
        assert_eq!(streams.len(), 2);
        let cut = dir.path().join("cut.bin");
        for len in 9..bytes.len() {
            std::fs::write(&cut, &bytes[..len]).unwrap();
            match load(&cut) {
                Ok((_, streams)) => assert!(streams.len() <= 2),
                Err(e) => assert!(len < bytes.len() - 2 * 15, "cut at {len}: {e}"),
            }
        }
        std::fs::write(&cut, &bytes[..bytes.len() - 3]).unwrap();
        assert_eq!(load(&cut).unwrap().1.len(), 1, "the cut record is left out");
    }
}
