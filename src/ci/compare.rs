//! `compare`'s (and `cost`'s) CI files: a JUnit case per metric verdict and the exports.
//!
//! Verdicts as JUnit outcomes: `regressed` is a `<failure type="regressed">`; `inconclusive`
//! is an `<error type="inconclusive">` (the comparison could not decide: too few repetitions
//! or too much noise, exit 3), which CI servers count apart from failures but never show as
//! passed; `improved` and `no change` pass.

use super::bmf::{self, Bmf};
use super::gab::{self, Entry};
use super::junit::{Case, CaseOutcome, Reason, Report, Suite};
use crate::compare::{Comparison, Measure, MetricComparison, MetricVerdict};

/// The JUnit case of one metric's verdict, filed under `classname`.
pub fn case(classname: &str, m: &MetricComparison) -> Case {
    let message = format!("{}: {} ({})", m.label, m.verdict.word(), m.reason);
    let outcome = match m.verdict {
        MetricVerdict::Regressed => CaseOutcome::Failure(Reason::new("regressed", message, "")),
        MetricVerdict::Inconclusive => CaseOutcome::Error(Reason::new("inconclusive", message, "")),
        MetricVerdict::Improved | MetricVerdict::NoChange => CaseOutcome::Passed,
    };
    Case::new(classname, m.label.clone(), outcome)
}

/// The JUnit document of a comparison: one suite `compare`, a case per metric
/// (class `emq-bench.compare.<script>`, `cycle` for the job cycle).
pub fn junit(c: &Comparison) -> Report {
    let cases = c
        .metrics
        .iter()
        .map(|m| case(&format!("emq-bench.compare.{}", m.metric.script.as_deref().unwrap_or("cycle")), m))
        .collect();
    Report { name: "emq-bench compare".into(), time_s: 0.0, suites: vec![Suite { name: "compare".into(), cases }] }
}

/// The BMF measure slug of a compared measure and the factor from its values to the slug's
/// unit: latencies in ns (from µs), the rest as they are.
fn slug(measure: Measure) -> (String, f64) {
    match measure {
        Measure::OpsPerSec => ("throughput".into(), 1.0),
        Measure::ServerUs => ("server-us-per-call".into(), 1.0),
        latency => (bmf::latency_slug(latency.name()), 1e3),
    }
}

/// The lowest and highest of `values`, when there are any.
fn range(values: &[f64]) -> Option<(f64, f64)> {
    let finite = values.iter().copied().filter(|v| v.is_finite());
    finite.clone().reduce(f64::min).zip(finite.reduce(f64::max))
}

/// What a metric's exports are named by, as `run`'s are: `<scenario>::<script>` in BMF (the
/// job cycle's script is `cycle`), `<scenario> <script>` in GAB.
fn benchmark(c: &Comparison, m: &MetricComparison, separator: &str) -> String {
    format!("{}{separator}{}", c.new.scenario, m.metric.script.as_deref().unwrap_or("cycle"))
}

/// The BMF document of a comparison's NEW side: benchmark `<scenario>::<script>` as `run`
/// names it, the NEW median as the value and its lowest and highest repetition as the bounds.
pub fn bmf(c: &Comparison) -> Bmf {
    let mut out = Bmf::new();
    for m in &c.metrics {
        let Some(median) = m.new.median else { continue };
        let (slug, factor) = slug(m.metric.measure);
        let (lo, hi) = range(&m.new.values).unzip();
        if let Some(metric) = bmf::Metric::new(median * factor, lo.map(|v| v * factor), hi.map(|v| v * factor)) {
            out.entry(benchmark(c, m, "::")).or_default().insert(slug, metric);
        }
    }
    out
}

/// The github-action-benchmark entries of a comparison's NEW side, named as `run`'s are
/// (`<scenario> <script> p99`, `<scenario> <script> time per op (1/throughput)`): latencies
/// in ms, ops/s as the time per op (µs/op), the server's µs per call as they are; `extra`
/// carries the verdict and the change.
pub fn gab(c: &Comparison) -> Vec<Entry> {
    c.metrics
        .iter()
        .filter_map(|m| {
            let name = match m.metric.measure {
                Measure::OpsPerSec => benchmark(c, m, " "),
                measure => format!("{} {}", benchmark(c, m, " "), measure.name()),
            };
            entry(m, &name)
        })
        .collect()
}

/// One metric's entry named `name` (see [`gab()`]; for ops/s, ` time per op (1/throughput)`
/// is added to it); None without a finite NEW median.
pub fn entry(m: &MetricComparison, name: &str) -> Option<Entry> {
    let median = m.new.median?;
    let range = range(&m.new.values);
    let change = m.change.map_or(String::new(), |c| format!(", change {:+.1}%", c * 100.0));
    let extra = format!("{}{change} ({}); {} repetitions", m.verdict.word(), m.reason, m.new.values.len());
    match m.metric.measure {
        Measure::OpsPerSec => {
            let inverse = range.and_then(|(lo, hi)| gab::us_per_op(hi).zip(gab::us_per_op(lo)));
            let name = format!("{name} time per op (1/throughput)");
            Entry::new(name, "µs/op", gab::us_per_op(median)?, inverse, format!("{median:.1} ops/s: {extra}"))
        }
        Measure::ServerUs => Entry::new(name.to_string(), "µs", median, range, extra),
        _ => Entry::new(name.to_string(), "ms", median / 1e3, range.map(|(lo, hi)| (lo / 1e3, hi / 1e3)), extra),
    }
}
