//! The history written to disk as the run records it: each load thread hands over every chunk
//! it closes (a full one, or the one it closes each second), a writer thread of its own appends
//! it to `history.bin`, so the run's memory holds no history it has closed, and a run killed
//! outright leaves every chunk up to about a second before the kill on disk.
//!
//! The file is the streamed layout of [`super::file`] (magic `EMQHIST6`): a first header that
//! says the run has not ended (`complete: false`), the chunks as they come, and the final
//! header at the end. A file without its final header is a run that ended without one.

use super::file::{segment_path, HistoryFileError, RECORD_HEADER, RECORD_STREAM, STREAMED_MAGIC};
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

/// What decides, in the writer's own thread, which events of each chunk are written: the
/// history then keeps what the filter gives back instead of every chunk (`--keep-history
/// violations`: the live check keeps the events of jobs it could not pass). The filter sees
/// every chunk, in the order the load threads handed them over, and none is ever skipped.
pub trait ChunkFilter: Send {
    /// What to write of `chunk` (a stream in this build's encoding) that came at `now`:
    /// streams in that encoding, none for nothing.
    fn chunk(&mut self, chunk: Vec<u8>, now: Instant) -> Vec<Vec<u8>>;
    /// What to write of what became due by `now`; called at least every [`TICK`].
    fn tick(&mut self, now: Instant) -> Vec<Vec<u8>>;
    /// What is left to write once the run's last chunk came (before the final header).
    fn finish(&mut self) -> Vec<Vec<u8>>;
}

/// How often a filter's [`ChunkFilter::tick`] runs when no chunk comes.
pub const TICK: Duration = Duration::from_millis(250);

/// The most bytes one segment of the history holds before the writer starts the next one.
pub const SEGMENT_BYTES: u64 = 256 << 20;

/// How a run's history is written.
pub struct SpoolOptions {
    /// Where each chunk goes once written (the live check reading beside the file).
    pub tap: Option<ChunkTap>,
    /// What decides which events are written (the live check in the writer's thread).
    pub filter: Option<Box<dyn ChunkFilter>>,
    /// Bytes after which the next segment starts ([`SEGMENT_BYTES`]).
    pub segment_bytes: u64,
}

impl Default for SpoolOptions {
    fn default() -> SpoolOptions {
        SpoolOptions { tap: None, filter: None, segment_bytes: SEGMENT_BYTES }
    }
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
    /// Encoded history the load threads handed over, bytes: `stream_bytes` unless a filter
    /// kept less.
    pub recorded_bytes: u64,
    /// Files the history takes (`history.bin` and the segments after it).
    pub segments: u32,
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
        HistorySpool::start_with(path, header, SpoolOptions::default())
    }

    /// [`start`](Self::start) with `options`: a tap, a filter, the segments' size.
    ///
    /// Errors: as [`start`](Self::start).
    pub fn start_with(
        path: &Path,
        header: &HistoryHeader,
        options: SpoolOptions,
    ) -> Result<HistorySpool, HistoryFileError> {
        let first = HistoryHeader { complete: false, ..header.clone() };
        let out = Segments::create(path, first, options.segment_bytes)?;
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("history-spool".into())
            .spawn(move || write_loop(out, rx, options.tap, options.filter))
            .map_err(|source| HistoryFileError::Io { path: path.to_path_buf(), source })?;
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

/// The history's files as the writer fills them: the segment being written, and what starts
/// the next one (see [`super::file::segment_path`]).
struct Segments {
    first: PathBuf,
    /// The header each segment starts with (the run's start header, marked incomplete).
    header: HistoryHeader,
    out: BufWriter<File>,
    /// The segment being written (0: `first`).
    index: u32,
    written: u64,
    limit: u64,
}

impl Segments {
    /// Creates the first segment (refusing a file that exists) with its magic and header.
    fn create(first: &Path, header: HistoryHeader, limit: u64) -> Result<Segments, HistoryFileError> {
        let out = Segments::open(first, &header)?;
        Ok(Segments { first: first.to_path_buf(), header, out, index: 0, written: 0, limit: limit.max(1) })
    }

    fn open(path: &Path, header: &HistoryHeader) -> Result<BufWriter<File>, HistoryFileError> {
        let io = |source| HistoryFileError::Io { path: path.to_path_buf(), source };
        let file = File::options().write(true).create_new(true).open(path).map_err(io)?;
        let mut out = BufWriter::with_capacity(1 << 16, file);
        out.write_all(STREAMED_MAGIC).map_err(io)?;
        write_header(&mut out, header).map_err(io)?;
        out.flush().map_err(io)?;
        Ok(out)
    }

    fn path(&self) -> PathBuf {
        segment_path(&self.first, self.index)
    }

    fn io(&self, source: std::io::Error) -> HistoryFileError {
        HistoryFileError::Io { path: self.path(), source }
    }

    /// Appends one stream record (`S` · u64 LE length · bytes), flushed at once (the page cache
    /// holds it when the process is killed); starts the next segment first when this one is
    /// full, syncing the one it closes.
    fn stream(&mut self, chunk: &[u8]) -> Result<(), HistoryFileError> {
        if self.written >= self.limit {
            self.out.flush().and_then(|()| self.out.get_ref().sync_all()).map_err(|e| self.io(e))?;
            self.index += 1;
            self.out = Segments::open(&self.path(), &self.header)?;
            self.written = 0;
        }
        (|| {
            self.out.write_all(&[RECORD_STREAM])?;
            self.out.write_all(&(chunk.len() as u64).to_le_bytes())?;
            self.out.write_all(chunk)?;
            self.out.flush()
        })()
        .map_err(|e| self.io(e))?;
        self.written += chunk.len() as u64;
        Ok(())
    }

    /// Appends the final header record.
    fn end(&mut self, header: &HistoryHeader) -> Result<(), HistoryFileError> {
        write_header(&mut self.out, header).and_then(|()| self.out.flush()).map_err(|e| self.io(e))
    }

    fn sync_data(&self) -> Result<(), HistoryFileError> {
        self.out.get_ref().sync_data().map_err(|e| self.io(e))
    }

    fn sync_all(&self) -> Result<(), HistoryFileError> {
        self.out.get_ref().sync_all().map_err(|e| self.io(e))
    }
}

/// `H` · u32 LE length · the header's JSON.
fn write_header(out: &mut impl Write, header: &HistoryHeader) -> std::io::Result<()> {
    let json = serde_json::to_vec(header).expect("a header serializes");
    out.write_all(&[RECORD_HEADER])?;
    out.write_all(&(json.len() as u32).to_le_bytes())?;
    out.write_all(&json)
}

/// The writer thread: appends every chunk (or what the filter keeps of it) as a stream record
/// and syncs every [`SYNC_EVERY`]. After a failed write it keeps receiving (so the load
/// threads never block or hold their chunks) and drops what it receives.
fn write_loop(
    mut out: Segments,
    rx: mpsc::Receiver<Spooled>,
    tap: Option<ChunkTap>,
    mut filter: Option<Box<dyn ChunkFilter>>,
) -> Result<SpoolTotals, HistoryFileError> {
    let mut totals = SpoolTotals { stream_bytes: 0, streams: 0, recorded_bytes: 0, segments: 1 };
    let mut failed: Option<HistoryFileError> = None;
    let mut synced = Instant::now();
    let mut ticked = Instant::now();
    loop {
        let msg = match rx.recv_timeout(TICK) {
            Ok(msg) => Some(msg),
            Err(mpsc::RecvTimeoutError::Timeout) => None,
            // Every sender gone without the end: the run was dropped (a panic, an abort). A
            // filter's open jobs are still written: they may hold the evidence.
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                if let Some(filter) = filter.as_mut() {
                    filter.finish().iter().for_each(|kept| put(&mut out, &mut totals, kept, &mut failed));
                }
                break;
            }
        };
        let now = Instant::now();
        match msg {
            Some(Spooled::Stream(chunk)) => {
                totals.recorded_bytes += chunk.len() as u64;
                match filter.as_mut() {
                    Some(filter) => {
                        filter.chunk(chunk, now).iter().for_each(|kept| put(&mut out, &mut totals, kept, &mut failed))
                    }
                    None => {
                        put(&mut out, &mut totals, &chunk, &mut failed);
                        // The tap reads the chunk whether or not the disk took it.
                        if let Some(tap) = &tap {
                            hand(tap, chunk);
                        }
                    }
                }
            }
            Some(Spooled::End(header)) => {
                if let Some(filter) = filter.as_mut() {
                    filter.finish().iter().for_each(|kept| put(&mut out, &mut totals, kept, &mut failed));
                }
                if failed.is_none() {
                    if let Err(err) = out.end(&header) {
                        failed = Some(err);
                    }
                }
                // The final header is the last record, whatever a sender still held sends after it.
                break;
            }
            None => {}
        }
        if let Some(filter) = filter.as_mut().filter(|_| now.duration_since(ticked) >= TICK) {
            filter.tick(now).iter().for_each(|kept| put(&mut out, &mut totals, kept, &mut failed));
            ticked = now;
        }
        if failed.is_none() && synced.elapsed() >= SYNC_EVERY {
            if let Err(err) = out.sync_data() {
                failed = Some(err);
            }
            synced = Instant::now();
        }
    }
    if let Some(err) = failed {
        return Err(err);
    }
    out.sync_all()?;
    Ok(totals)
}

/// Writes `bytes` as one stream record unless empty or a write failed before; a failure is kept
/// in `failed`.
fn put(out: &mut Segments, totals: &mut SpoolTotals, bytes: &[u8], failed: &mut Option<HistoryFileError>) {
    if bytes.is_empty() || failed.is_some() {
        return;
    }
    match out.stream(bytes) {
        Ok(()) => {
            totals.stream_bytes += bytes.len() as u64;
            totals.streams += 1;
            totals.segments = out.index + 1;
        }
        Err(err) => *failed = Some(err),
    }
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

    /// A history larger than a segment is written as several files (`history.bin`,
    /// `history.1.bin`, ...); every reader reads them in turn, under the last header; a filter
    /// decides what is written.
    #[test]
    fn a_history_in_segments_reads_back_whole() {
        struct Evens;
        impl ChunkFilter for Evens {
            fn chunk(&mut self, chunk: Vec<u8>, _: Instant) -> Vec<Vec<u8>> {
                let events = crate::history::buffer::decode(&chunk).unwrap();
                let evens: Vec<_> = events.into_iter().filter(|e| e.job % 2 == 0).collect();
                crate::history::buffer::encode_events(&evens)
            }
            fn tick(&mut self, _: Instant) -> Vec<Vec<u8>> {
                Vec::new()
            }
            fn finish(&mut self) -> Vec<Vec<u8>> {
                Vec::new()
            }
        }
        for filter in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("history.bin");
            let options = SpoolOptions {
                segment_bytes: 40,
                filter: filter.then(|| Box::new(Evens) as Box<dyn ChunkFilter>),
                ..SpoolOptions::default()
            };
            let spool =
                HistorySpool::start_with(&path, &HistoryHeader { drained: false, ..header() }, options).unwrap();
            let start = std::time::Instant::now();
            let spill = spool.spill();
            for chunk in 0..6u32 {
                let mut buf = HistoryBuf::new(start);
                for job in chunk * 10..chunk * 10 + 10 {
                    buf.push(job, Kind::Progress, Outcome::Ok, 1, None, start, 0);
                }
                buf.take().into_iter().for_each(|s| spill.send(s).unwrap());
            }
            let totals = spool.finish(Vec::new(), &header()).unwrap();
            assert!(totals.segments >= 3, "{totals:?}");
            assert!(dir.path().join("history.2.bin").exists());
            assert_eq!(
                crate::history::file::history_bytes(&path).unwrap(),
                (0..totals.segments).map(|k| std::fs::metadata(segment_path(&path, k)).unwrap().len()).sum::<u64>()
            );
            let (read, streams) = load(&path).unwrap();
            assert_eq!(read, header(), "the last segment's final header");
            let jobs: Vec<u32> =
                streams.iter().flat_map(|s| crate::history::buffer::decode(s).unwrap()).map(|e| e.job).collect();
            let want: Vec<u32> = (0..60).filter(|j| !filter || j % 2 == 0).collect();
            assert_eq!(jobs, want);
            assert_eq!(totals.recorded_bytes > totals.stream_bytes, filter, "{totals:?}");
        }
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
