//! Tests of the verdict rule, one per branch.

use super::*;
use crate::compare::metric::Measure;

/// Ten values around `center` with ±1 % spread (CV about 0.6 %), no ties.
fn tight(center: f64) -> Vec<f64> {
    [-1.0, -0.8, -0.5, -0.3, -0.1, 0.1, 0.3, 0.5, 0.8, 1.0].iter().map(|d| center * (1.0 + d / 100.0)).collect()
}

fn options() -> CompareOptions {
    CompareOptions { resamples: 1_000, ..CompareOptions::default() }
}

fn p99() -> Metric {
    Metric::script("claim", Measure::P99)
}

#[test]
fn a_20_percent_slower_latency_regresses_and_a_faster_one_improves() {
    let m = judge(p99(), tight(1000.0), tight(1200.0), &options());
    assert_eq!(m.verdict, Verdict::Regressed, "{}", m.reason);
    assert!((m.change.unwrap() - 0.2).abs() < 1e-9);
    assert!(m.p_worse.unwrap() < 1e-4 && m.p_better.unwrap() > 0.99);
    assert_eq!(m.test, Some(Method::Exact));
    let m = judge(p99(), tight(1200.0), tight(1000.0), &options());
    assert_eq!(m.verdict, Verdict::Improved, "{}", m.reason);
}

#[test]
fn throughput_direction_is_reversed() {
    let ops = Metric::script("enqueue", Measure::OpsPerSec);
    assert_eq!(judge(ops.clone(), tight(1000.0), tight(800.0), &options()).verdict, Verdict::Regressed);
    assert_eq!(judge(ops, tight(1000.0), tight(1250.0), &options()).verdict, Verdict::Improved);
}

#[test]
fn a_significant_change_inside_the_noise_band_is_no_change() {
    // 3 % slower p99: the test sees it, but the band for tails is 15 %.
    let m = judge(p99(), tight(1000.0), tight(1030.0), &options());
    assert!(m.p_worse.unwrap() < 0.01);
    assert_eq!(m.verdict, Verdict::NoChange);
    assert!(m.reason.contains("noise band"), "{}", m.reason);
    let same = judge(p99(), tight(1000.0), tight(1000.0), &options());
    assert_eq!(same.verdict, Verdict::NoChange);
    assert!(same.reason.contains("not significant"), "{}", same.reason);
}

#[test]
fn too_few_repetitions_are_inconclusive_even_for_a_large_change() {
    let two = judge(p99(), vec![1000.0, 1001.0], vec![2000.0, 2001.0], &options());
    assert_eq!(two.verdict, Verdict::Inconclusive);
    assert!(two.reason.contains("fewer than 3"), "{}", two.reason);
    // 3 + 3 can never give p < 0.01 (smallest p = 1/20): said so, rather than "no change".
    let three = judge(p99(), vec![1000.0, 1001.0, 1002.0], vec![2000.0, 2001.0, 2002.0], &options());
    assert_eq!(three.verdict, Verdict::Inconclusive);
    assert!(three.reason.contains("cannot reach"), "{}", three.reason);
    // With α = 0.1 the same data can regress.
    let loose = CompareOptions { alpha: 0.1, ..options() };
    let three = judge(p99(), vec![1000.0, 1001.0, 1002.0], vec![2000.0, 2001.0, 2002.0], &loose);
    assert_eq!(three.verdict, Verdict::Regressed, "{}", three.reason);
}

#[test]
fn a_noisy_side_is_inconclusive() {
    let noisy: Vec<f64> = tight(1000.0).iter().enumerate().map(|(i, v)| v * [0.7, 1.3][i % 2]).collect();
    let m = judge(p99(), tight(1000.0), noisy, &options());
    assert_eq!(m.verdict, Verdict::Inconclusive);
    assert!(m.reason.contains("CV") && m.reason.contains("NEW"), "{}", m.reason);
}

/// A change far larger than the noise is decided despite it: a side with a CV of ~13 % cannot
/// make a 3x slowdown.
#[test]
fn a_change_that_dwarfs_the_noise_is_decided() {
    let noisy =
        |center: f64| -> Vec<f64> { tight(center).iter().enumerate().map(|(i, v)| v * [0.87, 1.13][i % 2]).collect() };
    let m = judge(p99(), noisy(100.0), tight(350.0), &options());
    assert!(m.base.cv.unwrap() > 0.1, "noisy base: {:?}", m.base.cv);
    assert_eq!(m.verdict, Verdict::Regressed, "{}", m.reason);
    // The same noise with a change it could have made stays inconclusive.
    let m = judge(p99(), noisy(100.0), tight(130.0), &options());
    assert_eq!(m.verdict, Verdict::Inconclusive, "{}", m.reason);
}

#[test]
fn a_metric_missing_on_one_side_is_inconclusive() {
    let m = judge(p99(), tight(1000.0), vec![], &options());
    assert_eq!(m.verdict, Verdict::Inconclusive);
    assert_eq!(m.reason, "not measured on NEW");
    assert_eq!((m.change, m.ci, m.p_worse), (None, None, None));
}

#[test]
fn overall_takes_the_worst_and_maps_to_exit_codes() {
    use Verdict::*;
    assert_eq!(Overall::of([NoChange, Improved]), Overall::Pass);
    assert_eq!(Overall::of([NoChange, Inconclusive]), Overall::Inconclusive);
    assert_eq!(Overall::of([Inconclusive, Regressed, NoChange]), Overall::Regression);
    assert_eq!(Overall::of([]), Overall::Pass);
    let codes = [Overall::Pass, Overall::Regression, Overall::Inconclusive].map(Overall::exit_code);
    assert_eq!(codes, [0, 1, 3]);
}

#[test]
fn paired_ratios_see_a_shift_that_drift_between_pairs_hides() {
    let metric = Metric::script("complete", Measure::ServerUs);
    let o = CompareOptions::default();
    // The level drifts by 1.7x between pairs (a shared VM); within a pair NEW is 10 % dearer.
    let drift = [10.0, 17.0, 10.5, 16.0, 11.0, 17.5, 10.2, 16.8, 10.8, 17.2];
    let pairs: Vec<(f64, f64)> = drift.iter().enumerate().map(|(i, d)| (*d, d * (1.10 + 0.002 * i as f64))).collect();
    let m = judge_paired(metric.clone(), &pairs, &o);
    assert_eq!(m.verdict, Verdict::Regressed, "{m:#?}");
    let unpaired = judge(metric.clone(), pairs.iter().map(|p| p.0).collect(), pairs.iter().map(|p| p.1).collect(), &o);
    assert_ne!(unpaired.verdict, Verdict::Regressed, "the drift hides it from the unpaired rule");
    // The same arm twice: no change; cheaper: improved.
    let same: Vec<(f64, f64)> =
        drift.iter().enumerate().map(|(i, d)| (*d, d * if i % 2 == 0 { 1.004 } else { 0.996 })).collect();
    assert_eq!(judge_paired(metric.clone(), &same, &o).verdict, Verdict::NoChange);
    let cheaper: Vec<(f64, f64)> = drift.iter().map(|d| (*d, d * 0.85)).collect();
    assert_eq!(judge_paired(metric.clone(), &cheaper, &o).verdict, Verdict::Improved);
    // Too few pairs for the sign test at alpha 0.01 (0.5^6 = 0.016).
    assert_eq!(judge_paired(metric, &pairs[..6], &o).verdict, Verdict::Inconclusive);
}
