//! `queue.csv`: the queue's view of the run, one row per measured second: the depths the
//! coordinator read, and the reaps and stale completions of that second.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::results::{DepthSample, RunResults};
use super::writer::Writer;
use super::{write_atomic, ReportError};
use crate::metrics::{IntervalRecord, JobCounter, RunMetrics};
use crate::scenario::Stages;

/// One row of queue.csv (the header is the field names), as written and read back (a fleet's
/// merge adds the shards' rows second by second).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueRow {
    /// The second's start, s since the run start.
    pub t_s: u64,
    /// Pending jobs at the second's last depth reading (empty: none read).
    pub pending: Option<u64>,
    /// Active jobs, as `pending`.
    pub active: Option<u64>,
    /// Delayed jobs, as `pending`.
    pub delayed: Option<u64>,
    /// Completed jobs, as `pending`.
    pub completed: Option<u64>,
    /// Failed jobs, as `pending`.
    pub failed: Option<u64>,
    /// Jobs enqueued during the second.
    pub enqueued: u64,
    /// Jobs completed during the second.
    pub completed_calls: u64,
    /// Jobs reaped during the second.
    pub reaped: u64,
    /// Stale completions refused during the second.
    pub stale_refused: u64,
    /// The load shape's stage under way at the second's start (0-based; empty without
    /// `[[stages]]` and after the last stage).
    #[serde(default)]
    pub stage: Option<usize>,
}

impl QueueRow {
    /// The row of the second `rec`: its job counters, and the last of `depths` read within it.
    pub fn of(rec: &IntervalRecord, depths: &[DepthSample], stages: Option<&Stages>) -> QueueRow {
        let from = rec.start_us as f64 / 1e6;
        let depth = depths.iter().rev().find(|d| d.t_s >= from && d.t_s < from + 1.0).map(|d| d.depths);
        let job = |c: JobCounter| rec.jobs[c.index()];
        QueueRow {
            t_s: rec.index,
            pending: depth.map(|d| d.pending),
            active: depth.map(|d| d.active),
            delayed: depth.map(|d| d.delayed),
            completed: depth.map(|d| d.completed),
            failed: depth.map(|d| d.failed),
            enqueued: job(JobCounter::Enqueued),
            completed_calls: job(JobCounter::Completed),
            reaped: job(JobCounter::Reaped),
            stale_refused: job(JobCounter::StaleRefused),
            stage: super::intervals_csv::stage_of_second(stages, rec.index).0,
        }
    }
}

/// Writes `queue.csv` to `path`: header
/// `t_s,pending,active,delayed,completed,failed,enqueued,completed_calls,reaped,stale_refused,stage`,
/// one row per measured second (`t_s` its start, s since the run start; `stage` as in
/// intervals.csv, from `stages`).
///
/// The depths (summed over the run's queues) are the last reading taken within that second
/// (empty when none was: the server did not answer); the counters are the jobs enqueued,
/// completed, reaped and stale completions refused during it.
///
/// # Errors
/// [`ReportError::Csv`] or [`ReportError::Io`], naming `path`.
pub fn write_queue_csv(
    path: &Path,
    run: &RunMetrics,
    depths: &[DepthSample],
    stages: Option<&Stages>,
) -> Result<(), ReportError> {
    let csv_err = |source| ReportError::Csv { path: path.to_path_buf(), source };
    write_atomic(path, |w| {
        let mut out = csv::Writer::from_writer(w);
        for rec in &run.intervals {
            out.serialize(QueueRow::of(rec, depths, stages)).map_err(csv_err)?;
        }
        out.flush().map_err(|e| csv_err(e.into()))
    })
}

/// `queue.csv`.
pub struct QueueCsv;
impl Writer<RunResults<'_>> for QueueCsv {
    fn file(&self) -> &'static str {
        "queue.csv"
    }
    fn write(&self, path: &Path, run: &RunResults) -> Result<(), ReportError> {
        write_queue_csv(path, run.metrics, run.depths, run.stages)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::coordinator::Depths;
    use crate::report::tests::sample_run;

    #[test]
    fn one_row_per_second_with_the_depth_read_in_it() {
        let depths = [DepthSample { t_s: 1.2, depths: Depths { pending: 7, ..Depths::default() } }];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("queue.csv");
        write_queue_csv(&path, &sample_run(), &depths, None).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "t_s,pending,active,delayed,completed,failed,enqueued,completed_calls,reaped,stale_refused,stage"
        );
        assert_eq!(lines[1], "1,7,0,0,0,0,20,0,0,0,");
        assert_eq!(lines[2], "2,,,,,,0,10,0,2,", "no depth read in second 2");
    }
}
