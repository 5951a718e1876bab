//! What report.html shows, read back from a results folder's files (never from memory): a run
//! and `emq-bench report DIR` render the same page from the same bytes. Percentiles come from
//! the recorded histograms through hdrhistogram itself; nothing here estimates one.

use crate::faults::FaultSpan;
use crate::report::hlog::{read_log, Entry};
use crate::report::run_summary::RunSummary;
use crate::report::ReportError;
use hdrhistogram::Histogram;
use serde::Deserialize;
use std::path::Path;

/// A percentile spectrum as HdrHistogram's plotter draws it: latency against 1/(1−p).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Spectrum {
    /// (1/(1−p), ms), from hdrhistogram's quantile iteration (5 steps per halving of 1−p,
    /// as HdrHistogram's percentile distribution output), p < 1 only.
    pub points: Vec<(f64, f64)>,
    /// The named percentiles (label, 1/(1−p), ms): p50, p90, p99, p99.9, p99.99, and the max
    /// at 1/(1−p) = the count.
    pub marks: Vec<(&'static str, f64, f64)>,
}

/// The named percentiles of a spectrum.
pub const MARKS: [(&str, f64); 5] = [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p99.9", 0.999), ("p99.99", 0.9999)];

impl Spectrum {
    /// The spectrum of `h` (µs), in ms; empty for an empty histogram.
    pub fn of(h: &Histogram<u64>) -> Spectrum {
        if h.is_empty() {
            return Spectrum::default();
        }
        let ms = |us: u64| us as f64 / 1000.0;
        let points = h
            .iter_quantiles(5)
            .map(|v| (v.quantile_iterated_to(), v.value_iterated_to()))
            .filter(|(q, _)| *q < 1.0)
            .map(|(q, v)| (1.0 / (1.0 - q), ms(v)))
            .collect();
        let mut marks: Vec<(&'static str, f64, f64)> =
            MARKS.iter().map(|(label, q)| (*label, 1.0 / (1.0 - q), ms(h.value_at_quantile(*q)))).collect();
        marks.push(("max", h.len() as f64, ms(h.max())));
        Spectrum { points, marks }
    }

    /// The value of the mark `label` (e.g. `p99`), ms.
    pub fn mark(&self, label: &str) -> Option<f64> {
        self.marks.iter().find(|m| m.0 == label).map(|m| m.2)
    }
}

/// One second of one script (from latency.hlog and intervals.csv).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Second {
    /// Interval start, s since the run start.
    pub t_s: f64,
    /// Ok calls per second.
    pub ok_per_s: f64,
    /// Failed calls in the second.
    pub errors: f64,
    /// p50, p99, p99.9, max of that second's ok latency, ms (None for a second without ok calls).
    pub latency: Option<[f64; 4]>,
}

/// One script's page section.
#[derive(Debug, Clone, Default)]
pub struct ScriptView {
    /// Script name.
    pub name: String,
    /// Per second.
    pub seconds: Vec<Second>,
    /// Latency from the intended send, whole run.
    pub latency: Spectrum,
    /// Service time from the actual send, whole run.
    pub service: Spectrum,
}

/// One row of server.csv, the columns the page draws.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ServerPoint {
    /// s since the run start.
    pub t_s: f64,
    /// `host:port`.
    pub node: String,
    /// 1 when the node answered.
    pub up: u8,
    /// % of one core.
    pub cpu_user_pct: Option<f64>,
    /// % of one core.
    pub cpu_sys_pct: Option<f64>,
    /// Bytes.
    pub used_memory: Option<f64>,
    /// Bytes.
    pub used_memory_rss: Option<f64>,
    /// Bytes (the Lua VM).
    pub used_memory_lua: Option<f64>,
    /// Commands per second.
    pub ops_per_sec: Option<f64>,
    /// Clients connected.
    pub connected_clients: Option<f64>,
}

/// One row of queue.csv.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct QueuePoint {
    /// Second, s since the run start.
    pub t_s: f64,
    /// Depths (None when not read in that second).
    pub pending: Option<f64>,
    /// See `pending`.
    pub active: Option<f64>,
    /// See `pending`.
    pub delayed: Option<f64>,
    /// Jobs enqueued in the second.
    pub enqueued: f64,
    /// Jobs completed in the second.
    pub completed_calls: f64,
    /// Reaped in the second.
    pub reaped: f64,
    /// Stale completions refused in the second.
    pub stale_refused: f64,
}

/// Everything report.html shows.
#[derive(Debug)]
pub struct RunView {
    /// summary.json.
    pub summary: RunSummary,
    /// Per called script, in summary order.
    pub scripts: Vec<ScriptView>,
    /// queue.csv (empty when the folder has none).
    pub queue: Vec<QueuePoint>,
    /// server.csv (empty when the folder has none).
    pub server: Vec<ServerPoint>,
    /// Fault windows (kind, from s, to s), injected and seen.
    pub faults: Vec<FaultSpan>,
    /// What the folder lacked (a file of an older run), said on the page.
    pub missing: Vec<String>,
    /// When summary.json still says `running` (the run was killed before it wrote its own):
    /// about when, s since the run start (the latest of the summary's last rewrite, the last
    /// second written to intervals.csv and the last row of server.csv and queue.csv). Its
    /// `summary`'s script figures are then read from the per-second files.
    pub killed_at_s: Option<f64>,
}

#[derive(Deserialize)]
struct IntervalRow {
    t_s: f64,
    script: String,
    #[serde(default)]
    ok: f64,
    errors: f64,
    ops_per_sec: f64,
}

/// A killed run's script figures from its per-second files, which run a few seconds past the
/// last summary rewrite: ok calls and errors summed over intervals.csv's measured seconds (a
/// script first called after the rewrite added), each over one window, to the end of the last
/// second any script has; the latency merged from latency.hlog's. Errors by code stay the
/// rewrite's (intervals.csv counts errors, not their codes); service times are the end's only:
/// left empty.
fn from_seconds(summary: &mut RunSummary, intervals: &[IntervalRow], per_second: &[Entry]) {
    let from = summary.warmup_secs as f64;
    let last = intervals.iter().map(|r| r.t_s + 1.0).fold(0.0, f64::max);
    let window = (last - from).max(summary.measured_secs);
    for r in intervals {
        if !summary.scripts.iter().any(|s| s.script == r.script) {
            summary.scripts.push(crate::report::ScriptSummary::with_counts(&r.script, 0, 0, &[]));
        }
    }
    for s in &mut summary.scripts {
        let rows: Vec<&IntervalRow> = intervals.iter().filter(|r| r.script == s.script && r.t_s >= from).collect();
        if rows.is_empty() {
            continue;
        }
        let ok = rows.iter().map(|r| r.ok as u64).sum::<u64>();
        let errors = rows.iter().map(|r| r.errors as u64).sum::<u64>();
        s.ok = ok;
        s.calls = ok + errors.max(s.error_total());
        s.window_secs = window;
        s.ops_per_sec = if window > 0.0 { ok as f64 / window } else { 0.0 };
        let mut merged: Option<Histogram<u64>> = None;
        for e in per_second.iter().filter(|e| e.tag == s.script && e.start_s >= from) {
            match merged.as_mut() {
                Some(h) => {
                    // Every histogram of the log has the same bounds: an add cannot fail.
                    let _ = h.add(&e.histogram);
                }
                None => merged = Some(e.histogram.clone()),
            }
        }
        if let Some(h) = merged {
            s.latency_us = crate::report::Percentiles::of(&h);
        }
        s.service_us = crate::report::Percentiles::default();
    }
    summary.measured_secs = window;
}

/// A killed run's job counters: the last rewrite's, plus what queue.csv's seconds after it add.
fn jobs_from_seconds(summary: &mut RunSummary, queue: &[QueuePoint], rewrite_end: f64) {
    for p in queue.iter().filter(|p| p.t_s >= rewrite_end) {
        for (name, n) in [
            ("enqueued", p.enqueued),
            ("completed", p.completed_calls),
            ("reaped", p.reaped),
            ("stale_refused", p.stale_refused),
        ] {
            *summary.jobs.entry(name.to_string()).or_default() += n as u64;
        }
    }
}

fn read_csv<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Vec<T>, ReportError> {
    let bad = |e: csv::Error| ReportError::Read { path: path.to_path_buf(), message: e.to_string() };
    csv::Reader::from_path(path).map_err(bad)?.deserialize().collect::<Result<Vec<T>, _>>().map_err(bad)
}

impl RunView {
    /// Reads the results folder `dir`: summary.json (required), intervals.csv, latency.hlog,
    /// totals.hlog, queue.csv and server.csv (each optional: what is missing is listed in
    /// `missing` and its figures are left out).
    ///
    /// # Errors
    /// [`ReportError::Io`] when summary.json cannot be read, [`ReportError::Read`] when a file
    /// is there but malformed; both name the file.
    pub fn load(dir: &Path) -> Result<RunView, ReportError> {
        let path = dir.join("summary.json");
        let text = std::fs::read_to_string(&path).map_err(|source| ReportError::Io { path: path.clone(), source })?;
        let mut summary: RunSummary = serde_json::from_str(&text)
            .map_err(|e| ReportError::Read { path: path.clone(), message: e.to_string() })?;
        let faults: Vec<FaultSpan> = summary.faults.injected.iter().chain(&summary.faults.seen).cloned().collect();
        let (mut missing, mut scripts, mut queue, mut server) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let optional = |name: &str, missing: &mut Vec<String>| {
            let path = dir.join(name);
            let there = path.exists();
            if !there {
                missing.push(name.to_string());
            }
            there.then_some(path)
        };
        let intervals: Vec<IntervalRow> = match optional("intervals.csv", &mut missing) {
            Some(path) => read_csv(&path)?,
            None => Vec::new(),
        };
        let per_second: Vec<Entry> = match optional(crate::report::hlog::LATENCY_HLOG, &mut missing) {
            Some(path) => read_log(&path)?,
            None => Vec::new(),
        };
        let totals: Vec<Entry> = match optional("totals.hlog", &mut missing) {
            Some(path) => read_log(&path)?,
            None => Vec::new(),
        };
        // Where a killed run's last summary rewrite ends, s since the run start.
        let rewrite_end = summary.warmup_secs as f64 + summary.measured_secs;
        if summary.running {
            from_seconds(&mut summary, &intervals, &per_second);
        }
        let ms = |us: u64| us as f64 / 1000.0;
        for s in &summary.scripts {
            let mut seconds: Vec<Second> = intervals
                .iter()
                .filter(|r| r.script == s.script)
                .map(|r| Second { t_s: r.t_s, ok_per_s: r.ops_per_sec, errors: r.errors, latency: None })
                .collect();
            for e in per_second.iter().filter(|e| e.tag == s.script) {
                let h = &e.histogram;
                let latency = Some(
                    [h.value_at_quantile(0.5), h.value_at_quantile(0.99), h.value_at_quantile(0.999), h.max()].map(ms),
                );
                match seconds.iter_mut().find(|sec| (sec.t_s - e.start_s).abs() < 0.5) {
                    Some(sec) => sec.latency = latency,
                    None => seconds.push(Second { t_s: e.start_s, ok_per_s: 0.0, errors: 0.0, latency }),
                }
            }
            let total = |kind: &str| {
                let tag = format!("{kind}.{}", s.script);
                totals.iter().find(|e| e.tag == tag).map_or_else(Spectrum::default, |e| Spectrum::of(&e.histogram))
            };
            scripts.push(ScriptView {
                name: s.script.clone(),
                seconds,
                latency: total("latency"),
                service: total("service"),
            });
        }
        if let Some(path) = optional("queue.csv", &mut missing) {
            queue = read_csv(&path)?;
        }
        if let Some(path) = optional("server.csv", &mut missing) {
            server = read_csv(&path)?;
        }
        let killed_at_s = summary.running.then(|| {
            // The latest second any file holds: the probe's rows lag least.
            let last_second = intervals.iter().map(|r| r.t_s + 1.0).fold(0.0, f64::max);
            let last_row = server
                .iter()
                .map(|p: &ServerPoint| p.t_s)
                .chain(queue.iter().map(|p: &QueuePoint| p.t_s))
                .fold(0.0, f64::max);
            rewrite_end.max(last_second).max(last_row)
        });
        if summary.running {
            jobs_from_seconds(&mut summary, &queue, rewrite_end);
        }
        Ok(RunView { summary, scripts, queue, server, faults, missing, killed_at_s })
    }

    /// The run's time axis: from the end of warmup to the last second any series has, s.
    pub fn time_range(&self) -> (f64, f64) {
        let from = self.summary.warmup_secs as f64;
        let last = self
            .scripts
            .iter()
            .flat_map(|s| s.seconds.iter().map(|x| x.t_s + 1.0))
            .chain(self.queue.iter().map(|q| q.t_s + 1.0))
            .chain(self.server.iter().map(|p| p.t_s))
            .fold(from + 1.0, f64::max);
        (from.min(last - 1.0), last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A known histogram (1..=1000 µs, one each): the spectrum's marks are hdrhistogram's own
    /// percentiles of it, and the curve rises through them as HdrHistogram's plotter draws it.
    #[test]
    fn the_spectrum_of_a_known_histogram() {
        let mut h = crate::metrics::new_histogram();
        for us in 1..=1000 {
            h.record(us).unwrap();
        }
        let s = Spectrum::of(&h);
        assert_eq!(s.mark("p50"), Some(0.5));
        assert_eq!(s.mark("p99"), Some(0.99));
        assert_eq!(s.mark("max"), Some(1.0));
        assert_eq!(s.marks.last().map(|m| m.1), Some(1000.0), "the max sits at 1/(1-p) = the count");
        assert!(s.points.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1), "monotonic");
        let at_100 = s.points.iter().rfind(|p| p.0 <= 100.0).unwrap();
        assert!((at_100.0 - 100.0).abs() < 25.0 && (at_100.1 - 0.99).abs() < 0.03, "{at_100:?}");
        assert_eq!(Spectrum::of(&crate::metrics::new_histogram()), Spectrum::default());
    }
}
