//! Maintenance: per queue, `reap` expired leases and `promote` due delayed jobs at the
//! scenario's intervals, until the run stops. Both are timed and counted like any script.

use super::backend::QueueOps;
use super::context::{timed, Phase, ThreadCtx};
use crate::metrics::JobCounter;
use crate::protocol::Script;
use std::rc::Rc;
use std::time::Duration;

/// Which maintenance verb a loop runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chore {
    /// `reap` expired leases back to pending.
    Reap,
    /// `promote` due delayed jobs to pending.
    Promote,
}

/// Runs `chore` on `queue` every `every` until the run stops. A missed tick is skipped, not
/// bunched (the interval is a pacing, not a rate to catch up with).
pub async fn chore_loop<Q: QueueOps>(ctx: Rc<ThreadCtx>, mut ops: Q, queue: usize, chore: Chore, every: Duration) {
    let limit = ctx.plan.maintenance.limit;
    // v1.1: a lease that stalls on its last attempt ends in failed, not reclaimed forever.
    let max_attempts = ctx.plan.producers.max_attempts;
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    while ctx.phase() != Phase::Stop {
        ticker.tick().await;
        let moved = match chore {
            Chore::Reap => timed(&ctx, Script::Reap, None, ops.reap(queue, limit, max_attempts)).await,
            Chore::Promote => timed(&ctx, Script::Promote, None, ops.promote(queue, limit)).await,
        };
        let counter = match chore {
            Chore::Reap => JobCounter::Reaped,
            Chore::Promote => JobCounter::Promoted,
        };
        if let Ok(n) = moved {
            ctx.bump(counter, n);
        }
    }
}
