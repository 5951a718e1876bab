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

mod readback;
mod spill;
mod writer;

use self::readback::{restore_latency, restore_series};
use self::spill::{SecondsSpill, SECONDS_PREFIX};
use self::writer::Writing;
use super::hlog::LATENCY_HLOG;
use super::results::DepthSample;
use super::run_summary::RunSummary;
use crate::metrics::{ClosedInterval, IntervalRecord, RunMetrics};
use crate::probe::Row;
use crate::scenario::Stages;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

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
    /// The files not written, one line each.
    errors: Vec<String>,
    /// The seconds the scratch file did not take.
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

#[cfg(test)]
mod tests;
