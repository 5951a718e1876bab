//! The checker for a BullMQ 2.26.0 queue (docs/bullmq-mapping.md sections 1, 2 and 6):
//! read one queue's keys under `bull:{q}:` into the same [`ServerState`] EchoMQ's scan fills,
//! then check the invariants the state alone proves, in BullMQ's terms.
//!
//! - [`keys`]: which keys under `bull:{q}:` are BullMQ's, and which are strays.
//! - [`row`]: one job hash reduced to a [`Row`](crate::check::Row) with its
//!   [`BullRow`](crate::check::state::BullRow) (payload decoded from `data` and verified).
//! - [`read`]: the pipelined reads ([`scan_bullmq`]).
//! - [`structural`]: the rules ([`check_structural_bullmq`], [`check_queue`]).

pub mod keys;
pub mod read;
pub mod row;
pub mod structural;

pub use read::scan_bullmq;
pub use structural::{check_queue, check_structural_bullmq};

use super::history::check_history;
use super::outcome::{CheckError, CheckOutcome};
use super::report::InvariantsReport;
use super::state::{Location, ServerState, StateField};
use super::structural::checked_jobs;
use super::violation::Violation;
use crate::history::file::HistoryFileError;
use crate::history::HistoryParts;
use crate::keyspace::QueueName;
use crate::plane::Route;

/// Reads `queues` ([`scan_bullmq`]) and checks what their state proves
/// ([`check_structural_bullmq`]; `drained`: the run's drain finished), then, given the run's
/// `history`, the invariants that need it ([`check_history`]) on the history's view of each
/// row ([`history_view`]). `jobs_with_retries` counts jobs with `ats` ≥ 2 (claimed more than
/// once: retries or stalls); `failed_by_stall` failed jobs whose `failedReason` is the stall
/// limit's. Errors: the reads' [`crate::resp::CallError`], a history part not read back.
pub async fn check_bullmq<R: Route>(
    router: &R,
    queues: &[QueueName],
    drained: bool,
    history: Option<&HistoryParts>,
) -> Result<CheckOutcome, CheckError> {
    let began = std::time::Instant::now();
    let mut state = scan_bullmq(router, queues).await?;
    let violations = violations(&mut state, drained, history)?;
    let (jobs_with_retries, failed_by_stall) = retries_and_stalls(&state);
    let report = InvariantsReport::new(checked_jobs(&state), violations);
    let seconds = began.elapsed().as_secs_f64();
    Ok(CheckOutcome { report, jobs_with_retries, failed_by_stall, seconds, oldest_unfinished_s: None })
}

/// Every violation `state` (read by [`scan_bullmq`]) shows: BullMQ's structural rules, then,
/// given the run's `history`, its invariants on the history's view of each row.
///
/// Errors: a part of the history that cannot be read back.
pub fn violations(
    state: &mut ServerState,
    drained: bool,
    history: Option<&HistoryParts>,
) -> Result<Vec<Violation>, HistoryFileError> {
    let mut violations = check_structural_bullmq(state, drained);
    if let Some(history) = history {
        history_view(state);
        violations.extend(check_history(history, state)?);
    }
    Ok(violations)
}

/// Gives BullMQ rows what the history's checks read from an EchoMQ row: the state is the one
/// location the job is in (BullMQ keeps no state field: docs/bullmq-mapping.md section 1;
/// none when it is in none or several, which the structural rules report), and `attempts`
/// is `ats`, one per claim as EchoMQ's attempts are.
pub fn history_view(state: &mut ServerState) {
    for queue in &mut state.queues {
        for (id, row) in queue.rows.iter_mut() {
            let mask = queue.members.get(id).copied().unwrap_or(0);
            if let Some(location) = Location::EVERY.into_iter().find(|l| l.bit() == mask) {
                row.state = StateField::Known(location);
            }
            if let Some(bull) = &row.bull {
                // No `ats`: never claimed (the history's claims then prove the count wrong).
                row.attempts = Some(bull.ats.clone().unwrap_or(Ok(0)));
            }
        }
    }
}

/// Jobs claimed at least twice (`ats` ≥ 2), and failed jobs the stall limit failed.
fn retries_and_stalls(state: &ServerState) -> (u64, u64) {
    let failed = super::state::Location::Failed.bit();
    let (mut retries, mut stalls) = (0, 0);
    for queue in &state.queues {
        for (id, row) in &queue.rows {
            let ats = row.bull.as_ref().and_then(|b| b.ats.clone()).and_then(Result::ok).unwrap_or(0);
            retries += u64::from(ats >= 2);
            stalls += u64::from(row.stalled && queue.members.get(id) == Some(&failed));
        }
    }
    (retries, stalls)
}
