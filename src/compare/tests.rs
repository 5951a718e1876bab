//! A small comparison used by the output tests, and tests of [`compare_results`].

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::*;

/// A result set of one repetition per entry of `p99s` (µs), each with the cycle at 100 ops/s
/// and `claim` p99 from the list.
fn set(dir: &str, p99s: &[f64], skipped: Vec<Skipped>) -> ResultSet {
    let repetitions = p99s
        .iter()
        .enumerate()
        .map(|(i, &p99)| Repetition {
            name: format!("rep-{:03}", i + 1),
            values: BTreeMap::from([
                (Metric::cycle(), 100.0 + i as f64 * 0.1),
                (Metric::script("claim", Measure::P99), p99),
            ]),
            faults: Default::default(),
        })
        .collect();
    ResultSet {
        dir: PathBuf::from(dir),
        repetitions,
        skipped,
        scripts: vec!["claim".to_owned()],
        scenario: "smoke".to_owned(),
    }
}

/// Five repetitions a side (the fewest that can reach p < 0.01 with 4 or more on the other),
/// claim p99 20 % higher on NEW, one NEW repetition skipped as interrupted.
pub(crate) fn sample() -> Comparison {
    let base = set("base", &[998.0, 1000.0, 1002.0, 999.0, 1001.0], vec![]);
    let skipped = vec![Skipped { name: "rep-006".to_owned(), reason: "interrupted: Ctrl-C".to_owned() }];
    let new = set("new", &[1198.0, 1200.0, 1202.0, 1199.0, 1201.0], skipped);
    compare_results(&base, &new, &CompareOptions { resamples: 1_000, ..CompareOptions::default() })
}

#[test]
fn metrics_come_in_order_with_the_cycle_first() {
    let c = sample();
    let labels: Vec<&str> = c.metrics.iter().map(|m| m.label.as_str()).collect();
    assert_eq!(labels, ["cycle ops/s", "claim p99"]);
    assert_eq!(c.metrics[0].verdict, MetricVerdict::NoChange);
    assert_eq!(c.metrics[1].verdict, MetricVerdict::Regressed, "{}", c.metrics[1].reason);
    assert_eq!(c.verdict, Overall::Regression);
    assert_eq!(c.new.used.len(), 5);
    assert_eq!(c.new.skipped[0].name, "rep-006");
}

#[test]
fn a_script_only_one_side_called_is_inconclusive_not_a_pass() {
    let base = set("base", &[1000.0; 5], vec![]);
    let mut new = set("new", &[1000.0; 5], vec![]);
    for r in &mut new.repetitions {
        r.values.insert(Metric::script("fail", Measure::OpsPerSec), 10.0);
    }
    new.scripts.push("fail".to_owned());
    let c = compare_results(&base, &new, &CompareOptions { resamples: 200, ..CompareOptions::default() });
    let fail = c.metrics.last().unwrap();
    assert_eq!((fail.label.as_str(), fail.verdict), ("fail ops/s", MetricVerdict::Inconclusive));
    assert_eq!(c.verdict, Overall::Inconclusive);
}

#[test]
fn the_comparison_round_trips_through_json_and_is_deterministic() {
    let c = sample();
    let text = serde_json::to_string_pretty(&c).unwrap();
    let back: Comparison = serde_json::from_str(&text).unwrap();
    assert_eq!(back, c);
    assert_eq!(sample(), c, "same seed, same intervals");
    assert!(text.contains("\"verdict\": \"regression\"") && text.contains("\"measure\": \"p99\""), "{text}");
}
