//! Maintenance: per queue, the protocol's chores ([`QueueOps::CHORES`]: EchoMQ's `reap` of
//! expired leases and `promote` of due delayed jobs, BullMQ's stalled-jobs check) at the
//! scenario's intervals, until the run stops. Each is timed and counted like any script.

use super::context::{timed, Phase, ThreadCtx};
use crate::metrics::JobCounter;
use crate::queue::{Chore, QueueOps, Verb};
use std::rc::Rc;
use std::time::Duration;

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
            Chore::Reap => timed(&ctx, Q::script(Verb::Reap), None, ops.reap(queue, limit, max_attempts)).await,
            Chore::Promote => timed(&ctx, Q::script(Verb::Promote), None, ops.promote(queue, limit)).await,
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
