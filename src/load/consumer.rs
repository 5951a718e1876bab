//! Consumers: claim jobs in batches, verify their payloads, simulate work (with progress notes
//! and lease renewal), then complete, fail (retry or final) or stall on purpose; some stalled
//! attempts come back as zombies that try to complete with their stale token.

use super::context::{timed_span, Phase, ThreadCtx};
use crate::history::{Kind, Outcome, UNKNOWN_JOB};
use crate::keyspace::ids::job_number;
use crate::lua::{ErrorCode, Script};
use crate::metrics::JobCounter;
use crate::payload::{verify, PayloadCheck};
use crate::queue::{Claimed, CompleteReply, FailArgs, FailReply, QueueOps, Verb};
use crate::resp::CallError;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// What this attempt of a job will end in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Complete,
    Fail,
    Stall,
}

/// Backoff after a failed claim (server down, timeout): keeps a dead server from being hammered.
const CLAIM_ERROR_PAUSE: Duration = Duration::from_millis(10);

/// Runs one consumer lane until the run stops. `lane` (unique in the process) spreads lanes
/// over the queues and names the lane as the worker of its calls in the history.
pub async fn lane<Q: QueueOps>(ctx: Rc<ThreadCtx>, mut ops: Q, lane: usize, seed: u64) {
    let plan = &ctx.plan.consumers;
    let queues = ctx.plan.queues.len();
    let lease_ms = plan.lease.as_millis().max(1) as u64;
    let mut rng = SmallRng::seed_from_u64(seed);
    let worker = lane as u32;
    let mut turn = lane;
    while ctx.phase() != Phase::Stop {
        let queue = turn % queues;
        turn += 1;
        let (result, span) =
            timed_span(&ctx, Q::script(Verb::Claim), None, ops.claim(queue, lease_ms, plan.batch)).await;
        let claimed = match result {
            Ok(claimed) => claimed,
            Err(err) => {
                if err.code().is_unknown_outcome() {
                    // It may have handed out jobs nobody saw: the checker allows for it.
                    ctx.history.borrow_mut().push(
                        UNKNOWN_JOB,
                        Kind::Claim,
                        Outcome::Unknown,
                        0,
                        Some(worker),
                        span.sent,
                        span.service_us,
                    );
                }
                tokio::time::sleep(CLAIM_ERROR_PAUSE).await;
                continue;
            }
        };
        if claimed.is_empty() {
            ctx.wait_until(Instant::now() + plan.poll).await;
            continue;
        }
        ctx.bump(JobCounter::Claimed, claimed.len() as u64);
        for job in &claimed {
            // Every claim verifies the bytes it got back (I4).
            let intact = verify(&job.id, &job.payload) == PayloadCheck::Intact;
            if !intact {
                ctx.bump(JobCounter::PayloadCorrupt, 1);
            }
            let outcome = if intact { Outcome::Ok } else { Outcome::Alt };
            ctx.history.borrow_mut().push_claim(
                job_number(&job.id),
                outcome,
                Q::attempt(&job.token),
                Some(worker),
                Q::holder(&job.token),
                span.sent,
                span.service_us,
            );
        }
        for job in claimed {
            if ctx.phase() == Phase::Stop {
                return;
            }
            process(&ctx, &mut ops, queue, job, worker, &mut rng).await;
        }
    }
}

async fn process<Q: QueueOps>(
    ctx: &Rc<ThreadCtx>,
    ops: &mut Q,
    queue: usize,
    job: Claimed<Q::Token>,
    worker: u32,
    rng: &mut SmallRng,
) {
    let plan = &ctx.plan.consumers;
    // A job its protocol says must fail now (BullMQ's deferred failure of a job stalled too
    // often) is failed unprocessed, as BullMQ's worker fails it.
    let doomed = Q::must_fail(&job.token);
    let fate = {
        let x: f64 = rng.random();
        if doomed || x < plan.fail.get() {
            Fate::Fail
        } else if x < plan.fail.get() + plan.stall.get() {
            Fate::Stall
        } else {
            Fate::Complete
        }
    };
    if fate == Fate::Stall {
        ctx.bump(JobCounter::Stalled, 1);
        if plan.zombie.draw(rng) {
            tokio::task::spawn_local(zombie(ctx.clone(), ops.clone(), queue, job, worker));
        }
        return;
    }
    let work = plan.work.sample(rng);
    if !doomed && !work_on(ctx, ops, queue, &job, worker, work).await {
        return; // lost the job while working (fenced or gone): nothing more to do with it
    }
    match fate {
        Fate::Complete => {
            let request = ops.complete(queue, job.id, job.token);
            match fenced::<Q, _>(
                ctx,
                worker,
                Verb::Complete,
                Q::script(Verb::Complete),
                &job,
                request,
                complete_outcome,
            )
            .await
            {
                Ok(CompleteReply::Completed) => ctx.bump(JobCounter::Completed, 1),
                Ok(CompleteReply::AlreadyCompleted) | Err(_) => {}
            }
        }
        Fate::Fail => {
            let args = FailArgs {
                // BullMQ's worker fails a deferred failure with this reason (the checker
                // counts such jobs as failed by stall).
                error: if doomed { crate::bullmq::STALLED_TOO_OFTEN } else { "emq-bench: simulated failure" },
                max_attempts: ctx.plan.producers.max_attempts,
                backoff_ms: plan.backoff.draw(Q::attempt(&job.token), rng).as_millis() as u64,
                priority: job.priority,
            };
            let script = ops.fail_script(&job.token, &args);
            let request = ops.fail(queue, job.id, job.token, args);
            match fenced::<Q, _>(ctx, worker, Verb::Fail, script, &job, request, fail_outcome).await {
                Ok(FailReply::Retry) => ctx.bump(JobCounter::Retried, 1),
                // A stall failure is counted by the check's scan ("failed by stall"), as reap's.
                Ok(FailReply::Failed) if doomed => {}
                Ok(FailReply::Failed) => ctx.bump(JobCounter::Failed, 1),
                Err(_) => {}
            }
        }
        Fate::Stall => unreachable!("handled above"),
    }
}

/// Simulates `work` on a held job: `progress` notes spread evenly over it, and a lease renewal
/// every `extend_every`. Returns false when a fenced call says the job is no longer ours.
async fn work_on<Q: QueueOps>(
    ctx: &ThreadCtx,
    ops: &mut Q,
    queue: usize,
    job: &Claimed<Q::Token>,
    worker: u32,
    work: Duration,
) -> bool {
    let plan = &ctx.plan.consumers;
    let start = Instant::now();
    let end = start + work;
    let notes = plan.progress;
    let step = work / (notes + 1);
    let mut next_note = (notes > 0).then(|| start + step);
    let mut notes_sent = 0;
    let mut next_extend = plan.extend_every.filter(|every| *every < work).map(|every| start + every);
    loop {
        let wake = [Some(end), next_note, next_extend].into_iter().flatten().min().expect("end is always set");
        // The thread's precise timer: tokio's wakes a 200 µs job after a millisecond or more.
        if wake > Instant::now() {
            ctx.wait_until(wake).await;
        }
        if ctx.phase() == Phase::Stop {
            return false;
        }
        let now = Instant::now();
        if next_extend.is_some_and(|t| t <= now && t < end) {
            let lease_ms = plan.lease.as_millis().max(1) as u64;
            let request = ops.extend(queue, job.id, job.token, lease_ms);
            if lost(
                fenced::<Q, _>(ctx, worker, Verb::Extend, Q::script(Verb::Extend), job, request, |_| Outcome::Ok).await,
            ) {
                return false;
            }
            next_extend = plan.extend_every.map(|every| now + every);
        }
        if next_note.is_some_and(|t| t <= now) {
            notes_sent += 1;
            let note = progress_note(notes_sent, notes);
            let request = ops.progress(queue, job.id, job.token, note.as_bytes());
            let script = Q::script(Verb::Progress);
            if lost(fenced::<Q, _>(ctx, worker, Verb::Progress, script, job, request, |_| Outcome::Ok).await) {
                return false;
            }
            next_note = (notes_sent < notes).then(|| start + step * (notes_sent + 1));
        }
        if now >= end && next_note.is_none() {
            return true;
        }
    }
}

/// Sends one fenced call (complete, fail, extend, progress: `verb`, running `script`) for
/// `job`, timed and remembered in the history with the job's attempt and the `worker` that
/// holds it.
async fn fenced<Q: QueueOps, T>(
    ctx: &ThreadCtx,
    worker: u32,
    verb: Verb,
    script: Script,
    job: &Claimed<Q::Token>,
    request: impl std::future::Future<Output = Result<T, CallError>>,
    ok: impl FnOnce(&T) -> Outcome,
) -> Result<T, CallError> {
    let kind = match verb {
        Verb::Complete => Kind::Complete,
        Verb::Fail => Kind::Fail,
        Verb::Extend => Kind::Extend,
        _ => Kind::Progress,
    };
    let (result, span) = timed_span(ctx, script, None, request).await;
    ctx.remember(job_number(&job.id), kind, Q::attempt(&job.token), worker, span, &result, ok);
    result
}

fn complete_outcome(reply: &CompleteReply) -> Outcome {
    match reply {
        CompleteReply::Completed => Outcome::Ok,
        CompleteReply::AlreadyCompleted => Outcome::Alt,
    }
}

fn fail_outcome(reply: &FailReply) -> Outcome {
    match reply {
        FailReply::Retry => Outcome::Ok,
        FailReply::Failed => Outcome::Alt,
    }
}

fn progress_note(sent: u32, of: u32) -> String {
    format!("{sent}/{of}")
}

/// True when a fenced call was refused because the job moved on (its lease was reaped).
fn lost<T>(result: Result<T, CallError>) -> bool {
    matches!(result, Err(CallError::Emq { code, .. }) if code.is_stale() || code == ErrorCode::NoJob)
}

/// A stalled worker coming back late: completes with its stale token after `zombie_delay`.
/// The protocol must refuse it (EMQFENCE or EMQSTATE) once the lease has been reaped.
async fn zombie<Q: QueueOps>(ctx: Rc<ThreadCtx>, mut ops: Q, queue: usize, job: Claimed<Q::Token>, worker: u32) {
    ctx.wait_until(Instant::now() + ctx.plan.consumers.zombie_delay).await;
    if ctx.phase() == Phase::Stop {
        return;
    }
    let request = ops.complete(queue, job.id, job.token);
    match fenced::<Q, _>(&ctx, worker, Verb::Complete, Q::script(Verb::Complete), &job, request, complete_outcome).await
    {
        Err(CallError::Emq { code, .. }) if code.is_stale() => ctx.bump(JobCounter::StaleRefused, 1),
        Ok(CompleteReply::Completed) => {
            ctx.bump(JobCounter::StaleAccepted, 1);
            ctx.bump(JobCounter::Completed, 1);
        }
        _ => {}
    }
}
