//! The composition root of a run's results folder: which writers, in which order. It lives
//! here, above both, because the folder holds files of `report` and of `html` (which reads
//! `report`'s files back).

use crate::report::writer::Writer;
use crate::report::{hlog, intervals_csv, queue_csv, scripts_csv, server_csv, RunResults};
use crate::report::{InvariantsJson, SummaryJson};

/// The writers of a run's folder, in the order they run: `summary.json` first (small, and
/// the one a reader opens), CI's `junit.xml` and `summary.md`, then the series and
/// `report.html` (which reads them back). `history.bin` is not among them: the run writes it
/// as it records it (`crate::history::spool`).
pub fn run_writers<'a>() -> [&'a dyn Writer<RunResults<'a>>; 11] {
    [
        &SummaryJson,
        &InvariantsJson,
        &crate::ci::run::JunitXml,
        &crate::ci::summary_md::SummaryMd,
        &scripts_csv::ScriptsCsv,
        &intervals_csv::IntervalsCsv,
        &hlog::LatencyHlog,
        &hlog::TotalsHlog,
        &server_csv::ServerCsv,
        &queue_csv::QueueCsv,
        &crate::html::ReportHtml,
    ]
}
