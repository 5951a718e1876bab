//! The results model and its writers: one file per format, each reading only the finished model.
//!
//! [`summarize`] turns a [`RunMetrics`](crate::metrics::RunMetrics) into one [`ScriptSummary`] per
//! called script (the shape of `summary.json`, whose other fields the caller adds before
//! [`write_json`]). The writers never compute during the run and never print:
//!
//! | file / output | function | reads |
//! | --- | --- | --- |
//! | `scripts.csv` | [`write_scripts_csv`] | `&[ScriptSummary]` |
//! | `intervals.csv` | [`write_intervals_csv`] | `RunMetrics::intervals` |
//! | `latency.hlog` | [`write_hlog`] | `RunMetrics::intervals` (HdrHistogram interval log) |
//! | `totals.hlog` | [`write_totals`] | `RunMetrics::scripts` (whole-run histograms) |
//! | `server.csv` | [`write_server_csv`] | the probe's rows ([`crate::probe`]) |
//! | `queue.csv` | [`write_queue_csv`] | `RunMetrics::intervals` + the depths read |
//! | `report.html` | [`crate::html`] | the files above, read back |
//! | any JSON | [`write_json`] | any `Serialize` |
//! | terminal table | [`format_table`] | `&[ScriptSummary]` + job counters |
//!
//! A run's files are the run's writers (`cmd::session::writers`), each a [`Writer`] of the [`RunResults`] model, fanned
//! out by [`write_all`]. Every file is written to `<path>.tmp` and renamed, so a reader never sees half a file. Times in
//! files and tables are ms with 3 decimals ([`ms3`]), as memtier_benchmark and valkey-benchmark
//! print them; the model itself keeps µs integers.

pub mod client;
pub mod fleet;
pub mod gates;
pub mod growth;
pub mod hlog;
pub mod intervals_csv;
mod json;
pub mod live;
pub mod percentile_bounds;
pub mod queue_csv;
pub mod queue_time;
pub mod rates;
pub mod results;
pub mod run_summary;
pub mod scripts_csv;
pub mod server_csv;
pub mod steady;
mod summary;
mod table;
pub mod thresholds;
pub mod writer;

pub use hlog::{write_hlog, write_totals};
pub use intervals_csv::write_intervals_csv;
pub use json::write_json;
pub use percentile_bounds::{PercentileBound, PercentileIntervals};
pub use queue_csv::write_queue_csv;
pub use results::{DepthSample, InvariantsJson, JudgedRun, RunResults, SummaryJson};
pub use scripts_csv::write_scripts_csv;
pub use server_csv::write_server_csv;
pub use summary::{errors_line, over_load_phase, summarize, Percentiles, ScriptSummary};
pub use table::format_table;
pub use writer::{write_all, Writer};

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

/// A report file could not be written; every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// Creating, writing, flushing or renaming the file failed.
    #[error("cannot write {}: {source}", path.display())]
    Io {
        /// The file being written (the final path, not the `.tmp`).
        path: PathBuf,
        /// The underlying I/O error.
        source: std::io::Error,
    },
    /// The CSV encoder failed.
    #[error("cannot write CSV {}: {source}", path.display())]
    Csv {
        /// The file being written.
        path: PathBuf,
        /// The csv crate's error.
        source: csv::Error,
    },
    /// JSON encoding failed.
    #[error("cannot write JSON {}: {source}", path.display())]
    Json {
        /// The file being written.
        path: PathBuf,
        /// serde_json's error.
        source: serde_json::Error,
    },
    /// `history.bin` could not be written (the history module's error, which names the file).
    #[error("cannot write {0}")]
    History(String),
    /// A results file read back (for the report) is not what its writer writes.
    #[error("cannot read {}: {message}", path.display())]
    Read {
        /// The file read.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// A histogram could not be decoded or written to the interval log.
    #[error("cannot write interval log {}: {message}", path.display())]
    Hlog {
        /// The file being written.
        path: PathBuf,
        /// What hdrhistogram reported.
        message: String,
    },
}

/// µs as milliseconds with exactly 3 decimals (`1234` → `"1.234"`), the unit memtier_benchmark and
/// valkey-benchmark print. The only place the crate formats a latency.
pub fn ms3(us: u64) -> String {
    format!("{}.{:03}", us / 1000, us % 1000)
}

/// Write a file atomically: `body` writes into `<path>.tmp`, which is flushed, synced and renamed to
/// `path`. Errors from `body` are returned as they are; I/O errors name `path`.
pub fn write_atomic<F>(path: &Path, body: F) -> Result<(), ReportError>
where
    F: FnOnce(&mut BufWriter<File>) -> Result<(), ReportError>,
{
    crate::atomic::write(path, |source| ReportError::Io { path: path.to_path_buf(), source }, body)
}

/// Writes `text` to `path` atomically (see [`write_atomic`]): the Markdown and HTML pages.
///
/// # Errors
/// [`ReportError::Io`] naming `path`.
pub fn write_text(path: &Path, text: &str) -> Result<(), ReportError> {
    use std::io::Write;
    write_atomic(path, |w| {
        w.write_all(text.as_bytes()).map_err(|source| ReportError::Io { path: path.to_path_buf(), source })
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn ms3_has_three_decimals() {
        assert_eq!(ms3(0), "0.000");
        assert_eq!(ms3(1), "0.001");
        assert_eq!(ms3(1_234), "1.234");
        assert_eq!(ms3(60_000_000), "60000.000");
    }

    #[test]
    fn io_errors_name_the_file() {
        let path = Path::new("/nonexistent-dir/x.json");
        let err = write_json(path, &1).unwrap_err();
        assert!(err.to_string().contains("/nonexistent-dir/x.json"), "{err}");
    }

    /// A small finished run for the writers' tests: warmup 1 s, measured 2 s (intervals 1 and 2);
    /// `enqueue` 20 ok (100..=2000 µs), `complete` 10 ok (up to 2 ms, exact below 2048 µs) + 2 `EMQFENCE`.
    pub(crate) fn sample_run() -> crate::metrics::RunMetrics {
        use crate::lua::{ErrorCode, Script};
        use crate::metrics::{JobCounter, Recorder, Reporter};
        use std::time::{Duration, Instant};

        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let (mut reporter, sink) = Reporter::new(start, Duration::from_secs(1));
        let mut rec = Recorder::new(&sink);
        rec.record_ok(Script::Claim, 50, 50); // warmup only: not in the summaries
        rec.maybe_flush(at(1_000));
        for i in 1..=20 {
            rec.record_ok(Script::Enqueue, i * 100, i * 50);
        }
        rec.bump(JobCounter::Enqueued, 20);
        for i in 1..=5 {
            rec.record_ok(Script::Complete, i * 100, i * 10);
        }
        rec.maybe_flush(at(2_000));
        for _ in 1..=5 {
            rec.record_ok(Script::Complete, 2_000, 1_000);
        }
        rec.record_error(Script::Complete, ErrorCode::Fence, 80);
        rec.record_error(Script::Complete, ErrorCode::Fence, 90);
        rec.bump(JobCounter::Completed, 10);
        rec.bump(JobCounter::StaleRefused, 2);
        drop(rec);
        reporter.drain();
        reporter.finish(at(3_000))
    }
}
