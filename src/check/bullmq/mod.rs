//! The checker for a BullMQ 2.26.0 queue (issue 12; docs/bullmq-mapping.md sections 1, 2 and 6):
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

use super::report::InvariantsReport;
use super::run::CheckOutcome;
use super::state::ServerState;
use super::structural::checked_jobs;
use crate::protocol::{CallError, QueueName};
use crate::target::Route;

/// Reads `queues` ([`scan_bullmq`]) and checks what their state proves
/// ([`check_structural_bullmq`]; `drained`: the run's drain finished). The history's invariants
/// are not checked for BullMQ yet. `jobs_with_retries` counts jobs with `ats` ≥ 2 (claimed more
/// than once: retries or stalls); `failed_by_stall` failed jobs whose `failedReason` is the
/// stall limit's. Errors: the reads' [`CallError`].
pub async fn check_bullmq<R: Route>(
    router: &R,
    queues: &[QueueName],
    drained: bool,
) -> Result<CheckOutcome, CallError> {
    let began = std::time::Instant::now();
    let state = scan_bullmq(router, queues).await?;
    let violations = check_structural_bullmq(&state, drained);
    let (jobs_with_retries, failed_by_stall) = retries_and_stalls(&state);
    let report = InvariantsReport::new(checked_jobs(&state), violations);
    Ok(CheckOutcome { report, jobs_with_retries, failed_by_stall, seconds: began.elapsed().as_secs_f64() })
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
