//! Maintenance: per queue, the protocol's chores ([`QueueOps::CHORES`]: EchoMQ's `reap` of
//! expired leases, `promote` of due delayed jobs and, when the scenario keeps finished jobs
//! for a while only, `clean`; BullMQ's stalled-jobs check) at the scenario's intervals, until
//! the run stops. Each is timed and counted like any script.

use super::context::{timed, timed_span, Phase, ThreadCtx};
use crate::history::{Kind, Outcome, UNKNOWN_JOB};
use crate::keyspace::ids::{job_number, job_tag, run_tag};
use crate::lua::ErrorCode;
use crate::metrics::JobCounter;
use crate::queue::{Chore, FinishedSet, QueueOps, Verb};
use crate::resp::CallError;
use std::rc::Rc;
use std::time::Duration;

/// Most `clean` calls per set in one tick: what one tick may remove is `limit` times this, and
/// the tick after goes on.
const CLEAN_ROUNDS: usize = 64;

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
        // A tick after the stop sends nothing: the thread may have handed over its history.
        if ctx.phase() == Phase::Stop {
            break;
        }
        let (moved, counter) = match chore {
            Chore::Reap => {
                let reap = ops.reap(queue, limit, max_attempts);
                (timed(&ctx, Q::script(Verb::Reap), None, reap).await, JobCounter::Reaped)
            }
            Chore::Promote => {
                let promote = ops.promote(queue, limit);
                (timed(&ctx, Q::script(Verb::Promote), None, promote).await, JobCounter::Promoted)
            }
            Chore::Clean => {
                // A call that removed `limit` jobs may have left more that are due: the chore
                // calls again, the two sets in turn, until both are clean (or the run stops, or
                // CLEAN_ROUNDS), so retention keeps up with any finishing rate, not `limit` per
                // interval, and a busy set does not starve the other.
                let mut full = FinishedSet::BOTH.to_vec();
                for _ in 0..CLEAN_ROUNDS {
                    let mut still = Vec::new();
                    for &set in &full {
                        if ctx.phase() == Phase::Stop {
                            break;
                        }
                        if clean(&ctx, &mut ops, queue, set).await == limit as usize {
                            still.push(set);
                        }
                    }
                    if still.is_empty() || ctx.phase() == Phase::Stop {
                        break;
                    }
                    full = still;
                }
                continue;
            }
        };
        if let Ok(n) = moved {
            ctx.bump(counter, n);
        }
    }
}

/// One `clean` of `queue`'s finished `set`: every id it removed is recorded in the history
/// as retired (the check then knows the row is gone on purpose), and a call whose outcome is
/// unknown is recorded as one that may have removed jobs nobody saw. Returns how many it
/// removed (0 after an error).
async fn clean<Q: QueueOps>(ctx: &ThreadCtx, ops: &mut Q, queue: usize, set: FinishedSet) -> usize {
    let plan = &ctx.plan;
    let age_ms = plan.maintenance.retain.as_millis() as u64;
    let request = ops.clean(queue, set, age_ms, plan.maintenance.limit);
    let (result, span) = timed_span(ctx, Q::script(Verb::Clean), None, request).await;
    let mut history = ctx.history.borrow_mut();
    match result {
        Ok(ids) => {
            ctx.bump(JobCounter::Retired, ids.len() as u64);
            let tag = run_tag(plan.id_seed());
            // Ids of another run cannot be in this run's sets; were one there, it names no job
            // of this history, and the check's scan reports what is left of it.
            for id in ids.iter().filter(|id| job_tag(id) == tag) {
                history.push(job_number(id), Kind::Retire, Outcome::Ok, set.bit(), None, span.sent, span.service_us);
            }
            ids.len()
        }
        Err(err) => {
            // The script may have run, and removed rows nobody saw: no reply (a timeout, a lost
            // connection), a reply that does not read, a Lua error after some deletions, a WAIT
            // that came short. The other errors refuse before any write.
            let code = err.code();
            let ran = Outcome::of_error(code) == Outcome::Unknown
                || (matches!(code, ErrorCode::Server | ErrorCode::Reply | ErrorCode::WaitShort)
                    && !matches!(err, CallError::Redirect(_)));
            if ran {
                let token = (queue as u32) << 1 | set.bit();
                history.push(UNKNOWN_JOB, Kind::Retire, Outcome::Unknown, token, None, span.sent, span.service_us);
            }
            0
        }
    }
}
