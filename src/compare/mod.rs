//! Two results folders → a verdict per metric and overall: did NEW get slower than BASE?
//!
//! Each folder holds one run or several repetitions ([`load`]); per called script its ops/s,
//! p50, p99 and p99.9 latency, plus the job cycle's ops/s ([`metric`]), give one value per
//! repetition. Each metric is judged by the rule of [`verdict`] (criterion.rs's: significance
//! *and* the whole confidence interval beyond a noise band, from [`crate::stats`]), with the
//! thresholds of [`options`]. The outputs are pure functions of the finished [`Comparison`]:
//! a text table ([`table`]), Markdown for a CI comment ([`markdown`]) and `compare.json` (serde).

pub mod cause;
pub mod load;
pub mod markdown;
pub mod metric;
pub mod options;
pub mod safety;
pub mod sequential;
pub mod table;
pub mod verdict;

use serde::{Deserialize, Serialize};

pub use cause::{Arm, InconclusiveCause};
pub use load::{load_results, load_results_with, LatencyKind, LoadError, Repetition, ResultSet, Skipped};
pub use markdown::format_markdown;
pub use metric::{Better, Measure, Metric};
pub use options::CompareOptions;
pub use safety::{compare_safety, format_safety, FaultTally, SafetyComparison, SafetyEffect, SafetyVerdict};
pub use table::format_table;
pub use verdict::{compare_metric, MetricComparison, MetricVerdict, Overall, Side};

/// What one side of the comparison was made of.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SetInfo {
    /// The results folder as given.
    pub dir: String,
    /// Names of the repetitions used (`rep-001`, ..., or `run`).
    pub used: Vec<String>,
    /// Repetitions left out, and why.
    pub skipped: Vec<Skipped>,
    /// The scenario's name, as the first repetition used ran it (what the exports name
    /// benchmarks by, as `run`'s do).
    #[serde(default)]
    pub scenario: String,
}

impl SetInfo {
    fn of(set: &ResultSet) -> SetInfo {
        SetInfo {
            dir: set.dir.display().to_string(),
            used: set.repetitions.iter().map(|r| r.name.clone()).collect(),
            skipped: set.skipped.clone(),
            scenario: set.scenario.clone(),
        }
    }
}

/// The whole comparison: what `compare.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The base folder.
    pub base: SetInfo,
    /// The new folder.
    pub new: SetInfo,
    /// The thresholds used.
    pub options: CompareOptions,
    /// One entry per metric: the job cycle first, then each script (in the order the base's
    /// runs list them, then scripts only NEW called) with ops/s, p50, p99, p99.9.
    pub metrics: Vec<MetricComparison>,
    /// Remarks on the whole comparison, e.g. too few repetitions to ever reach α.
    pub notes: Vec<String>,
    /// What the injected faults did on each side, effect by effect ([`safety`]); absent when a
    /// side injected no fault whose effects were checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safety: Option<SafetyComparison>,
    /// Regression if any metric regressed or NEW had an effect of its faults significantly more
    /// often; else inconclusive if any metric was (or nothing could be compared); else pass.
    pub verdict: Overall,
}

impl Comparison {
    /// The metrics with the given verdict, in order.
    pub fn with_verdict(&self, verdict: MetricVerdict) -> impl Iterator<Item = &MetricComparison> {
        self.metrics.iter().filter(move |m| m.verdict == verdict)
    }
}

/// Compares every metric measured on either side. `options` are taken as valid
/// ([`CompareOptions::validate`]). Deterministic: the same inputs and seed give the same result.
pub fn compare_results(base: &ResultSet, new: &ResultSet, options: &CompareOptions) -> Comparison {
    let mut order = vec![Metric::cycle()];
    let mut scripts = base.scripts.clone();
    scripts.extend(new.scripts.iter().filter(|s| !base.scripts.contains(s)).cloned());
    for script in &scripts {
        order.extend(Measure::ALL.iter().map(|&m| Metric::script(script, m)));
    }
    let values = |set: &ResultSet, metric: &Metric| -> Vec<f64> {
        set.repetitions.iter().filter_map(|r| r.values.get(metric).copied()).collect()
    };
    let metrics: Vec<MetricComparison> = order
        .into_iter()
        .filter_map(|metric| {
            let (b, n) = (values(base, &metric), values(new, &metric));
            (!b.is_empty() || !n.is_empty()).then(|| compare_metric(metric, b, n, options))
        })
        .collect();
    let tally = |set: &ResultSet| {
        let mut all = FaultTally::default();
        set.repetitions.iter().for_each(|r| all.add(&r.faults));
        all
    };
    let safety = compare_safety(&tally(base), &tally(new), options.alpha, options.confidence);
    let verdict = match (metrics.is_empty(), safety.as_ref().is_some_and(SafetyComparison::regressed)) {
        (_, true) => Overall::Regression,
        (true, false) => Overall::Inconclusive,
        (false, false) => Overall::of(metrics.iter().map(|m| m.verdict)),
    };
    let (base, new) = (SetInfo::of(base), SetInfo::of(new));
    let notes = repetition_notes(&base, &new, options);
    Comparison { base, new, options: options.clone(), metrics, notes, safety, verdict }
}

/// Says so when a side has fewer repetitions than α can ever need: the smallest equal size `n`
/// whose smallest exact p-value `1 / C(2n, n)` is below α (5 for α = 0.01, 4 for 0.05).
fn repetition_notes(base: &SetInfo, new: &SetInfo, options: &CompareOptions) -> Vec<String> {
    let needed =
        (options.min_repetitions..=50).find(|&n| crate::stats::min_exact_p_value(n, n) < options.alpha).unwrap_or(50);
    [("BASE", base), ("NEW", new)]
        .into_iter()
        .filter(|(_, side)| side.used.len() < needed)
        .map(|(label, side)| {
            format!(
                "{label} has {} usable repetition(s): no metric can be significant at α = {}; \
                 use about {needed} or more a side",
                side.used.len(),
                options.alpha
            )
        })
        .collect()
}

/// Formatting helpers shared by the table and the Markdown.
pub(crate) mod fmt {
    use super::{Measure, MetricComparison};
    use crate::stats::Interval;

    /// A median: ops/s with 1 decimal, latency µs as ms with 3 decimals (as the run table).
    pub fn value(measure: Measure, v: Option<f64>) -> String {
        match v {
            None => "-".to_owned(),
            Some(v) if measure.is_latency() => format!("{:.3} ms", v / 1000.0),
            Some(v) => format!("{v:.1}"),
        }
    }

    /// A relative change as a signed percentage, `+20.0%`.
    pub fn change(c: Option<f64>) -> String {
        c.map_or_else(|| "-".to_owned(), |c| format!("{:+.1}%", c * 100.0))
    }

    /// An interval of the ratio new/base, as changes: `[+15.2%, +24.9%]`.
    pub fn interval(ci: Option<Interval>) -> String {
        ci.map_or_else(
            || "-".to_owned(),
            |ci| format!("[{}, {}]", change(Some(ci.lo - 1.0)), change(Some(ci.hi - 1.0))),
        )
    }

    /// A p-value: 4 decimals, or `<0.0001`.
    pub fn p(p: Option<f64>) -> String {
        match p {
            None => "-".to_owned(),
            Some(p) if p < 1e-4 => "<0.0001".to_owned(),
            Some(p) => format!("{p:.4}"),
        }
    }

    /// The cells of one row: metric, base, new, change, CI, p (worse), verdict.
    pub fn row(m: &MetricComparison) -> [String; 7] {
        let measure = m.metric.measure;
        [
            m.label.clone(),
            value(measure, m.base.median),
            value(measure, m.new.median),
            change(m.change),
            interval(m.ci),
            p(m.p_worse),
            m.verdict.word().to_owned(),
        ]
    }

    /// One line per side saying how many repetitions were used and which were skipped.
    pub fn side_line(label: &str, side: &super::SetInfo) -> String {
        let mut line = format!("{label} {}: {} repetition(s)", side.dir, side.used.len());
        for s in &side.skipped {
            line.push_str(&format!("; skipped {} ({})", s.name, s.reason));
        }
        line
    }

    /// The reasons of every verdict other than "no change", grouped by identical text in
    /// first-seen order: `(verdict: reason, labels)`; a group covering every metric is labelled
    /// `all metrics`, one of more than six `N metrics` (the table's rows say which).
    pub fn notes(c: &super::Comparison) -> Vec<(String, String)> {
        let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
        for m in c.metrics.iter().filter(|m| m.verdict != super::MetricVerdict::NoChange) {
            let key = format!("{}: {}", m.verdict.word(), m.reason);
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, labels)) => labels.push(&m.label),
                None => groups.push((key, vec![&m.label])),
            }
        }
        let all = c.metrics.len();
        groups
            .into_iter()
            .map(|(key, labels)| {
                let who = match labels.len() {
                    n if n == all && n > 1 => "all metrics".to_owned(),
                    n if n > 6 => format!("{n} metrics"),
                    _ => labels.join(", "),
                };
                (key, who)
            })
            .collect()
    }

    /// The rule in one sentence, with the thresholds in force.
    pub fn rule(o: &super::CompareOptions) -> String {
        format!(
            "regressed/improved: one-sided Mann-Whitney p < {} and the whole {:.0}% bootstrap CI of new/base \
             beyond the noise band (ops/s {:.0}%, p50 {:.0}%, p99/p99.9 {:.0}%); inconclusive: fewer than {} \
             repetitions, too few to reach p < {}, or CV > {:.0}%; percentiles are compared only with at \
             least 100 (p50), 1000 (p99) or 10000 (p99.9) ok calls per repetition",
            o.alpha,
            o.confidence * 100.0,
            o.noise_throughput * 100.0,
            o.noise_p50 * 100.0,
            o.noise_tail * 100.0,
            o.min_repetitions,
            o.alpha,
            o.max_cv * 100.0
        )
    }
}

#[cfg(test)]
pub(crate) mod tests;
