//! The judge: a finished run's facts and the rules resolved from its plan, in; its
//! [`Verdict`], out. A pure function (no I/O, no clock), so every exit-1 rule of
//! docs/running.md ("Exit codes") is a unit test here, and a fleet, a capacity search or a live endpoint can judge again.
//!
//! The rules, in the order their findings are printed:
//! 1. an interrupted run fails (a stop, an abort, the target unreachable past `--give-up`, ...);
//! 2. corrupt payloads seen by consumers (I4);
//! 3. every `[thresholds]` entry that did not hold;
//! 4. the default gates (`report::gates`): a script whose calls all failed, errors beyond 1 %
//!    not explained by an injected fault nor provoked (stale refusals), nothing enqueued or
//!    finished;
//! 5. a fault that did not take effect, and a schedule that fired fewer faults than it asked
//!    for (a time-bounded run not interrupted);
//! 6. an open-loop rate not held, unless `producers.allow_shortfall`;
//! 7. re-used ids accepted as new jobs (I8);
//! 8. jobs left unfinished after the drain limit (a run with consumers, not interrupted);
//! 9. what the end found: the keys not deleted, the run lock lost, the check not run, files
//!    not written, keys kept against the plan, invariant violations (but those in an injected
//!    fault's window of a kind a `fault.<effect>` threshold bounds, which rule 3 judges).

use crate::faults::{FaultSpan, SpanKind};
use crate::load::coordinator::Depths;
use crate::metrics::JobCounter;
use crate::report::gates::{self, GateOutcome, GateResult, Intent};
use crate::report::rates::ProducerRates;
use crate::report::thresholds::{effect_of, ThresholdResult};
use crate::report::ScriptSummary;
use crate::scenario::thresholds::{FaultEffect, ThresholdMetric};
use crate::scenario::{FaultKind, Plan, Stop};
use crate::verdict::{Finding, FindingKind, KeptBecause, KeysFate, Verdict};
use std::collections::BTreeMap;

/// The rules a run is judged by, resolved once from its plan and flags.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    /// Whether the scenario has producers and consumers (what the default gates expect).
    pub intent: Intent,
    /// A threshold sets every script's error rate (`errors.rate`): the 1 % rule is off.
    pub all_rates_gated: bool,
    /// Scripts whose error rate a threshold sets (`<script>.errors.rate`).
    pub rates_gated: Vec<String>,
    /// `producers.allow_shortfall`: a rate not held is said, not failed.
    pub allow_shortfall: bool,
    /// For a time-bounded load phase: each fault kind and how many of it were due
    /// within the phase; empty for a job budget.
    pub faults_due: Vec<(FaultKind, usize)>,
    /// `--keep`: kept keys are the user's wish, not a finding.
    pub keep: bool,
    /// The violation effects a `fault.<effect>` threshold bounds: the violations of those
    /// kinds in an injected fault's window are the threshold's to judge, not rule 9's.
    pub bounded_effects: Vec<FaultEffect>,
}

impl Rules {
    /// The rules of `plan`, with `--keep` as `keep`.
    pub fn of(plan: &Plan, keep: bool) -> Rules {
        let mut rates_gated = Vec::new();
        let mut all_rates_gated = false;
        let mut bounded_effects = Vec::new();
        for threshold in &plan.thresholds {
            match &threshold.metric {
                ThresholdMetric::ErrorRate { script: None } => all_rates_gated = true,
                ThresholdMetric::ErrorRate { script: Some(s) } => rates_gated.push(s.clone()),
                ThresholdMetric::FaultEffect { effect } if effect.is_violation() => bounded_effects.push(*effect),
                _ => {}
            }
        }
        let mut faults_due: Vec<(FaultKind, usize)> = Vec::new();
        if let Stop::Duration(load) = plan.stop {
            for fault in &plan.faults {
                let due = fault.count_before(load);
                match faults_due.iter_mut().find(|(kind, _)| *kind == fault.kind) {
                    Some((_, sum)) => *sum += due,
                    None => faults_due.push((fault.kind, due)),
                }
            }
        }
        Rules {
            intent: Intent { producers: plan.producers.count > 0, consumers: plan.consumers.count > 0 },
            all_rates_gated,
            rates_gated,
            allow_shortfall: plan.producers.allow_shortfall,
            faults_due,
            keep,
            bounded_effects,
        }
    }

    fn rate_gated(&self, script: &str) -> bool {
        self.all_rates_gated || self.rates_gated.iter().any(|s| s == script)
    }
}

/// What became of the invariant check.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum CheckFate {
    /// Not asked for (`--no-check`: `emq-bench check --history` can run it later).
    #[default]
    Skipped,
    /// It could not run, and why.
    NotRun(String),
    /// It ran and found this many violations.
    Ran {
        /// Violations in all (invariants.json has them).
        violations: usize,
    },
}

/// What the end of a run knows that decides whether its keys are deleted; every field false
/// is a run that keeps nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct KeysEnd {
    /// `--keep`.
    pub keep: bool,
    /// A second stop signal: nothing that waits on the server runs.
    pub aborted: bool,
    /// The queues' depths could not be read at the end.
    pub end_unreadable: bool,
    /// A run-lock lease was lost while the run held it.
    pub lock_lost: bool,
    /// A `shared` fleet's shard: the merge checks and deletes the keys.
    pub fleet_check: bool,
    /// A file the run writes as it goes (the history, a per-second file) could not be written.
    pub folder_incomplete: bool,
    /// The invariant check was asked for and could not run.
    pub check_not_run: bool,
    /// `--fail-fast` stopped the run at a violation the live check found.
    pub failed_fast: bool,
}

/// The keys' fate as the end of a run decides it, before the folder is written: kept for the
/// first reason in [`KeysEnd`]'s order, else [`KeysFate::Deleting`]: the deletion runs once
/// the folder is written, and only its end makes the fate `deleted`.
///
/// The order: the user's wish first; then what makes any deletion unsafe (an abort; a run
/// `--fail-fast` stopped at a violation, whose keys are the evidence; a server not read, a lock
/// lost: the keys may be another run's now); then a fleet's shard, whose keys
/// the merge needs; then what leaves the keys the only evidence (a folder incomplete, a check
/// not run).
pub fn keys_fate(end: &KeysEnd) -> KeysFate {
    let why = if end.keep {
        KeptBecause::Keep
    } else if end.aborted {
        KeptBecause::Aborted
    } else if end.failed_fast {
        KeptBecause::Violation
    } else if end.end_unreadable {
        KeptBecause::EndUnreadable
    } else if end.lock_lost {
        KeptBecause::LockLost
    } else if end.fleet_check {
        KeptBecause::FleetCheck
    } else if end.folder_incomplete {
        KeptBecause::FolderIncomplete
    } else if end.check_not_run {
        KeptBecause::CheckNotRun
    } else {
        return KeysFate::Deleting;
    };
    KeysFate::Kept(why)
}

/// The keys' fate once the deletion ended: `deleted` when every queue's keys were, else kept
/// with the failure (`error`, naming the queue).
pub fn keys_deleted(error: Option<String>) -> KeysFate {
    match error {
        None => KeysFate::Deleted,
        Some(error) => KeysFate::Kept(KeptBecause::DeletionFailed(error)),
    }
}

/// Where the run's kept keys can be looked at later, for the finding that says so.
#[derive(Debug, Clone, Default)]
pub struct KeptKeysHint {
    /// The harness started the server: it and its data go when the harness exits.
    pub embedded: bool,
    /// The target's URL, password masked.
    pub url: String,
    /// The run's queues.
    pub queues: Vec<String>,
}

/// What the judge reads of a finished run: summary.json's figures and what the end found.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// Why the run ended early (`None`: the plan was carried out).
    pub interrupted: Option<String>,
    /// Per script over the measured part.
    pub scripts: Vec<ScriptSummary>,
    /// summary.json's job counters (the whole run).
    pub jobs: BTreeMap<String, u64>,
    /// The thresholds, evaluated.
    pub thresholds: Vec<ThresholdResult>,
    /// Per script: failed calls an injected fault explains (absent: none).
    pub explained: BTreeMap<String, u64>,
    /// The faults the nemesis injected (or failed to).
    pub injected: Vec<FaultSpan>,
    /// Open loop: the rates (`None` in closed loop).
    pub producers: Option<ProducerRates>,
    /// The drain finished every job in time.
    pub drained: bool,
    /// Jobs in each place at the end (`None`: the server could not be read).
    pub depths_end: Option<Depths>,
    /// How long before the end the oldest unfinished job was enqueued, s (from the check).
    pub oldest_unfinished_s: Option<f64>,
    /// The invariant check.
    pub check: CheckFate,
    /// Run-lock leases lost while the run held them, one line each.
    pub lock_lost: Vec<String>,
    /// Files of the results folder not written, with why.
    pub write_errors: Vec<String>,
    /// What became of the keys.
    pub keys: Option<KeysFate>,
    /// Where kept keys can be looked at.
    pub kept_hint: KeptKeysHint,
}

/// Every default gate of `facts` under `rules`, passed, failed or skipped (rule 4; what
/// `junit.xml` lists one testcase each).
pub fn gates(facts: &Facts, rules: &Rules) -> Vec<GateResult> {
    let explained = |script: &str| facts.explained.get(script).copied().unwrap_or(0);
    gates::evaluate(&facts.scripts, &facts.jobs, rules.intent, |s| rules.rate_gated(s), explained)
}

/// The verdict on `facts` under `rules`.
pub fn judge(facts: &Facts, rules: &Rules) -> Verdict {
    let mut out = Vec::new();
    let mut say = |kind, message: String| out.push(Finding::new(kind, message));
    let count = |name: &str| facts.jobs.get(name).copied().unwrap_or(0);
    if let Some(reason) = &facts.interrupted {
        say(FindingKind::Interrupted, format!("run interrupted: {reason}"));
    }
    let corrupt = count(JobCounter::PayloadCorrupt.name());
    if corrupt > 0 {
        say(
            FindingKind::PayloadCorrupt,
            format!("I4 payload-intact: {corrupt} claimed payloads differ from what was enqueued"),
        );
    }
    for threshold in facts.thresholds.iter().filter(|t| !t.passed) {
        say(FindingKind::Threshold, threshold.describe());
    }
    for gate in gates(facts, rules) {
        if let GateOutcome::Failed(line) = gate.outcome {
            say(FindingKind::DefaultGate, line);
        }
    }
    for span in facts.injected.iter().filter(|s| !s.applied) {
        say(
            FindingKind::FaultNotApplied,
            format!("fault {} at {:.1} s did not take effect: {}", span.kind, span.from_s, span.detail),
        );
    }
    if facts.interrupted.is_none() {
        for &(kind, due) in &rules.faults_due {
            let fired = facts.injected.iter().filter(|s| s.kind == SpanKind::Injected(kind)).count();
            // The nemesis fires at most MAX_FIRED faults in all: more are not owed.
            if fired < due.min(crate::faults::nemesis::MAX_FIRED) {
                say(
                    FindingKind::FaultsNotFired,
                    format!(
                        "faults not injected: {fired} of {due} scheduled {} faults fired within the load phase \
                         (an earlier fault held the schedule up)",
                        kind.name()
                    ),
                );
            }
        }
    }
    if let Some(rates) = facts.producers.as_ref().filter(|r| !r.held) {
        if !rules.allow_shortfall && facts.interrupted.is_none() {
            say(
                FindingKind::RateNotHeld,
                format!("{} (set producers.allow_shortfall = true to accept it)", rates.line()),
            );
        }
    }
    let dup = count(JobCounter::DuplicateAccepted.name());
    if dup > 0 {
        say(
            FindingKind::DuplicateAccepted,
            format!("I8 duplicate-enqueue: {dup} re-used ids were accepted as new jobs"),
        );
    }
    // A run without consumers (an enqueue-only benchmark) has nothing to drain.
    if !facts.drained && facts.interrupted.is_none() && rules.intent.consumers {
        // A backlog (consumers that could not keep up), not a lost job: the check judges loss.
        let oldest = facts
            .oldest_unfinished_s
            .map_or(String::new(), |s| format!("; the oldest enqueued {s:.1} s before the end"));
        let message = match facts.depths_end {
            Some(d) => format!(
                "drain incomplete: {} jobs unfinished after the drain limit (pending {}, delayed {}, active {}{oldest})",
                d.unfinished(),
                d.pending,
                d.delayed,
                d.active
            ),
            None => "drain incomplete: the jobs left could not be counted (the server was not read)".to_string(),
        };
        say(FindingKind::DrainIncomplete, message);
    }
    match &facts.keys {
        Some(KeysFate::Kept(KeptBecause::DeletionFailed(err))) => say(
            FindingKind::CleanupFailed,
            format!("the run's keys could not be deleted ({err}); some are left on the server"),
        ),
        // Judged before the deletion ends: a folder whose verdict still says this was left by
        // a run that ended during its cleanup.
        Some(KeysFate::Deleting) => say(
            FindingKind::CleanupFailed,
            "the run's keys were still being deleted when this verdict was written: until summary.json says \
             `deleted`, some may be left on the server (its `cleanup` names the queues not finished)"
                .to_string(),
        ),
        _ => {}
    }
    for line in &facts.lock_lost {
        say(FindingKind::LockLost, format!("run lock lost: {line} (its keys were kept)"));
    }
    if let CheckFate::NotRun(reason) = &facts.check {
        say(FindingKind::CheckNotRun, format!("the invariant check could not run: {reason}"));
    }
    for error in &facts.write_errors {
        say(FindingKind::WriteError, format!("results folder incomplete: {error}"));
    }
    let kept_for_a_look = matches!(&facts.keys, Some(KeysFate::Kept(why)) if !matches!(why, KeptBecause::DeletionFailed(_) | KeptBecause::FleetCheck));
    if kept_for_a_look && !rules.keep {
        let hint = &facts.kept_hint;
        say(
            FindingKind::KeysKept,
            match hint.embedded {
                // The embedded server and its data go when the harness exits.
                true => "the run's keys were kept, but on the embedded server, which stops with this run: \
                         run against a server of your own (--url) to look at them later"
                    .to_string(),
                false => {
                    let queues: Vec<String> = hint.queues.iter().map(|q| format!("--queue {q}")).collect();
                    format!(
                        "the run's keys were kept for a later look: emq-bench check --url {} {}",
                        hint.url,
                        queues.join(" ")
                    )
                }
            },
        );
    }
    if let Some(line) = violations_beyond_bounds(facts, rules) {
        say(FindingKind::Violations, line);
    }
    Verdict::of(out)
}

/// The violations finding, when the check ran and found any that no `fault.<effect>` threshold
/// bounds. The violations a threshold bounds, in a fault's window or of a job its window names
/// (with no time of their own), are judged by it (rule 3); any other (outside every window, or
/// of a kind no threshold bounds) fails.
fn violations_beyond_bounds(facts: &Facts, rules: &Rules) -> Option<String> {
    let CheckFate::Ran { violations } = facts.check else { return None };
    let bounded: u64 = facts
        .injected
        .iter()
        .filter_map(|f| f.effects.as_ref())
        .flat_map(|e| {
            rules
                .bounded_effects
                .iter()
                .map(|&effect| effect_of(effect, e) + e.untimed_same_job.get(effect.name()).copied().unwrap_or(0))
        })
        .sum();
    let left = (violations as u64).saturating_sub(bounded);
    match (left > 0, bounded > 0) {
        (true, true) => Some(format!(
            "{left} invariant violations beyond what the fault thresholds bound ({bounded} in the faults' windows, \
             or of their jobs with no time of their own, are theirs to judge; all in invariants.json)"
        )),
        (true, false) => Some(format!("{violations} invariant violations (all in invariants.json)")),
        (false, _) => None,
    }
}

#[cfg(test)]
mod tests;
