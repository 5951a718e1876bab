//! The terminal table of a comparison: a pure function from the finished [`Comparison`] to a
//! `String` (no printing; `main` prints it).

use std::fmt::Write as _;

use super::{fmt, Comparison, MetricVerdict};

/// Column headers; the p-value is the one-sided test that NEW is worse.
const HEADERS: [&str; 7] = ["metric", "base", "new", "change", "95% CI", "p (worse)", "verdict"];

/// Formats the comparison: one line per side (repetitions used and skipped), one aligned row
/// per metric (medians; latency in ms, throughput in ops/s), notes (the comparison's own, then
/// the reason of every verdict other than "no change", grouped by reason), the rule with its thresholds, and the overall verdict. Every line ends with
/// `\n`.
pub fn format_table(c: &Comparison) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", fmt::side_line("BASE", &c.base));
    let _ = writeln!(out, "{}", fmt::side_line("NEW ", &c.new));
    out.push('\n');
    let mut headers = HEADERS.map(str::to_owned);
    headers[4] = format!("{:.0}% CI", c.options.confidence * 100.0);
    let rows: Vec<[String; 7]> = c.metrics.iter().map(fmt::row).collect();
    let mut widths = headers.clone().map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in std::iter::once(&headers).chain(&rows) {
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(widths).enumerate() {
            let _ = match i {
                0 => write!(line, "{cell:<w$}"),
                6 => write!(line, "  {cell:<w$}"),
                _ => write!(line, "  {cell:>w$}"),
            };
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    let notes = fmt::notes(c);
    if !notes.is_empty() || !c.notes.is_empty() {
        out.push_str("\nnotes:\n");
        for note in &c.notes {
            let _ = writeln!(out, "  {note}");
        }
        for (what, who) in notes {
            let _ = writeln!(out, "  {who}: {what}");
        }
    }
    if let Some(safety) = &c.safety {
        let _ = write!(out, "\n{}", super::format_safety(safety, c.options.confidence));
    }
    let _ = writeln!(out, "\nrule: {}", fmt::rule(&c.options));
    let _ = writeln!(out, "verdict: {}", verdict_line(c));
    out
}

/// `regression; regressed: enqueue p50, enqueue p99; 2 of 37 metrics inconclusive`, or `pass`.
pub(crate) fn verdict_line(c: &Comparison) -> String {
    let regressed: Vec<&str> = c.with_verdict(MetricVerdict::Regressed).map(|m| m.label.as_str()).collect();
    let inconclusive = c.with_verdict(MetricVerdict::Inconclusive).count();
    let mut line = c.verdict.word().to_owned();
    if !regressed.is_empty() {
        let _ = write!(line, "; regressed: {}", regressed.join(", "));
    }
    if inconclusive > 0 {
        let _ = write!(line, "; {inconclusive} of {} metrics inconclusive", c.metrics.len());
    }
    if c.metrics.is_empty() {
        line.push_str("; no metric measured on either side");
    }
    if let Some(safety) = &c.safety {
        for e in safety.effects.iter().filter(|e| e.verdict != super::SafetyVerdict::NoDifferenceShown) {
            let _ = write!(line, "; {}", e.sentence);
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::tests::sample;

    #[test]
    fn rows_are_aligned_and_reasons_listed() {
        let c = sample();
        let text = format_table(&c);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("BASE base: 5 repetition(s)"), "{text}");
        assert!(lines[1].contains("skipped rep-006 (interrupted: Ctrl-C)"), "{text}");
        let header = lines.iter().position(|l| l.starts_with("metric")).unwrap();
        let verdict_col = lines[header].find("verdict").unwrap();
        for row in &lines[header + 1..header + 1 + c.metrics.len()] {
            assert!(row.len() > verdict_col, "{row}");
        }
        assert!(text.contains("claim p99  "), "{text}");
        assert!(text.contains("+20.0%") && text.contains("1.200 ms"), "{text}");
        assert!(text.contains("  claim p99: regressed: p "), "{text}");
        assert!(text.ends_with("verdict: regression; regressed: claim p99\n"), "{text}");
    }
}
