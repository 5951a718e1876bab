//! Evaluating the scenario's `[thresholds]` against a finished run (k6-style absolute gates).

use super::ScriptSummary;
use crate::scenario::thresholds::{Threshold, ThresholdMetric};
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
}

impl ThresholdResult {
    /// A one-line account, e.g. `threshold claim.p99 < 2ms failed: 2.531 ms`.
    pub fn describe(&self) -> String {
        let value = match self.value {
            Some(v) if self.key.ends_with(".rate") => format!("{v:.6}"),
            Some(v) if self.key.ends_with(".ops") => format!("{v:.1} ops/s"),
            Some(v) => format!("{:.3} ms", v / 1000.0),
            None => "never called".to_string(),
        };
        let verdict = if self.passed { "passed" } else { "failed" };
        format!("threshold {} {} {verdict}: {value}", self.key, self.condition)
    }
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
        ThresholdMetric::ErrorRate { script } => {
            let (errors, calls) = scripts
                .iter()
                .filter(|s| script.as_ref().is_none_or(|name| &s.script == name))
                .fold((0u64, 0u64), |(e, c), s| (e + s.error_total(), c + s.calls));
            (calls > 0).then(|| errors as f64 / calls as f64)
        }
    }
}

/// Evaluates every threshold against the run's per-script summaries.
pub fn evaluate(thresholds: &[Threshold], scripts: &[ScriptSummary]) -> Vec<ThresholdResult> {
    thresholds
        .iter()
        .map(|t| {
            let value = value(&t.metric, scripts);
            ThresholdResult {
                key: t.key.clone(),
                condition: t.text.trim().to_string(),
                value,
                passed: value.is_some_and(|v| t.cmp.holds(v, t.limit)),
            }
        })
        .collect()
}
