//! `cost`'s CI files: `junit.xml` (a case per script: its verdict with two arms, else passed
//! as measured) and the exports of the last arm (NEW, or the only one): per script the median
//! server µs per call and server CPU µs per call over the blocks, the lowest and highest block
//! as BMF's bounds.

use super::CostReport;
use crate::ci::bmf::{self, Bmf};
use crate::ci::gab::Entry;
use crate::ci::junit::{Case, CaseOutcome, Report, Suite};
use crate::stats;

/// The JUnit document: one suite `cost`, class `emq-bench.cost.<script>`.
pub fn junit(report: &CostReport) -> Report {
    let cases = report
        .scripts
        .iter()
        .map(|s| {
            let class = format!("emq-bench.cost.{}", s.script);
            match &s.comparison {
                Some(m) => crate::ci::compare::case(&class, m),
                None => Case::new(&class, format!("{} server µs/call", s.script), CaseOutcome::Passed),
            }
        })
        .collect();
    Report { name: "emq-bench cost".into(), time_s: 0.0, suites: vec![Suite { name: "cost".into(), cases }] }
}

/// The median, lowest and highest of the last arm's blocks.
fn last_arm(per_arm: &[Vec<f64>]) -> Option<(f64, f64, f64)> {
    let values = per_arm.last()?;
    let median = stats::median(values)?;
    let lo = values.iter().copied().reduce(f64::min)?;
    let hi = values.iter().copied().reduce(f64::max)?;
    Some((median, lo, hi))
}

/// The BMF document: benchmark the script, measures `server-us-per-call` and
/// `server-cpu-us-per-call` (µs).
pub fn bmf(report: &CostReport) -> Bmf {
    let mut out = Bmf::new();
    for s in &report.scripts {
        for (slug, per_arm) in [("server-us-per-call", &s.us_per_call), ("server-cpu-us-per-call", &s.cpu_us_per_call)]
        {
            if let Some(m) = last_arm(per_arm).and_then(|(v, lo, hi)| bmf::Metric::new(v, Some(lo), Some(hi))) {
                out.entry(s.script.clone()).or_default().insert(slug.to_string(), m);
            }
        }
    }
    out
}

/// The github-action-benchmark entries: `<script> server µs/call` (the verdict in `extra`
/// with two arms) and `<script> server CPU µs/call`.
pub fn gab(report: &CostReport) -> Vec<Entry> {
    let mut out = Vec::new();
    for s in &report.scripts {
        let name = format!("{} server µs/call", s.script);
        match &s.comparison {
            Some(m) => out.extend(crate::ci::compare::entry(m, &name)),
            None => out.extend(last_arm(&s.us_per_call).and_then(|(v, lo, hi)| {
                Entry::new(name, "µs", v, Some((lo, hi)), format!("median of {} blocks", s.us_per_call.last()?.len()))
            })),
        }
        if let Some((v, lo, hi)) = last_arm(&s.cpu_us_per_call) {
            out.extend(Entry::new(format!("{} server CPU µs/call", s.script), "µs", v, Some((lo, hi)), String::new()));
        }
    }
    out
}
