//! Producers: enqueue jobs through the opts mix (delays, priorities, duplicates), closed or
//! open loop. One producer is `pipeline` lanes sharing its id generator and schedule, so up to
//! `pipeline` enqueues are in flight on its connection, each timed on its own.

use super::backend::{script_of_enqueue, QueueOps};
use super::context::{timed_span, Phase, ThreadCtx};
use super::pacing::Schedule;
use super::payload::header_crc;
use crate::history::{Kind, Outcome};
use crate::metrics::JobCounter;
use crate::protocol::ids::job_number;
use crate::protocol::{EnqueueReply, JobId, JobIdGen};
use crate::scenario::Stop;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How often a producer waiting for its next intended send looks at the run phase.
const PHASE_POLL: Duration = Duration::from_millis(50);

/// What one producer's lanes share.
pub struct Producer {
    ids: JobIdGen,
    schedule: Schedule,
    /// The last accepted job (queue, id), the id a duplicate enqueue re-sends.
    last: Option<(usize, JobId)>,
    /// True once a lane counted the schedule's undrawn backlog (once per producer).
    backlog_counted: bool,
}

impl Producer {
    /// A producer of the run with seed `run_seed` (the ids' run tag), paced by `schedule`.
    pub fn new(run_seed: u64, schedule: Schedule) -> Rc<RefCell<Producer>> {
        Rc::new(RefCell::new(Producer { ids: JobIdGen::new(run_seed), schedule, last: None, backlog_counted: false }))
    }
}

/// What one enqueue will be.
enum Job {
    New { queue: usize, number: u32, id: JobId, id_ms: u64, delay: Option<Duration>, priority: Option<u64> },
    Duplicate { queue: usize, id: JobId },
}

/// Runs one producer lane until the run leaves the load phase or the job budget is spent.
pub async fn lane<Q: QueueOps>(ctx: Rc<ThreadCtx>, producer: Rc<RefCell<Producer>>, mut ops: Q, seed: u64) {
    let plan = &ctx.plan.producers;
    let queues = ctx.plan.queues.len();
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut payload = Vec::new();
    // The lane's latest instant (its last reply's read time; the lane's start at first): closed-
    // loop ids are stamped from it instead of reading the wall clock once more per job. While
    // the lane is busy it is at most one request old; ids stay monotonic either way (mint_at).
    let mut now = Instant::now();
    while ctx.phase() == Phase::Load {
        let duplicate = plan.duplicate.draw(&mut rng);
        let (intended, job) = {
            let mut p = producer.borrow_mut();
            let intended = p.schedule.next_intended();
            // Open loop: the id's time is the intended send time, read from no clock.
            let stamp = ctx.wall.unix_ms(intended.unwrap_or(now));
            let job = match (duplicate, p.last) {
                (true, Some((queue, id))) => Job::Duplicate { queue, id },
                _ => {
                    // The run-wide job number: unique, increasing per producer, and the id's
                    // low 32 bits (so the checker maps server rows back to the history).
                    let number = ctx.shared.issued.fetch_add(1, Ordering::Relaxed);
                    let budget = match ctx.plan.stop {
                        Stop::Jobs(budget) => budget.min(u64::from(u32::MAX)),
                        Stop::Duration(_) => u64::from(u32::MAX),
                    };
                    if number >= budget {
                        break;
                    }
                    let delay = plan.delayed.draw(&mut rng).then(|| plan.delay.sample(&mut rng));
                    let priority = (plan.priority.draw(&mut rng) && !plan.priorities.is_empty())
                        .then(|| u64::from(plan.priorities[rng.random_range(0..plan.priorities.len())]));
                    Job::New {
                        queue: rng.random_range(0..queues),
                        number: number as u32,
                        id: p.ids.mint_at(number as u32, stamp),
                        id_ms: p.ids.last_ms(),
                        delay,
                        priority,
                    }
                }
            };
            (intended, job)
        };
        if let Some(at) = intended {
            // Sleep in slices on tokio's coarse timer, so a long gap at a low rate does not hold
            // up the drain; only the last wait goes to the precise pacer.
            loop {
                let now = Instant::now();
                if now >= at || ctx.phase() != Phase::Load {
                    break;
                }
                if at - now > PHASE_POLL {
                    tokio::time::sleep(PHASE_POLL).await;
                } else {
                    ctx.wait_until(at).await;
                }
            }
            if ctx.phase() != Phase::Load {
                // Due before the load phase ended and never sent: the backlog of a rate not held.
                if ctx.shared.load_end.get().is_some_and(|end| at <= *end) {
                    ctx.backlog.set(ctx.backlog.get() + 1);
                }
                break;
            }
        }
        ctx.sends.set(ctx.sends.get() + 1);
        let size = plan.payload.sample(&mut rng) as usize;
        match job {
            Job::New { queue, number, id, id_ms, delay, priority } => {
                ctx.pool.build(&id, size, &mut payload);
                let (result, span) = match delay {
                    Some(d) => {
                        let request = ops.enqueue_delayed(queue, id, &payload, d.as_millis() as u64);
                        timed_span(&ctx, script_of_enqueue(true), intended, request).await
                    }
                    None => {
                        let request = ops.enqueue(queue, id, &payload, priority);
                        timed_span(&ctx, script_of_enqueue(false), intended, request).await
                    }
                };
                now = span.done;
                let crc = payload_crc(&payload);
                ctx.remember_enqueue(number, Kind::Enqueue, crc, queue as u16, id_ms, span, &result, enqueue_outcome);
                match result {
                    Ok(EnqueueReply::Enqueued) => {
                        ctx.bump(JobCounter::Enqueued, 1);
                        producer.borrow_mut().last = Some((queue, id));
                    }
                    // A fresh id that is a duplicate means an id collision; the checker reports it.
                    Ok(EnqueueReply::Duplicate) => ctx.bump(JobCounter::Duplicates, 1),
                    Err(_) => {}
                }
            }
            Job::Duplicate { queue, id } => {
                // Other bytes than the original (a different length, so never equal): a duplicate must
                // change nothing (I8).
                ctx.pool.build(&id, size + 7, &mut payload);
                let (result, span) =
                    timed_span(&ctx, script_of_enqueue(false), intended, ops.enqueue(queue, id, &payload, Some(9)))
                        .await;
                let number = job_number(&id);
                ctx.remember_enqueue(
                    number,
                    Kind::EnqueueDup,
                    payload_crc(&payload),
                    queue as u16,
                    0, // the original enqueue kept the id's time part
                    span,
                    &result,
                    enqueue_outcome,
                );
                match result {
                    Ok(EnqueueReply::Duplicate) => ctx.bump(JobCounter::Duplicates, 1),
                    Ok(EnqueueReply::Enqueued) => ctx.bump(JobCounter::DuplicateAccepted, 1),
                    Err(_) => {}
                }
            }
        }
    }
    // Intended times before the load phase ended that no lane drew yet (a producer far
    // behind its schedule): counted once per producer, by the first lane out, in closed form.
    let mut p = producer.borrow_mut();
    if let (Some(end), false) = (ctx.shared.load_end.get(), p.backlog_counted) {
        p.backlog_counted = true;
        let undrawn = p.schedule.due_until(*end);
        ctx.backlog.set(ctx.backlog.get() + undrawn);
    }
    drop(p);
    ctx.shared.producers_live.fetch_sub(1, Ordering::Relaxed);
}

/// The CRC-32 a built payload carries in its header (built payloads always have one).
fn payload_crc(payload: &[u8]) -> u32 {
    header_crc(payload).expect("built payloads have a 20-byte header")
}

fn enqueue_outcome(reply: &EnqueueReply) -> Outcome {
    match reply {
        EnqueueReply::Enqueued => Outcome::Ok,
        EnqueueReply::Duplicate => Outcome::Alt,
    }
}
