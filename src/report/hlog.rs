//! HdrHistogram interval logs: `latency.hlog` (one histogram per second per script) and
//! `totals.hlog` (each script's whole-run latency, service-time, send-lag and error histograms), written and
//! read back (the report and `emq-bench report DIR` read them).

use std::path::Path;
use std::time::{Duration, SystemTime};

use base64::Engine;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, IntervalLogWriterBuilder, LogEntry, Tag};
use hdrhistogram::serialization::{Deserializer, V2DeflateSerializer};
use hdrhistogram::Histogram;

use super::results::RunResults;
use super::writer::Writer;
use super::{write_atomic, ReportError};
use crate::metrics::RunMetrics;

/// One histogram of an interval log: its tag, start and length (s since the log's base
/// time) and the histogram (µs).
pub struct Entry {
    /// The tag, e.g. `claim` or `service.claim`.
    pub tag: String,
    /// Start, s since the run start.
    pub start_s: f64,
    /// Length, s.
    pub length_s: f64,
    /// The histogram, µs.
    pub histogram: Histogram<u64>,
}

/// Writes `entries` to `path` as an HdrHistogram interval log (readable by
/// `HistogramLogProcessor`, HdrHistogram's plotter and [`read_log`]): `comment`, then
/// `#[StartTime: ...]` and `#[BaseTime: ...]` both set to `start`, then one line per entry:
/// `Tag=<tag>,<start s>,<length s>,<max>,<V2 deflate base64 histogram>`. Values are µs.
///
/// # Errors
/// [`ReportError::Hlog`] if a histogram fails to encode, [`ReportError::Io`] otherwise; both
/// name `path`.
fn write_log<'h>(
    path: &Path,
    comment: &str,
    start: SystemTime,
    entries: impl Iterator<Item = (&'h str, Duration, Duration, &'h Histogram<u64>)>,
) -> Result<(), ReportError> {
    let hlog_err = |message: String| ReportError::Hlog { path: path.to_path_buf(), message };
    write_atomic(path, |w| {
        let mut serializer = V2DeflateSerializer::new();
        let mut log = IntervalLogWriterBuilder::new()
            .add_comment(comment)
            .with_start_time(start)
            .with_base_time(start)
            .begin_log_with(w, &mut serializer)
            .map_err(|e| hlog_err(e.to_string()))?;
        for (tag, from, length, h) in entries {
            let tag = Tag::new(tag).expect("tags have no ',' ' ' or '\\n'");
            log.write_histogram(h, from, length, Some(tag)).map_err(|e| hlog_err(e.to_string()))?;
        }
        Ok(())
    })
}

/// Write the per-second ok-latency histograms to `path` (`latency.hlog`): one line per measured
/// interval per script with at least one ok call, tag = the script, µs from the intended send.
///
/// # Errors
/// As [`write_log`]; also [`ReportError::Hlog`] when a recorded interval fails to decode.
pub fn write_hlog(path: &Path, run: &RunMetrics) -> Result<(), ReportError> {
    let mut entries = Vec::new();
    for rec in &run.intervals {
        for s in rec.scripts.iter().filter(|s| s.ok > 0) {
            let h = s
                .latency
                .decode()
                .map_err(|e| ReportError::Hlog { path: path.to_path_buf(), message: e.to_string() })?;
            let (from, length) = (Duration::from_micros(rec.start_us), Duration::from_micros(rec.duration_us));
            entries.push((s.script.name(), from, length, h));
        }
    }
    let comment = "emq-bench latency per script: ok calls, us from the intended send";
    write_log(path, comment, run.start_wall, entries.iter().map(|(tag, from, length, h)| (*tag, *from, *length, h)))
}

/// Write each called script's whole measured histograms to `path` (`totals.hlog`): tag
/// `latency.<script>` (ok calls, µs from the intended send) and `service.<script>` (µs from the
/// actual send), then, when any was recorded, `send_lag.<script>` (open-loop sends, µs from
/// the intended to the actual send) and `error.<script>` (failed and timed-out calls, µs from
/// the intended send), all spanning the measured part (from the end of warmup). These are the
/// histograms summary.json's percentiles come from: the report draws its spectra from them,
/// and HdrHistogram's own tools can re-plot any of them.
///
/// # Errors
/// As [`write_log`].
pub fn write_totals(path: &Path, run: &RunMetrics) -> Result<(), ReportError> {
    let from = Duration::from_secs(run.warmup_intervals);
    let length = Duration::from_micros(run.measured_us);
    let mut entries: Vec<(String, &Histogram<u64>)> = Vec::new();
    for t in run.scripts.iter().filter(|t| t.was_called()) {
        let name = t.script.name();
        entries.push((format!("latency.{name}"), &t.latency));
        entries.push((format!("service.{name}"), &t.service));
        if !t.send_lag.is_empty() {
            entries.push((format!("send_lag.{name}"), &t.send_lag));
        }
        if !t.error_latency.is_empty() {
            entries.push((format!("error.{name}"), &t.error_latency));
        }
    }
    let comment = "emq-bench whole-run histograms per script: latency.<script> from the intended send, \
                   service.<script> from the actual send, send_lag.<script> intended to actual send, \
                   error.<script> failed calls from the intended send, us";
    write_log(path, comment, run.start_wall, entries.iter().map(|(tag, h)| (tag.as_str(), from, length, *h)))
}

/// Writes `entries` (tag, histogram) to `path` as one interval log spanning `from` for
/// `length` after `start`, with `comment`: a fleet's merged `totals.hlog`.
///
/// # Errors
/// As [`write_log`].
pub fn write_entries(
    path: &Path,
    comment: &str,
    start: SystemTime,
    from: Duration,
    length: Duration,
    entries: &[(String, Histogram<u64>)],
) -> Result<(), ReportError> {
    write_log(path, comment, start, entries.iter().map(|(tag, h)| (tag.as_str(), from, length, h)))
}

/// Writes `entries` (tag, start and length after `start`, histogram) to `path` as one
/// interval log with `comment`: a fleet's merged `latency.hlog`.
///
/// # Errors
/// As [`write_log`].
pub fn write_intervals(
    path: &Path,
    comment: &str,
    start: SystemTime,
    entries: &[(String, Duration, Duration, Histogram<u64>)],
) -> Result<(), ReportError> {
    write_log(path, comment, start, entries.iter().map(|(tag, from, length, h)| (tag.as_str(), *from, *length, h)))
}

/// Reads every histogram of the interval log at `path`, in file order.
///
/// # Errors
/// [`ReportError::Io`] when the file cannot be read, [`ReportError::Read`] when a line or a
/// histogram does not decode; both name `path`.
pub fn read_log(path: &Path) -> Result<Vec<Entry>, ReportError> {
    let mut out = Vec::new();
    each_entry(path, |entry| out.push(entry))?;
    Ok(out)
}

/// Reads the interval log at `path` as [`read_log`] does, handing each entry to `visit` as it
/// is decoded instead of keeping them all: a long run's log holds a histogram per script per
/// second.
///
/// # Errors
/// As [`read_log`].
pub fn each_entry(path: &Path, mut visit: impl FnMut(Entry)) -> Result<(), ReportError> {
    let mut bytes = std::fs::read(path).map_err(|source| ReportError::Io { path: path.to_path_buf(), source })?;
    // A last line without its newline is one a killed run was writing: left out, as the
    // seconds after it are.
    let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |at| at + 1);
    bytes.truncate(whole);
    let bad = |message: String| ReportError::Read { path: path.to_path_buf(), message };
    let mut decoder = Deserializer::new();
    for entry in IntervalLogIterator::new(&bytes) {
        let LogEntry::Interval(i) = entry.map_err(|e| bad(format!("{e:?}")))? else { continue };
        let raw = base64::engine::general_purpose::STANDARD
            .decode(i.encoded_histogram())
            .map_err(|e| bad(format!("a histogram is not base64: {e}")))?;
        // Growable: an arm's repetitions are added into its first one (`html::compare`).
        let histogram: Histogram<u64> = crate::metrics::growable(
            decoder.deserialize(&mut &raw[..]).map_err(|e| bad(format!("a histogram does not decode: {e:?}")))?,
        );
        visit(Entry {
            tag: i.tag().map(|t| t.as_str().to_owned()).unwrap_or_default(),
            start_s: i.start_timestamp().as_secs_f64(),
            length_s: i.duration().as_secs_f64(),
            histogram,
        });
    }
    Ok(())
}

/// The per-second latency file's name.
pub const LATENCY_HLOG: &str = "latency.hlog";

/// `latency.hlog`.
pub struct LatencyHlog;
impl Writer<RunResults<'_>> for LatencyHlog {
    fn file(&self) -> &'static str {
        LATENCY_HLOG
    }
    fn write(&self, path: &Path, run: &RunResults) -> Result<(), ReportError> {
        write_hlog(path, run.metrics)
    }
}

/// `totals.hlog`.
pub struct TotalsHlog;
impl Writer<RunResults<'_>> for TotalsHlog {
    fn file(&self) -> &'static str {
        "totals.hlog"
    }
    fn write(&self, path: &Path, run: &RunResults) -> Result<(), ReportError> {
        write_totals(path, run.metrics)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::sample_run;

    #[test]
    fn log_reads_back_with_the_same_counts() {
        let run = sample_run();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("latency.hlog");
        write_hlog(&path, &run).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!((text.matches("#[StartTime:").count(), text.matches("#[BaseTime:").count()), (1, 1));
        let got: Vec<(u64, String, u64, u64)> = read_log(&path)
            .unwrap()
            .into_iter()
            .map(|e| (e.start_s as u64, e.tag, e.histogram.len(), e.histogram.max()))
            .collect();
        let want: Vec<(u64, String, u64, u64)> = run
            .intervals
            .iter()
            .flat_map(|r| r.scripts.iter().map(move |s| (r, s)))
            .map(|(r, s)| {
                let h = s.latency.decode().unwrap();
                (r.start_us / 1_000_000, s.script.name().to_owned(), h.len(), h.max())
            })
            .collect();
        assert_eq!(got, want);
        assert_eq!(got.len(), 3);
        assert_eq!(got[2], (2, "complete".to_owned(), 5, 2_000));
    }

    #[test]
    fn totals_hold_the_summary_histograms() {
        let run = sample_run();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("totals.hlog");
        write_totals(&path, &run).unwrap();
        let entries = read_log(&path).unwrap();
        let tags: Vec<&str> = entries.iter().map(|e| e.tag.as_str()).collect();
        // The sample's closed-loop calls have no send lag; complete's two EMQFENCE refusals
        // have an error histogram.
        assert_eq!(
            tags,
            ["latency.enqueue", "service.enqueue", "latency.complete", "service.complete", "error.complete"]
        );
        let summary = crate::report::summarize(&run);
        assert_eq!(entries[4].histogram.len(), 2);
        assert_eq!(entries[4].histogram.max(), summary[1].error_latency_us.max);
        assert_eq!(entries[2].histogram.value_at_quantile(0.99), summary[1].latency_us.p99);
        assert_eq!((entries[0].start_s, entries[0].length_s), (1.0, 2.0));
    }
}
