//! `server.csv`: the server sampled every second, one row per node per second.

use std::collections::BTreeSet;
use std::path::Path;

use super::results::RunResults;
use super::writer::Writer;
use super::{write_atomic, ReportError};
use crate::probe::Row;

/// The file's name in a results folder.
pub const SERVER_CSV: &str = "server.csv";

/// The fixed columns of server.csv; then `calls.<command>` and `usec.<command>` per command
/// any node ran during the run.
pub const COLUMNS: [&str; 15] = [
    "t_s",
    "node",
    "up",
    "cpu_user_pct",
    "cpu_sys_pct",
    "used_memory",
    "used_memory_rss",
    "used_memory_scripts",
    "used_memory_lua",
    "connected_clients",
    "ops_per_sec",
    "evalsha_usec_per_call",
    "evalsha_p50_us_since_start",
    "evalsha_p99_us_since_start",
    "evalsha_p999_us_since_start",
];

/// Writes `rows` to `path`: header [`COLUMNS`] then `calls.<cmd>`,`usec.<cmd>` for every
/// command in any row (sorted), one row per node per second.
///
/// `t_s` is s since the run start (3 decimals), `up` 1 when the node answered INFO within the
/// second (0: the figures are empty); CPU in % of one core over the second; memory in bytes
/// and clients as INFO said at the sample; `ops_per_sec` from `total_commands_processed`; the
/// commands' calls and µs are that second's (from `INFO commandstats`), `evalsha_usec_per_call`
/// their ratio for EVALSHA; the `_since_start` percentiles are the server's own
/// (`INFO latencystats`, cumulative since it started; empty where not reported).
///
/// # Errors
/// [`ReportError::Csv`] or [`ReportError::Io`], naming `path`.
pub fn write_server_csv(path: &Path, rows: &[Row]) -> Result<(), ReportError> {
    let csv_err = |source| ReportError::Csv { path: path.to_path_buf(), source };
    let commands: BTreeSet<&str> =
        rows.iter().filter_map(|r| r.figures.as_ref()).flat_map(|f| f.commands.keys().map(String::as_str)).collect();
    write_atomic(path, |w| {
        let mut out = csv::Writer::from_writer(w);
        out.write_record(header(&commands)).map_err(csv_err)?;
        for row in rows {
            out.write_record(record(row, &commands)).map_err(csv_err)?;
        }
        out.flush().map_err(|e| csv_err(e.into()))
    })
}

/// server.csv's header: [`COLUMNS`], then `calls.<cmd>`,`usec.<cmd>` for each of `commands`.
pub(crate) fn header(commands: &BTreeSet<&str>) -> Vec<String> {
    COLUMNS
        .iter()
        .map(|c| c.to_string())
        .chain(commands.iter().flat_map(|c| [format!("calls.{c}"), format!("usec.{c}")]))
        .collect()
}

/// One server.csv row of `row` (its `t_s` as given), with the columns of `commands`.
pub(crate) fn record(row: &Row, commands: &BTreeSet<&str>) -> Vec<String> {
    let mut record = vec![format!("{:.3}", row.t_s), row.node.clone()];
    match &row.figures {
        None => {
            record.push("0".into());
            record.resize(COLUMNS.len() + 2 * commands.len(), String::new());
        }
        Some(f) => {
            let l = &f.level;
            let evalsha = f.commands.get("evalsha");
            let per_call = evalsha.map_or(String::new(), |s| format!("{:.2}", s.usec as f64 / s.calls as f64));
            let pct = |p: Option<f64>| p.map_or(String::new(), |v| format!("{v:.3}"));
            let (p50, p99, p999) =
                l.evalsha_percentiles.map_or((None, None, None), |(a, b, c)| (Some(a), Some(b), Some(c)));
            record.extend([
                "1".into(),
                format!("{:.1}", f.cpu_user_pct),
                format!("{:.1}", f.cpu_sys_pct),
                l.used_memory.to_string(),
                l.used_memory_rss.to_string(),
                l.used_memory_scripts.to_string(),
                l.used_memory_lua.to_string(),
                l.connected_clients.to_string(),
                format!("{:.1}", f.ops_per_sec),
                per_call,
                pct(p50),
                pct(p99),
                pct(p999),
            ]);
            for c in commands {
                let stat = f.commands.get(*c).cloned().unwrap_or_default();
                record.extend([stat.calls.to_string(), stat.usec.to_string()]);
            }
        }
    }
    record
}

/// `server.csv`.
pub struct ServerCsv;
impl Writer<RunResults<'_>> for ServerCsv {
    fn file(&self) -> &'static str {
        SERVER_CSV
    }
    fn write(&self, path: &Path, run: &RunResults) -> Result<(), ReportError> {
        write_server_csv(path, &run.server.rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::{reading, Figures};

    #[test]
    fn one_row_per_node_and_a_column_pair_per_command() {
        let a = reading::parse("used_memory:10\r\ncmdstat_evalsha:calls=1,usec=5\r\n");
        let b = reading::parse("used_memory:20\r\ncmdstat_evalsha:calls=11,usec=55\r\ncmdstat_info:calls=1,usec=9\r\n");
        let rows = vec![
            Row { t_s: 1.0, node: "n1".into(), figures: Some(Figures::between(&a, &b, 1.0)) },
            Row { t_s: 1.0, node: "n2".into(), figures: None },
        ];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.csv");
        write_server_csv(&path, &rows).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].ends_with(",calls.evalsha,usec.evalsha,calls.info,usec.info"), "{}", lines[0]);
        assert!(lines[1].starts_with("1.000,n1,1,0.0,0.0,20,"), "{}", lines[1]);
        assert!(lines[1].ends_with(",10,50,1,9"), "{}", lines[1]);
        assert!(lines[1].contains(",5.00,"), "50 us over 10 calls: {}", lines[1]);
        assert_eq!(lines[2].split(',').count(), lines[0].split(',').count(), "a row without figures keeps the shape");
        assert!(lines[2].starts_with("1.000,n2,0,"));
    }
}
