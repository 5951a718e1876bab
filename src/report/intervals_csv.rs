//! `intervals.csv`: the per-second series, one row per measured second per called script.

use std::path::Path;

use serde::Serialize;

use super::{ms3, write_atomic, ReportError};
use crate::faults::FaultsSeen;
use crate::lua::Script;
use crate::metrics::{IntervalRecord, RunMetrics};
use crate::scenario::Stages;

/// One row of intervals.csv; the header is the field names.
#[derive(Serialize)]
struct Row<'a> {
    t_s: u64,
    script: &'a str,
    ok: u64,
    errors: u64,
    ops_per_sec: String,
    p50_ms: String,
    p99_ms: String,
    max_ms: String,
    faults: &'a str,
    stage: Option<usize>,
    intended_rate: Option<String>,
}

/// Write `intervals.csv` to `path`: header
/// `t_s,script,ok,errors,ops_per_sec,p50_ms,p99_ms,max_ms,faults,stage,intended_rate`.
///
/// `t_s` is the interval start in whole seconds since the run start (so the first row is at the
/// warmup length); `ops_per_sec` is ok calls over the interval's length (1 s, or less for the last
/// one), 1 decimal; latencies are that second's ok-call latency from the intended send, ms with 3
/// decimals (0.000 when the script had only errors). `faults` names the faults that touched
/// the second (injected kinds and `unreachable`, `;`-separated, empty for none), so errors and
/// latency can be read against them. Every measured second has a row for every script the run
/// called, zeros included: an outage shows as zeros, not as a gap a plot would bridge.
///
/// With a load shape (`stages`, timed from the run's start as the load phase is), `stage` is
/// the 0-based index of the stage under way at the second's start and `intended_rate` the
/// schedule's mean enqueue rate over the second (jobs/s, 1 decimal, over the part of the second
/// within the stages), both on every script's row of that second so `ops_per_sec` of
/// `enqueue` reads against them; both are empty without stages and after the last stage.
///
/// # Errors
/// [`ReportError::Csv`] or [`ReportError::Io`], naming `path`.
pub fn write_intervals_csv(
    path: &Path,
    run: &RunMetrics,
    faults: &FaultsSeen,
    stages: Option<&Stages>,
) -> Result<(), ReportError> {
    let csv_err = |source| ReportError::Csv { path: path.to_path_buf(), source };
    let called: Vec<Script> = run.scripts.iter().filter(|t| t.was_called()).map(|t| t.script).collect();
    let first = run.warmup_intervals;
    let end_us = first * 1_000_000 + run.measured_us;
    // Replies read after the stop (the wait for requests in flight) fall in later intervals:
    // those rows are kept too.
    let last = run.intervals.last().map_or(0, |r| r.index + 1);
    let seconds = end_us.div_ceil(1_000_000).max(last).saturating_sub(first);
    write_atomic(path, |w| {
        let mut out = csv::Writer::from_writer(w);
        let mut recs = run.intervals.iter().peekable();
        for k in first..first + seconds {
            while recs.peek().is_some_and(|r| r.index < k) {
                recs.next();
            }
            let rec = recs.peek().filter(|r| r.index == k);
            let start_us = k * 1_000_000;
            let duration_us =
                rec.map_or_else(|| end_us.saturating_sub(start_us).clamp(1, 1_000_000), |r| r.duration_us);
            let from = start_us as f64 / 1e6;
            let active = faults.active_in(from, from + duration_us.max(1) as f64 / 1e6);
            let second = Second { k, rec: rec.copied(), duration_us, faults: &active };
            write_second(&mut out, &second, &called, stages).map_err(csv_err)?;
        }
        out.flush().map_err(|e| csv_err(e.into()))
    })
}

/// One second of intervals.csv: its index, its record (`None`: no call in it), its length and
/// the faults that touched it (`;`-separated).
pub(crate) struct Second<'a> {
    /// The interval's index (`t_s`).
    pub k: u64,
    /// The merged interval, when any call fell in it.
    pub rec: Option<&'a IntervalRecord>,
    /// Its length, µs (1 s but for a last one cut short).
    pub duration_us: u64,
    /// The faults active in it.
    pub faults: &'a str,
}

/// Writes the rows of `second`, one per script of `called` (zeros for one without a call in
/// it): the rows [`write_intervals_csv`] writes, and the ones a run appends as it goes.
pub(crate) fn write_second<W: std::io::Write>(
    out: &mut csv::Writer<W>,
    second: &Second,
    called: &[Script],
    stages: Option<&Stages>,
) -> Result<(), csv::Error> {
    let secs = second.duration_us.max(1) as f64 / 1e6;
    let (stage, intended) = stage_of_second(stages, second.k);
    let intended_rate = intended.map(|r| format!("{r:.1}"));
    for &script in called {
        let s = second.rec.and_then(|r| r.scripts.iter().find(|s| s.script == script));
        let (ok, errors) = s.map_or((0, 0), |s| (s.ok, s.error_total()));
        out.serialize(Row {
            t_s: second.k,
            script: script.name(),
            ok,
            errors,
            ops_per_sec: format!("{:.1}", ok as f64 / secs),
            p50_ms: ms3(s.map_or(0, |s| s.p50_us)),
            p99_ms: ms3(s.map_or(0, |s| s.p99_us)),
            max_ms: ms3(s.map_or(0, |s| s.max_us)),
            faults: second.faults,
            stage,
            intended_rate: intended_rate.clone(),
        })?;
    }
    Ok(())
}

/// The stage under way at the start of second `k` of the run, and the intended rate over
/// that second (jobs/s), when the run follows `stages` and the second is within them.
pub(crate) fn stage_of_second(stages: Option<&Stages>, k: u64) -> (Option<usize>, Option<f64>) {
    let Some(stages) = stages else { return (None, None) };
    let from = k as f64;
    (stages.stage_at(from), stages.rate_over(from, from + 1.0))
}

/// `intervals.csv`, with the faults of summary.json.
pub struct IntervalsCsv;
impl super::writer::Writer<super::results::RunResults<'_>> for IntervalsCsv {
    fn file(&self) -> &'static str {
        "intervals.csv"
    }
    fn write(&self, path: &Path, run: &super::results::RunResults) -> Result<(), ReportError> {
        write_intervals_csv(path, run.metrics, &run.summary.faults, run.stages)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::sample_run;
    use std::time::Duration;

    #[test]
    fn one_row_per_second_per_script() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("intervals.csv");
        let mut faults = FaultsSeen::default();
        faults.injected.push(crate::faults::FaultSpan {
            kind: crate::faults::SpanKind::Injected(crate::scenario::FaultKind::Pause),
            applied: true,
            from_s: 2.5,
            to_s: 2.9,
            count: 0,
            detail: String::new(),
            effects: None,
            queue: None,
        });
        write_intervals_csv(&path, &sample_run(), &faults, None).unwrap();
        let mut r = csv::Reader::from_path(&path).unwrap();
        let rows: Vec<Vec<String>> = r.records().map(|rec| rec.unwrap().iter().map(str::to_owned).collect()).collect();
        let keys: Vec<(&str, &str, &str, &str)> =
            rows.iter().map(|r| (r[0].as_str(), r[1].as_str(), r[2].as_str(), r[3].as_str())).collect();
        assert_eq!(
            keys,
            [
                ("1", "enqueue", "20", "0"),
                ("1", "complete", "5", "0"),
                ("2", "enqueue", "0", "0"),
                ("2", "complete", "5", "2")
            ],
            "every second has a row for every called script, zeros included"
        );
        assert_eq!(rows[0][4], "20.0");
        assert_eq!(rows[3][7], "2.000");
        assert_eq!((rows[0][8].as_str(), rows[3][8].as_str()), ("", "pause"), "the fault's second is marked");
    }

    /// Each second says the stage under way at its start and the rate intended over it; the
    /// seconds after the last stage say neither.
    #[test]
    fn every_row_carries_its_stage_and_intended_rate() {
        use crate::scenario::StagePlan;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("intervals.csv");
        let stage = |secs, rate_from, rate_to| StagePlan { duration: Duration::from_secs(secs), rate_from, rate_to };
        let stages = Stages::new(&[stage(1, 100.0, 100.0), stage(1, 100.0, 300.0)]);
        write_intervals_csv(&path, &sample_run(), &FaultsSeen::default(), Some(&stages)).unwrap();
        let mut r = csv::Reader::from_path(&path).unwrap();
        assert_eq!(r.headers().unwrap().iter().rev().take(2).collect::<Vec<_>>(), ["intended_rate", "stage"]);
        let tail: Vec<(String, String, String)> =
            r.records().map(|rec| rec.unwrap()).map(|x| (x[0].to_owned(), x[9].to_owned(), x[10].to_owned())).collect();
        let want = |t: &str, s: &str, r: &str| (t.to_owned(), s.to_owned(), r.to_owned());
        assert_eq!(tail, [want("1", "1", "200.0"), want("1", "1", "200.0"), want("2", "", ""), want("2", "", "")]);
    }

    /// A second without any call (a 1 s outage) is a row of zeros, not a gap.
    #[test]
    fn an_outage_is_a_row_of_zeros() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("intervals.csv");
        let mut run = sample_run();
        run.intervals.retain(|r| r.index != 1);
        write_intervals_csv(&path, &run, &FaultsSeen::default(), None).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\n1,enqueue,0,0,0.0,0.000,0.000,0.000,,,\n1,complete,0,0,0.0,"), "{text}");
        assert!(text.contains("\n2,complete,5,2,"), "{text}");
    }
}
