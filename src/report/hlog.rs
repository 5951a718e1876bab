//! `latency.hlog`: an HdrHistogram interval log, one histogram per second per script.

use std::path::Path;
use std::time::Duration;

use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;

use super::{write_atomic, ReportError};
use crate::metrics::RunMetrics;

/// Write the per-second ok-latency histograms to `path` as an HdrHistogram interval log.
///
/// Format: the HdrHistogram log format (readable by `HistogramLogProcessor`, HdrHistogram's
/// plotter and `hdrhistogram::serialization::interval_log::IntervalLogIterator`): comment lines,
/// `#[StartTime: ...]` and `#[BaseTime: ...]` both set to the run start (wall clock), then one line
/// per measured interval per script with at least one ok call: `Tag=<script>,<start s since run
/// start>,<length s>,<max>,<V2 deflate base64 histogram>`. Values are µs (max divisor 1).
///
/// # Errors
/// [`ReportError::Hlog`] if a histogram fails to decode or encode, [`ReportError::Io`] otherwise;
/// both name `path`.
pub fn write_hlog(path: &Path, run: &RunMetrics) -> Result<(), ReportError> {
    let hlog_err = |message: String| ReportError::Hlog { path: path.to_path_buf(), message };
    write_atomic(path, |w| {
        let mut serializer = V2DeflateSerializer::new();
        let mut log = IntervalLogWriterBuilder::new()
            .add_comment("emq-bench latency per script: ok calls, us from the intended send")
            .with_start_time(run.start_wall)
            .with_base_time(run.start_wall)
            .begin_log_with(w, &mut serializer)
            .map_err(|e| hlog_err(e.to_string()))?;
        for rec in &run.intervals {
            for s in rec.scripts.iter().filter(|s| s.ok > 0) {
                let h = s.latency.decode().map_err(|e| hlog_err(e.to_string()))?;
                let tag = Tag::new(s.script.name()).expect("script names have no ',' ' ' or '\\n'");
                log.write_histogram(
                    &h,
                    Duration::from_micros(rec.start_us),
                    Duration::from_micros(rec.duration_us),
                    Some(tag),
                )
                .map_err(|e| hlog_err(e.to_string()))?;
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    use hdrhistogram::serialization::Deserializer;
    use hdrhistogram::Histogram;

    use super::*;
    use crate::report::tests::sample_run;

    /// Minimal standard-alphabet base64 decoder (the crate has no base64 dependency of its own).
    fn base64(s: &str) -> Vec<u8> {
        let val = |c: u8| match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {c}"),
        };
        let (mut out, mut acc, mut bits) = (Vec::new(), 0u32, 0);
        for c in s.bytes().filter(|&c| c != b'=') {
            acc = (acc << 6) | u32::from(val(c));
            bits += 6;
            if bits >= 8 {
                bits -= 8;
                out.push((acc >> bits) as u8);
            }
        }
        out
    }

    #[test]
    fn log_reads_back_with_the_same_counts() {
        let run = sample_run();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("latency.hlog");
        write_hlog(&path, &run).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let (mut starts, mut bases, mut got) = (0, 0, Vec::new());
        for entry in IntervalLogIterator::new(&bytes) {
            match entry.unwrap() {
                LogEntry::StartTime(_) => starts += 1,
                LogEntry::BaseTime(_) => bases += 1,
                LogEntry::Interval(i) => {
                    let raw = base64(i.encoded_histogram());
                    let h: Histogram<u64> = Deserializer::new().deserialize(&mut &raw[..]).unwrap();
                    let tag = i.tag().unwrap().as_str().to_owned();
                    got.push((i.start_timestamp().as_secs(), tag, h.len(), h.max()));
                }
            }
        }
        assert_eq!((starts, bases), (1, 1));
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
}
