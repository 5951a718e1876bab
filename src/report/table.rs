//! The final terminal table: a pure function from the finished model to a `String` (no printing).

use std::fmt::Write as _;

use super::percentile_bounds::{interval_lines, CONFIDENCE};
use super::{errors_line, ms3, ScriptSummary};
use crate::metrics::JobCounter;

/// Column headers; latencies are ms with 3 decimals, as memtier_benchmark prints them.
const HEADERS: [&str; 10] = ["script", "calls", "ops/s", "errors", "p50", "p90", "p99", "p99.9", "p99.99", "max"];

/// The jobs line's counters and labels, in print order.
const JOB_LINE: [(JobCounter, &str); 9] = [
    (JobCounter::Enqueued, "enqueued"),
    (JobCounter::Duplicates, "duplicates"),
    (JobCounter::Claimed, "claimed"),
    (JobCounter::Completed, "completed"),
    (JobCounter::Retried, "retried"),
    (JobCounter::Failed, "failed"),
    (JobCounter::FailedByStall, "failed by stall"),
    (JobCounter::Reaped, "reaped"),
    (JobCounter::StaleRefused, "stale completions refused"),
];

/// Format the summary table: one row per script (`summaries` order), aligned columns (script left,
/// numbers right), a `(ms)` note on the latency header, the percentiles' intervals (a heading,
/// then one line per script with an ok call: [`interval_lines`]), then one jobs line from `jobs`
/// (indexed by [`JobCounter::index`]), counted over the whole run: when `warmup_secs` > 0 the
/// line says the warmup is in it, since the script rows above leave it out. Every line ends
/// with `\n`.
///
/// Latency columns are ok-call latency from the intended send (coordinated-omission free).
pub fn format_table(summaries: &[ScriptSummary], jobs: &[u64; JobCounter::COUNT], warmup_secs: u64) -> String {
    let rows: Vec<[String; 10]> = summaries
        .iter()
        .map(|s| {
            let l = &s.latency_us;
            // No successful call has no latency: a dash, never a 0.000 that reads as fast.
            let ms = |us: u64| if s.ok == 0 { "–".to_string() } else { ms3(us) };
            [
                s.script.clone(),
                s.calls.to_string(),
                format!("{:.1}", s.ops_per_sec),
                s.error_total().to_string(),
                ms(l.p50),
                ms(l.p90),
                ms(l.p99),
                ms(l.p999),
                ms(l.p9999),
                ms(l.max),
            ]
        })
        .collect();
    let mut widths = HEADERS.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header = HEADERS.map(str::to_owned);
    for row in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(widths).enumerate() {
            let _ = match i {
                0 => write!(line, "{cell:<w$}"),
                _ => write!(line, "  {cell:>w$}"),
            };
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out.push_str("latencies in ms from the intended send (open loop) or the actual send (closed loop); service times in summary.json\n");
    let intervals = interval_lines(summaries);
    if !intervals.is_empty() {
        let _ = writeln!(
            out,
            "{:.0} % intervals (order statistics, any distribution, independent calls assumed):",
            CONFIDENCE * 100.0
        );
        for line in intervals {
            out.push_str(&line);
            out.push('\n');
        }
    }
    if let Some(errors) = errors_line(summaries) {
        out.push_str(&errors);
        out.push('\n');
    }
    let jobs_line: Vec<String> = JOB_LINE.iter().map(|(c, label)| format!("{label} {}", jobs[c.index()])).collect();
    let label = if warmup_secs > 0 {
        format!("jobs (whole run, the {warmup_secs} s warmup included)")
    } else {
        "jobs".to_string()
    };
    let _ = writeln!(out, "{label}: {}", jobs_line.join(", "));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::summarize;
    use crate::report::tests::sample_run;

    #[test]
    fn columns_are_aligned_and_jobs_listed() {
        let run = sample_run();
        let table = format_table(&summarize(&run), &run.jobs, 0);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 9, "{table}");
        assert!(lines[0].starts_with("script  "));
        assert!(lines[2].starts_with("complete"));
        // Right-aligned numeric columns end at the same offset on every row.
        let ends: Vec<usize> = lines[..3].iter().map(|l| l.len()).collect();
        assert!(ends.iter().all(|&e| e == ends[0]), "{table}");
        assert!(
            lines[2].contains("5.0")
                && lines[2].ends_with(&ms3(run.script(crate::lua::Script::Complete).unwrap().latency.max()))
        );
        assert_eq!(lines[4], "95 % intervals (order statistics, any distribution, independent calls assumed):");
        assert_eq!(lines[5], "  enqueue: p50 1.000 (0.600–1.500); p90 needs ≥ 36 calls (has 20)");
        assert_eq!(lines[6], "  complete: p50 0.500 (0.200–2.000); p90 needs ≥ 36 calls (has 10)");
        assert_eq!(
            lines[7],
            "errors: complete EMQFENCE 2; stale workers' calls refused (fencing, invariant I6): 2 of 2"
        );
        assert_eq!(
            lines[8],
            "jobs: enqueued 20, duplicates 0, claimed 0, completed 10, retried 0, failed 0, \
             failed by stall 0, reaped 0, stale completions refused 2"
        );
        let warm = format_table(&summarize(&run), &run.jobs, 2);
        assert!(warm.contains("\njobs (whole run, the 2 s warmup included): enqueued 20,"), "{warm}");
    }
}
