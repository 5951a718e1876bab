//! One test per exit-1 rule of docs/running.md ("Exit codes"), and the passing run beside
//! them: every rule fails the run on its own, with its kind and its line.

use super::*;
use crate::verdict::{FindingKind as K, EXIT_FAIL, EXIT_PASS};

const PAUSE: SpanKind = SpanKind::Injected(FaultKind::Pause);

fn script(name: &str, calls: u64, ok: u64, errors: &[(&str, u64)]) -> ScriptSummary {
    ScriptSummary::with_counts(name, calls, ok, errors)
}

/// A run that passes: 100 jobs enqueued and completed, drained, checked clean, keys deleted.
fn clean() -> Facts {
    Facts {
        scripts: vec![script("enqueue", 100, 100, &[]), script("complete", 100, 100, &[])],
        jobs: [("enqueued", 100), ("completed", 100)].map(|(k, v)| (k.to_string(), v)).into(),
        drained: true,
        depths_end: Some(Depths::default()),
        check: CheckFate::Ran { violations: 0 },
        keys: Some(KeysFate::Deleted),
        ..Facts::default()
    }
}

fn rules() -> Rules {
    Rules { intent: Intent { producers: true, consumers: true }, ..Rules::default() }
}

/// The verdict's kinds, and it failed with exit 1 when any.
fn kinds(facts: &Facts, rules: &Rules) -> Vec<K> {
    let verdict = judge(facts, rules);
    assert_eq!(verdict.passed, verdict.findings.is_empty());
    assert_eq!(verdict.exit_code, if verdict.passed { EXIT_PASS } else { EXIT_FAIL });
    verdict.findings.iter().map(|f| f.kind).collect()
}

fn message(facts: &Facts, rules: &Rules) -> String {
    judge(facts, rules).lines().join("\n")
}

#[test]
fn a_clean_run_passes_with_exit_0() {
    let verdict = judge(&clean(), &rules());
    assert!(verdict.passed, "{:?}", verdict.findings);
    assert_eq!(verdict.exit_code, 0);
}

#[test]
fn an_interrupted_run_fails_and_skips_the_rules_an_early_end_makes_moot() {
    let facts = Facts {
        interrupted: Some("stopped by a signal".into()),
        drained: false,
        producers: Some(ProducerRates::new(1000.0, 1.0, 100, 900, 0, false, vec![0.1])),
        ..clean()
    };
    let rules = Rules { faults_due: vec![(FaultKind::Pause, 3)], ..rules() };
    assert_eq!(kinds(&facts, &rules), [K::Interrupted], "no drain, rate or schedule finding after an early end");
    assert_eq!(message(&facts, &rules), "run interrupted: stopped by a signal");
}

#[test]
fn corrupt_payloads_and_accepted_duplicates_fail_as_i4_and_i8() {
    let mut facts = clean();
    facts.jobs.insert("payload_corrupt".into(), 2);
    facts.jobs.insert("duplicate_accepted".into(), 3);
    assert_eq!(kinds(&facts, &rules()), [K::PayloadCorrupt, K::DuplicateAccepted]);
    let text = message(&facts, &rules());
    assert!(text.contains("I4 payload-intact: 2 claimed payloads"), "{text}");
    assert!(text.contains("I8 duplicate-enqueue: 3 re-used ids"), "{text}");
}

#[test]
fn a_threshold_that_did_not_hold_fails_and_one_that_held_does_not() {
    let held = ThresholdResult {
        key: "claim.p99".into(),
        condition: "< 2ms".into(),
        value: Some(900.0),
        passed: true,
        fault: None,
    };
    let missed = ThresholdResult {
        key: "claim.p99".into(),
        condition: "< 2ms".into(),
        value: Some(2531.0),
        passed: false,
        fault: None,
    };
    let facts = Facts { thresholds: vec![held.clone()], ..clean() };
    assert!(kinds(&facts, &rules()).is_empty());
    let facts = Facts { thresholds: vec![held, missed], ..clean() };
    assert_eq!(kinds(&facts, &rules()), [K::Threshold]);
    assert_eq!(message(&facts, &rules()), "threshold claim.p99 < 2ms failed: 2.531 ms");
}

#[test]
fn the_default_gates_fail_a_run_without_thresholds_and_an_error_rate_threshold_replaces_the_one_percent_rule() {
    let failing = script("complete", 1000, 980, &[("timeout", 20)]);
    let facts = Facts { scripts: vec![script("enqueue", 100, 100, &[]), failing], ..clean() };
    assert_eq!(kinds(&facts, &rules()), [K::DefaultGate]);
    assert!(message(&facts, &rules()).starts_with("complete: 20 of 1000 calls failed"));
    let gated = Rules { rates_gated: vec!["complete".into()], ..rules() };
    assert!(kinds(&facts, &gated).is_empty(), "complete.errors.rate replaces the rule");
    let all = Rules { all_rates_gated: true, ..rules() };
    assert!(kinds(&facts, &all).is_empty(), "errors.rate replaces it for every script");
    let explained = Facts { explained: [("complete".to_string(), 15)].into_iter().collect(), ..facts.clone() };
    assert!(kinds(&explained, &rules()).is_empty(), "5 of 1000 left once a fault explains 15");
    let nothing =
        Facts { jobs: BTreeMap::new(), scripts: vec![script("enqueue", 10, 0, &[("server", 10)])], ..clean() };
    assert_eq!(kinds(&nothing, &rules()), [K::DefaultGate, K::DefaultGate]);
    assert!(message(&nothing, &rules()).ends_with("nothing was enqueued"));
}

#[test]
fn a_fault_that_did_not_take_effect_or_a_schedule_that_did_not_fire_fails() {
    let span = |kind: SpanKind, detail: &str| FaultSpan {
        kind,
        applied: !detail.starts_with("failed") && kind != SpanKind::Nemesis,
        from_s: 2.0,
        to_s: 2.0,
        count: 0,
        detail: detail.into(),
        effects: None,
        queue: None,
    };
    let facts = Facts { injected: vec![span(PAUSE, "failed: ERR unknown command")], ..clean() };
    let rules = Rules { faults_due: vec![(FaultKind::Pause, 1)], ..rules() };
    assert_eq!(kinds(&facts, &rules), [K::FaultNotApplied]);
    assert_eq!(message(&facts, &rules), "fault pause at 2.0 s did not take effect: failed: ERR unknown command");
    let nemesis = Facts { injected: vec![span(SpanKind::Nemesis, "its connections failed")], ..clean() };
    assert_eq!(kinds(&nemesis, &Rules { faults_due: Vec::new(), ..rules.clone() }), [K::FaultNotApplied]);
    let fired_one = Facts { injected: vec![span(PAUSE, "CLIENT PAUSE 500 WRITE")], ..clean() };
    let two_due = Rules { faults_due: vec![(FaultKind::Pause, 2)], ..rules.clone() };
    assert_eq!(kinds(&fired_one, &two_due), [K::FaultsNotFired]);
    assert!(message(&fired_one, &two_due).starts_with("faults not injected: 1 of 2 scheduled pause faults"));
    assert!(kinds(&fired_one, &rules).is_empty(), "one due, one fired");
}

#[test]
fn a_rate_not_held_fails_unless_the_shortfall_is_allowed() {
    let rates = ProducerRates::new(1000.0, 10.0, 9_000, 1_000, 0, false, vec![0.4]);
    assert!(!rates.held);
    let facts = Facts { producers: Some(rates), ..clean() };
    assert_eq!(kinds(&facts, &rules()), [K::RateNotHeld]);
    assert!(message(&facts, &rules()).ends_with("(set producers.allow_shortfall = true to accept it)"));
    assert!(kinds(&facts, &Rules { allow_shortfall: true, ..rules() }).is_empty());
}

#[test]
fn jobs_left_after_the_drain_limit_fail_as_drain_incomplete_unless_there_are_no_consumers() {
    let backlog = Depths { pending: 40, delayed: 0, active: 2, completed: 58, failed: 0 };
    let facts = Facts { drained: false, depths_end: Some(backlog), ..clean() };
    assert_eq!(kinds(&facts, &rules()), [K::DrainIncomplete]);
    assert_eq!(
        message(&facts, &rules()),
        "drain incomplete: 42 jobs unfinished after the drain limit (pending 40, delayed 0, active 2)"
    );
    let aged = Facts { oldest_unfinished_s: Some(12.34), ..facts.clone() };
    assert!(message(&aged, &rules()).ends_with("active 2; the oldest enqueued 12.3 s before the end)"));
    let enqueue_only = Rules { intent: Intent { producers: true, consumers: false }, ..rules() };
    let facts = Facts { jobs: [("enqueued".to_string(), 100)].into(), ..facts };
    assert!(kinds(&facts, &enqueue_only).is_empty());
}

#[test]
fn what_the_end_found_fails_the_run_in_the_order_it_is_printed() {
    let facts = Facts {
        lock_lost: vec!["queue q: the run lock emq-lock:{q} was no longer this run's".into()],
        check: CheckFate::NotRun("the server could not be read at the end of the run".into()),
        write_errors: vec!["history.bin: No space left on device".into()],
        keys: Some(KeysFate::Kept(KeptBecause::LockLost)),
        kept_hint: KeptKeysHint { embedded: false, url: "redis://127.0.0.1:7000".into(), queues: vec!["q".into()] },
        ..clean()
    };
    assert_eq!(kinds(&facts, &rules()), [K::LockLost, K::CheckNotRun, K::WriteError, K::KeysKept]);
    let text = message(&facts, &rules());
    assert!(text.contains("emq-bench check --url redis://127.0.0.1:7000 --queue q"), "{text}");
    let kept = Rules { keep: true, ..rules() };
    assert!(!kinds(&facts, &kept).contains(&K::KeysKept), "--keep kept them on purpose");
    let embedded = Facts { kept_hint: KeptKeysHint { embedded: true, ..Default::default() }, ..facts };
    assert!(message(&embedded, &rules()).contains("on the embedded server, which stops with this run"));
}

#[test]
fn keys_that_could_not_be_deleted_fail_as_a_cleanup_without_a_hint_to_look_at_them() {
    let facts =
        Facts { keys: Some(KeysFate::Kept(KeptBecause::DeletionFailed("queue q: broken pipe".into()))), ..clean() };
    assert_eq!(kinds(&facts, &rules()), [K::CleanupFailed]);
    assert_eq!(
        message(&facts, &rules()),
        "the run's keys could not be deleted (queue q: broken pipe); some are left on the server"
    );
}

#[test]
fn a_verdict_written_before_the_deletion_ended_says_the_keys_may_be_left() {
    let facts = Facts { keys: Some(KeysFate::Deleting), ..clean() };
    assert_eq!(kinds(&facts, &rules()), [K::CleanupFailed], "until the deletion ends, it has not");
    let text = message(&facts, &rules());
    assert!(text.contains("still being deleted") && text.contains("`deleted`"), "{text}");
    assert!(kinds(&Facts { keys: Some(KeysFate::Deleted), ..clean() }, &rules()).is_empty());
}

#[test]
fn the_keys_are_deleted_only_when_nothing_keeps_them_and_kept_for_the_first_reason() {
    assert_eq!(keys_fate(&KeysEnd::default()), KeysFate::Deleting, "not `deleted` before the deletion ran");
    let every = KeysEnd {
        keep: true,
        aborted: true,
        end_unreadable: true,
        lock_lost: true,
        fleet_check: true,
        folder_incomplete: true,
        check_not_run: true,
        failed_fast: true,
    };
    // Each reason in turn, with every later one present too: the first decides.
    let order = [
        (KeysEnd { ..every }, KeptBecause::Keep),
        (KeysEnd { keep: false, ..every }, KeptBecause::Aborted),
        (KeysEnd { keep: false, aborted: false, ..every }, KeptBecause::Violation),
        (KeysEnd { keep: false, aborted: false, failed_fast: false, ..every }, KeptBecause::EndUnreadable),
        (
            KeysEnd { end_unreadable: false, lock_lost: true, fleet_check: true, ..KeysEnd::default() },
            KeptBecause::LockLost,
        ),
        (
            KeysEnd { fleet_check: true, folder_incomplete: true, check_not_run: true, ..KeysEnd::default() },
            KeptBecause::FleetCheck,
        ),
        (KeysEnd { folder_incomplete: true, check_not_run: true, ..KeysEnd::default() }, KeptBecause::FolderIncomplete),
        (KeysEnd { check_not_run: true, ..KeysEnd::default() }, KeptBecause::CheckNotRun),
    ];
    for (end, why) in order {
        assert_eq!(keys_fate(&end), KeysFate::Kept(why), "{end:?}");
    }
    assert_eq!(keys_deleted(None), KeysFate::Deleted);
    assert_eq!(
        keys_deleted(Some("queue q: broken pipe".into())),
        KeysFate::Kept(KeptBecause::DeletionFailed("queue q: broken pipe".into()))
    );
}

#[test]
fn invariant_violations_fail_last_and_a_skipped_check_does_not() {
    let facts = Facts { check: CheckFate::Ran { violations: 7 }, ..clean() };
    assert_eq!(kinds(&facts, &rules()), [K::Violations]);
    assert_eq!(message(&facts, &rules()), "7 invariant violations (all in invariants.json)");
    assert!(kinds(&Facts { check: CheckFate::Skipped, ..clean() }, &rules()).is_empty(), "--no-check");
}

/// A fault threshold takes the violations of its kind in the faults' windows: the run passes
/// when they are all the faults', and any beyond them (outside every window, or of a kind no
/// threshold bounds) still fails.
#[test]
fn violations_a_fault_threshold_bounds_are_its_to_judge() {
    use crate::faults::record::FaultEffects;
    use crate::faults::{FaultSpan, SpanKind};
    use crate::scenario::thresholds::FaultEffect;
    let kill = |lost: u64, fencing: u64| FaultSpan {
        kind: SpanKind::Injected(crate::scenario::FaultKind::KillPrimary),
        applied: true,
        from_s: 5.0,
        to_s: 5.5,
        count: 1,
        detail: String::new(),
        effects: Some(FaultEffects { lost_enqueues: lost, fencing_violations: fencing, ..FaultEffects::default() }),
        queue: Some("bench-2".into()),
    };
    let bounded = Rules { bounded_effects: vec![FaultEffect::LostEnqueues], ..rules() };
    let facts = Facts { injected: vec![kill(30, 0)], check: CheckFate::Ran { violations: 30 }, ..clean() };
    assert!(kinds(&facts, &bounded).is_empty(), "{}", message(&facts, &bounded));
    assert_eq!(kinds(&facts, &rules()), vec![K::Violations], "no threshold: every violation fails");
    // Two violations outside the window.
    let facts = Facts { injected: vec![kill(30, 0)], check: CheckFate::Ran { violations: 32 }, ..clean() };
    assert_eq!(kinds(&facts, &bounded), vec![K::Violations]);
    assert!(message(&facts, &bounded).contains("2 invariant violations beyond what the fault thresholds bound"));
    // A fencing failure in the window, a kind no threshold bounds.
    let facts = Facts { injected: vec![kill(30, 1)], check: CheckFate::Ran { violations: 31 }, ..clean() };
    assert_eq!(kinds(&facts, &bounded), vec![K::Violations]);
    // The same job's finding again with no time of its own (its end state) is judged with the
    // effect its timed finding counts in: bounded when that effect is, else it fails.
    let mut twice = kill(30, 1);
    let untimed = [("fencing_violations".to_string(), 1)].into_iter().collect();
    twice.effects.as_mut().unwrap().untimed_same_job = untimed;
    let facts = Facts { injected: vec![twice], check: CheckFate::Ran { violations: 32 }, ..clean() };
    let both = Rules { bounded_effects: vec![FaultEffect::LostEnqueues, FaultEffect::FencingViolations], ..rules() };
    assert!(kinds(&facts, &both).is_empty(), "{}", message(&facts, &both));
    assert!(message(&facts, &bounded).contains("2 invariant violations beyond"), "{}", message(&facts, &bounded));
}
