//! Evaluating the scenario's `[thresholds]` against a finished run (k6-style absolute gates).

use super::ScriptSummary;
use crate::faults::record::FaultEffects;
use crate::faults::FaultSpan;
use crate::scenario::thresholds::{Cmp, FaultEffect, Threshold, ThresholdMetric};
use serde::{Deserialize, Serialize};

/// One threshold's result, as `summary.json` and the failure lines show it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ThresholdResult {
    /// The key, e.g. `claim.p99`.
    pub key: String,
    /// The condition as written, e.g. `< 2ms`.
    pub condition: String,
    /// The measured value (µs for latencies, ops/s, or a rate); None when the script was never
    /// called (a failed threshold: nothing shows it holds).
    pub value: Option<f64>,
    /// True when the condition holds.
    pub passed: bool,
    /// A `fault.<effect>` threshold: the fault its value is of (the first that broke the
    /// bound, else the one nearest it), e.g. `kill-primary at 5.0 s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault: Option<String>,
}

impl ThresholdResult {
    /// A one-line account, e.g. `threshold claim.p99 < 2ms failed: 2.531 ms`.
    pub fn describe(&self) -> String {
        let value = match (self.value, &self.fault) {
            (Some(v), Some(fault)) => format!("{v:.0} ({fault})"),
            (None, _) if self.key.starts_with("fault.") => {
                "no fault's effects (none injected, or the check did not run)".to_string()
            }
            (v, _) => self.plain(v),
        };
        let verdict = if self.passed { "passed" } else { "failed" };
        format!("threshold {} {} {verdict}: {value}", self.key, self.condition)
    }

    fn plain(&self, value: Option<f64>) -> String {
        match value {
            Some(v) if self.key.ends_with(".rate") => format!("{v:.6}"),
            Some(v) if self.key.ends_with(".ops") => format!("{v:.1} ops/s"),
            Some(v) => format!("{:.3} ms", v / 1000.0),
            None => "never called".to_string(),
        }
    }
}

/// `effect` of one fault's `effects`.
pub fn effect_of(effect: FaultEffect, e: &FaultEffects) -> u64 {
    match effect {
        FaultEffect::LostEnqueues => e.lost_enqueues,
        FaultEffect::ReissuedTokens => e.reissued_tokens,
        FaultEffect::FencingViolations => e.fencing_violations,
        FaultEffect::OtherViolations => e.other_violations,
        FaultEffect::UnknownOutcomes => e.unknown_outcomes,
        FaultEffect::ClusterDownS => e.cluster_down_s,
    }
}

/// A `fault.<effect>` threshold over the `injected` faults that have effects: the value of the
/// first fault that breaks it, else of the one nearest its limit, with that fault's name;
/// `None` when no fault has effects.
fn fault_value(effect: FaultEffect, cmp: Cmp, limit: f64, injected: &[FaultSpan]) -> Option<(f64, String, bool)> {
    let mut values =
        injected.iter().filter_map(|f| f.effects.as_ref().map(|e| (effect_of(effect, e) as f64, f))).peekable();
    values.peek()?;
    let name = |f: &FaultSpan| {
        let queue = f.queue.as_ref().map_or_else(String::new, |q| format!(" on queue {q}"));
        format!("{} at {:.1} s{queue}", f.kind, f.from_s)
    };
    let all: Vec<(f64, &FaultSpan)> = values.collect();
    if let Some((v, f)) = all.iter().find(|(v, _)| !cmp.holds(*v, limit)) {
        return Some((*v, name(f), false));
    }
    let nearest = all.iter().min_by(|a, b| (a.0 - limit).abs().total_cmp(&(b.0 - limit).abs()))?;
    Some((nearest.0, name(nearest.1), true))
}

/// The value a threshold looks at in `scripts` (per-script summaries of the measured part).
fn value(metric: &ThresholdMetric, scripts: &[ScriptSummary]) -> Option<f64> {
    let find = |name: &str| scripts.iter().find(|s| s.script == name);
    match metric {
        ThresholdMetric::Latency { script, quantile } => {
            let l = find(script).filter(|s| s.ok > 0)?.latency_us;
            Some(match quantile {
                None => l.mean,
                Some(q) if *q >= 1.0 => l.max as f64,
                Some(q) if *q >= 0.9999 => l.p9999 as f64,
                Some(q) if *q >= 0.999 => l.p999 as f64,
                Some(q) if *q >= 0.99 => l.p99 as f64,
                Some(q) if *q >= 0.9 => l.p90 as f64,
                Some(_) => l.p50 as f64,
            })
        }
        ThresholdMetric::Ops { script } => find(script).map(|s| s.ops_per_sec),
        // Judged per fault, by `evaluate`.
        ThresholdMetric::FaultEffect { .. } => None,
        ThresholdMetric::ErrorRate { script } => {
            let (errors, calls) = scripts
                .iter()
                .filter(|s| script.as_ref().is_none_or(|name| &s.script == name))
                .fold((0u64, 0u64), |(e, c), s| (e + s.error_total(), c + s.calls));
            (calls > 0).then(|| errors as f64 / calls as f64)
        }
    }
}

/// Evaluates every threshold against the run's per-script summaries and its `injected`
/// faults (a `fault.<effect>` threshold holds when it holds for every fault with effects).
pub fn evaluate(thresholds: &[Threshold], scripts: &[ScriptSummary], injected: &[FaultSpan]) -> Vec<ThresholdResult> {
    thresholds
        .iter()
        .map(|t| {
            let condition = t.text.trim().to_string();
            if let ThresholdMetric::FaultEffect { effect } = t.metric {
                let found = fault_value(effect, t.cmp, t.limit, injected);
                return ThresholdResult {
                    key: t.key.clone(),
                    condition,
                    value: found.as_ref().map(|f| f.0),
                    passed: found.as_ref().is_some_and(|f| f.2),
                    fault: found.map(|f| f.1),
                };
            }
            let value = value(&t.metric, scripts);
            ThresholdResult {
                key: t.key.clone(),
                condition,
                value,
                passed: value.is_some_and(|v| t.cmp.holds(v, t.limit)),
                fault: None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::SpanKind;
    use crate::scenario::FaultKind;

    fn fault(kind: FaultKind, from_s: f64, lost: Option<u64>) -> FaultSpan {
        FaultSpan {
            kind: SpanKind::Injected(kind),
            applied: true,
            from_s,
            to_s: from_s,
            count: 1,
            detail: String::new(),
            effects: lost.map(|lost_enqueues| FaultEffects { lost_enqueues, ..FaultEffects::default() }),
            queue: Some("bench-2 (queue 1 of 3)".into()),
        }
    }

    fn lost(cmp: Cmp, limit: f64) -> Threshold {
        let text = format!("{} {limit}", if cmp == Cmp::Eq { "==" } else { "<=" });
        let metric = ThresholdMetric::FaultEffect { effect: FaultEffect::LostEnqueues };
        Threshold { key: "fault.lost_enqueues".into(), text, metric, cmp, limit }
    }

    /// A fault threshold holds when every fault with effects is within it; a failure names
    /// the first fault beyond it, its queue included; no fault with effects is no evidence.
    #[test]
    fn a_fault_threshold_is_judged_per_fault_and_names_the_fault() {
        let faults = [fault(FaultKind::KillPrimary, 5.0, Some(31)), fault(FaultKind::ClusterFailover, 12.0, Some(0))];
        let held = &evaluate(&[lost(Cmp::Le, 40.0)], &[], &faults)[0];
        assert!(held.passed, "{held:?}");
        let failed = &evaluate(&[lost(Cmp::Eq, 0.0)], &[], &faults)[0];
        assert!(!failed.passed);
        assert_eq!(
            failed.describe(),
            "threshold fault.lost_enqueues == 0 failed: 31 (kill-primary at 5.0 s on queue bench-2 (queue 1 of 3))"
        );
        let none = &evaluate(&[lost(Cmp::Le, 40.0)], &[], &[fault(FaultKind::KillPrimary, 5.0, None)])[0];
        assert!(!none.passed && none.describe().contains("no fault's effects"), "{}", none.describe());
    }
}
