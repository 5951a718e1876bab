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
    thread: Option<JoinHandle<Vec<String>>>,
    /// The seconds' counts as they closed (`None` when the scratch file could not be made: the
    /// reporter is then not tapped, and keeps its series itself).
    seconds: Option<tempfile::NamedTempFile>,
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
        let seconds = tempfile::Builder::new().prefix(SECONDS_PREFIX).suffix(".jsonl").tempfile_in(dir).ok();
        let writer = Writing {
            dir: dir.to_path_buf(),
            summary,
            stages,
            intervals: intervals_rx,
            depths: depths_rx,
            server: server_rx,
            stop: stop.clone(),
            seconds: seconds.as_ref().and_then(|f| f.as_file().try_clone().ok()).map(std::io::BufWriter::new),
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
        let mut errors = thread.join().unwrap_or_else(|_| vec!["the live-folder thread panicked".to_string()]);
        if let Some(seconds) = self.seconds.take() {
            if let Err(e) = restore_series(metrics, seconds.path()) {
                errors.push(format!("cannot read back the run's seconds: {e}"));
            }
            let hlog = self.dir.join(LATENCY_HLOG);
            if let Err(e) = restore_latency(metrics, &hlog) {
                errors.push(format!("cannot read back {}: {e}", hlog.display()));
            }
        }
        errors
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
/// the seconds' counts, in the order they closed), adding to each second what the series
/// already holds for it (data merged after the second closed), and cuts the last measured
/// second at the run's end as the reporter does. Histograms are not touched
/// ([`restore_latency`] puts them back).
///
/// # Errors
/// [`ReportError::Io`] when the file cannot be read; a line that does not parse, named.
fn restore_series(metrics: &mut RunMetrics, seconds: &Path) -> Result<(), ReportError> {
    use std::io::BufRead;
    let io = |source| ReportError::Io { path: seconds.to_path_buf(), source };
    let mut late: std::collections::BTreeMap<u64, IntervalRecord> =
        std::mem::take(&mut metrics.intervals).into_iter().map(|r| (r.index, r)).collect();
    let mut series = Vec::new();
    let input = std::io::BufReader::new(File::open(seconds).map_err(io)?);
    for (n, line) in input.lines().enumerate() {
        let line = line.map_err(io)?;
        let bad = || {
            io(std::io::Error::new(std::io::ErrorKind::InvalidData, format!("line {} is not a second's counts", n + 1)))
        };
        let spilled: SpilledSecond = serde_json::from_str(&line).map_err(|_| bad())?;
        let mut rec = spilled.record().ok_or_else(bad)?;
        if let Some(extra) = late.remove(&rec.index) {
            add_late(&mut rec, extra);
        }
        series.push(rec);
    }
    series.extend(late.into_values());
    series.sort_by_key(|r| r.index);
    let end_us = metrics.warmup_intervals * INTERVAL_US + metrics.measured_us;
    for rec in &mut series {
        if rec.start_us < end_us {
            rec.duration_us = (end_us - rec.start_us).min(INTERVAL_US);
        }
    }
    metrics.intervals = series;
    Ok(())
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
    seconds: Option<std::io::BufWriter<File>>,
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
    /// The thread: returns the files it could not write.
    fn run(mut self) -> Vec<String> {
        let mut errors: Vec<String> = Vec::new();
        let fail = |errors: &mut Vec<String>, path: &Path, why: String| {
            let line = format!("cannot write {} while the run went: {why}", path.display());
            if !errors.contains(&line) {
                errors.push(line);
            }
        };
        let Some(first) = self.wait_first() else { return errors };
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
        let (mut files, mut hlog_file) = match opened {
            Ok(opened) => opened,
            Err((path, e)) => {
                fail(&mut errors, &path, e.to_string());
                return errors;
            }
        };
        let mut serializer = V2DeflateSerializer::new();
        let hlog = IntervalLogWriterBuilder::new()
            .add_comment("emq-bench latency per script: ok calls, us from the intended send")
            .with_start_time(first.start_wall)
            .with_base_time(first.start_wall)
            .begin_log_with(&mut hlog_file, &mut serializer);
        let mut hlog = match hlog {
            Ok(log) => Some(log),
            Err(e) => {
                fail(&mut errors, &hlog_path, e.to_string());
                None
            }
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
                if let Some(out) = self.seconds.as_mut() {
                    let written = serde_json::to_writer(&mut *out, &SpilledSecond::of(rec))
                        .map_err(std::io::Error::from)
                        .and_then(|()| out.write_all(b"\n"));
                    if let Err(e) = written {
                        fail(&mut errors, &self.dir.join(SECONDS_PREFIX), e.to_string());
                    }
                }
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
                for file in &files.sync {
                    let _ = file.sync_data();
                }
            }
            if self.stop.load(Ordering::Relaxed) && !got {
                break;
            }
        }
        if let Err(e) = self.rewrite_summary(&totals) {
            fail(&mut errors, &self.dir.join("summary.json"), e.to_string());
        }
        if let Some(Err(e)) = self.seconds.as_mut().map(|out| out.flush()) {
            fail(&mut errors, &self.dir.join(SECONDS_PREFIX), e.to_string());
        }
        errors
    }

    /// Waits for the first measured second; `None` when the run ends before one closes.
    fn wait_first(&self) -> Option<ClosedInterval> {
        loop {
            match self.intervals.recv_timeout(POLL) {
                Ok(closed) => return Some(closed),
                Err(_) if self.stop.load(Ordering::Relaxed) => return None,
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

/// Puts back into `metrics`' per-second series the histograms the run wrote to
/// `latency_hlog` as it went (the series keeps only each second's counts and percentiles while
/// it runs), added to whatever the series holds for that second (data a stalled task sent
/// after the second closed). Read one entry at a time; each is stored compacted.
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
        restore_series(&mut metrics, &path).unwrap();
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
}
