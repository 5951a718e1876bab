//! The failover table: what each injected fault did to the run, attributed from the history
//! (when the queues' enqueues were acknowledged again, which calls' outcomes are unknown), the
//! per-second counters (CLUSTERDOWN refusals waited out) and the check's findings (each
//! violation carries the time of its evidence).
//!
//! A fault's window runs from its start until the next fault starts (or the run ends): what a
//! failover breaks shows up after it is over (a token reissued by the promoted replica, a stale
//! worker's complete), so the window is not cut at the fault's own end. Evidence up to
//! [`LEAD`] before a fault starts counts for it too (a claim read while the fault's first
//! command was on its way).

use crate::check::{Invariant, Violation};
use crate::faults::record::{FaultEffects, MAX_JOBS_NAMED, OUTAGE_MIN_S};
use crate::faults::FaultSpan;
use crate::history::file::HistoryFileError;
use crate::history::{HistoryParts, Kind, Outcome, UNKNOWN_JOB};
use crate::metrics::{JobCounter, RunMetrics};
use crate::scenario::thresholds::FaultEffect;

/// How long before a fault's start its evidence may lie, s.
const LEAD: f64 = 0.25;

/// Fills `effects` of every injected span in `injected` (in time order) from the run's
/// `history` (read part by part), its per-second `metrics` and the check's `violations`.
///
/// Errors: a part of the history that cannot be read back (then no span has effects).
pub(super) fn attribute(
    injected: &mut [FaultSpan],
    history: &HistoryParts,
    metrics: &RunMetrics,
    violations: &[Violation],
) -> Result<(), HistoryFileError> {
    if injected.is_empty() {
        // No fault to attribute: the history is not read again.
        return Ok(());
    }
    let mut order: Vec<usize> = (0..injected.len()).collect();
    order.sort_by(|&a, &b| injected[a].from_s.total_cmp(&injected[b].from_s));
    let (acks, unknown_sent) = acknowledged_enqueues(history)?;
    // Each fault's timed findings, as (job, the effect it counts in).
    let mut named: Vec<std::collections::HashSet<(&str, &str)>> = vec![Default::default(); injected.len()];
    for (k, &i) in order.iter().enumerate() {
        let from = injected[i].from_s - LEAD;
        let until = order.get(k + 1).map_or(f64::INFINITY, |&next| injected[next].from_s - LEAD);
        let within = |us: u64| {
            let s = us as f64 / 1e6;
            s >= from && s < until
        };
        let mut effects = FaultEffects::default();
        let start_us = (injected[i].from_s.max(0.0) * 1e6) as u64;
        for (queue, done) in history.header().queues.iter().zip(&acks) {
            effects.answered_again_s.insert(queue.clone(), answered_again(done, start_us, until));
        }
        effects.cluster_down_s = cluster_down_seconds(metrics, from, until);
        effects.unknown_outcomes = unknown_sent.iter().filter(|&&sent| within(sent)).count() as u64;
        for v in violations.iter().filter(|v| v.at_us.is_some_and(within)) {
            let effect = counted_in(v);
            *match effect {
                FaultEffect::LostEnqueues => &mut effects.lost_enqueues,
                FaultEffect::ReissuedTokens => &mut effects.reissued_tokens,
                FaultEffect::FencingViolations => &mut effects.fencing_violations,
                _ => &mut effects.other_violations,
            } += 1;
            if let Some(job) = &v.job {
                named[i].insert((job.as_str(), effect.name()));
                if effects.jobs.len() < MAX_JOBS_NAMED && !effects.jobs.contains(job) {
                    effects.jobs.push(job.clone());
                }
            }
        }
        injected[i].effects = Some(effects);
    }
    // A finding with no time, of a job whose timed finding of the same effect a fault's window
    // holds, is that fault's (the first such fault's, in time order): the same failure, seen
    // again in the end state. Any other untimed finding stays outside every window.
    for (i, effect) in untimed_same_job(violations, &named, &order) {
        if let Some(effects) = injected[i].effects.as_mut() {
            *effects.untimed_same_job.entry(effect.to_string()).or_default() += 1;
        }
    }
    Ok(())
}

/// For each violation with no time whose job has a timed finding of the same effect in a
/// fault's window (`named[i]`: fault `i`'s (job, effect name) pairs), that fault (the first in
/// time `order`) and the effect's name.
fn untimed_same_job(
    violations: &[Violation],
    named: &[std::collections::HashSet<(&str, &str)>],
    order: &[usize],
) -> Vec<(usize, &'static str)> {
    let mut out = Vec::new();
    for v in violations.iter().filter(|v| v.at_us.is_none()) {
        let Some(job) = v.job.as_deref() else { continue };
        let effect = counted_in(v).name();
        if let Some(&i) = order.iter().find(|&&i| named[i].contains(&(job, effect))) {
            out.push((i, effect));
        }
    }
    out
}

/// The effect a violation in a fault's window counts in: I7 a lost enqueue, an I5 token handed
/// out twice a reissued token, I6 a fencing failure, anything else another violation.
fn counted_in(v: &Violation) -> FaultEffect {
    match v.invariant {
        Invariant::I7 => FaultEffect::LostEnqueues,
        Invariant::I5 if v.found.contains(" handed out ") => FaultEffect::ReissuedTokens,
        Invariant::I6 => FaultEffect::FencingViolations,
        _ => FaultEffect::OtherViolations,
    }
}

/// Each queue's acknowledged enqueues' reply times, µs, sorted (by the header's queue index),
/// and the send times of the calls whose outcome is unknown (each unknown claim once, though
/// every part holds them).
fn acknowledged_enqueues(history: &HistoryParts) -> Result<(Vec<Vec<u64>>, Vec<u64>), HistoryFileError> {
    let mut out = vec![Vec::new(); history.header().queues.len()];
    let mut unknown_sent = Vec::new();
    history.each(|index, _, part| {
        for e in &part.events {
            if e.kind == Kind::Enqueue && e.outcome.accepted() {
                if let Some(done) = out.get_mut(usize::from(e.queue)) {
                    done.push(e.done_us);
                }
            } else if e.outcome == Outcome::Unknown && (e.job != UNKNOWN_JOB || index == 0) {
                unknown_sent.push(e.sent_us);
            }
        }
        Ok::<(), HistoryFileError>(())
    })?;
    for done in &mut out {
        done.sort_unstable();
    }
    Ok((out, unknown_sent))
}

/// Seconds from `start_us` until an enqueue was acknowledged again after the longest gap of
/// at least [`OUTAGE_MIN_S`] in `done` (sorted reply times, µs) that ends after `start_us`
/// and begins before `until` (s); `Some(0.0)` when there is no such gap, `None` when nothing
/// was acknowledged after `start_us`.
fn answered_again(done: &[u64], start_us: u64, until: f64) -> Option<f64> {
    let first_after = done.partition_point(|&t| t <= start_us);
    if first_after == done.len() {
        return None;
    }
    let min_gap = (OUTAGE_MIN_S * 1e6) as u64;
    // The gap that holds `start_us` begins at the last reply before it (at the fault's start
    // when there was none); every later gap that begins inside the window counts too.
    let mut prev = if first_after == 0 { start_us } else { done[first_after - 1] };
    let mut longest: Option<(u64, u64)> = None;
    for &t in &done[first_after..] {
        if prev as f64 / 1e6 >= until {
            break;
        }
        if t - prev >= min_gap && longest.is_none_or(|(a, b)| t - prev > b - a) {
            longest = Some((prev, t));
        }
        prev = t;
    }
    Some(longest.map_or(0.0, |(_, b)| (b - start_us) as f64 / 1e6))
}

/// Seconds from the first to the last second in `[from, until)` (s) in which the load waited
/// out CLUSTERDOWN refusals; 0 when it waited out none.
fn cluster_down_seconds(metrics: &RunMetrics, from: f64, until: f64) -> u64 {
    let seconds: Vec<u64> = metrics
        .intervals
        .iter()
        .filter(|r| {
            let s = r.start_us as f64 / 1e6;
            s + 1.0 > from && s < until && r.jobs[JobCounter::ClusterDown.index()] > 0
        })
        .map(|r| r.index)
        .collect();
    match (seconds.first(), seconds.last()) {
        (Some(first), Some(last)) => last - first + 1,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finding_with_no_time_goes_to_the_fault_whose_window_names_its_job() {
        let v = |invariant, job: &str, at_us: Option<u64>, found: &str| Violation {
            invariant,
            queue: "q".into(),
            job: Some(job.into()),
            expected: String::new(),
            found: found.into(),
            at_us,
        };
        assert_eq!(counted_in(&v(Invariant::I7, "a", None, "")), FaultEffect::LostEnqueues);
        assert_eq!(counted_in(&v(Invariant::I5, "a", None, "token 1 handed out 2 times")), FaultEffect::ReissuedTokens);
        assert_eq!(counted_in(&v(Invariant::I5, "a", None, "attempts = 2")), FaultEffect::OtherViolations);
        assert_eq!(counted_in(&v(Invariant::I6, "a", None, "")), FaultEffect::FencingViolations);
        // Job a's timed fencing failure is fault 1's (the later one in time, order [1, 0]).
        let named: Vec<std::collections::HashSet<(&str, &str)>> =
            vec![Default::default(), [("a", "fencing_violations"), ("b", "reissued_tokens")].into_iter().collect()];
        let violations = [
            v(Invariant::I6, "a", None, "accepted with token 1 but token 2 was handed out"),
            v(Invariant::I6, "a", Some(5), "2 accepted"),
            // Another effect of the same job, or another job: not the same failure.
            v(Invariant::I4, "a", None, "payload differs"),
            v(Invariant::I6, "b", None, "accepted with token 1 but token 2 was handed out"),
            v(Invariant::I6, "c", None, "accepted with token 1 but token 2 was handed out"),
        ];
        assert_eq!(untimed_same_job(&violations, &named, &[1, 0]), [(1, "fencing_violations")]);
    }

    #[test]
    fn a_queue_answers_again_after_its_longest_gap_in_the_window() {
        // Acks every 10 ms, then nothing from 4.0 s to 7.5 s.
        let mut done: Vec<u64> = (0..400).map(|k| k * 10_000).collect();
        done.extend((0..100).map(|k| 7_500_000 + k * 10_000));
        let again = answered_again(&done, 4_000_000, f64::INFINITY).unwrap();
        assert!((again - 3.5).abs() < 0.02, "{again}");
        // Not interrupted: gaps of 10 ms only.
        let steady: Vec<u64> = (0..1000).map(|k| k * 10_000).collect();
        assert_eq!(answered_again(&steady, 4_000_000, f64::INFINITY), Some(0.0));
        // Nothing acknowledged after the fault.
        assert_eq!(answered_again(&steady, 20_000_000, f64::INFINITY), None);
        // A gap that begins after the window is another fault's.
        assert_eq!(answered_again(&done, 1_000_000, 2.0), Some(0.0));
    }
}
