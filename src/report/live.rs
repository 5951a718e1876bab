//! The results folder as the run goes: a thread of its own appends each measured second to
//! `intervals.csv`, `latency.hlog` and `queue.csv` as the reporter closes it, and each of the
//! probe's rows to `server.csv` as it is taken (its fixed columns: the per-command ones
//! depend on every command the run saw), flushed at once, synced every few seconds; and it
//! rewrites `summary.json` every few seconds, marked `running`, from the seconds so far. A run
//! killed outright (SIGKILL, the OOM killer, a lost node) leaves a folder `emq-bench report`
//! renders; a run that ends writes every file again, whole, from its finished measurement (the
//! faults column, the last second cut short, server.csv's command columns, `scripts.csv`,
//! `totals.hlog` and the verdict come only then).
//!
//! Nothing here holds the run's seconds: each is written and dropped, and the running totals
//! are one histogram per script. The reporter keeps none either: each second's counts go to a
//! scratch file beside the results (`.seconds.*.jsonl`, removed at the end) and its histograms
//! to `latency.hlog`, and [`LiveFolder::finish`] reads the series back from them, one second at
//! a time, for the files the end writes whole.

use super::hlog::LATENCY_HLOG;
use super::intervals_csv::{write_second, Second};
use super::queue_csv::QueueRow;
use super::results::DepthSample;
use super::run_summary::RunSummary;
use super::server_csv::{self, SERVER_CSV};
use super::{summarize, write_json, ReportError};
use crate::lua::{ErrorCode, Script};
use crate::metrics::{
    growable, ClosedInterval, CompactHistogram, IntervalRecord, IntervalScript, JobCounter, RunMetrics, INTERVAL_US,
};
use crate::probe::Row;
use crate::scenario::Stages;
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;
use std::collections::BTreeSet;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often `summary.json` is rewritten and the appended files synced to the disk.
const REWRITE_EVERY: Duration = Duration::from_secs(3);
/// How long the thread waits for a second before it looks at the depths and the stop flag.
const POLL: Duration = Duration::from_millis(200);
/// Depth readings kept for the seconds not closed yet (the reporter closes a second about
/// 2 s after its end; one reading a second).
const DEPTHS_KEPT: usize = 16;

/// The writer of a run's folder while it runs.
pub struct LiveFolder {
    dir: PathBuf,
    intervals: mpsc::Sender<ClosedInterval>,
    depths: mpsc::Sender<DepthSample>,
    server: mpsc::Sender<Row>,
    stop: Arc<AtomicBool>,
    /// `None` once joined.
    thread: Option<JoinHandle<ThreadEnd>>,
    /// The seconds' counts as they closed (`None` when the scratch file could not be made or
    /// opened for the thread: the reporter is then not tapped, and keeps its series itself).
    seconds: Option<tempfile::NamedTempFile>,
}

/// What the thread returns: the files it could not write, and the seconds it could not put in
/// the scratch file (kept for the read-back instead).
#[derive(Default)]
struct ThreadEnd {
    errors: Vec<String>,
    unspilled: Vec<IntervalRecord>,
}

impl Drop for LiveFolder {
    /// A folder dropped without [`LiveFolder::finish`] (a panic on the way) stops its thread
    /// too: it must not keep rewriting summary.json as running.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl LiveFolder {
    /// Starts writing into `dir`: `summary` is what the run's start knows (name, seed,
    /// scenario, target; see [`RunSummary::running`]); `stages` the open loop's load shape.
    ///
    /// Panics when the OS cannot start a thread.
    pub fn start(dir: &Path, summary: RunSummary, stages: Option<Stages>) -> LiveFolder {
        let (intervals, intervals_rx) = mpsc::channel();
        let (depths, depths_rx) = mpsc::channel();
        let (server, server_rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let scratch = tempfile::Builder::new().prefix(SECONDS_PREFIX).suffix(".jsonl").tempfile_in(dir).ok();
        // The file and the thread's handle of it, both or neither: a tapped reporter keeps
        // nothing, so its seconds must have somewhere to go.
        let (seconds, spill) = match scratch.and_then(|f| {
            let out = f.as_file().try_clone().ok()?;
            let path = f.path().to_path_buf();
            Some((f, SecondsSpill { file: out, path, broken: false }))
        }) {
            Some((file, spill)) => (Some(file), Some(spill)),
            None => (None, None),
        };
        let writer = Writing {
            dir: dir.to_path_buf(),
            summary,
            stages,
            intervals: intervals_rx,
            depths: depths_rx,
            server: server_rx,
            stop: stop.clone(),
            seconds: spill,
        };
        let thread = std::thread::Builder::new()
            .name("live-folder".into())
            .spawn(move || writer.run())
            .unwrap_or_else(|e| panic!("spawn the live-folder thread: {e}"));
        LiveFolder { dir: dir.to_path_buf(), intervals, depths, server, stop, thread: Some(thread), seconds }
    }

    /// Where the reporter sends each measured second as it closes; `None` when this folder
    /// cannot keep the seconds for the end (no scratch file): the reporter then keeps them.
    pub fn intervals(&self) -> Option<mpsc::Sender<ClosedInterval>> {
        self.seconds.as_ref().map(|_| self.intervals.clone())
    }

    /// Where the run's depth readings go (one a second, s since the run start).
    pub fn depths(&self) -> mpsc::Sender<DepthSample> {
        self.depths.clone()
    }

    /// Where the probe's rows go as it takes them (times in s since the Unix epoch, as the
    /// probe keeps them).
    pub fn server_rows(&self) -> mpsc::Sender<Row> {
        self.server.clone()
    }

    /// Writes what has arrived, stops the thread, and puts the run's per-second series back
    /// into `metrics` (the reporter's finished measurement, whose series holds only data
    /// merged into a second after it closed): the seconds' counts from the scratch file, their
    /// histograms from latency.hlog. Returns what could not be written or read back, one line
    /// per file. Call it before the run writes its final files: none of this thread's writes
    /// comes after.
    pub fn finish(mut self, metrics: &mut RunMetrics) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
        let thread = self.thread.take().expect("joined once, here");
        let end = thread.join().unwrap_or_else(|_| ThreadEnd {
            errors: vec!["the live-folder thread panicked".to_string()],
            unspilled: Vec::new(),
        });
        let mut errors = end.errors;
        if let Some(seconds) = self.seconds.take() {
            match restore_series(metrics, seconds.path(), end.unspilled) {
                Ok(0) => {}
                Ok(unreadable) => errors.push(format!(
                    "{unreadable} of the run's seconds could not be read back from {}",
                    seconds.path().display()
                )),
                Err(e) => errors.push(format!("cannot read back the run's seconds: {e}")),
            }
            // A run with no measured second has no latency.hlog to read.
            let hlog = self.dir.join(LATENCY_HLOG);
            if !metrics.intervals.is_empty() {
                if let Err(e) = restore_latency(metrics, &hlog) {
                    errors.push(format!("cannot read back {}: {e}", hlog.display()));
                }
            }
        }
        errors
    }
}

/// The scratch file of the seconds' counts, one JSON line a second, each written whole in one
/// call; after a write that failed (a full disk), the next line starts on a line of its own,
/// so the part of the failed one that reached the file spoils no other.
struct SecondsSpill {
    file: File,
    path: PathBuf,
    broken: bool,
}

impl SecondsSpill {
    fn append(&mut self, rec: &IntervalRecord) -> std::io::Result<()> {
        let mut line = if self.broken { b"\n".to_vec() } else { Vec::new() };
        serde_json::to_writer(&mut line, &SpilledSecond::of(rec))?;
        line.push(b'\n');
        let written = self.file.write_all(&line);
        self.broken = written.is_err();
        written
    }
}

/// The prefix of the scratch file of the seconds' counts.
const SECONDS_PREFIX: &str = ".seconds.";

/// One second's counts as the scratch file keeps them (one JSON line; a script's errors by
/// [`ErrorCode::index`](crate::lua::ErrorCode::index), only the codes seen).
#[derive(serde::Serialize, serde::Deserialize)]
struct SpilledSecond {
    index: u64,
    start_us: u64,
    duration_us: u64,
    jobs: Vec<u64>,
    scripts: Vec<SpilledScript>,
}

/// One script's part of a [`SpilledSecond`].
#[derive(serde::Serialize, serde::Deserialize)]
struct SpilledScript {
    script: usize,
    ok: u64,
    errors: Vec<(usize, u64)>,
    late: u64,
    p50_us: u64,
    p99_us: u64,
    max_us: u64,
}

impl SpilledSecond {
    fn of(rec: &IntervalRecord) -> SpilledSecond {
        SpilledSecond {
            index: rec.index,
            start_us: rec.start_us,
            duration_us: rec.duration_us,
            jobs: rec.jobs.to_vec(),
            scripts: rec
                .scripts
                .iter()
                .map(|s| SpilledScript {
                    script: s.script.index(),
                    ok: s.ok,
                    errors: s.errors.iter().enumerate().filter(|(_, n)| **n > 0).map(|(i, n)| (i, *n)).collect(),
                    late: s.late,
                    p50_us: s.p50_us,
                    p99_us: s.p99_us,
                    max_us: s.max_us,
                })
                .collect(),
        }
    }

    /// The record back (no histogram); `None` when an index is out of range.
    fn record(self) -> Option<IntervalRecord> {
        let mut jobs = [0u64; JobCounter::COUNT];
        for (slot, n) in jobs.iter_mut().zip(self.jobs) {
            *slot = n;
        }
        let scripts = self
            .scripts
            .into_iter()
            .map(|s| {
                let mut errors = [0u64; ErrorCode::COUNT];
                for (i, n) in s.errors {
                    *errors.get_mut(i)? = n;
                }
                Some(IntervalScript {
                    script: *Script::ALL.get(s.script)?,
                    ok: s.ok,
                    errors,
                    late: s.late,
                    p50_us: s.p50_us,
                    p99_us: s.p99_us,
                    max_us: s.max_us,
                    latency: CompactHistogram::default(),
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(IntervalRecord {
            index: self.index,
            start_us: self.start_us,
            duration_us: self.duration_us,
            scripts,
            jobs,
        })
    }
}

/// Puts the run's per-second series back into `metrics` from `seconds` (the scratch file of
/// the seconds' counts, in the order they closed) and `unspilled` (seconds that could not be
/// written to it), adding to each second what the series already holds for it (data merged
/// after the second closed), and cuts the last measured second at the run's end as the
/// reporter does. Histograms are not touched ([`restore_latency`] puts them back). Returns how
/// many lines of the file could not be read (a write cut by a full disk: its second is among
/// `unspilled`).
///
/// # Errors
/// [`ReportError::Io`] when the file cannot be opened or read (the series then holds what it
/// held, and `unspilled`).
fn restore_series(
    metrics: &mut RunMetrics,
    seconds: &Path,
    unspilled: Vec<IntervalRecord>,
) -> Result<usize, ReportError> {
    use std::io::BufRead;
    let io = |source| ReportError::Io { path: seconds.to_path_buf(), source };
    let mut series = unspilled;
    let mut unreadable = 0;
    let read = File::open(seconds).map_err(io).and_then(|file| {
        for line in std::io::BufReader::new(file).lines() {
            let line = line.map_err(io)?;
            match serde_json::from_str::<SpilledSecond>(&line).ok().and_then(SpilledSecond::record) {
                Some(rec) => series.push(rec),
                None if line.is_empty() => {}
                None => unreadable += 1,
            }
        }
        Ok(())
    });
    let mut by_index: std::collections::BTreeMap<u64, IntervalRecord> = std::collections::BTreeMap::new();
    for rec in series {
        by_index.insert(rec.index, rec);
    }
    for extra in std::mem::take(&mut metrics.intervals) {
        match by_index.get_mut(&extra.index) {
            Some(rec) => add_late(rec, extra),
            None => {
                by_index.insert(extra.index, extra);
            }
        }
    }
    let end_us = metrics.warmup_intervals * INTERVAL_US + metrics.measured_us;
    metrics.intervals = by_index.into_values().collect();
    for rec in &mut metrics.intervals {
        if rec.start_us < end_us {
            rec.duration_us = (end_us - rec.start_us).min(INTERVAL_US);
        }
    }
    read.map(|()| unreadable)
}

/// Adds `extra` (data merged into `rec`'s second after it closed) to `rec`: counts summed, and
/// each script's late histogram kept for [`restore_latency`] to merge (a script with no ok call
/// before takes the late part's percentiles as they are).
fn add_late(rec: &mut IntervalRecord, extra: IntervalRecord) {
    for (total, add) in rec.jobs.iter_mut().zip(extra.jobs) {
        *total += add;
    }
    for s in extra.scripts {
        match rec.scripts.iter_mut().find(|r| r.script == s.script) {
            Some(r) => {
                if r.ok == 0 {
                    (r.p50_us, r.p99_us, r.max_us) = (s.p50_us, s.p99_us, s.max_us);
                }
                r.ok += s.ok;
                r.late += s.late;
                for (total, add) in r.errors.iter_mut().zip(s.errors) {
                    *total += add;
                }
                r.latency = s.latency;
            }
            None => {
                let at = rec.scripts.partition_point(|r| r.script.index() < s.script.index());
                rec.scripts.insert(at, s);
            }
        }
    }
}

/// The thread's state.
struct Writing {
    dir: PathBuf,
    summary: RunSummary,
    stages: Option<Stages>,
    intervals: mpsc::Receiver<ClosedInterval>,
    depths: mpsc::Receiver<DepthSample>,
    server: mpsc::Receiver<Row>,
    stop: Arc<AtomicBool>,
    /// The scratch file of the seconds' counts, appended as each second closes.
    seconds: Option<SecondsSpill>,
}

/// The running totals: a [`RunMetrics`] without its series.
struct Totals {
    metrics: RunMetrics,
    /// The scripts called so far, in [`Script`] order: intervals.csv's rows of each second.
    called: Vec<Script>,
}

impl Totals {
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

impl Writing {
    /// The thread: returns the files it could not write and the seconds the scratch file did
    /// not take. Every second the reporter sent is in one or the other: the thread ends only
    /// once it is told to stop and the channel is empty.
    fn run(mut self) -> ThreadEnd {
        let mut errors: Vec<String> = Vec::new();
        let mut unspilled: Vec<IntervalRecord> = Vec::new();
        let fail = |errors: &mut Vec<String>, path: &Path, why: String| {
            let line = format!("cannot write {} while the run went: {why}", path.display());
            if !errors.contains(&line) {
                errors.push(line);
            }
        };
        let Some(first) = self.wait_first() else { return ThreadEnd { errors, unspilled } };
        let hlog_path = self.dir.join(LATENCY_HLOG);
        let opened = (|| -> Result<(Appended, std::io::LineWriter<File>), (PathBuf, std::io::Error)> {
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
            Ok((appended, std::io::LineWriter::with_capacity(1 << 16, hlog)))
        })();
        // Files that cannot be made leave the thread keeping the seconds for the end only.
        let (mut files, mut hlog_file) = match opened {
            Ok((files, hlog_file)) => (Some(files), Some(hlog_file)),
            Err((path, e)) => {
                fail(&mut errors, &path, e.to_string());
                (None, None)
            }
        };
        let mut serializer = V2DeflateSerializer::new();
        let mut hlog = match hlog_file.as_mut().map(|hlog_file| {
            IntervalLogWriterBuilder::new()
                .add_comment("emq-bench latency per script: ok calls, us from the intended send")
                .with_start_time(first.start_wall)
                .with_base_time(first.start_wall)
                .begin_log_with(hlog_file, &mut serializer)
        }) {
            Some(Ok(log)) => Some(log),
            Some(Err(e)) => {
                fail(&mut errors, &hlog_path, e.to_string());
                None
            }
            None => None,
        };
        let mut totals = Totals {
            metrics: RunMetrics {
                start_wall: first.start_wall,
                warmup_intervals: first.warmup_intervals,
                measured_us: 0,
                scripts: Vec::new(),
                intervals: Vec::new(),
                jobs: [0; JobCounter::COUNT],
                warmup_jobs: [0; JobCounter::COUNT],
            },
            called: Vec::new(),
        };
        let mut depths: Vec<DepthSample> = Vec::new();
        let mut pending = Some(first);
        let mut rewritten = Instant::now();
        loop {
            let closed = match pending.take() {
                Some(closed) => Some(closed),
                None => match self.intervals.recv_timeout(POLL) {
                    Ok(closed) => Some(closed),
                    Err(mpsc::RecvTimeoutError::Timeout) => None,
                    Err(mpsc::RecvTimeoutError::Disconnected) => {
                        if self.stop.load(Ordering::Relaxed) {
                            break;
                        }
                        std::thread::sleep(POLL);
                        None
                    }
                },
            };
            depths.extend(self.depths.try_iter());
            let keep_from = depths.len().saturating_sub(DEPTHS_KEPT);
            depths.drain(..keep_from);
            let zero = crate::probe::epoch_secs(totals.metrics.start_wall);
            for mut row in self.server.try_iter() {
                let Some(files) = files.as_mut() else { continue };
                row.t_s -= zero;
                let written = files
                    .server
                    .write_record(server_csv::record(&row, &BTreeSet::new()))
                    .and_then(|()| files.server.flush().map_err(csv::Error::from));
                if let Err(e) = written {
                    fail(&mut errors, &self.dir.join(SERVER_CSV), e.to_string());
                }
            }
            let got = closed.is_some();
            if let Some(closed) = closed {
                totals.add(&closed);
                let rec = &closed.record;
                if let Some(spill) = self.seconds.as_mut() {
                    if let Err(e) = spill.append(rec) {
                        fail(&mut errors, &spill.path.clone(), e.to_string());
                        unspilled.push(IntervalRecord {
                            scripts: rec
                                .scripts
                                .iter()
                                .map(|s| IntervalScript { latency: CompactHistogram::default(), ..s.clone() })
                                .collect(),
                            ..rec.clone()
                        });
                    }
                }
                let Some(files) = files.as_mut() else { continue };
                let second = Second { k: rec.index, rec: Some(rec), duration_us: rec.duration_us, faults: "" };
                let stages = self.stages.as_ref();
                let intervals_path = self.dir.join("intervals.csv");
                let written = write_second(&mut files.intervals, &second, &totals.called, stages)
                    .and_then(|()| files.intervals.flush().map_err(csv::Error::from));
                if let Err(e) = written {
                    fail(&mut errors, &intervals_path, e.to_string());
                }
                let queue_path = self.dir.join("queue.csv");
                let written = files
                    .queue
                    .serialize(QueueRow::of(rec, &depths, stages))
                    .and_then(|()| files.queue.flush().map_err(csv::Error::from));
                if let Err(e) = written {
                    fail(&mut errors, &queue_path, e.to_string());
                }
                if let Some(log) = hlog.as_mut() {
                    for s in rec.scripts.iter().filter(|s| s.ok > 0) {
                        let from = Duration::from_micros(rec.start_us);
                        let length = Duration::from_micros(rec.duration_us);
                        let tag = Tag::new(s.script.name()).expect("script names have no ',' ' ' or '\\n'");
                        let written =
                            s.latency.decode().map_err(|e| e.to_string()).and_then(|h| {
                                log.write_histogram(&h, from, length, Some(tag)).map_err(|e| e.to_string())
                            });
                        if let Err(e) = written {
                            fail(&mut errors, &hlog_path, e);
                        }
                    }
                }
            }
            if rewritten.elapsed() >= REWRITE_EVERY {
                rewritten = Instant::now();
                if let Err(e) = self.rewrite_summary(&totals) {
                    fail(&mut errors, &self.dir.join("summary.json"), e.to_string());
                }
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
        if let Err(e) = self.rewrite_summary(&totals) {
            fail(&mut errors, &self.dir.join("summary.json"), e.to_string());
        }
        ThreadEnd { errors, unspilled }
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
        summary.jobs_measured = super::run_summary::jobs_map(&m.jobs);
        write_json(&self.dir.join(super::run_summary::SUMMARY_FILE), summary)
    }
}

/// Puts back into `metrics`' per-second series (read back by [`restore_series`], counts and
/// percentiles only) the histograms the run wrote to `latency_hlog` as it went, added to
/// whatever the series holds for that second (data a stalled task sent after the second
/// closed). Read one entry at a time; each is stored compacted.
///
/// # Errors
/// [`ReportError`] naming the file when it cannot be read or a histogram does not decode.
fn restore_latency(metrics: &mut RunMetrics, latency_hlog: &Path) -> Result<(), ReportError> {
    let by_index: std::collections::HashMap<u64, usize> =
        metrics.intervals.iter().enumerate().map(|(at, rec)| (rec.index, at)).collect();
    super::hlog::each_entry(latency_hlog, |entry| {
        let index = entry.start_s.round() as u64;
        let Some(rec) = by_index.get(&index).map(|at| &mut metrics.intervals[*at]) else { return };
        let Some(s) = rec.scripts.iter_mut().find(|s| s.script.name() == entry.tag) else { return };
        let mut h = entry.histogram;
        if let Ok(late) = s.latency.decode() {
            if !late.is_empty() {
                // The second's percentiles were computed from the late part alone.
                let _ = h.add(late);
                s.p50_us = h.value_at_quantile(0.5);
                s.p99_us = h.value_at_quantile(0.99);
                s.max_us = h.max();
            }
        }
        s.latency = crate::metrics::CompactHistogram::encode(&h);
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lua::Script;
    use crate::metrics::{Recorder, Reporter};

    /// A run whose reporter streams its seconds: the reporter finishes with no series,
    /// latency.hlog and intervals.csv hold every second, and the series read back is the one
    /// recorded (counts, errors, histograms per second; the last second cut at the run's end).
    #[test]
    fn streamed_seconds_read_back_as_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let live = LiveFolder::start(dir.path(), RunSummary::at_start("t", 1, None, Default::default()), None);
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let (mut reporter, sink) = Reporter::new(start, Duration::from_secs(1));
        reporter.tap_closed(live.intervals().unwrap());
        let mut rec = Recorder::new(&sink);
        rec.record_ok(Script::Claim, 50, 50);
        rec.maybe_flush(at(1_000));
        for i in 1..=20 {
            rec.record_ok(Script::Enqueue, i * 100, i * 50);
        }
        rec.maybe_flush(at(2_000));
        for i in 1..=7 {
            rec.record_ok(Script::Enqueue, i * 1_000, 10);
        }
        rec.record_error(Script::Enqueue, ErrorCode::Timeout, 40);
        drop(rec);
        reporter.drain();
        let mut metrics = reporter.finish(at(2_500));
        assert!(metrics.intervals.is_empty(), "the reporter keeps no second once streamed");
        assert!(live.finish(&mut metrics).is_empty());
        let seconds: Vec<(u64, u64, u64, u64, u64, u64)> = metrics
            .intervals
            .iter()
            .flat_map(|r| r.scripts.iter().map(move |s| (r, s)))
            .map(|(r, s)| {
                let h = s.latency.decode().unwrap();
                (r.index, r.duration_us, s.ok, s.error_total(), h.len(), h.max())
            })
            .collect();
        assert_eq!(
            seconds,
            vec![(1, 1_000_000, 20, 0, 20, 2_000), (2, 500_000, 7, 1, 7, 7_003)],
            "counts, errors and histograms read back; the last second cut at the end"
        );
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.file_name()).collect();
        assert!(!left.iter().any(|n| n.to_string_lossy().starts_with(SECONDS_PREFIX)), "{left:?}");
        // A line cut by a kill is left out, not an unreadable log.
        let hlog = dir.path().join("latency.hlog");
        let mut cut = std::fs::read(&hlog).unwrap();
        cut.extend_from_slice(b"Tag=enqueue,3.000,1.000,7.003,HISTFAAAA");
        std::fs::write(&hlog, cut).unwrap();
        assert_eq!(super::super::hlog::read_log(&hlog).unwrap().len(), 2);
        let rows = std::fs::read_to_string(dir.path().join("intervals.csv")).unwrap();
        assert_eq!(rows.lines().count(), 3, "a header and one row per second:\n{rows}");
        let summary: RunSummary =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("summary.json")).unwrap()).unwrap();
        assert!(summary.running);
        assert_eq!(summary.scripts.iter().map(|s| (s.script.as_str(), s.ok)).collect::<Vec<_>>(), [("enqueue", 27)]);
    }

    /// Data merged into a second after it closed (a stalled task) is added to what the second
    /// streamed: counts summed, a script new to the second inserted in order, the late
    /// histogram kept for the read-back of latency.hlog; a late second never streamed stays.
    #[test]
    fn late_data_adds_to_the_streamed_second() {
        let script = |script: Script, ok: u64, p99_us: u64| IntervalScript {
            script,
            ok,
            errors: [0; ErrorCode::COUNT],
            late: 0,
            p50_us: p99_us,
            p99_us,
            max_us: p99_us,
            latency: CompactHistogram::default(),
        };
        let second = |index: u64, scripts: Vec<IntervalScript>| IntervalRecord {
            index,
            start_us: index * INTERVAL_US,
            duration_us: INTERVAL_US,
            scripts,
            jobs: [1; JobCounter::COUNT],
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seconds.jsonl");
        let mut streamed = second(3, vec![script(Script::Claim, 10, 700)]);
        streamed.scripts[0].errors[ErrorCode::Fence.index()] = 2;
        let lines = [SpilledSecond::of(&streamed), SpilledSecond::of(&second(4, vec![script(Script::Claim, 1, 9)]))];
        let text: String = lines.iter().map(|l| serde_json::to_string(l).unwrap() + "\n").collect();
        std::fs::write(&path, text).unwrap();
        let mut late = second(3, vec![script(Script::Enqueue, 5, 300), script(Script::Claim, 1, 900)]);
        let mut h = crate::metrics::new_histogram();
        h.record(900).unwrap();
        late.scripts[1].latency = CompactHistogram::encode(&h);
        let mut metrics = RunMetrics {
            start_wall: std::time::SystemTime::now(),
            warmup_intervals: 3,
            measured_us: 1_250_000,
            scripts: Vec::new(),
            intervals: vec![late, second(9, vec![script(Script::Complete, 2, 50)])],
            jobs: [0; JobCounter::COUNT],
            warmup_jobs: [0; JobCounter::COUNT],
        };
        assert_eq!(restore_series(&mut metrics, &path, Vec::new()).unwrap(), 0);
        type Second = (u64, u64, Vec<(Script, u64, u64, u64)>);
        let got: Vec<Second> = metrics
            .intervals
            .iter()
            .map(|r| {
                (
                    r.index,
                    r.duration_us,
                    r.scripts.iter().map(|s| (s.script, s.ok, s.error_total(), s.p99_us)).collect(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (3, 1_000_000, vec![(Script::Enqueue, 5, 0, 300), (Script::Claim, 11, 2, 700)]),
                (4, 250_000, vec![(Script::Claim, 1, 0, 9)]),
                (9, 1_000_000, vec![(Script::Complete, 2, 0, 50)]),
            ]
        );
        assert_eq!(metrics.intervals[0].jobs, [2; JobCounter::COUNT]);
        assert_eq!(metrics.intervals[0].scripts[1].latency.decode().unwrap().len(), 1, "the late histogram kept");
    }

    /// A write cut short (a full disk) spoils only its own line: the seconds around it read
    /// back, the cut one comes from memory, and the unreadable line is counted.
    #[test]
    fn a_cut_line_spoils_no_other_second() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seconds.jsonl");
        let second = |index: u64| IntervalRecord {
            index,
            start_us: index * INTERVAL_US,
            duration_us: INTERVAL_US,
            scripts: Vec::new(),
            jobs: [index; JobCounter::COUNT],
        };
        let mut spill = SecondsSpill { file: File::create(&path).unwrap(), path: path.clone(), broken: false };
        spill.append(&second(1)).unwrap();
        // Half of second 2's line reached the file before the write failed.
        let line = serde_json::to_string(&SpilledSecond::of(&second(2))).unwrap();
        spill.file.write_all(&line.as_bytes()[..line.len() / 2]).unwrap();
        spill.broken = true;
        spill.append(&second(3)).unwrap();
        let mut metrics = RunMetrics {
            start_wall: std::time::SystemTime::now(),
            warmup_intervals: 1,
            measured_us: 3 * INTERVAL_US,
            scripts: Vec::new(),
            intervals: Vec::new(),
            jobs: [0; JobCounter::COUNT],
            warmup_jobs: [0; JobCounter::COUNT],
        };
        assert_eq!(restore_series(&mut metrics, &path, vec![second(2)]).unwrap(), 1, "one unreadable line");
        let got: Vec<(u64, u64)> = metrics.intervals.iter().map(|r| (r.index, r.jobs[0])).collect();
        assert_eq!(got, [(1, 1), (2, 2), (3, 3)]);
    }
}
