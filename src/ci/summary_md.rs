//! `summary.md`: a run on one Markdown page, fit for `$GITHUB_STEP_SUMMARY`
//! (`cat results/x/summary.md >> "$GITHUB_STEP_SUMMARY"`): the verdict first, then per script
//! the rate and p50/p99/p99.9 with their 95 % intervals, the invariants, the thresholds, the
//! default gates and the faults.

use crate::check::Invariant;
use crate::report::gates::GateOutcome;
use crate::report::writer::Writer;
use crate::report::{ms3, JudgedRun, PercentileBound, ReportError, RunResults};
use std::fmt::Write as _;
use std::path::Path;

/// The file's name in a run's folder.
pub const SUMMARY_MD_FILE: &str = "summary.md";

/// `summary.md` of a run's folder.
pub struct SummaryMd;
impl Writer<RunResults<'_>> for SummaryMd {
    fn file(&self) -> &'static str {
        SUMMARY_MD_FILE
    }
    fn write(&self, path: &Path, run: &RunResults) -> Result<(), ReportError> {
        crate::report::write_text(path, &markdown(&run.judged()))
    }
}
impl Writer<JudgedRun<'_>> for SummaryMd {
    fn file(&self) -> &'static str {
        SUMMARY_MD_FILE
    }
    fn write(&self, path: &Path, run: &JudgedRun) -> Result<(), ReportError> {
        crate::report::write_text(path, &markdown(run))
    }
}

/// A table cell: `|` escaped and line breaks as spaces, so a message cannot break the table.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// A percentile with its interval, ms: `1.234 (1.100–1.402)`; an end without enough samples
/// shows as `?`.
fn with_interval(value_us: u64, bound: PercentileBound) -> String {
    let end = |us: Option<u64>| us.map_or("?".to_string(), ms3);
    format!("{} ({}–{})", ms3(value_us), end(bound.lo_us), end(bound.hi_us))
}

/// The page of a finished run (or a fleet's merge).
pub fn markdown(run: &JudgedRun) -> String {
    let s = run.summary;
    let mut out = String::new();
    let (word, code, lines) = match &s.verdict {
        Some(v) if v.passed => ("PASS", v.exit_code, Vec::new()),
        Some(v) => ("FAIL", v.exit_code, v.lines()),
        None => ("no verdict", 1, Vec::new()),
    };
    let _ = writeln!(out, "## emq-bench run `{}`: **{word}** (exit {code})\n", cell(&s.name));
    for line in &lines {
        let _ = writeln!(out, "- FAIL {}", cell(line));
    }
    if !lines.is_empty() {
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "{} on `{}` ({}), seed {}, {:.1} s measured after {} s of warmup, started {}.\n",
        if s.target.protocol.is_empty() { "echomq-v1" } else { &s.target.protocol },
        cell(&s.target.url),
        s.server_version.as_deref().unwrap_or("server version unknown"),
        s.seed,
        s.measured_secs,
        s.warmup_secs,
        s.started
    );

    if let Some(fleet) = &s.fleet {
        let _ = writeln!(
            out,
            "### Fleet `{}`\n\n{} of {} shards merged, started within {:.1} ms of each other.\n",
            cell(&fleet.group),
            fleet.merged.len(),
            fleet.shards,
            fleet.start_spread_ms
        );
        out.push_str("| shard | ran to its end | its verdict | enqueued | completed jobs | start offset ms |\n");
        out.push_str("| ---: | --- | --- | ---: | ---: | ---: |\n");
        for r in &fleet.merged {
            let verdict = r.passed.map_or("none recorded", |p| if p { "pass" } else { "**fail**" });
            let ended = if r.completed { "yes" } else { "**no**" };
            let _ = writeln!(
                out,
                "| {} | {ended} | {verdict} | {} | {} | {:.1} |",
                r.shard.index, r.enqueued, r.completed_jobs, r.shard.start_offset_ms
            );
        }
        for index in &fleet.missing {
            let _ = writeln!(out, "| {index} | **missing** | | | | |");
        }
        out.push('\n');
    }
    out.push_str("### Scripts\n\nLatency in ms, each with its 95% distribution-free interval.\n\n");
    out.push_str(
        "| script | calls | errors | ops/s | p50 | p99 | p99.9 |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for sc in &s.scripts {
        let (l, i) = (&sc.latency_us, &sc.latency_us.intervals);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.1} | {} | {} | {} |",
            cell(&sc.script),
            sc.calls,
            sc.error_total(),
            sc.ops_per_sec,
            with_interval(l.p50, i.p50),
            with_interval(l.p99, i.p99),
            with_interval(l.p999, i.p999)
        );
    }

    out.push_str("\n### Invariants\n\n");
    match (run.invariants, &s.check) {
        (Some(report), _) => {
            let _ = writeln!(out, "{} jobs checked, {} violations.\n", report.checked_jobs, report.violations_total);
            out.push_str("| invariant | violations |\n| --- | ---: |\n");
            for inv in Invariant::ALL {
                let n = report.by_invariant.get(inv.id()).copied().unwrap_or(0);
                let _ = writeln!(out, "| {} {} | {n} |", inv.id(), inv.name());
            }
        }
        (None, _) => out.push_str("Not checked (`--no-check`, or the check could not run: see the verdict).\n"),
    }

    out.push_str("\n### Thresholds\n\n");
    if s.thresholds.is_empty() {
        out.push_str("None in the scenario.\n");
    } else {
        out.push_str("| threshold | result |\n| --- | --- |\n");
        for t in &s.thresholds {
            let _ = writeln!(out, "| `{} {}` | {} |", cell(&t.key), cell(&t.condition), cell(&t.describe()));
        }
    }

    out.push_str("\n### Default gates\n\n| gate | result |\n| --- | --- |\n");
    for g in run.gates {
        let result = match &g.outcome {
            GateOutcome::Passed => "passed".to_string(),
            GateOutcome::Failed(line) => format!("**failed**: {line}"),
            GateOutcome::Skipped(why) => format!("skipped: {why}"),
        };
        let _ = writeln!(out, "| {} | {} |", cell(&g.name), cell(&result));
    }

    out.push_str("\n### Faults\n\n");
    let f = &s.faults;
    if f.injected.is_empty() {
        out.push_str("None injected.");
    } else {
        out.push_str("| fault | at s | took effect | detail |\n| --- | ---: | --- | --- |\n");
        for span in &f.injected {
            let applied = if span.applied { "yes" } else { "**no**" };
            let kind =
                span.queue.as_ref().map_or_else(|| span.kind.to_string(), |q| format!("{} on queue {q}", span.kind));
            let _ = writeln!(out, "| {} | {:.1} | {applied} | {} |", cell(&kind), span.from_s, cell(&span.detail));
        }
    }
    let _ = writeln!(
        out,
        "\nSeen: {} reconnects (connections opened again), {} calls failed on a lost or unopened connection, {} calls \
         with an unknown outcome.",
        f.reconnects, f.connection_errors, f.unknown_outcomes
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_cannot_break_the_table() {
        assert_eq!(cell("a|b\nc"), "a\\|b c");
        let bound = PercentileBound { lo_us: Some(900), hi_us: None, needs_calls: Some(300) };
        assert_eq!(with_interval(1_234, bound), "1.234 (0.900–?)");
    }
}
