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

/// The cause of `m`, after asserting that it is there exactly when the verdict is inconclusive
/// and that the reason is its prose.
fn cause_of(m: &MetricComparison, o: &CompareOptions) -> Option<InconclusiveCause> {
    assert_eq!(m.cause.is_some(), m.verdict == MetricVerdict::Inconclusive, "{m:#?}");
    if let Some(cause) = m.cause {
        assert_eq!(m.reason, cause.reason(o));
    }
    m.cause
}

#[test]
fn a_20_percent_slower_latency_regresses_and_a_faster_one_improves() {
    let m = compare_metric(p99(), tight(1000.0), tight(1200.0), &options());
    assert_eq!(m.verdict, MetricVerdict::Regressed, "{}", m.reason);
    assert!((m.change.unwrap() - 0.2).abs() < 1e-9);
    assert!(m.p_worse.unwrap() < 1e-4 && m.p_better.unwrap() > 0.99);
    assert_eq!(m.test, Some(Method::Exact));
    assert_eq!(cause_of(&m, &options()), None);
    let m = compare_metric(p99(), tight(1200.0), tight(1000.0), &options());
    assert_eq!(m.verdict, MetricVerdict::Improved, "{}", m.reason);
    assert_eq!(cause_of(&m, &options()), None);
}

#[test]
fn throughput_direction_is_reversed() {
    let ops = Metric::script("enqueue", Measure::OpsPerSec);
    assert_eq!(compare_metric(ops.clone(), tight(1000.0), tight(800.0), &options()).verdict, MetricVerdict::Regressed);
    assert_eq!(compare_metric(ops, tight(1000.0), tight(1250.0), &options()).verdict, MetricVerdict::Improved);
}

/// A change whose interval crosses the band's edge is inconclusive, never "no change": a 15 %
/// slower p99 (the tails' band is 15 %) is measured as about +14..+16 %.
#[test]
fn an_interval_across_the_band_is_inconclusive_never_no_change() {
    let m = compare_metric(p99(), tight(1000.0), tight(1150.0), &options());
    let Some(InconclusiveCause::CrossesBand { lo, hi, band }) = cause_of(&m, &options()) else { panic!("{m:#?}") };
    assert!(lo < band && hi > band && band == 0.15, "{lo} {hi} {band}");
    assert!(m.reason.contains("crosses the noise band ±15%"), "{}", m.reason);
    // Synthetic paired ratios of every spread and centre: whatever the rule says, "no change"
    // comes only with an interval wholly inside the band.
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::SmallRng::seed_from_u64(41);
    let metric = Metric::script("complete", Measure::ServerUs);
    let o = CompareOptions { resamples: 500, ..CompareOptions::default() };
    for _ in 0..300 {
        let (centre, spread) = (rng.random_range(0.9..1.12), rng.random_range(0.0..0.12));
        let pairs: Vec<(f64, f64)> =
            (0..12).map(|_| (100.0, 100.0 * (centre + rng.random_range(-spread..=spread)))).collect();
        let m = compare_paired(metric.clone(), &pairs, &o);
        if m.verdict == MetricVerdict::NoChange {
            let ci = m.ci.unwrap();
            assert!(ci.lo >= 1.0 - m.noise && ci.hi <= 1.0 + m.noise, "no change with {ci:?}: {m:#?}");
        }
    }
}

#[test]
fn a_significant_change_inside_the_noise_band_is_no_change() {
    // 3 % slower p99: the test sees it, but the band for tails is 15 %.
    let m = compare_metric(p99(), tight(1000.0), tight(1030.0), &options());
    assert!(m.p_worse.unwrap() < 0.01);
    assert_eq!(m.verdict, MetricVerdict::NoChange);
    assert!(m.reason.contains("noise band"), "{}", m.reason);
    assert_eq!(cause_of(&m, &options()), None);
    let same = compare_metric(p99(), tight(1000.0), tight(1000.0), &options());
    assert_eq!(same.verdict, MetricVerdict::NoChange);
    assert!(same.reason.contains("not significant"), "{}", same.reason);
    assert_eq!(cause_of(&same, &options()), None);
}

#[test]
fn too_few_repetitions_are_inconclusive_even_for_a_large_change() {
    let two = compare_metric(p99(), vec![1000.0, 1001.0], vec![2000.0, 2001.0], &options());
    assert_eq!(two.verdict, MetricVerdict::Inconclusive);
    assert!(two.reason.contains("fewer than 3"), "{}", two.reason);
    // Both sides short: BASE, checked first, is named.
    let cause = Some(InconclusiveCause::TooFewRepetitions { side: Arm::Base, repetitions: 2 });
    assert_eq!(cause_of(&two, &options()), cause);
    let short_new = compare_metric(p99(), tight(1000.0), vec![2000.0, 2001.0], &options());
    let cause = Some(InconclusiveCause::TooFewRepetitions { side: Arm::New, repetitions: 2 });
    assert_eq!(cause_of(&short_new, &options()), cause);
    // 3 + 3 can never give p < 0.01 (smallest p = 1/20): said so, rather than "no change".
    let three = compare_metric(p99(), vec![1000.0, 1001.0, 1002.0], vec![2000.0, 2001.0, 2002.0], &options());
    assert_eq!(three.verdict, MetricVerdict::Inconclusive);
    assert!(three.reason.contains("cannot reach"), "{}", three.reason);
    let Some(InconclusiveCause::CannotReachAlpha { base_repetitions: 3, new_repetitions: 3, smallest_p }) =
        cause_of(&three, &options())
    else {
        panic!("{three:#?}")
    };
    assert!((smallest_p - 0.05).abs() < 1e-12, "1 / C(6, 3) = 0.05, not {smallest_p}");
    // With α = 0.1 the same data can regress.
    let loose = CompareOptions { alpha: 0.1, ..options() };
    let three = compare_metric(p99(), vec![1000.0, 1001.0, 1002.0], vec![2000.0, 2001.0, 2002.0], &loose);
    assert_eq!(three.verdict, MetricVerdict::Regressed, "{}", three.reason);
    assert_eq!(cause_of(&three, &loose), None);
}

#[test]
fn a_noisy_side_is_inconclusive() {
    let noisy: Vec<f64> = tight(1000.0).iter().enumerate().map(|(i, v)| v * [0.7, 1.3][i % 2]).collect();
    let m = compare_metric(p99(), tight(1000.0), noisy.clone(), &options());
    assert_eq!(m.verdict, MetricVerdict::Inconclusive);
    assert!(m.reason.contains("CV") && m.reason.contains("NEW"), "{}", m.reason);
    let cv = m.new.cv.unwrap();
    assert!(cv > options().max_cv);
    assert_eq!(cause_of(&m, &options()), Some(InconclusiveCause::Cv { side: Arm::New, cv }));
    // Both sides noisy: BASE, checked first, is named.
    let m = compare_metric(p99(), noisy.clone(), noisy, &options());
    let cv = m.base.cv.unwrap();
    assert_eq!(cause_of(&m, &options()), Some(InconclusiveCause::Cv { side: Arm::Base, cv }));
}

/// A change far larger than the noise is decided despite it: a side with a CV of ~13 % cannot
/// make a 3x slowdown.
#[test]
fn a_change_that_dwarfs_the_noise_is_decided() {
    let noisy =
        |center: f64| -> Vec<f64> { tight(center).iter().enumerate().map(|(i, v)| v * [0.87, 1.13][i % 2]).collect() };
    let m = compare_metric(p99(), noisy(100.0), tight(350.0), &options());
    assert!(m.base.cv.unwrap() > 0.1, "noisy base: {:?}", m.base.cv);
    assert_eq!(m.verdict, MetricVerdict::Regressed, "{}", m.reason);
    assert_eq!(cause_of(&m, &options()), None);
    // The same noise with a change it could have made stays inconclusive.
    let m = compare_metric(p99(), noisy(100.0), tight(130.0), &options());
    assert_eq!(m.verdict, MetricVerdict::Inconclusive, "{}", m.reason);
    assert!(matches!(cause_of(&m, &options()), Some(InconclusiveCause::Cv { side: Arm::Base, .. })));
}

/// Past the other gates, a BASE value of 0 (the ratio needs a positive base) or a value that
/// is not finite leaves no interval to decide on.
#[test]
fn no_interval_is_inconclusive() {
    // One zero among ten makes a CV of ~33 %: a loose max_cv lets it past that gate.
    let loose = CompareOptions { max_cv: 5.0, ..options() };
    let mut base = tight(1000.0);
    base[0] = 0.0;
    let m = compare_metric(p99(), base, tight(1200.0), &loose);
    assert_eq!((m.ci, m.change.is_some()), (None, true), "the median is not 0, one value is");
    assert_eq!(cause_of(&m, &loose), Some(InconclusiveCause::NoInterval));
    // An infinite value has no CV (NaN), so only the interval can stop it.
    let mut new = tight(1200.0);
    new[3] = f64::INFINITY;
    let m = compare_metric(p99(), tight(1000.0), new, &options());
    assert_eq!(cause_of(&m, &options()), Some(InconclusiveCause::NoInterval));
    assert_eq!(m.reason, "no interval: a value is not finite, or (unpaired) a BASE value is 0 or below");
}

#[test]
fn a_metric_missing_on_one_side_is_inconclusive() {
    let m = compare_metric(p99(), tight(1000.0), vec![], &options());
    assert_eq!(m.verdict, MetricVerdict::Inconclusive);
    assert_eq!(m.reason, "not measured on NEW");
    assert_eq!((m.change, m.ci, m.p_worse), (None, None, None));
    assert_eq!(cause_of(&m, &options()), Some(InconclusiveCause::NotMeasured { side: Arm::New }));
    let m = compare_metric(p99(), vec![], vec![1000.0], &options());
    assert_eq!(cause_of(&m, &options()), Some(InconclusiveCause::NotMeasured { side: Arm::Base }));
    assert_eq!(m.reason, "not measured on BASE");
}

#[test]
fn overall_takes_the_worst_and_maps_to_exit_codes() {
    use MetricVerdict::*;
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
    let m = compare_paired(metric.clone(), &pairs, &o);
    assert_eq!(m.verdict, MetricVerdict::Regressed, "{m:#?}");
    assert_eq!(cause_of(&m, &o), None);
    let unpaired =
        compare_metric(metric.clone(), pairs.iter().map(|p| p.0).collect(), pairs.iter().map(|p| p.1).collect(), &o);
    assert_ne!(unpaired.verdict, MetricVerdict::Regressed, "the drift hides it from the unpaired rule");
    // The same arm twice: no change; cheaper: improved.
    let same: Vec<(f64, f64)> =
        drift.iter().enumerate().map(|(i, d)| (*d, d * if i % 2 == 0 { 1.004 } else { 0.996 })).collect();
    let m = compare_paired(metric.clone(), &same, &o);
    assert_eq!((m.verdict, cause_of(&m, &o)), (MetricVerdict::NoChange, None));
    let cheaper: Vec<(f64, f64)> = drift.iter().map(|d| (*d, d * 0.85)).collect();
    let m = compare_paired(metric.clone(), &cheaper, &o);
    assert_eq!((m.verdict, cause_of(&m, &o)), (MetricVerdict::Improved, None));
    // Too few pairs for the sign test at alpha 0.01 (0.5^6 = 0.016).
    let m = compare_paired(metric, &pairs[..6], &o);
    assert_eq!(m.verdict, MetricVerdict::Inconclusive);
    let cause = InconclusiveCause::SignTestCannotReachAlpha { pairs: 6, smallest_p: 0.5f64.powi(6) };
    assert_eq!(cause_of(&m, &o), Some(cause));
}

#[test]
fn paired_gates_name_their_causes() {
    let metric = Metric::script("complete", Measure::ServerUs);
    let o = CompareOptions::default();
    // Fewer usable pairs than min_repetitions: a pair whose base is 0 does not count.
    let m = compare_paired(metric.clone(), &[(10.0, 11.0), (0.0, 11.0), (0.0, 12.0), (10.5, 11.6)], &o);
    assert_eq!(cause_of(&m, &o), Some(InconclusiveCause::TooFewPairs { pairs: 2 }));
    assert_eq!(m.reason, "2 pair(s), fewer than 3");
    let m = compare_paired(metric.clone(), &[], &o);
    assert_eq!(cause_of(&m, &o), Some(InconclusiveCause::TooFewPairs { pairs: 0 }));
    // Ratios 0.7 and 1.3 in turn: the interval of their median spans far more than 2 x 10 %
    // and reaches across the band.
    let wild: Vec<(f64, f64)> =
        (0..10).map(|i| (10.0, 10.0 * if i % 2 == 0 { 0.7 } else { 1.3 } * (1.0 + 0.001 * i as f64))).collect();
    let m = compare_paired(metric.clone(), &wild, &o);
    let Some(InconclusiveCause::WideInterval { width }) = cause_of(&m, &o) else { panic!("{m:#?}") };
    let ci = m.ci.unwrap();
    assert_eq!(width, ci.hi - ci.lo);
    assert!(width > 2.0 * o.max_cv, "{width}");
    // A ratio that is not finite leaves no interval.
    let mut broken: Vec<(f64, f64)> = (0..10).map(|i| (10.0, 11.0 + 0.01 * i as f64)).collect();
    broken[4].1 = f64::INFINITY;
    let m = compare_paired(metric, &broken, &o);
    assert_eq!(cause_of(&m, &o), Some(InconclusiveCause::NoInterval));
}

/// compare.json's shape of a cause: tagged as the crate's other enums (externally,
/// snake_case); a file from before the field reads as `None`.
#[test]
fn a_cause_serializes_tagged_and_an_old_file_reads_without_one() {
    let m = compare_metric(p99(), tight(1000.0), vec![], &options());
    let json = serde_json::to_value(&m).unwrap();
    assert_eq!(json["cause"], serde_json::json!({ "not_measured": { "side": "new" } }));
    let cv = serde_json::to_value(InconclusiveCause::Cv { side: Arm::Base, cv: 0.25 }).unwrap();
    assert_eq!(cv, serde_json::json!({ "cv": { "side": "base", "cv": 0.25 } }));
    let crosses = serde_json::to_value(InconclusiveCause::CrossesBand { lo: -0.01, hi: 0.25, band: 0.125 }).unwrap();
    assert_eq!(crosses, serde_json::json!({ "crosses_band": { "lo": -0.01, "hi": 0.25, "band": 0.125 } }));
    assert_eq!(serde_json::to_value(InconclusiveCause::NoInterval).unwrap(), serde_json::json!("no_interval"));
    let decided = compare_metric(p99(), tight(1000.0), tight(1200.0), &options());
    let mut old = serde_json::to_value(&decided).unwrap();
    assert_eq!(old["cause"], serde_json::Value::Null);
    old.as_object_mut().unwrap().remove("cause");
    let read: MetricComparison = serde_json::from_value(old).unwrap();
    assert_eq!(read, decided);
}
