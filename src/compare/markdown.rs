//! The Markdown version of a comparison, for a CI comment: a pure function of the finished
//! [`Comparison`] (GitHub-flavoured tables).

use std::fmt::Write as _;

use super::table::verdict_line;
use super::{fmt, Comparison, MetricVerdict};

/// Formats the comparison as Markdown: a heading with the overall verdict, the two sides, a
/// table (metric, base, new, change, CI, p, verdict; verdicts other than "no change" in bold),
/// the notes (grouped reasons of those verdicts), and the rule. Cells escape `|`.
pub fn format_markdown(c: &Comparison) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "### emq-bench compare: {}\n", c.verdict.word());
    let _ = writeln!(out, "- {}", escape(&fmt::side_line("BASE", &c.base)));
    let _ = writeln!(out, "- {}\n", escape(&fmt::side_line("NEW", &c.new)));
    let ci = format!("{:.0}% CI", c.options.confidence * 100.0);
    let _ = writeln!(out, "| metric | base | new | change | {ci} | p (worse) | verdict |");
    out.push_str("| :--- | ---: | ---: | ---: | ---: | ---: | :--- |\n");
    for m in &c.metrics {
        let mut cells = fmt::row(m).map(|cell| escape(&cell));
        if m.verdict != MetricVerdict::NoChange {
            cells[6] = format!("**{}**", cells[6]);
        }
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    let notes = fmt::notes(c);
    if !notes.is_empty() || !c.notes.is_empty() {
        out.push('\n');
        for note in &c.notes {
            let _ = writeln!(out, "- {}", escape(note));
        }
        for (what, who) in notes {
            let _ = writeln!(out, "- {}: {}", escape(&who), escape(&what));
        }
    }
    if let Some(safety) = &c.safety {
        // The safety table's cells are numbers and sentences of ours: nothing to escape.
        let _ = write!(out, "\n{}", super::format_safety(safety, c.options.confidence));
    }
    let _ = writeln!(out, "\n**verdict: {}**\n", escape(&verdict_line(c)));
    let _ = writeln!(out, "<sub>{}</sub>", escape(&fmt::rule(&c.options)));
    out
}

/// Escapes what would break a table cell (`|`) or open an HTML tag (`<` before a letter, `/`,
/// `!` or `?`); a `<` before a digit or a space, as in `p <0.0001`, is left as it is.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '|' => out.push_str("\\|"),
            '<' if chars.peek().is_some_and(|n| n.is_alphabetic() || "/!?".contains(*n)) => out.push_str("&lt;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::tests::sample;

    #[test]
    fn a_table_row_per_metric_and_the_verdict_in_bold() {
        let c = sample();
        let md = format_markdown(&c);
        assert!(md.starts_with("### emq-bench compare: regression\n"), "{md}");
        let rows = md.lines().filter(|l| l.starts_with("| ") && !l.starts_with("| :") && !l.starts_with("| metric"));
        assert_eq!(rows.count(), c.metrics.len(), "{md}");
        assert!(md.contains("| claim p99 | 1.000 ms | 1.200 ms | +20.0% |"), "{md}");
        assert!(md.contains("**regressed** |"), "{md}");
        assert!(md.contains("**verdict: regression; regressed: claim p99**"), "{md}");
        assert!(md.contains("<sub>regressed/improved:"), "{md}");
    }

    #[test]
    fn pipes_are_escaped() {
        assert_eq!(escape("a|b<c </d <0.1 < 2"), "a\\|b&lt;c &lt;/d <0.1 < 2");
    }
}
