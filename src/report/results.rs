//! The results model of one run: everything its folder's files are written from, finished.

use super::run_summary::RunSummary;
use super::writer::Writer;
use crate::check::report::InvariantsReport;
use crate::load::coordinator::Depths;
use crate::metrics::RunMetrics;
use crate::probe::ServerSeries;
use crate::scenario::Stages;
use std::path::Path;

/// The queue depths read at one moment of the run (the coordinator's progress poll).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DepthSample {
    /// Seconds since the run start (interval 0).
    pub t_s: f64,
    /// The depths summed over the run's queues.
    pub depths: Depths,
}

/// One finished run, as its writers see it (they read nothing else).
pub struct RunResults<'a> {
    /// `summary.json`'s content.
    pub summary: &'a RunSummary,
    /// The measurement: totals and the per-second series.
    pub metrics: &'a RunMetrics,
    /// The server sampled every second.
    pub server: &'a ServerSeries,
    /// The queue depths over the run, by time.
    pub depths: &'a [DepthSample],
    /// The invariant check's report, when the check ran.
    pub invariants: Option<&'a InvariantsReport>,
    /// The open loop's load shape (`[[stages]]`), whose stage and intended rate the
    /// per-second files give each second; `None` without stages.
    pub stages: Option<&'a Stages>,
    /// The default gates (`report::gates`), each passed, failed or skipped, as the judge
    /// evaluated them.
    pub gates: &'a [super::gates::GateResult],
}

impl<'a> RunResults<'a> {
    /// The part of the run its verdict files are written from.
    pub fn judged(&self) -> JudgedRun<'a> {
        JudgedRun { summary: self.summary, invariants: self.invariants, gates: self.gates }
    }
}

/// A finished run or a fleet's merge, judged: what the files that carry a verdict for CI
/// (`invariants.json`, `junit.xml`, `summary.md`) are written from. A run's folder and a
/// fleet's merged folder both write them through the same writers.
pub struct JudgedRun<'a> {
    /// `summary.json`'s content, its verdict included.
    pub summary: &'a RunSummary,
    /// The invariant check's report, when the check ran (a sharded fleet's: the union of its
    /// shards').
    pub invariants: Option<&'a InvariantsReport>,
    /// The default gates, as the judge evaluated them.
    pub gates: &'a [super::gates::GateResult],
}

/// `summary.json`.
pub struct SummaryJson;
impl Writer<RunResults<'_>> for SummaryJson {
    fn file(&self) -> &'static str {
        super::run_summary::SUMMARY_FILE
    }
    fn write(&self, path: &Path, run: &RunResults) -> Result<(), super::ReportError> {
        super::write_json(path, run.summary)
    }
}

/// `invariants.json` (nothing when the check did not run).
pub struct InvariantsJson;
impl Writer<RunResults<'_>> for InvariantsJson {
    fn file(&self) -> &'static str {
        crate::check::report::INVARIANTS_FILE
    }
    fn write(&self, path: &Path, run: &RunResults) -> Result<(), super::ReportError> {
        Writer::<JudgedRun>::write(self, path, &run.judged())
    }
}
impl Writer<JudgedRun<'_>> for InvariantsJson {
    fn file(&self) -> &'static str {
        crate::check::report::INVARIANTS_FILE
    }
    fn write(&self, path: &Path, run: &JudgedRun) -> Result<(), super::ReportError> {
        run.invariants.map_or(Ok(()), |report| super::write_json(path, report))
    }
}
