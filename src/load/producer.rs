//! Producers: enqueue jobs through the opts mix (delays, priorities, duplicates), closed or
//! open loop. One producer is one task holding a window of up to `pipeline` enqueues in flight
//! on its connection, each timed on its own.
//!
//! Why a window and not a task per in-flight request: a task per request cost a wake-up, a
//! poll through every layer of the call and a copy of its state per reply; the window queues
//! each enqueue on its node's reply lane without awaiting it ([`QueueOps::queue_enqueue`],
//! [`ReplyLane`]), waits on the oldest, and then counts every reply already read in one go, so
//! one wake-up serves a whole read, which keeps the client's CPU per request near
//! redis-benchmark's. The replies of a read are recorded after the window's next sends are
//! queued and written, while the server works on them; until then they stay on their lane and
//! their requests at the front of the window, moved once each (never copied into a list of
//! taken replies first, which would copy both once more per enqueue). Replies on one connection
//! come back in send order, so the oldest is the next one due. On a cluster a producer's
//! window spans one lane per node: a reply from another node waits behind a slower node's
//! older one to be recorded (its times are the connection's, so its latency is not
//! inflated), and the window's next sends wait with it, as a pool of lanes ends up waiting on
//! the slow node too.

use super::context::{Phase, Span, ThreadCtx};
use super::schedule::Schedule;
use crate::history::{Kind, Outcome};
use crate::keyspace::{JobId, JobIdGen};
use crate::lua::Script;
use crate::metrics::{elapsed_us, JobCounter};
use crate::payload::PayloadPool;
use crate::queue::{needs_redo, EnqueueReply, QueueOps};
use crate::resp::lane::{self, Laned};
use crate::resp::{CallError, ReplyLane};
use crate::scenario::shard::NUMBER_BLOCK;
use crate::scenario::Stop;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How often a producer waiting for its next intended send looks at the run phase.
const PHASE_POLL: Duration = Duration::from_millis(50);

/// True when a job enqueued with id stamp `id_ms` cannot have been retired by `clean` at
/// `now_ms` (both Unix ms): no retention, or younger than half the retention age (a finished
/// job is kept for the whole age after it finished, which is after its enqueue; the half is
/// the margin for the server's clock). A retired id is free again, so a duplicate of it
/// would create a new job, not test that a repeated id changes nothing.
fn still_kept(maintenance: &crate::scenario::MaintenancePlan, now_ms: u64, id_ms: u64) -> bool {
    maintenance.clean.is_none() || now_ms.saturating_sub(id_ms) < maintenance.retain.as_millis() as u64 / 2
}

/// One producer: its id generator, schedule and draws.
pub struct Producer {
    ids: JobIdGen,
    schedule: Schedule,
    rng: SmallRng,
    /// The last accepted job (queue, number, id stamp), whose id a duplicate enqueue re-sends.
    last: Option<(u16, u32, u64)>,
    /// Job numbers reserved and not drawn yet, in the fleet's numbering ([`NUMBER_BLOCK`]).
    numbers: std::ops::Range<u64>,
    /// The last instant an id was stamped from, and its Unix ms.
    stamp: Option<(Instant, u64)>,
}

impl Producer {
    /// A producer of the run with seed `run_seed` (the ids' run tag), paced by `schedule`,
    /// drawing its opts mix from `seed`.
    pub fn new(run_seed: u64, schedule: Schedule, seed: u64) -> Producer {
        Producer {
            ids: JobIdGen::new(run_seed),
            schedule,
            rng: SmallRng::seed_from_u64(seed),
            last: None,
            numbers: 0..0,
            stamp: None,
        }
    }

    /// Draws the next send: its intended time (open loop) and the job. `None` once the run's
    /// job budget is spent. `now` is the producer's latest instant (closed-loop ids are stamped
    /// from it instead of reading the wall clock once more per job; ids stay monotonic).
    /// Inlined into its one caller: a call would copy the returned `Next` through memory on
    /// every enqueue.
    #[inline(always)]
    fn draw(&mut self, ctx: &ThreadCtx, now: Instant) -> Option<Next> {
        let plan = &ctx.plan.producers;
        let duplicate = plan.duplicate.draw(&mut self.rng);
        let intended = self.schedule.next_intended();
        // Open loop: the id's time is the intended send time, read from no clock.
        let at = intended.unwrap_or(now);
        let stamp = match self.stamp {
            // Closed loop: `now` is the last reply's read time, shared by a whole read.
            Some((last, ms)) if last == at => ms,
            _ => {
                let ms = ctx.wall.unix_ms(at);
                self.stamp = Some((at, ms));
                ms
            }
        };
        let job = match (duplicate, self.last) {
            (true, Some((queue, number, id_ms))) if still_kept(&ctx.plan.maintenance, stamp, id_ms) => {
                Job { id_ms, number, queue, duplicate: true, delay: None, priority: Some(9) }
            }
            _ => {
                // The run-wide job number: unique, increasing per producer, and the id's low
                // 32 bits (so the checker maps server rows back to the history).
                let number = match self.numbers.next() {
                    Some(number) => number,
                    None => {
                        let numbering = ctx.plan.job_numbers();
                        let limit = numbering.local_limit();
                        let budget = match ctx.plan.stop {
                            Stop::Jobs(budget) => budget.min(limit),
                            Stop::Duration(_) => limit,
                        };
                        let first = ctx.shared.issued.fetch_add(NUMBER_BLOCK, Ordering::Relaxed);
                        let end = (first + NUMBER_BLOCK).min(budget).max(first);
                        // A block is contiguous in the fleet's numbering too.
                        let global = numbering.global(first);
                        self.numbers = global..global + (end - first);
                        self.numbers.next()?
                    }
                };
                let rng = &mut self.rng;
                let delay = plan.delayed.draw(rng).then(|| plan.delay.sample(rng).as_millis() as u64);
                let priority = (plan.priority.draw(rng) && !plan.priorities.is_empty())
                    .then(|| plan.priorities[rng.random_range(0..plan.priorities.len())]);
                Job {
                    id_ms: self.ids.stamp(stamp),
                    number: number as u32,
                    // One queue (the usual case) draws nothing: no random draw per job.
                    queue: match ctx.plan.queues.len() {
                        1 => 0,
                        n => rng.random_range(0..n) as u16,
                    },
                    duplicate: false,
                    delay,
                    priority,
                }
            }
        };
        Some(Next { intended, job })
    }
}

/// A send drawn and not made yet.
struct Next {
    intended: Option<Instant>,
    job: Job,
}

/// What one enqueue is: a new job, or a re-send of an accepted one's id. No id is kept: it is
/// a function of the job number, the stamp and the run tag ([`JobIdGen::id_of`]), minted when
/// the request is framed. Requests in flight stay 72 bytes instead of 128: each is moved into
/// and out of the window, once per enqueue.
#[derive(Clone, Copy)]
struct Job {
    /// The id's time part, ms since the Unix epoch.
    id_ms: u64,
    /// The run-wide job number, the id's low 32 bits.
    number: u32,
    queue: u16,
    /// A re-sent id, which must change nothing (I8).
    duplicate: bool,
    /// A new job's delay, ms.
    delay: Option<u64>,
    /// The priority sent: a duplicate asks for priority 9 (it must change nothing).
    priority: Option<u32>,
}

/// One enqueue in flight, and what its reply is matched with.
#[derive(Clone, Copy)]
struct InFlight {
    job: Job,
    intended: Option<Instant>,
    /// Payload bytes (a redo rebuilds the same bytes from the id and this size).
    size: u32,
    crc: u32,
    /// The node it was queued on: the lane its reply comes back on, where a redirect came from.
    node: u16,
}

impl Job {
    /// The script the enqueue runs in protocol `Q`.
    fn script<Q: QueueOps>(&self) -> Script {
        let (priority, delay) = self.args();
        Q::enqueue_script(delay, priority)
    }

    /// The optional arguments sent: (priority, delay ms).
    fn args(&self) -> (Option<u64>, Option<u64>) {
        (self.priority.map(u64::from), self.delay)
    }

    /// The job's id (minted again: see [`Job`]).
    fn id(&self, ids: &JobIdGen) -> JobId {
        ids.id_of(self.number, self.id_ms)
    }
}

/// Runs one producer until the run leaves the load phase or the job budget is spent, with up
/// to `window` enqueues in flight on `ops`; returns once every reply is in (or the thread stops
/// polling it at the run's end).
pub async fn run<Q: QueueOps>(ctx: Rc<ThreadCtx>, mut producer: Producer, mut ops: Q, window: usize) {
    let window = window.max(1);
    let mut lanes = ops.enqueue_lanes();
    let mut in_flight: VecDeque<InFlight> = VecDeque::with_capacity(window);
    let mut now = Instant::now();
    let mut next: Option<Next> = None;
    let mut sending = true;
    // The last reply's span: the replies of one read share their read time, and those of one
    // write their send time, so most replies reuse its µs instead of converting again.
    let mut last = Span { sent: now, done: now, service_us: 0 };
    // The oldest `ready` requests in flight have their replies in, not recorded yet: they stay
    // at the front of `in_flight` and on their lanes until they are (no copy of either).
    let mut ready = 0;
    // Per lane, while counting replies in across several (a cluster): (in, counted).
    let mut per_lane = vec![(0, 0); lanes.len()];
    loop {
        // Send while there is room and the next send is due.
        let mut queued = false;
        while sending && in_flight.len() - ready < window {
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
            in_flight.push_back(queue_one(&ctx, &mut producer, &mut ops, &mut lanes, send));
            queued = true;
        }
        // The new sends go out now, written in this poll (`flush`), and only then are the
        // replies counted in last round recorded: the server works while this thread records.
        // A whole window is then one write, one read and one wake-up, as redis-benchmark's,
        // and the server does not idle while the histograms and the history are written.
        if queued {
            lanes.iter_mut().for_each(ReplyLane::flush);
        }
        if ready > 0 {
            for _ in 0..ready {
                // Recorded where it stands in the window, then dropped: not moved out first.
                let sent = in_flight.front().expect("a reply counted in has its request");
                let reply = lanes[usize::from(sent.node)].try_next().expect("a reply counted in is there");
                record_reply(&ctx, &mut producer, &ops, &mut last, sent, reply);
                in_flight.pop_front();
            }
            ready = 0;
        }
        if !sending && in_flight.is_empty() {
            break;
        }
        // Wait for the oldest reply, and, while there is room, for the next intended send.
        let due = next.as_ref().and_then(|n| n.intended).filter(|_| sending && in_flight.len() < window);
        let oldest = match (in_flight.front().map(|oldest| usize::from(oldest.node)), due) {
            (Some(node), None) => Some(lane::ready(&mut lanes[node]).await),
            (Some(node), Some(at)) => tokio::select! {
                biased;
                oldest = lane::ready(&mut lanes[node]) => Some(oldest),
                _ = wait_for_send(&ctx, at) => None,
            },
            (None, Some(at)) => {
                wait_for_send(&ctx, at).await;
                None
            }
            (None, None) => None,
        };
        let Some(oldest) = oldest else { continue };
        // The oldest, then every later reply already in, in order. Closed-loop ids are
        // stamped from the latest read.
        let newest_read = if lanes.len() == 1 {
            debug_assert!(oldest.count <= in_flight.len(), "a lane holds replies of its own requests only");
            ready = oldest.count;
            oldest.read
        } else {
            let (count, read) = count_in(&in_flight, &mut lanes, &mut per_lane);
            ready = count;
            read
        };
        now = newest_read.unwrap_or_else(Instant::now);
    }
    // Intended times before the load phase ended that were never drawn (a producer far behind
    // its schedule): counted once, in closed form.
    if let Some(end) = ctx.shared.load_end.get() {
        let undrawn = producer.schedule.due_until(*end);
        ctx.backlog.set(ctx.backlog.get() + undrawn);
    }
    // The last producer out ends a job-budget run's load phase at its last reply: else the
    // producers' rate window closes at the coordinator's next check, up to 50 ms later, which
    // understates enqueue ops/s by that share of a short run.
    // A run that ended on its duration or a stop has its end already (the first set wins).
    if ctx.shared.producers_live.fetch_sub(1, Ordering::AcqRel) == 1 {
        let _ = ctx.shared.load_end.set(Instant::now());
    }
}

/// How many of the oldest requests in `in_flight` have their replies in, in order, across
/// their lanes (a cluster: one lane per node), and the latest read time among those lanes.
/// `per_lane` is scratch room, one entry per lane.
fn count_in<L: ReplyLane>(
    in_flight: &VecDeque<InFlight>,
    lanes: &mut [L],
    per_lane: &mut [(usize, usize)],
) -> (usize, Option<Instant>) {
    const UNASKED: usize = usize::MAX;
    per_lane.fill((UNASKED, 0));
    let mut read = None;
    let mut count = 0;
    for sent in in_flight {
        let node = usize::from(sent.node);
        let (has, counted) = &mut per_lane[node];
        if *has == UNASKED {
            let ready = lanes[node].ready();
            *has = ready.count;
            read = read.max(ready.read);
        }
        if *counted == *has {
            break;
        }
        *counted += 1;
        count += 1;
    }
    (count, read)
}

/// Records the reply of `sent`, or redoes the call on a task of its own when the script did
/// not run (so a migration's TRYAGAIN loop or a reload does not stall the rest of the
/// window). `last` is the previous reply's span: the replies of one read share their read
/// time, and those of one write their send time, so most reuse its µs.
fn record_reply<Q: QueueOps>(
    ctx: &Rc<ThreadCtx>,
    producer: &mut Producer,
    ops: &Q,
    last: &mut Span,
    sent: &InFlight,
    reply: Laned,
) {
    let Laned { result, times } = reply;
    let (start, done) = match times {
        Some(t) => (t.sent, t.read),
        // Failed before any write began to send it: no service time to speak of.
        None => {
            let now = Instant::now();
            (now, now)
        }
    };
    if (start, done) != (last.sent, last.done) {
        *last = Span { sent: start, done, service_us: elapsed_us(start, done) };
    }
    let ids = &producer.ids;
    match Q::enqueue_reply(sent.job.script::<Q>(), || sent.job.id(ids), result) {
        Err(err) if needs_redo(&err) => {
            let id = sent.job.id(&producer.ids);
            tokio::task::spawn_local(redo(ctx.clone(), ops.clone(), *sent, id, err, start));
        }
        reply => settle::<Q>(ctx, Some(producer), sent, reply, *last),
    }
}

/// Builds `send`'s payload and queues its enqueue.
fn queue_one<Q: QueueOps>(
    ctx: &ThreadCtx,
    producer: &mut Producer,
    ops: &mut Q,
    lanes: &mut [Q::Lane],
    send: Next,
) -> InFlight {
    ctx.sends.set(ctx.sends.get() + 1);
    ctx.in_flight.set(ctx.in_flight.get() + 1);
    let drawn = ctx.plan.producers.payload.sample(&mut producer.rng) as usize;
    let job = send.job;
    // A duplicate carries other bytes than the original (7 more than a draw, so never equal):
    // it must change nothing (I8). Its id is minted again; a new job's is the generator's
    // next, whose stamp the draw fixed.
    let ulid = producer.ids.ulid_of(job.number, job.id_ms);
    let resent;
    let (size, id) = match job.duplicate {
        false => (drawn, producer.ids.mint_ref(job.number, job.id_ms)),
        true => {
            resent = job.id(&producer.ids);
            (drawn + 7, &resent)
        }
    };
    let (priority, delay) = job.args();
    // Built straight into the command: no payload buffer, no copy of it.
    let mut crc = 0;
    let write = |out: &mut Vec<u8>| crc = ctx.pool.append(ulid, size, out);
    let node = ops.queue_enqueue(lanes, usize::from(job.queue), id, PayloadPool::length(size), write, priority, delay);
    InFlight { job, intended: send.intended, size: size as u32, crc, node: node as u16 }
}

/// Redoes a call whose reply was `err`, a redirect or NOSCRIPT: the script did not run (a moved
/// slot, a server that lost its scripts), so the redirect is followed and the routed path
/// reloads ([`QueueOps::redo_enqueue`]), with the same payload bytes. Then records it as one
/// call, from its first send (`start`) to the last reply. The last accepted id of a redone
/// job is not offered to duplicates (rare, and a duplicate of an older id tests as much).
async fn redo<Q: QueueOps>(ctx: Rc<ThreadCtx>, mut ops: Q, sent: InFlight, id: JobId, err: CallError, start: Instant) {
    let mut payload = Vec::new();
    ctx.pool.build(&id, sent.size as usize, &mut payload);
    let (priority, delay) = sent.job.args();
    let queue = usize::from(sent.job.queue);
    let result = ops.redo_enqueue(usize::from(sent.node), err, queue, id, &payload, priority, delay).await;
    let done = crate::resp::pipe::take_times_since(start).map_or_else(Instant::now, |t| t.read);
    let start = start.min(done);
    settle::<Q>(&ctx, None, &sent, result, Span { sent: start, done, service_us: elapsed_us(start, done) });
}

/// Records one reply sent and read as `span` says: in the histograms and the history, and in
/// the job counters; an accepted new job becomes the producer's next duplicate. Always
/// inlined (into the window's loop and `redo`): the loop records every reply through it, and
/// a call would cost on every reply.
#[inline(always)]
fn settle<Q: QueueOps>(
    ctx: &ThreadCtx,
    producer: Option<&mut Producer>,
    sent: &InFlight,
    result: Result<EnqueueReply, CallError>,
    span: Span,
) {
    ctx.in_flight.set(ctx.in_flight.get() - 1);
    ctx.record(sent.job.script::<Q>(), sent.intended, span, &result);
    let Job { queue, number, id_ms, .. } = sent.job;
    if !sent.job.duplicate {
        ctx.remember_enqueue(number, Kind::Enqueue, sent.crc, queue, id_ms, span, &result, enqueue_outcome);
        match result {
            Ok(EnqueueReply::Enqueued) => {
                ctx.bump(JobCounter::Enqueued, 1);
                if let Some(producer) = producer {
                    producer.last = Some((queue, number, id_ms));
                }
            }
            // A fresh id that is a duplicate means an id collision; the checker reports it.
            Ok(EnqueueReply::Duplicate) => ctx.bump(JobCounter::Duplicates, 1),
            Err(_) => {}
        }
    } else {
        // A protocol whose reply cannot say "already there" (BullMQ answers with the id
        // either way) accepted the repeat as its own documented no-op.
        let result = match result {
            Ok(EnqueueReply::Enqueued) if !Q::REPORTS_DUPLICATES => Ok(EnqueueReply::Duplicate),
            other => other,
        };
        // The original enqueue kept the id's time part (0 here).
        ctx.remember_enqueue(number, Kind::EnqueueDup, sent.crc, queue, 0, span, &result, enqueue_outcome);
        match result {
            Ok(EnqueueReply::Duplicate) => ctx.bump(JobCounter::Duplicates, 1),
            Ok(EnqueueReply::Enqueued) => ctx.bump(JobCounter::DuplicateAccepted, 1),
            Err(_) => {}
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

fn enqueue_outcome(reply: &EnqueueReply) -> Outcome {
    match reply {
        EnqueueReply::Enqueued => Outcome::Ok,
        EnqueueReply::Duplicate => Outcome::Alt,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resp::lane::Ready;
    use crate::resp::Request;
    use std::task::{Context, Poll};

    /// A lane with `.0` replies in, the newest read at `.1` (all that [`count_in`] asks of it).
    struct Has(usize, Option<Instant>);

    impl ReplyLane for Has {
        fn queue_with(&mut self, _: impl FnOnce(&mut Request)) {
            unreachable!("count_in queues nothing")
        }
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Ready> {
            match self.0 {
                0 => Poll::Pending,
                count => Poll::Ready(Ready { count, read: self.1 }),
            }
        }
        fn try_next(&mut self) -> Option<Laned> {
            unreachable!("count_in takes nothing")
        }
    }

    fn on(nodes: &[u16]) -> VecDeque<InFlight> {
        let job = Job { id_ms: 0, number: 0, queue: 0, duplicate: false, delay: None, priority: None };
        nodes.iter().map(|&node| InFlight { job, intended: None, size: 0, crc: 0, node }).collect()
    }

    #[test]
    fn replies_are_counted_in_send_order_across_lanes_up_to_the_first_missing() {
        let (early, late) = (Instant::now(), Instant::now() + Duration::from_millis(1));
        let mut lanes = [Has(2, Some(early)), Has(1, Some(late)), Has(0, None)];
        let mut scratch = [(0, 0); 3];
        // Node 1 has one reply in: its second request stops the count, whatever follows.
        assert_eq!(count_in(&on(&[0, 1, 0, 1, 0]), &mut lanes, &mut scratch), (3, Some(late)));
        // A lane with nothing in stops it at once; only the lanes asked give the read time.
        assert_eq!(count_in(&on(&[0, 2, 1]), &mut lanes, &mut scratch), (1, Some(early)));
        assert_eq!(count_in(&on(&[2, 0]), &mut lanes, &mut scratch), (0, None));
        // Every request's reply in: the whole window.
        assert_eq!(count_in(&on(&[1, 0, 0]), &mut lanes, &mut scratch), (3, Some(late)));
    }
}
