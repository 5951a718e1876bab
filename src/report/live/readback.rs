//! The read-back at a run's end: its per-second series put together again from the scratch
//! file of the seconds' counts and the histograms in latency.hlog.

use super::spill::SpilledSecond;
use crate::metrics::{IntervalRecord, RunMetrics, INTERVAL_US};
use crate::report::ReportError;
use std::fs::File;
use std::path::Path;

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
pub(super) fn restore_series(
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

/// Puts back into `metrics`' per-second series (read back by [`restore_series`], counts and
/// percentiles only) the histograms the run wrote to `latency_hlog` as it went, added to
/// whatever the series holds for that second (data a stalled task sent after the second
/// closed). Read one entry at a time; each is stored compacted.
///
/// # Errors
/// [`ReportError`] naming the file when it cannot be read or a histogram does not decode.
pub(super) fn restore_latency(metrics: &mut RunMetrics, latency_hlog: &Path) -> Result<(), ReportError> {
    let by_index: std::collections::HashMap<u64, usize> =
        metrics.intervals.iter().enumerate().map(|(at, rec)| (rec.index, at)).collect();
    crate::report::hlog::each_entry(latency_hlog, |entry| {
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
