//! What every lane of one load thread shares: the plan, the thread's recorder, the run phase,
//! the payload pool. One load thread runs one current-thread runtime, so sharing is `Rc` and
//! `RefCell`: no lock and no atomic read-modify-write on the per-request path.

use crate::history::{HistoryBuf, Kind, Outcome};
use crate::lua::Script;
use crate::metrics::{elapsed_us, JobCounter, Recorder};
use crate::payload::PayloadPool;
use crate::resp::CallError;
use crate::scenario::Plan;
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Where the run is. Producers send only in `Load`; consumers and maintenance work until `Stop`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Phase {
    /// Producers and consumers run (warmup included; the reporter drops warmup intervals).
    Load = 0,
    /// Producers have stopped; consumers finish the jobs left.
    Drain = 1,
    /// Everything stops; in-flight requests are abandoned.
    Stop = 2,
}

/// State shared by every load thread and the coordinator (atomics only, read once per job).
#[derive(Debug, Default)]
pub struct RunShared {
    phase: AtomicU8,
    /// Job numbers handed to producers so far, in blocks (the `jobs = N` budget caps what
    /// they draw from them; this counter may pass it by up to a block per producer).
    pub issued: AtomicU64,
    /// Producers still running.
    pub producers_live: AtomicUsize,
    /// Set by an abort (a second stop signal): the threads stop waiting for the replies of
    /// requests in flight and hand over their history at once.
    pub aborted: std::sync::atomic::AtomicBool,
    /// When the load phase ended (set once: by the last producer to finish a job budget, at its
    /// last reply, else by the coordinator as it moves to the drain): what a send must have been
    /// due before to count as never sent, and where the producers' rate window ends.
    pub load_end: std::sync::OnceLock<std::time::Instant>,
    /// Producer sends made, over all threads (each thread adds its count once, at its end).
    pub sent: AtomicU64,
    /// Open-loop sends whose intended time came before the load phase ended but that were
    /// never made (the backlog at the stop), over all threads, added once per thread.
    pub never_sent: AtomicU64,
    /// Each load thread's CPU share of its running time, 0..1 (user + sys over wall, from
    /// getrusage(RUSAGE_THREAD)), and its wait for a CPU as a share of the same time (`None`
    /// where the kernel keeps no run delay), by thread index, filled as the threads end (once
    /// each).
    pub busy: std::sync::Mutex<Vec<(usize, f64, Option<f64>)>>,
}

impl RunShared {
    /// The current phase (a relaxed load).
    pub fn phase(&self) -> Phase {
        match self.phase.load(Ordering::Relaxed) {
            0 => Phase::Load,
            1 => Phase::Drain,
            _ => Phase::Stop,
        }
    }

    /// Moves the run forward to `phase` (never back).
    pub fn advance(&self, phase: Phase) {
        self.phase.fetch_max(phase as u8, Ordering::Relaxed);
    }
}

/// One load thread's shared context.
pub struct ThreadCtx {
    /// The resolved scenario.
    pub plan: Arc<Plan>,
    /// Run-wide atomics.
    pub shared: Arc<RunShared>,
    /// This thread's recorder: one histogram per script per thread, swapped once a second.
    pub recorder: RefCell<Recorder>,
    /// Filler bytes for payloads.
    pub pool: PayloadPool,
    /// This thread's history (every outcome per job, for the checker).
    pub history: RefCell<HistoryBuf>,
    /// Requests of this thread awaiting their reply: at the stop, the thread waits for them,
    /// so no effect the server applied goes missing from the history.
    pub in_flight: std::cell::Cell<usize>,
    /// Wall-clock time from instants the lanes already hold (job ids carry a Unix ms stamp).
    pub wall: WallClock,
    /// The thread's precise timer for open-loop sends and the consumers' waits (`None` for a
    /// thread of closed-loop producers only, or where no timerfd could be made: then tokio's
    /// 1 ms timer waits).
    pub pacer: Option<super::pacer::Pacer>,
    /// Producer sends made by this thread (added to [`RunShared::sent`] at its end).
    pub sends: std::cell::Cell<u64>,
    /// This thread's intended-but-never-sent open-loop sends (added to [`RunShared::never_sent`]).
    pub backlog: std::cell::Cell<u64>,
}

/// Converts an [`Instant`] to Unix milliseconds from one anchor read at the start, so minting
/// an id needs no second clock read per request.
#[derive(Debug, Clone, Copy)]
pub struct WallClock {
    at: Instant,
    unix_ms: u64,
}

impl WallClock {
    /// Anchors at the current time.
    pub fn now() -> WallClock {
        WallClock { at: Instant::now(), unix_ms: crate::keyspace::ids::unix_ms_now() }
    }

    /// `instant` in ms since the Unix epoch (the anchor's, for instants before it).
    pub fn unix_ms(&self, instant: Instant) -> u64 {
        self.unix_ms + instant.saturating_duration_since(self.at).as_millis() as u64
    }
}

impl ThreadCtx {
    /// Waits until `at`: on the thread's pacer (µs precision) when it has one.
    pub async fn wait_until(&self, at: Instant) {
        match &self.pacer {
            Some(pacer) if !pacer.is_broken() => pacer.until(at).await,
            _ => tokio::time::sleep_until(at.into()).await,
        }
    }

    /// Records one call of `script` sent and answered as `span` says: latency from `intended`
    /// (open loop) or, in closed loop, the service time itself; errors by code. Always
    /// inlined: every reply of the run goes through it, and a call would be a large share of
    /// its cost.
    #[inline(always)]
    pub fn record<T>(&self, script: Script, intended: Option<Instant>, span: Span, result: &Result<T, CallError>) {
        let mut rec = self.recorder.borrow_mut();
        rec.maybe_flush(span.done);
        let latency = intended.map_or(span.service_us, |at| elapsed_us(at, span.done));
        match result {
            Ok(_) => rec.record_ok(script, latency, span.service_us),
            Err(err) => rec.record_error(script, err.code(), latency),
        }
        if let Some(at) = intended {
            rec.record_lag(script, elapsed_us(at, span.sent));
            if span.sent > at + self.plan.producers.late_after {
                rec.record_late(script);
            }
        }
    }

    /// Adds `n` to a job counter.
    pub fn bump(&self, counter: JobCounter, n: u64) {
        self.recorder.borrow_mut().bump(counter, n);
    }

    /// The run phase.
    pub fn phase(&self) -> Phase {
        self.shared.phase()
    }

    /// Appends one event of a claimed job's call by consumer lane `worker` to the thread's
    /// history. `result` decides the
    /// outcome: `ok` maps a success reply to [`Outcome::Ok`] or [`Outcome::Alt`]; an error is
    /// refused or unknown.
    #[allow(clippy::too_many_arguments)] // the fields of one event, as `remember_enqueue`'s
    pub fn remember<T>(
        &self,
        job: u32,
        kind: Kind,
        token: u32,
        worker: u32,
        span: Span,
        result: &Result<T, CallError>,
        ok: impl FnOnce(&T) -> Outcome,
    ) {
        let outcome = outcome_of(result, ok);
        self.history.borrow_mut().push(job, kind, outcome, token, Some(worker), span.sent, span.service_us);
    }

    /// Appends one enqueue event (`crc` of the payload sent, into queue index `queue`) whose id
    /// has the time part `id_ms` (ms since the Unix epoch; kept so the checker can name the job
    /// even when nothing of it is left on the server; 0 for a repeated id).
    /// Always inlined (as `record`): `settle` calls it for every enqueue reply.
    #[allow(clippy::too_many_arguments)] // the fields of one event, as `remember`'s
    #[inline(always)]
    pub fn remember_enqueue<T>(
        &self,
        job: u32,
        kind: Kind,
        crc: u32,
        queue: u16,
        id_ms: u64,
        span: Span,
        result: &Result<T, CallError>,
        ok: impl FnOnce(&T) -> Outcome,
    ) {
        let outcome = outcome_of(result, ok);
        self.history.borrow_mut().push_enqueue(job, kind, outcome, crc, queue, id_ms, span.sent, span.service_us);
    }
}

/// The history outcome of a call's `result` (`ok` maps a success reply).
fn outcome_of<T>(result: &Result<T, CallError>, ok: impl FnOnce(&T) -> Outcome) -> Outcome {
    match result {
        Ok(reply) => ok(reply),
        Err(err) => Outcome::of_error(err.code()),
    }
}

/// When one request was sent and when its reply was read.
#[derive(Debug, Clone, Copy)]
pub struct Span {
    /// The actual send.
    pub sent: Instant,
    /// The reply read (or the error).
    pub done: Instant,
    /// `done - sent` in µs, computed once for the histograms and the history.
    pub service_us: u64,
}

/// Sends one request and records it: the per-request timing wrapper of consumer lanes and
/// maintenance (producers time their window's replies themselves).
///
/// `intended` is the open-loop intended send time, or `None` in closed loop (then latency is
/// measured from the actual send). The reply is timed when it is read.
pub async fn timed<T>(
    ctx: &ThreadCtx,
    script: Script,
    intended: Option<Instant>,
    request: impl std::future::Future<Output = Result<T, CallError>>,
) -> Result<T, CallError> {
    timed_span(ctx, script, intended, request).await.0
}

/// [`timed`], also returning when the request was sent and its reply read (for the history).
pub async fn timed_span<T>(
    ctx: &ThreadCtx,
    script: Script,
    intended: Option<Instant>,
    request: impl std::future::Future<Output = Result<T, CallError>>,
) -> (Result<T, CallError>, Span) {
    ctx.in_flight.set(ctx.in_flight.get() + 1);
    let sent = Instant::now();
    let result = request.await;
    // The pipe transport hands over when the request was written and its reply read (one
    // clock read per write and per read); otherwise the call is timed here. A call that took
    // several requests (a NOSCRIPT reload, a followed redirect) counts from its last send.
    let (sent, done) = match crate::resp::pipe::take_times_since(sent) {
        Some(t) => (t.sent, t.read),
        None => (sent, Instant::now()),
    };
    ctx.in_flight.set(ctx.in_flight.get() - 1);
    let span = Span { sent, done, service_us: elapsed_us(sent, done) };
    ctx.record(script, intended, span, &result);
    (result, span)
}
