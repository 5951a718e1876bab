//! The live folder's thread: appends each measured second to intervals.csv, latency.hlog and
//! queue.csv and each probe row to server.csv as they come, keeps the seconds' counts in the
//! scratch file, and rewrites summary.json every few seconds.

use super::spill::SecondsSpill;
use super::ThreadEnd;
use crate::lua::Script;
use crate::metrics::{
    growable, ClosedInterval, CompactHistogram, IntervalRecord, IntervalScript, JobCounter, RunMetrics, INTERVAL_US,
};
use crate::probe::Row;
use crate::report::hlog::LATENCY_HLOG;
use crate::report::intervals_csv::{write_second, Second};
use crate::report::queue_csv::QueueRow;
use crate::report::results::DepthSample;
use crate::report::run_summary::RunSummary;
use crate::report::server_csv::{self, SERVER_CSV};
use crate::report::{summarize, write_json, ReportError};
use crate::scenario::Stages;
use hdrhistogram::serialization::interval_log::{IntervalLogWriter, IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;
use std::collections::BTreeSet;
use std::fs::File;
use std::io::LineWriter;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant, SystemTime};

/// How often `summary.json` is rewritten and the appended files synced to the disk.
const REWRITE_EVERY: Duration = Duration::from_secs(3);
/// How long the thread waits for a second before it looks at the depths and the stop flag.
const POLL: Duration = Duration::from_millis(200);
/// Depth readings kept for the seconds not closed yet (the reporter closes a second about
/// 2 s after its end; one reading a second).
const DEPTHS_KEPT: usize = 16;

/// The thread's state.
pub(super) struct Writing {
    pub(super) dir: PathBuf,
    pub(super) summary: RunSummary,
    pub(super) stages: Option<Stages>,
    pub(super) intervals: mpsc::Receiver<ClosedInterval>,
    pub(super) depths: mpsc::Receiver<DepthSample>,
    pub(super) server: mpsc::Receiver<Row>,
    pub(super) stop: Arc<AtomicBool>,
    /// The scratch file of the seconds' counts, appended as each second closes.
    pub(super) seconds: Option<SecondsSpill>,
}

/// The running totals: a [`RunMetrics`] without its series.
struct Totals {
    metrics: RunMetrics,
    /// The scripts called so far, in [`Script`] order: intervals.csv's rows of each second.
    called: Vec<Script>,
}

impl Totals {
    /// Nothing yet, of a run whose first closed second is `first`.
    fn starting(first: &ClosedInterval) -> Totals {
        let metrics = RunMetrics {
            start_wall: first.start_wall,
            warmup_intervals: first.warmup_intervals,
            measured_us: 0,
            scripts: Vec::new(),
            intervals: Vec::new(),
            jobs: [0; JobCounter::COUNT],
            warmup_jobs: [0; JobCounter::COUNT],
        };
        Totals { metrics, called: Vec::new() }
    }

    fn add(&mut self, closed: &ClosedInterval) {
        let rec = &closed.record;
        let m = &mut self.metrics;
        m.start_wall = closed.start_wall;
        m.warmup_intervals = closed.warmup_intervals;
        m.measured_us = m.measured_us.max((rec.index + 1).saturating_sub(closed.warmup_intervals) * INTERVAL_US);
        for (total, add) in m.jobs.iter_mut().zip(rec.jobs) {
            *total += add;
        }
        for s in &rec.scripts {
            let t = m.script_mut(s.script);
            t.add_counts(s.ok, s.late, &s.errors);
            if let Ok(h) = s.latency.decode() {
                // Both grow (`new_histogram`, `growable`): adding cannot fail.
                let _ = t.latency.add(growable(h));
            }
            if let Err(at) = self.called.binary_search_by_key(&s.script.index(), |c| c.index()) {
                self.called.insert(at, s.script);
            }
        }
    }
}

/// What the thread appends to, opened at the first second (the hlog's header needs the run's
/// start).
struct Appended {
    intervals: csv::Writer<File>,
    queue: csv::Writer<File>,
    server: csv::Writer<File>,
    /// Handles of every appended file, to sync them.
    sync: Vec<File>,
}

/// latency.hlog as the thread appends to it.
type Hlog<'a, 'b> = IntervalLogWriter<'a, 'b, LineWriter<File>, V2DeflateSerializer>;

/// Adds a line to `errors` saying `path` could not be written, once per distinct line.
fn fail(errors: &mut Vec<String>, path: &Path, why: impl std::fmt::Display) {
    let line = format!("cannot write {} while the run went: {why}", path.display());
    if !errors.contains(&line) {
        errors.push(line);
    }
}

impl Writing {
    /// The thread: returns the files it could not write and the seconds the scratch file did
    /// not take. Every second the reporter sent is in one or the other: the thread ends only
    /// once it is told to stop and the channel is empty.
    pub(super) fn run(mut self) -> ThreadEnd {
        let mut end = ThreadEnd::default();
        let Some(first) = self.wait_first() else { return end };
        // Files that cannot be made leave the thread keeping the seconds for the end only.
        let (mut files, mut hlog_file) = match self.open_files() {
            Ok((files, hlog_file)) => (Some(files), Some(hlog_file)),
            Err((path, e)) => {
                fail(&mut end.errors, &path, e);
                (None, None)
            }
        };
        let mut serializer = V2DeflateSerializer::new();
        let mut hlog = hlog_file.as_mut().and_then(|hlog_file| {
            let begun = begin_hlog(hlog_file, &mut serializer, first.start_wall);
            begun.map_err(|e| fail(&mut end.errors, &self.dir.join(LATENCY_HLOG), e)).ok()
        });
        let mut totals = Totals::starting(&first);
        let mut depths: Vec<DepthSample> = Vec::new();
        let mut pending = Some(first);
        let mut rewritten = Instant::now();
        loop {
            let closed = match pending.take() {
                Some(closed) => Some(closed),
                None => match self.next_second() {
                    Ok(closed) => closed,
                    Err(Ended) => break,
                },
            };
            depths.extend(self.depths.try_iter());
            let keep_from = depths.len().saturating_sub(DEPTHS_KEPT);
            depths.drain(..keep_from);
            self.append_server_rows(files.as_mut(), totals.metrics.start_wall, &mut end.errors);
            let got = closed.is_some();
            if let Some(closed) = closed {
                totals.add(&closed);
                self.spill(&closed.record, &mut end);
                if let Some(files) = files.as_mut() {
                    let appending = Appending { rec: &closed.record, called: &totals.called, depths: &depths };
                    self.append_second(files, hlog.as_mut(), appending, &mut end.errors);
                }
            }
            if rewritten.elapsed() >= REWRITE_EVERY {
                rewritten = Instant::now();
                self.rewrite_summary_or_fail(&totals, &mut end.errors);
                for file in files.iter().flat_map(|f| &f.sync) {
                    let _ = file.sync_data();
                }
            }
            if self.stop.load(Ordering::Relaxed) && !got {
                // Told to stop: every second the reporter sent is in the channel by now.
                match self.intervals.try_recv() {
                    Ok(closed) => pending = Some(closed),
                    Err(_) => break,
                }
            }
        }
        self.rewrite_summary_or_fail(&totals, &mut end.errors);
        end
    }

    /// Waits for the first measured second; `None` when the run ends before one closes.
    fn wait_first(&self) -> Option<ClosedInterval> {
        loop {
            match self.intervals.recv_timeout(POLL) {
                Ok(closed) => return Some(closed),
                // Told to stop: a second sent just before is in the channel by now.
                Err(_) if self.stop.load(Ordering::Relaxed) => return self.intervals.try_recv().ok(),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => std::thread::sleep(POLL),
            }
        }
    }

    /// The next closed second within [`POLL`] (`Ok(None)`: none came); `Err(Ended)` once the
    /// reporter has gone and the thread is told to stop.
    fn next_second(&self) -> Result<Option<ClosedInterval>, Ended> {
        match self.intervals.recv_timeout(POLL) {
            Ok(closed) => Ok(Some(closed)),
            Err(mpsc::RecvTimeoutError::Timeout) => Ok(None),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                if self.stop.load(Ordering::Relaxed) {
                    return Err(Ended);
                }
                std::thread::sleep(POLL);
                Ok(None)
            }
        }
    }

    /// Creates the appended files (server.csv with its fixed header) and latency.hlog, which
    /// is written through a line buffer.
    ///
    /// Errors: the file that could not be made, with why.
    fn open_files(&self) -> Result<(Appended, LineWriter<File>), (PathBuf, std::io::Error)> {
        let create = |name: &str| {
            let path = self.dir.join(name);
            File::create(&path).map_err(|e| (path, e))
        };
        let intervals = create("intervals.csv")?;
        let queue = create("queue.csv")?;
        let server = create(SERVER_CSV)?;
        // Each histogram's line reaches the file in one write, at its newline: a kill
        // between the parts hdrhistogram writes a line in never leaves half of one.
        let hlog = create(LATENCY_HLOG)?;
        let clone = |f: &File, name: &str| f.try_clone().map_err(|e| (self.dir.join(name), e));
        let sync = vec![
            clone(&intervals, "intervals.csv")?,
            clone(&queue, "queue.csv")?,
            clone(&server, SERVER_CSV)?,
            clone(&hlog, LATENCY_HLOG)?,
        ];
        let mut server = csv::Writer::from_writer(server);
        server
            .write_record(server_csv::header(&BTreeSet::new()))
            .and_then(|()| server.flush().map_err(csv::Error::from))
            .map_err(|e| (self.dir.join(SERVER_CSV), std::io::Error::other(e)))?;
        let appended = Appended {
            intervals: csv::Writer::from_writer(intervals),
            queue: csv::Writer::from_writer(queue),
            server,
            sync,
        };
        Ok((appended, LineWriter::with_capacity(1 << 16, hlog)))
    }

    /// Appends the probe's rows that came to server.csv, on the run's clock (`start_wall`).
    fn append_server_rows(&self, mut files: Option<&mut Appended>, start_wall: SystemTime, errors: &mut Vec<String>) {
        let zero = crate::probe::epoch_secs(start_wall);
        for mut row in self.server.try_iter() {
            let Some(files) = files.as_deref_mut() else { continue };
            row.t_s -= zero;
            let written = files
                .server
                .write_record(server_csv::record(&row, &BTreeSet::new()))
                .and_then(|()| files.server.flush().map_err(csv::Error::from));
            if let Err(e) = written {
                fail(errors, &self.dir.join(SERVER_CSV), e);
            }
        }
    }

    /// Puts `rec`'s counts in the scratch file; a second it could not take is kept in `end`
    /// (without its histograms, which latency.hlog has).
    fn spill(&mut self, rec: &IntervalRecord, end: &mut ThreadEnd) {
        let Some(spill) = self.seconds.as_mut() else { return };
        if let Err(e) = spill.append(rec) {
            fail(&mut end.errors, &spill.path.clone(), e);
            end.unspilled.push(IntervalRecord {
                scripts: rec
                    .scripts
                    .iter()
                    .map(|s| IntervalScript { latency: CompactHistogram::default(), ..s.clone() })
                    .collect(),
                ..rec.clone()
            });
        }
    }

    /// Appends one closed second to intervals.csv, queue.csv and latency.hlog, each flushed.
    fn append_second(
        &self,
        files: &mut Appended,
        hlog: Option<&mut Hlog>,
        appending: Appending,
        errors: &mut Vec<String>,
    ) {
        let Appending { rec, called, depths } = appending;
        let second = Second { k: rec.index, rec: Some(rec), duration_us: rec.duration_us, faults: "" };
        let stages = self.stages.as_ref();
        let written = write_second(&mut files.intervals, &second, called, stages)
            .and_then(|()| files.intervals.flush().map_err(csv::Error::from));
        if let Err(e) = written {
            fail(errors, &self.dir.join("intervals.csv"), e);
        }
        let written = files
            .queue
            .serialize(QueueRow::of(rec, depths, stages))
            .and_then(|()| files.queue.flush().map_err(csv::Error::from));
        if let Err(e) = written {
            fail(errors, &self.dir.join("queue.csv"), e);
        }
        let Some(log) = hlog else { return };
        for s in rec.scripts.iter().filter(|s| s.ok > 0) {
            let from = Duration::from_micros(rec.start_us);
            let length = Duration::from_micros(rec.duration_us);
            let tag = Tag::new(s.script.name()).expect("script names have no ',' ' ' or '\\n'");
            let written = s
                .latency
                .decode()
                .map_err(|e| e.to_string())
                .and_then(|h| log.write_histogram(&h, from, length, Some(tag)).map_err(|e| e.to_string()));
            if let Err(e) = written {
                fail(errors, &self.dir.join(LATENCY_HLOG), e);
            }
        }
    }

    /// [`Writing::rewrite_summary`], a failure noted in `errors`.
    fn rewrite_summary_or_fail(&mut self, totals: &Totals, errors: &mut Vec<String>) {
        if let Err(e) = self.rewrite_summary(totals) {
            fail(errors, &self.dir.join("summary.json"), e);
        }
    }

    /// `summary.json` from the seconds so far, marked `running` (atomically: a reader sees the
    /// last one whole).
    fn rewrite_summary(&mut self, totals: &Totals) -> Result<(), ReportError> {
        let m = &totals.metrics;
        let summary = &mut self.summary;
        summary.running = true;
        summary.started = humantime::format_rfc3339_millis(m.start_wall).to_string();
        summary.warmup_secs = m.warmup_intervals;
        summary.measured_secs = m.measured_secs();
        summary.scripts = summarize(m);
        summary.jobs_measured = crate::report::run_summary::jobs_map(&m.jobs);
        write_json(&self.dir.join(crate::report::run_summary::SUMMARY_FILE), summary)
    }
}

/// The reporter has gone and the thread is told to stop: nothing more comes.
struct Ended;

/// One closed second to append, with what its rows need: the scripts called so far and the
/// latest depth readings.
struct Appending<'a> {
    rec: &'a IntervalRecord,
    called: &'a [Script],
    depths: &'a [DepthSample],
}

/// Begins latency.hlog in `file`, its start and base time the run's `start_wall`.
fn begin_hlog<'a, 'b>(
    file: &'a mut LineWriter<File>,
    serializer: &'b mut V2DeflateSerializer,
    start_wall: SystemTime,
) -> std::io::Result<Hlog<'a, 'b>> {
    IntervalLogWriterBuilder::new()
        .add_comment("emq-bench latency per script: ok calls, us from the intended send")
        .with_start_time(start_wall)
        .with_base_time(start_wall)
        .begin_log_with(file, serializer)
}
