//! The check's outputs: `invariants.json` (every violation) and the terminal table of the
//! first [`TABLE_ROWS`]. Pure formatting plus one atomic file write; no checking here.

use super::violation::{Invariant, Violation};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Violations shown in the terminal table; the rest are only in `invariants.json`.
pub const TABLE_ROWS: usize = 20;

/// The file name written into the `--out` folder.
pub const INVARIANTS_FILE: &str = "invariants.json";

/// The shape of `invariants.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvariantsReport {
    /// Distinct job ids checked (rows, plus location-set members without a row).
    pub checked_jobs: usize,
    /// `violations.len()`.
    pub violations_total: usize,
    /// Violations per invariant, `"I1"` .. `"I8"`, every invariant listed (0 when clean).
    pub by_invariant: BTreeMap<String, usize>,
    /// Every violation, in the checker's order.
    pub violations: Vec<Violation>,
}

impl InvariantsReport {
    /// Builds the report of `checked_jobs` jobs with these `violations`.
    pub fn new(checked_jobs: usize, violations: Vec<Violation>) -> InvariantsReport {
        let mut by_invariant: BTreeMap<String, usize> =
            Invariant::ALL.iter().map(|i| (i.id().to_string(), 0)).collect();
        for v in &violations {
            *by_invariant.entry(v.invariant.id().to_string()).or_insert(0) += 1;
        }
        InvariantsReport { checked_jobs, violations_total: violations.len(), by_invariant, violations }
    }

    /// True when no invariant is broken.
    pub fn is_clean(&self) -> bool {
        self.violations.is_empty()
    }

    /// One line, e.g. `checked 6 jobs in queue q: 2 violations (I2 1, I4 1)` or
    /// `checked 9 jobs in queues a, b: no violations`.
    pub fn summary_line(&self, queues: &[&str]) -> String {
        let scope = match queues {
            [one] => format!("queue {one}"),
            many => format!("queues {}", many.join(", ")),
        };
        if self.is_clean() {
            return format!("checked {} jobs in {scope}: no violations", self.checked_jobs);
        }
        let parts: Vec<String> =
            self.by_invariant.iter().filter(|(_, n)| **n > 0).map(|(id, n)| format!("{id} {n}")).collect();
        let noun = if self.violations_total == 1 { "violation" } else { "violations" };
        format!(
            "checked {} jobs in {scope}: {} {noun} ({})",
            self.checked_jobs,
            self.violations_total,
            parts.join(", ")
        )
    }
}

/// Column headers of the violation table.
const HEADERS: [&str; 6] = ["invariant", "name", "queue", "job", "expected", "found"];

/// Formats the first [`TABLE_ROWS`] of `violations` as an aligned text table (columns:
/// invariant, name, queue, job or key, expected, found; a job of `None` shows as `-`), then
/// `… and N more in invariants.json` when there are more and `written` (the file holds them
/// all), else `… and N more (--out DIR writes them all to invariants.json)`. Empty string for
/// no violations. Every line ends with `\n`.
pub fn format_violations(violations: &[Violation], written: bool) -> String {
    if violations.is_empty() {
        return String::new();
    }
    let rows: Vec<[&str; 6]> = violations
        .iter()
        .take(TABLE_ROWS)
        .map(|v| {
            [v.invariant.id(), v.invariant.name(), &v.queue, v.job.as_deref().unwrap_or("-"), &v.expected, &v.found]
        })
        .collect();
    let mut widths = HEADERS.map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(&HEADERS).chain(&rows) {
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(widths).enumerate() {
            let sep = if i == 0 { "" } else { "  " };
            // Pad by characters, not bytes (`≥` in a cell must not shift the columns).
            let pad = w - cell.chars().count();
            let _ = write!(line, "{sep}{cell}{:pad$}", "");
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    if violations.len() > TABLE_ROWS {
        let more = violations.len() - TABLE_ROWS;
        if written {
            let _ = writeln!(out, "… and {more} more in {INVARIANTS_FILE}");
        } else {
            let _ = writeln!(out, "… and {more} more (--out DIR writes them all to {INVARIANTS_FILE})");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(invariant: Invariant, job: &str, found: &str) -> Violation {
        Violation {
            invariant,
            queue: "q".into(),
            job: Some(job.into()),
            expected: "attempts ≥ 1".into(),
            found: found.into(),
            at_us: None,
        }
    }

    #[test]
    fn the_report_counts_by_invariant() {
        let report = InvariantsReport::new(10, vec![v(Invariant::I2, "a", "x"), v(Invariant::I2, "b", "y")]);
        assert_eq!(report.violations_total, 2);
        assert_eq!(report.by_invariant["I2"], 2);
        assert_eq!(report.by_invariant["I8"], 0);
        assert_eq!(report.summary_line(&["q"]), "checked 10 jobs in queue q: 2 violations (I2 2)");
        assert_eq!(
            InvariantsReport::new(3, vec![]).summary_line(&["a", "b"]),
            "checked 3 jobs in queues a, b: no violations"
        );
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["violations"][0]["invariant"], "I2");
        assert_eq!(json["by_invariant"]["I1"], 0);
    }

    #[test]
    fn the_table_is_aligned_and_capped() {
        assert_eq!(format_violations(&[], true), "");
        let many: Vec<Violation> = (0..25).map(|i| v(Invariant::I5, &format!("JOB{i}"), "attempts = 0")).collect();
        let table = format_violations(&many, true);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 1 + TABLE_ROWS + 1, "{table}");
        assert!(lines[0].starts_with("invariant  name                queue  job"), "{table}");
        assert!(lines[1].starts_with("I5         attempts-monotonic  q      JOB0 "), "{table}");
        // Columns line up by characters (the expected cell holds a multi-byte `≥`).
        let column = |l: &str, pat: &str| l[..l.find(pat).unwrap()].chars().count();
        assert_eq!(column(lines[0], "found"), column(lines[1], "attempts = 0"));
        assert_eq!(column(lines[1], "attempts = 0"), column(lines[20], "attempts = 0"));
        assert_eq!(lines[21], "… and 5 more in invariants.json");
        let unwritten = format_violations(&many, false);
        assert_eq!(unwritten.lines().last(), Some("… and 5 more (--out DIR writes them all to invariants.json)"));
    }
}
