//! `scripts.csv`: one row per called script, latencies in ms with 3 decimals (memtier's unit).

use std::path::Path;

use serde::Serialize;

use super::{ms3, write_atomic, ReportError, ScriptSummary};

/// One row of scripts.csv; the header is the field names.
#[derive(Serialize)]
struct Row<'a> {
    script: &'a str,
    calls: u64,
    ok: u64,
    errors: u64,
    ops_per_sec: String,
    p50_ms: String,
    p90_ms: String,
    p99_ms: String,
    p999_ms: String,
    p9999_ms: String,
    max_ms: String,
    service_p50_ms: String,
    service_p99_ms: String,
    p99_lo_ms: String,
    p99_hi_ms: String,
    p999_lo_ms: String,
    p999_hi_ms: String,
}

/// Write `scripts.csv` to `path`: header `script,calls,ok,errors,ops_per_sec,p50_ms,p90_ms,p99_ms,
/// p999_ms,p9999_ms,max_ms,service_p50_ms,service_p99_ms,p99_lo_ms,p99_hi_ms,p999_lo_ms,p999_hi_ms`,
/// one row per summary, in order.
///
/// Latency columns are ok-call latency from the intended send (service_* from the actual send), ms
/// with 3 decimals; `errors` is the total over all codes (by code in summary.json); `ops_per_sec`
/// has 1 decimal and counts ok calls only. The `_lo_`/`_hi_` columns are the 95 % order-statistic
/// interval of p99 and p99.9 ([`super::PercentileBound`]), empty where too few calls give a finite
/// bound.
///
/// # Errors
/// [`ReportError::Csv`] or [`ReportError::Io`], naming `path`.
pub fn write_scripts_csv(path: &Path, summaries: &[ScriptSummary]) -> Result<(), ReportError> {
    let csv_err = |source| ReportError::Csv { path: path.to_path_buf(), source };
    write_atomic(path, |w| {
        let mut out = csv::Writer::from_writer(w);
        for s in summaries {
            let l = &s.latency_us;
            out.serialize(Row {
                script: &s.script,
                calls: s.calls,
                ok: s.ok,
                errors: s.error_total(),
                ops_per_sec: format!("{:.1}", s.ops_per_sec),
                p50_ms: ms3(l.p50),
                p90_ms: ms3(l.p90),
                p99_ms: ms3(l.p99),
                p999_ms: ms3(l.p999),
                p9999_ms: ms3(l.p9999),
                max_ms: ms3(l.max),
                service_p50_ms: ms3(s.service_us.p50),
                service_p99_ms: ms3(s.service_us.p99),
                p99_lo_ms: bound(l.intervals.p99.lo_us),
                p99_hi_ms: bound(l.intervals.p99.hi_us),
                p999_lo_ms: bound(l.intervals.p999.lo_us),
                p999_hi_ms: bound(l.intervals.p999.hi_us),
            })
            .map_err(csv_err)?;
        }
        out.flush().map_err(|e| csv_err(e.into()))
    })
}

/// A bound in ms with 3 decimals, or an empty cell when it is not finite.
fn bound(us: Option<u64>) -> String {
    us.map_or_else(String::new, ms3)
}

/// `scripts.csv`, from summary.json's scripts.
pub struct ScriptsCsv;
impl super::writer::Writer<super::results::RunResults<'_>> for ScriptsCsv {
    fn file(&self) -> &'static str {
        "scripts.csv"
    }
    fn write(&self, path: &Path, run: &super::results::RunResults) -> Result<(), ReportError> {
        write_scripts_csv(path, &run.summary.scripts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::summarize;
    use crate::report::tests::sample_run;

    #[test]
    fn reads_back_with_the_csv_reader() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("scripts.csv");
        write_scripts_csv(&path, &summarize(&sample_run())).unwrap();
        let mut r = csv::Reader::from_path(&path).unwrap();
        let header: Vec<String> = r.headers().unwrap().iter().map(str::to_owned).collect();
        assert_eq!(header[..5], ["script", "calls", "ok", "errors", "ops_per_sec"]);
        assert_eq!(header.len(), 17);
        assert_eq!(header[13..], ["p99_lo_ms", "p99_hi_ms", "p999_lo_ms", "p999_hi_ms"]);
        let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
        assert_eq!(rows.len(), 2);
        assert_eq!(&rows[1][0], "complete");
        assert_eq!((&rows[1][1], &rows[1][2], &rows[1][3]), ("12", "10", "2"));
        assert_eq!(&rows[1][4], "5.0");
        assert_eq!(&rows[1][10], "2.000", "max 2000 µs is 2.000 ms");
        // 10 ok calls bound neither p99 nor p99.9 from above; the largest bounds p99.9 from below.
        assert_eq!((&rows[1][14], &rows[1][15], &rows[1][16]), ("", "2.000", ""));
        assert!(!dir.path().join("scripts.csv.tmp").exists());
    }
}
