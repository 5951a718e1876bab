//! `[thresholds]`: absolute pass/fail gates for CI, k6-style (`"claim.p99" = "< 2ms"`).
//!
//! Keys: `<script>.<stat>` with stat `p50 p90 p99 p99.9 p99.99 max mean` (a latency, the value
//! a duration: "2ms", "750us"), `<script>.ops` (ok calls/s, a number), `<script>.errors.rate`
//! and `errors.rate` (errors / calls, a number in 0..=1), and `fault.<effect>` (what each
//! injected fault did, [`FaultEffect`], a count bounded per fault). Values: `<`, `<=`, `==`,
//! `>` or `>=`, then the limit. A failed threshold makes `run` exit 1 and says which.

use super::context::Ctx;
use super::error::ScenarioError;
use crate::lua::Script;
use std::collections::BTreeMap;

/// Which number a threshold looks at.
#[derive(Debug, Clone, PartialEq)]
pub enum ThresholdMetric {
    /// A latency percentile of a script (from the intended send), µs; `quantile` 1.0 = max,
    /// `None` = mean.
    Latency {
        /// Script name.
        script: String,
        /// 0.5, 0.9, 0.99, 0.999, 0.9999, 1.0 (max) or None (mean).
        quantile: Option<f64>,
    },
    /// Ok calls per second of a script.
    Ops {
        /// Script name.
        script: String,
    },
    /// Errors / calls, of one script or (None) of all.
    ErrorRate {
        /// Script name, or all scripts.
        script: Option<String>,
    },
    /// One effect of every injected fault, each fault judged on its own.
    FaultEffect {
        /// Which effect.
        effect: FaultEffect,
    },
}

/// What one injected fault did that a threshold can bound (`fault.<name>`): the field of the
/// same name in summary.json's `faults.injected[].effects`, attributed to the fault's window
/// (from its start until the next fault's). The violations among them are the check's, so a
/// bound on them needs the check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultEffect {
    /// Acknowledged enqueues whose job is gone (I7).
    LostEnqueues,
    /// Tokens handed out to two holders or more (I5).
    ReissuedTokens,
    /// Fencing failures (I6).
    FencingViolations,
    /// Other violations in the window.
    OtherViolations,
    /// Calls sent in the window whose outcome is unknown.
    UnknownOutcomes,
    /// Seconds in which the load waited out CLUSTERDOWN refusals.
    ClusterDownS,
}

impl FaultEffect {
    /// Every effect, in summary.json's order.
    pub const ALL: [FaultEffect; 6] = [
        FaultEffect::LostEnqueues,
        FaultEffect::ReissuedTokens,
        FaultEffect::FencingViolations,
        FaultEffect::OtherViolations,
        FaultEffect::UnknownOutcomes,
        FaultEffect::ClusterDownS,
    ];

    /// Its name, summary.json's field and the threshold key's part after `fault.`.
    pub fn name(self) -> &'static str {
        match self {
            FaultEffect::LostEnqueues => "lost_enqueues",
            FaultEffect::ReissuedTokens => "reissued_tokens",
            FaultEffect::FencingViolations => "fencing_violations",
            FaultEffect::OtherViolations => "other_violations",
            FaultEffect::UnknownOutcomes => "unknown_outcomes",
            FaultEffect::ClusterDownS => "cluster_down_s",
        }
    }

    /// True for the effects that are invariant violations (the check's findings): a bound on
    /// one makes the violations of its kind in a fault's window the bound's to judge.
    pub fn is_violation(self) -> bool {
        !matches!(self, FaultEffect::UnknownOutcomes | FaultEffect::ClusterDownS)
    }
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `==`
    Eq,
}

impl Cmp {
    /// True when `value <op> limit` holds.
    pub fn holds(self, value: f64, limit: f64) -> bool {
        match self {
            Cmp::Lt => value < limit,
            Cmp::Le => value <= limit,
            Cmp::Gt => value > limit,
            Cmp::Ge => value >= limit,
            Cmp::Eq => value == limit,
        }
    }
}

/// One resolved threshold.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    /// The key as written, e.g. `claim.p99`.
    pub key: String,
    /// The value as written, e.g. `< 2ms`.
    pub text: String,
    /// What it measures.
    pub metric: ThresholdMetric,
    /// The comparison.
    pub cmp: Cmp,
    /// The limit: µs for latencies, ops/s, a rate in 0..=1, or a count per fault.
    pub limit: f64,
}

const STATS: [(&str, Option<f64>); 7] = [
    ("p50", Some(0.5)),
    ("p90", Some(0.9)),
    ("p99", Some(0.99)),
    ("p99.9", Some(0.999)),
    ("p99.99", Some(0.9999)),
    ("max", Some(1.0)),
    ("mean", None),
];

/// Resolves the `[thresholds]` table. Errors name the key, what was found and what is expected.
pub(crate) fn thresholds(cx: &Ctx, raw: &BTreeMap<String, String>) -> Result<Vec<Threshold>, ScenarioError> {
    let mut out = Vec::new();
    for (key, text) in raw {
        let field = format!("thresholds.\"{key}\"");
        let bad_key = || {
            let effects: Vec<&str> = FaultEffect::ALL.iter().map(|e| e.name()).collect();
            let expected = format!(
                "<script>.p50|p90|p99|p99.9|p99.99|max|mean, <script>.ops, <script>.errors.rate, errors.rate or \
                 fault.{}",
                effects.join("|")
            );
            cx.err_at(&format!("thresholds.{key}"), &field, format!("{key:?}"), expected)
        };
        let script_of = |name: &str| Script::from_name(name).map(|s| s.name().to_string()).ok_or_else(bad_key);
        let metric = if let Some(name) = key.strip_prefix("fault.") {
            let effect = FaultEffect::ALL.into_iter().find(|e| e.name() == name).ok_or_else(bad_key)?;
            ThresholdMetric::FaultEffect { effect }
        } else if key == "errors.rate" {
            ThresholdMetric::ErrorRate { script: None }
        } else if let Some(script) = key.strip_suffix(".errors.rate") {
            ThresholdMetric::ErrorRate { script: Some(script_of(script)?) }
        } else if let Some(script) = key.strip_suffix(".ops") {
            ThresholdMetric::Ops { script: script_of(script)? }
        } else {
            let (script, stat) = key.split_once('.').ok_or_else(bad_key)?;
            let quantile = STATS.iter().find(|(name, _)| *name == stat).ok_or_else(bad_key)?.1;
            ThresholdMetric::Latency { script: script_of(script)?, quantile }
        };
        let trimmed = text.trim();
        let (cmp, rest) = [("<=", Cmp::Le), (">=", Cmp::Ge), ("==", Cmp::Eq), ("<", Cmp::Lt), (">", Cmp::Gt)]
            .iter()
            .find_map(|(op, cmp)| trimmed.strip_prefix(op).map(|rest| (*cmp, rest.trim())))
            .ok_or_else(|| {
                cx.err_at(
                    &format!("thresholds.{key}"),
                    &field,
                    format!("{text:?}"),
                    "an operator (<, <=, ==, >, >=) and a limit, e.g. \"< 2ms\"",
                )
            })?;
        let limit = match metric {
            ThresholdMetric::Latency { .. } => {
                humantime::parse_duration(rest).map(|d| d.as_secs_f64() * 1e6).map_err(|_| {
                    cx.err_at(
                        &format!("thresholds.{key}"),
                        &field,
                        format!("{rest:?}"),
                        "a duration with a unit, e.g. 2ms or 750us",
                    )
                })?
            }
            ThresholdMetric::FaultEffect { .. } => rest.parse::<u64>().map(|n| n as f64).map_err(|_| {
                cx.err_at(&format!("thresholds.{key}"), &field, format!("{rest:?}"), "a count, e.g. 0 or 40")
            })?,
            ThresholdMetric::Ops { .. } | ThresholdMetric::ErrorRate { .. } => {
                rest.parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0).ok_or_else(|| {
                    cx.err_at(&format!("thresholds.{key}"), &field, format!("{rest:?}"), "a non-negative number")
                })?
            }
        };
        out.push(Threshold { key: key.clone(), text: text.clone(), metric, cmp, limit });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn parse(pairs: &[(&str, &str)]) -> Result<Vec<Threshold>, ScenarioError> {
        let text = "[thresholds]\n";
        let cx = Ctx { text, path: Path::new("t.toml") };
        thresholds(&cx, &pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
    }

    #[test]
    fn keys_and_values_resolve() {
        let t = parse(&[
            ("claim.p99", "< 2ms"),
            ("errors.rate", "<= 0.001"),
            ("enqueue.ops", ">= 1000"),
            ("complete.p99.9", "<750us"),
            ("fault.lost_enqueues", "<= 40"),
            ("fault.fencing_violations", "== 0"),
        ])
        .unwrap();
        let by_key = |k: &str| t.iter().find(|t| t.key == k).unwrap().clone();
        assert_eq!(
            by_key("claim.p99").metric,
            ThresholdMetric::Latency { script: "claim".into(), quantile: Some(0.99) }
        );
        assert_eq!((by_key("claim.p99").cmp, by_key("claim.p99").limit), (Cmp::Lt, 2000.0));
        assert_eq!(by_key("complete.p99.9").limit, 750.0);
        assert_eq!(by_key("errors.rate").metric, ThresholdMetric::ErrorRate { script: None });
        assert_eq!((by_key("enqueue.ops").cmp, by_key("enqueue.ops").limit), (Cmp::Ge, 1000.0));
        let lost = by_key("fault.lost_enqueues");
        assert_eq!(lost.metric, ThresholdMetric::FaultEffect { effect: FaultEffect::LostEnqueues });
        assert_eq!((lost.cmp, lost.limit), (Cmp::Le, 40.0));
        assert_eq!(by_key("fault.fencing_violations").cmp, Cmp::Eq);
    }

    #[test]
    fn bad_keys_and_values_are_refused_naming_the_key() {
        for (k, v) in [
            ("claim.p42", "< 2ms"),
            ("nope.p99", "< 2ms"),
            ("claim.p99", "2ms"),
            ("claim.p99", "< fast"),
            ("errors.rate", "< x"),
            ("fault.lost", "<= 1"),
            ("fault.lost_enqueues", "<= 1.5"),
        ] {
            let err = parse(&[(k, v)]).unwrap_err().to_string();
            assert!(err.contains(k), "{err}");
        }
    }
}
