//! Producers: enqueue jobs through the opts mix (delays, priorities, duplicates), closed or
//! open loop. One producer is one task holding a window of up to `pipeline` enqueues in flight
//! on its connection, each timed on its own.
//!
//! Why a window and not a task per in-flight request: a task per request cost a wake-up, a
//! poll through every layer of the call and a copy of its state per reply; the window queues
//! each enqueue without awaiting it ([`QueueOps::queue_enqueue`]), waits on the oldest, and
//! then takes every reply already read in one go, so one wake-up serves a whole read (issue 11
//! item 7: the harness's client CPU per request against redis-benchmark's). Replies on one
//! connection come back in send order, so the oldest is the next one due. On a cluster a
//! producer's window spans one connection per node: a reply from another node waits behind a
//! slower node's older one to be recorded (its times are the connection's, so its latency is
//! not inflated), and the window's next sends wait with it, as a pool of lanes ends up waiting
//! on the slow node too.

use super::backend::{needs_redo, QueueOps};
use super::context::{Phase, Span, ThreadCtx};
use super::pacing::Schedule;
use super::payload::PayloadPool;
use crate::history::{Kind, Outcome};
use crate::metrics::{elapsed_us, JobCounter};
use crate::protocol::ids::job_number;
use crate::protocol::{CallError, EnqueueReply, JobId, JobIdGen, Script};
use crate::scenario::Stop;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// How often a producer waiting for its next intended send looks at the run phase.
const PHASE_POLL: Duration = Duration::from_millis(50);

/// One producer: its id generator, schedule and draws.
pub struct Producer {
    ids: JobIdGen,
    schedule: Schedule,
    rng: SmallRng,
    /// The last accepted job (queue, id), the id a duplicate enqueue re-sends.
    last: Option<(usize, JobId)>,
}

impl Producer {
    /// A producer of the run with seed `run_seed` (the ids' run tag), paced by `schedule`,
    /// drawing its opts mix from `seed`.
    pub fn new(run_seed: u64, schedule: Schedule, seed: u64) -> Producer {
        Producer { ids: JobIdGen::new(run_seed), schedule, rng: SmallRng::seed_from_u64(seed), last: None }
    }

    /// Draws the next send: its intended time (open loop) and the job. `None` once the run's
    /// job budget is spent. `now` is the producer's latest instant (closed-loop ids are stamped
    /// from it instead of reading the wall clock once more per job; ids stay monotonic).
    fn draw(&mut self, ctx: &ThreadCtx, now: Instant) -> Option<Next> {
        let plan = &ctx.plan.producers;
        let duplicate = plan.duplicate.draw(&mut self.rng);
        let intended = self.schedule.next_intended();
        // Open loop: the id's time is the intended send time, read from no clock.
        let stamp = ctx.wall.unix_ms(intended.unwrap_or(now));
        let (job, ulid) = match (duplicate, self.last) {
            (true, Some((queue, id))) => (Job::Duplicate { queue, id }, id.ulid().0),
            _ => {
                // The run-wide job number: unique, increasing per producer, and the id's low
                // 32 bits (so the checker maps server rows back to the history).
                let number = ctx.shared.issued.fetch_add(1, Ordering::Relaxed);
                let budget = match ctx.plan.stop {
                    Stop::Jobs(budget) => budget.min(u64::from(u32::MAX)),
                    Stop::Duration(_) => u64::from(u32::MAX),
                };
                if number >= budget {
                    return None;
                }
                let rng = &mut self.rng;
                let delay = plan.delayed.draw(rng).then(|| plan.delay.sample(rng).as_millis() as u64);
                let priority = (plan.priority.draw(rng) && !plan.priorities.is_empty())
                    .then(|| u64::from(plan.priorities[rng.random_range(0..plan.priorities.len())]));
                let job = Job::New {
                    queue: rng.random_range(0..ctx.plan.queues.len()),
                    number: number as u32,
                    id: self.ids.mint_at(number as u32, stamp),
                    id_ms: self.ids.last_ms(),
                    delay,
                    priority,
                };
                (job, self.ids.last_ulid(number as u32))
            }
        };
        Some(Next { intended, job, ulid })
    }
}

/// A send drawn and not made yet.
struct Next {
    intended: Option<Instant>,
    job: Job,
    /// The job's ULID (what its payload carries), kept out of [`Job`]: a `u128` would align
    /// every request in flight to 16 bytes.
    ulid: u128,
}

/// What one enqueue is.
#[derive(Clone, Copy)]
enum Job {
    /// A new job (`delay` ms, or `priority`).
    New { queue: usize, number: u32, id: JobId, id_ms: u64, delay: Option<u64>, priority: Option<u64> },
    /// A re-sent id, which must change nothing (I8).
    Duplicate { queue: usize, id: JobId },
}

/// One enqueue in flight, and what its reply is matched with.
struct InFlight<P> {
    pending: P,
    job: Job,
    intended: Option<Instant>,
    /// Payload bytes (a redo rebuilds the same bytes from the id and this size).
    size: usize,
    crc: u32,
    /// When it was queued, for a transport that does not time its calls itself.
    queued: Option<Instant>,
    /// The node it was queued on (where a redirect came from).
    node: usize,
}

impl Job {
    /// The script the enqueue runs in protocol `Q`.
    fn script<Q: QueueOps>(&self) -> Script {
        let (priority, delay) = self.args();
        Q::enqueue_script(delay, priority)
    }

    fn queue_and_id(&self) -> (usize, JobId) {
        match *self {
            Job::New { queue, id, .. } | Job::Duplicate { queue, id } => (queue, id),
        }
    }

    /// The priority sent: a duplicate asks for priority 9 (it must change nothing).
    fn args(&self) -> (Option<u64>, Option<u64>) {
        match *self {
            Job::New { delay, priority, .. } => (priority, delay),
            Job::Duplicate { .. } => (Some(9), None),
        }
    }
}

/// Runs one producer until the run leaves the load phase or the job budget is spent, with up
/// to `window` enqueues in flight on `ops`; returns once every reply is in (or the thread stops
/// polling it at the run's end).
pub async fn run<Q: QueueOps>(ctx: Rc<ThreadCtx>, mut producer: Producer, mut ops: Q, window: usize) {
    let window = window.max(1);
    let mut in_flight: VecDeque<InFlight<Q::EnqueuePending>> = VecDeque::with_capacity(window);
    let mut now = Instant::now();
    let mut next: Option<Next> = None;
    let mut sending = true;
    loop {
        // Send while there is room and the next send is due.
        while sending && in_flight.len() < window {
            if ctx.phase() != Phase::Load {
                // Due before the load phase ended and never sent: the backlog of a rate not held.
                let due = next.take().and_then(|n| n.intended);
                if due.is_some_and(|at| ctx.shared.load_end.get().is_some_and(|end| at <= *end)) {
                    ctx.backlog.set(ctx.backlog.get() + 1);
                }
                sending = false;
                break;
            }
            let Some(send) = next.take().or_else(|| producer.draw(&ctx, now)) else {
                sending = false;
                break;
            };
            if send.intended.is_some_and(|at| at > Instant::now()) {
                next = Some(send);
                break;
            }
            in_flight.push_back(queue_one(&ctx, &mut producer, &mut ops, send));
        }
        if !sending && in_flight.is_empty() {
            break;
        }
        // Wait for the oldest reply, and, while there is room, for the next intended send.
        let due = next.as_ref().and_then(|n| n.intended).filter(|_| sending && in_flight.len() < window);
        let reply = match (in_flight.front_mut(), due) {
            (Some(oldest), None) => Some((&mut oldest.pending).await),
            (Some(oldest), Some(at)) => tokio::select! {
                biased;
                reply = &mut oldest.pending => Some(reply),
                _ = wait_for_send(&ctx, at) => None,
            },
            (None, Some(at)) => {
                wait_for_send(&ctx, at).await;
                None
            }
            (None, None) => None,
        };
        let Some(mut reply) = reply else { continue };
        // The oldest, then every later reply already read, in order.
        loop {
            let sent = in_flight.pop_front().expect("the reply of the oldest");
            let (start, done) = match crate::protocol::pipe::take_times() {
                Some(t) if Q::TIMED => (t.sent, t.read),
                _ => (sent.queued.unwrap_or_else(Instant::now), Instant::now()),
            };
            match reply {
                // The script did not run: redone on a task of its own, so a migration's
                // TRYAGAIN loop or a reload does not stall the rest of the window.
                Err(err) if needs_redo(&err) => {
                    tokio::task::spawn_local(redo(ctx.clone(), ops.clone(), sent, err, start));
                }
                reply => settle::<Q, _>(&ctx, Some(&mut producer), &sent, reply, start, done),
            }
            now = done;
            match in_flight.front_mut().map(|oldest| poll_now(&mut oldest.pending)) {
                Some(Some(ready)) => reply = ready,
                _ => break,
            }
        }
    }
    // Intended times before the load phase ended that were never drawn (a producer far behind
    // its schedule): counted once, in closed form.
    if let Some(end) = ctx.shared.load_end.get() {
        let undrawn = producer.schedule.due_until(*end);
        ctx.backlog.set(ctx.backlog.get() + undrawn);
    }
    ctx.shared.producers_live.fetch_sub(1, Ordering::Relaxed);
}

/// Builds `send`'s payload and queues its enqueue.
fn queue_one<Q: QueueOps>(
    ctx: &ThreadCtx,
    producer: &mut Producer,
    ops: &mut Q,
    send: Next,
) -> InFlight<Q::EnqueuePending> {
    ctx.sends.set(ctx.sends.get() + 1);
    ctx.in_flight.set(ctx.in_flight.get() + 1);
    let drawn = ctx.plan.producers.payload.sample(&mut producer.rng) as usize;
    // A duplicate carries other bytes than the original (7 more than a draw, so never equal):
    // it must change nothing (I8).
    let size = match send.job {
        Job::New { .. } => drawn,
        Job::Duplicate { .. } => drawn + 7,
    };
    let (queue, id) = send.job.queue_and_id();
    let (priority, delay) = send.job.args();
    // Built straight into the command: no payload buffer, no copy of it. A new job's ULID was
    // known from its parts; a duplicate's was decoded from its id.
    let mut crc = 0;
    let write = |out: &mut Vec<u8>| crc = ctx.pool.append(send.ulid, size, out);
    let node = ops.node_of(queue);
    let pending = ops.queue_enqueue(queue, &id, PayloadPool::length(size), write, priority, delay);
    let queued = (!Q::TIMED).then(Instant::now);
    InFlight { pending, job: send.job, intended: send.intended, size, crc, queued, node }
}

/// Redoes a call whose reply was `err`, a redirect or NOSCRIPT: the script did not run (a moved
/// slot, a server that lost its scripts), so the redirect is followed and the routed path
/// reloads ([`QueueOps::redo_enqueue`]), with the same payload bytes. Then records it as one
/// call, from its first send (`start`) to the last reply. The last accepted id of a redone
/// job is not offered to duplicates (rare, and a duplicate of an older id tests as much).
async fn redo<Q: QueueOps, P>(ctx: Rc<ThreadCtx>, mut ops: Q, sent: InFlight<P>, err: CallError, start: Instant) {
    let (queue, id) = sent.job.queue_and_id();
    let mut payload = Vec::new();
    ctx.pool.build(&id, sent.size, &mut payload);
    let (priority, delay) = sent.job.args();
    let result = ops.redo_enqueue(sent.node, err, queue, id, &payload, priority, delay).await;
    let done = crate::protocol::pipe::take_times_since(start).map_or_else(Instant::now, |t| t.read);
    settle::<Q, _>(&ctx, None, &sent, result, start.min(done), done);
}

/// Records one reply sent at `start` and read at `done`: in the histograms and the history,
/// and in the job counters; an accepted new job becomes the producer's next duplicate.
fn settle<Q: QueueOps, P>(
    ctx: &ThreadCtx,
    producer: Option<&mut Producer>,
    sent: &InFlight<P>,
    result: Result<EnqueueReply, CallError>,
    start: Instant,
    done: Instant,
) {
    ctx.in_flight.set(ctx.in_flight.get() - 1);
    let span = Span { sent: start, done, service_us: elapsed_us(start, done) };
    ctx.record(sent.job.script::<Q>(), sent.intended, span, &result);
    match sent.job {
        Job::New { queue, number, id, id_ms, .. } => {
            ctx.remember_enqueue(number, Kind::Enqueue, sent.crc, queue as u16, id_ms, span, &result, enqueue_outcome);
            match result {
                Ok(EnqueueReply::Enqueued) => {
                    ctx.bump(JobCounter::Enqueued, 1);
                    if let Some(producer) = producer {
                        producer.last = Some((queue, id));
                    }
                }
                // A fresh id that is a duplicate means an id collision; the checker reports it.
                Ok(EnqueueReply::Duplicate) => ctx.bump(JobCounter::Duplicates, 1),
                Err(_) => {}
            }
        }
        Job::Duplicate { queue, id } => {
            // A protocol whose reply cannot say "already there" (BullMQ answers with the id
            // either way) accepted the repeat as its own documented no-op.
            let result = match result {
                Ok(EnqueueReply::Enqueued) if !Q::REPORTS_DUPLICATES => Ok(EnqueueReply::Duplicate),
                other => other,
            };
            // The original enqueue kept the id's time part (0 here).
            let number = job_number(&id);
            ctx.remember_enqueue(number, Kind::EnqueueDup, sent.crc, queue as u16, 0, span, &result, enqueue_outcome);
            match result {
                Ok(EnqueueReply::Duplicate) => ctx.bump(JobCounter::Duplicates, 1),
                Ok(EnqueueReply::Enqueued) => ctx.bump(JobCounter::DuplicateAccepted, 1),
                Err(_) => {}
            }
        }
    }
}

/// Waits until `at` or until the run leaves the load phase: in slices on tokio's coarse timer,
/// so a long gap at a low rate does not hold up the drain; only the last wait goes to the
/// precise pacer.
async fn wait_for_send(ctx: &ThreadCtx, at: Instant) {
    loop {
        let now = Instant::now();
        if now >= at || ctx.phase() != Phase::Load {
            return;
        }
        if at - now > PHASE_POLL {
            tokio::time::sleep(PHASE_POLL).await;
        } else {
            ctx.wait_until(at).await;
        }
    }
}

/// The reply of `pending` if it is already in, without registering for a wake-up.
fn poll_now<F: Future + Unpin>(pending: &mut F) -> Option<F::Output> {
    match Pin::new(pending).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(output) => Some(output),
        Poll::Pending => None,
    }
}

fn enqueue_outcome(reply: &EnqueueReply) -> Outcome {
    match reply {
        EnqueueReply::Enqueued => Outcome::Ok,
        EnqueueReply::Duplicate => Outcome::Alt,
    }
}
