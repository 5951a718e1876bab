//! One whole check: scan, the structural invariants, and (given a history) the history ones.

use super::history::check_history;
use super::report::InvariantsReport;
use super::scan::scan;
use super::state::{Location, ServerState, StateField};
use super::structural::{check_structural, checked_jobs};
use super::violation::Violation;
use crate::history::file::HistoryFileError;
use crate::history::HistoryParts;
use crate::keyspace::{QueueKeys, QueueName};
use crate::lua::Protocol;
use crate::plane::Route;
use crate::resp::CallError;
use serde::Serialize;
use std::collections::BTreeMap;

/// Why a check could not run.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The server could not be read.
    #[error(transparent)]
    Read(#[from] CallError),
    /// A part of the run's history could not be read back ([`HistoryParts`]).
    #[error("the history could not be read back: {0}")]
    History(#[from] HistoryFileError),
}

/// What a check found, with the evidence that the run had contention.
#[derive(Debug, Clone)]
pub struct CheckOutcome {
    /// Every violation, and the counts `invariants.json` holds.
    pub report: InvariantsReport,
    /// Rows whose `attempts` ≥ 2: jobs claimed more than once (retries or reaped leases).
    pub jobs_with_retries: u64,
    /// Rows `reap` failed because their last lease expired (`failed`, `last_error = stalled`).
    pub failed_by_stall: u64,
    /// Check time, s (scan and analysis).
    pub seconds: f64,
    /// How long before the scan the oldest job still pending, delayed or active was enqueued,
    /// s (its id's ULID time against the server's clock; `None`: none left, or no clock).
    pub oldest_unfinished_s: Option<f64>,
}

/// The part of a check that `summary.json` carries.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
#[serde(default)]
pub struct CheckSummary {
    /// Jobs checked.
    pub checked_jobs: usize,
    /// Violations in all.
    pub violations_total: usize,
    /// Violations per invariant id.
    pub by_invariant: BTreeMap<String, usize>,
    /// Rows with `attempts` ≥ 2.
    pub jobs_with_retries: u64,
    /// True when the history was part of the check (else only the server state was).
    pub with_history: bool,
    /// Check time, s.
    pub seconds: f64,
    /// How long before the scan the oldest unfinished job was enqueued, s (`null`: none left,
    /// or not known); a backlog's age, beside the counts of `depths_end`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oldest_unfinished_s: Option<f64>,
}

impl CheckOutcome {
    /// The summary of this outcome.
    pub fn summary(&self, with_history: bool) -> CheckSummary {
        CheckSummary {
            checked_jobs: self.report.checked_jobs,
            violations_total: self.report.violations_total,
            by_invariant: self.report.by_invariant.clone(),
            jobs_with_retries: self.jobs_with_retries,
            with_history,
            seconds: self.seconds,
            oldest_unfinished_s: self.oldest_unfinished_s,
        }
    }
}

/// Every violation a scanned `state` of `protocol`'s queues shows: the structural rules, then,
/// given the run's `history`, the invariants that need it (BullMQ's on the history's view of
/// its rows, [`super::bullmq::violations`]). What the run's check and `emq-bench check` share.
///
/// Errors: a part of the history that cannot be read back.
pub fn violations(
    protocol: Protocol,
    state: &mut ServerState,
    history: Option<&HistoryParts>,
) -> Result<Vec<Violation>, HistoryFileError> {
    match protocol {
        Protocol::EchoMqV1 => {
            let mut violations = check_structural(state);
            if let Some(history) = history {
                violations.extend(check_history(history, state)?);
            }
            Ok(violations)
        }
        Protocol::BullMq => {
            let drained = history.is_some_and(|h| h.header().drained);
            super::bullmq::violations(state, drained, history)
        }
    }
}

/// Scans `queues` and checks every invariant the server state proves, plus, with `history`,
/// those that need it. Errors: the scan's [`CallError`], a history part not read back.
pub async fn check<R: Route>(
    router: &R,
    queues: &[QueueKeys],
    history: Option<&HistoryParts>,
) -> Result<CheckOutcome, CheckError> {
    if queues.first().is_some_and(|q| q.protocol == Protocol::BullMq) {
        return check_bullmq_run(router, queues, history).await;
    }
    let began = std::time::Instant::now();
    let mut state = scan(router, queues).await?;
    let violations = violations(Protocol::EchoMqV1, &mut state, history)?;
    let jobs_with_retries = state
        .queues
        .iter()
        .flat_map(|q| q.rows.values())
        .filter(|row| matches!(row.attempts, Some(Ok(n)) if n >= 2))
        .count() as u64;
    let failed_by_stall = state
        .queues
        .iter()
        .flat_map(|q| q.rows.values())
        .filter(|row| row.stalled && row.state == StateField::Known(Location::Failed))
        .count() as u64;
    let report = InvariantsReport::new(checked_jobs(&state), violations);
    let oldest_unfinished_s = oldest_unfinished(&state);
    let seconds = began.elapsed().as_secs_f64();
    Ok(CheckOutcome { report, jobs_with_retries, failed_by_stall, seconds, oldest_unfinished_s })
}

/// How long before the scan the oldest unfinished job (pending, delayed or active) was
/// enqueued, s: its id's ULID time (the producer's clock) against the server's (the scan's).
fn oldest_unfinished(state: &ServerState) -> Option<f64> {
    let now_ms = state.now_ms?;
    let oldest_ms = state
        .queues
        .iter()
        .flat_map(|q| q.rows.iter())
        .filter(|(_, row)| row.state.unfinished().is_some())
        .map(|(id, _)| (id.ulid().0 >> 80) as u64)
        .min()?;
    Some(now_ms.saturating_sub(oldest_ms) as f64 / 1000.0)
}

/// [`check`] for BullMQ queues ([`super::bullmq::check_bullmq`]).
async fn check_bullmq_run<R: Route>(
    router: &R,
    queues: &[QueueKeys],
    history: Option<&HistoryParts>,
) -> Result<CheckOutcome, CheckError> {
    let names: Vec<QueueName> = queues.iter().map(|q| q.queue.clone()).collect();
    super::bullmq::check_bullmq(router, &names, history.is_some_and(|h| h.header().drained), history).await
}
