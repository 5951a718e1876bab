//! The pipe transport: one pipelined connection per handle set, driven by a connection loop we
//! own. It exists because redis-rs' multiplexed connection costs a channel hop, a oneshot, a
//! timer entry and a few allocations per request: most of the client's CPU per request, and
//! several times what valkey-benchmark spends on a whole request.
//!
//! How a request travels (all on one load thread, so `Rc` + `RefCell`, no lock, no atomic):
//! 1. [`PipeConn::send`] copies the request's RESP bytes ([`Request`], framed as it was
//!    built) into the shared output buffer, takes a reply slot (reused, no allocation) and
//!    wakes the driver; the returned [`Call`] owns nothing borrowed. A producer's window goes
//!    through a [`PipeLane`] instead ([`Wire::lane`]): its requests are framed straight into
//!    the output buffer and their replies, with their times, are appended to the lane's own
//!    queue, with no slot, waker or future per request; the producer then writes its batch
//!    itself ([`ReplyLane::flush`]), in its own poll, and the driver is woken only for what
//!    the socket did not take.
//! 2. The driver task ([`driver`]) runs after its callers (producers, consumers) yield, so
//!    every request issued in the same scheduler tick goes out in one `write`; it then reads
//!    whatever replies are there.
//! 3. Replies are decoded in order (redis-protocol's zero-copy RESP2 decoder) and handed to the
//!    slots and lanes in send order; the clock is read once per socket read and that instant
//!    is the read time of every reply the read brought ([`take_times`], [`Laned::times`]).
//!    Likewise the clock is read once per `write`, just before it: that instant is the send
//!    time of every request the write begins to send (a short write leaves the rest for the
//!    write that reaches them), so a request's service time starts when it left the client,
//!    not when its caller queued it.
//!    A pipelined request is thus timed by the read that brought its own reply, not by when
//!    its pipeline was sent or completed;
//!    replies the driver hands out a poll later (up to 256 per poll) keep their read time, so the
//!    client's own hand-out delay is not counted as server latency.
//!
//! Failure handling matches what the load needs: a lost connection or no reply within the
//! response timeout fails every request in flight (unknown outcomes), then the driver
//! reconnects with backoff (10 ms doubling to 1 s) and loads every script again before it
//! sends anything else, so a restarted server (empty script cache) is picked up. Requests made
//! while the connection is down wait for it (as with redis-rs' ConnectionManager), up to the
//! response timeout; a caller that retries at once therefore cannot spin and starve the driver.
//!
//! With a durability mode (`[target] wait`, [`Durability::Wait`]) every state-changing call
//! ([`PipeConn::send_write`], and every request of a lane) is followed in the output buffer by
//! `WAIT <replicas> <timeout ms>`, its bytes encoded once per connection: both go out in the same
//! write, on the same connection, so the `WAIT` counts exactly the writes before it. The
//! call's reply is held until the `WAIT`'s arrives; the caller then gets one reply, timed to
//! the `WAIT`'s read: the call's own when the `WAIT` reported enough replicas,
//! [`CallError::WaitShort`] (an unknown outcome) when it did not, and the call's error (the
//! `WAIT`'s reply read and discarded) when the call failed. Without a durability mode a request
//! costs one flag test more than it would without the feature.
//!
//! The connection is the run's [`Connector`]'s stream: plain TCP or TLS (rustls), with
//! AUTH (user/password) and SELECT in the handshake. Unix sockets are not built in.

mod driver;
pub mod reply;

pub(crate) use driver::open_stream;

use super::error::CallError;
use super::lane::{Laned, Ready, ReplyLane};
use super::registry::ScriptRegistry;
use super::request::Request;
use super::wire::Wire;
use crate::net::{ConnectOptions, Connector, Durability};
use redis::Value;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

thread_local! {
    /// The send and read times of the reply a [`Call`] just returned. The task that awaited
    /// it takes them in the same poll ([`take_times`]), before any other task runs here.
    static TIMES: Cell<Option<Times>> = const { Cell::new(None) };
}

/// When one request went out and its reply came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Times {
    /// Just before the `write` that began to send the request (one clock read per write).
    pub sent: Instant,
    /// The `read` that brought its reply returned (one clock read per read).
    pub read: Instant,
}

/// When the request whose reply the current task's last pipe call returned was sent, and when
/// that reply was read off the socket, once (the value is cleared). A call that took several
/// requests (a NOSCRIPT reload and resend, a followed redirect) gives its last request's times.
/// `None` when the last call did not go through a pipe connection, or failed before it was
/// written; a caller checks that `sent` is not before its own call began (a value nobody took
/// is stale).
pub fn take_times() -> Option<Times> {
    TIMES.with(Cell::take)
}

/// [`take_times`], kept only when it belongs to a call begun at `start` or later (a value
/// nobody took is older): what a caller that read the clock before its call takes.
pub fn take_times_since(start: Instant) -> Option<Times> {
    take_times().filter(|t| t.sent >= start && t.read >= t.sent)
}

/// Keeps `cx`'s waker in `slot`, cloned only when the one there would wake another task.
fn register(slot: &mut Option<Waker>, cx: &Context<'_>) {
    if !slot.as_ref().is_some_and(|waker| waker.will_wake(cx.waker())) {
        *slot = Some(cx.waker().clone());
    }
}

/// Hands `times` to the task whose [`Call`] returns in this poll.
fn hand_over_times(times: Option<Times>) {
    TIMES.with(|cell| cell.set(times));
}

/// A handle on one pipelined connection. Clones share the connection: each caller holds one and
/// keeps its own requests in flight; replies come back in order. `!Send`: the connection
/// belongs to the load thread that opened it.
#[derive(Clone)]
pub struct PipeConn {
    shared: Rc<Shared>,
}

/// Where to connect and what to do after connecting.
pub(crate) struct DialSpec {
    connector: Connector,
    opts: ConnectOptions,
    registry: Arc<ScriptRegistry>,
}

struct Shared {
    state: RefCell<State>,
    /// The connection while it is up (the driver's; a lane's [`flush`](ReplyLane::flush)
    /// writes on it too). Apart from `state` so that both can be borrowed at once.
    stream: RefCell<Option<crate::net::Stream>>,
}

/// The reply of one [`Call`], until the call takes it.
#[derive(Default)]
struct Slot {
    waker: Option<Waker>,
    reply: Option<Result<Value, CallError>>,
    times: Option<Times>,
    /// The [`Call`] was dropped before its reply: free the slot when the reply comes.
    abandoned: bool,
}

/// One request awaiting its reply, in send order.
#[derive(Clone, Copy)]
struct Waiting {
    /// Where the reply goes: a [`Slot`] index, or a lane's index with [`LANE`] set.
    to: u32,
    /// Where the request begins in the output buffer, while no write has reached it.
    start: usize,
    /// Set by the write that began to send the request.
    sent_at: Option<Instant>,
}

/// Marks [`Waiting::to`] as a lane's index.
const LANE: u32 = 1 << 31;
/// Marks [`Waiting::to`] as a call followed by the durability `WAIT`: two replies, one result.
const WAITED: u32 = 1 << 30;

/// The `WAIT` a state-changing call is followed by, pre-encoded, and what its reply must say.
struct WaitAfter {
    /// `*3\r\n$4\r\nWAIT\r\n...`: copied after each call, never formatted per request.
    request: Box<[u8]>,
    replicas: u32,
    timeout_ms: u64,
}

impl WaitAfter {
    /// The connection's `WAIT`, or `None` when a call is acknowledged by the primary alone.
    fn of(durability: Durability) -> Option<WaitAfter> {
        let Durability::Wait { replicas, timeout } = durability else { return None };
        let request = durability.wait_request()?.into_boxed_slice();
        Some(WaitAfter { request, replicas, timeout_ms: timeout.as_millis() as u64 })
    }

    /// One result of a call's reply and the reply of the `WAIT` after it: the call's error when
    /// it failed (the `WAIT`'s reply discarded); its reply when the `WAIT` reported at least
    /// `replicas`; otherwise unknown: [`CallError::WaitShort`], a lost connection or a timeout
    /// as itself (the routing reacts to those), any other `WAIT` failure as
    /// [`CallError::WaitFailed`].
    fn acknowledged(&self, call: Result<Value, CallError>, wait: Result<Value, CallError>) -> Result<Value, CallError> {
        let value = call?;
        match wait {
            Ok(Value::Int(acked)) if acked >= i64::from(self.replicas) => Ok(value),
            Ok(Value::Int(acked)) => {
                Err(CallError::WaitShort { acked, replicas: self.replicas, timeout_ms: self.timeout_ms })
            }
            Ok(other) => Err(CallError::WaitFailed(format!("WAIT replied {other:?}, expected an integer"))),
            Err(err @ (CallError::Connection(_) | CallError::Timeout)) => Err(err),
            Err(err) => Err(CallError::WaitFailed(err.to_string())),
        }
    }
}

/// One [`PipeLane`]'s replies not taken yet, in send order.
#[derive(Default)]
struct LaneState {
    replies: VecDeque<Laned>,
    waker: Option<Waker>,
    /// The lane was dropped: its replies are read and discarded.
    closed: bool,
}

struct State {
    /// Packed requests; `out[written..]` is not on the socket yet.
    out: Vec<u8>,
    written: usize,
    /// Requests awaiting a reply, in send order; the last `unsent` of them have no send time
    /// yet (no write has begun to send them).
    queue: VecDeque<Waiting>,
    unsent: usize,
    slots: Vec<Slot>,
    free: Vec<u32>,
    lanes: Vec<LaneState>,
    /// The driver's waker, woken when a request is queued, and whether it was woken since its
    /// last poll (one wake per batch, not one atomic task transition per request).
    driver: Option<Waker>,
    driver_woken: bool,
    /// A write that failed in a lane's flush, for the driver to fail the connection with.
    write_error: Option<CallError>,
    /// When the reply queue last went from empty to non-empty, and when a reply was last read:
    /// the watchdog's "no reply for `response_timeout`" is measured from the later of the two.
    waiting_since: Instant,
    last_read: Instant,
    /// The `WAIT` that follows each state-changing call (`None`: acknowledged by the primary).
    wait: Option<WaitAfter>,
    /// The reply of the oldest request, a [`WAITED`] call, until its `WAIT`'s reply comes.
    held: Option<Result<Value, CallError>>,
}

impl PipeConn {
    /// Connects through `connector` (TCP or TLS), authenticates, selects the db, `SCRIPT
    /// LOAD`s every script of `registry`, and spawns the connection's driver on the current
    /// `LocalSet`.
    ///
    /// Panics outside a `tokio::task::LocalSet` (the driver is a local task).
    /// Errors: a failed connect/TLS handshake/AUTH, as [`CallError::Connection`] (or the
    /// handshake's error reply).
    pub async fn connect(
        connector: &Connector,
        opts: ConnectOptions,
        registry: Arc<ScriptRegistry>,
    ) -> Result<PipeConn, CallError> {
        let target = DialSpec { connector: connector.clone(), opts, registry };
        let stream = driver::open(&target).await?;
        let mut state = State::new(Instant::now());
        state.wait = WaitAfter::of(opts.durability);
        state.out.reserve(64 * 1024);
        state.queue.reserve(256);
        let shared = Rc::new(Shared { state: RefCell::new(state), stream: RefCell::new(Some(stream)) });
        tokio::task::spawn_local(driver::run(shared.clone(), target));
        Ok(PipeConn { shared })
    }

    /// Queues `request` for the next write and returns the future of its reply.
    ///
    /// The future's errors: the server's error reply (classified), [`CallError::Timeout`]
    /// when the connection gave no reply for the response timeout, [`CallError::Connection`]
    /// when it was lost, or could not be re-established within the response timeout; the
    /// last two are unknown outcomes.
    ///
    /// Panics on a request without arguments: the server answers `*0` with nothing, which
    /// would shift every later reply onto the wrong request.
    pub fn send(&self, request: &Request) -> Call {
        self.send_as(request, false)
    }

    /// [`send`](Self::send) for a state-changing call (a script call): followed by the
    /// connection's durability `WAIT`, if it has one, in the same write, and acknowledged only
    /// as that `WAIT` says (see the module's doc).
    ///
    /// The future's errors: as [`send`](Self::send)'s, and [`CallError::WaitShort`] /
    /// [`CallError::WaitFailed`] (unknown outcomes) when the `WAIT` did not acknowledge it.
    pub fn send_write(&self, request: &Request) -> Call {
        self.send_as(request, true)
    }

    fn send_as(&self, request: &Request, write: bool) -> Call {
        assert!(request.framed().1 > 0, "an empty request gets no reply");
        let mut st = self.shared.state.borrow_mut();
        let start = st.out.len();
        request.write_packed(&mut st.out);
        self.queued(st, start, write)
    }

    /// Takes a reply slot for the request just packed at `out[start..]` (a state-changing call
    /// when `write`) and wakes the driver.
    fn queued(&self, mut st: std::cell::RefMut<'_, State>, start: usize, write: bool) -> Call {
        let slot = match st.free.pop() {
            Some(slot) => slot,
            None => {
                st.slots.push(Slot::default());
                (st.slots.len() - 1) as u32
            }
        };
        debug_assert!(slot < WAITED, "a slot index reads as a lane's or a waited call's");
        match write {
            true => st.push_call(slot, start),
            false => st.push_waiting(slot, start),
        }
        st.wake_driver();
        Call { shared: Some(self.shared.clone()), slot }
    }

    /// A new lane on this connection: its requests' replies come back to it in order, with
    /// their times ([`ReplyLane`]).
    pub fn lane(&self) -> PipeLane {
        let mut st = self.shared.state.borrow_mut();
        st.lanes.push(LaneState::default());
        let id = (st.lanes.len() - 1) as u32;
        assert!(id < WAITED, "too many lanes on one connection");
        PipeLane { shared: self.shared.clone(), id }
    }
}

impl Shared {
    /// Frames the request `frame` builds straight onto the output buffer ([`Request::onto`]:
    /// no copy of its bytes; `frame` must not use the connection, whose state is borrowed
    /// meanwhile) and returns the state with it packed at `start`.
    ///
    /// Panics on a request without arguments, as [`PipeConn::send`].
    fn frame_onto(&self, frame: impl FnOnce(&mut Request)) -> (std::cell::RefMut<'_, State>, usize) {
        let mut st = self.state.borrow_mut();
        let start = st.out.len();
        let request = Request::onto(std::mem::take(&mut st.out));
        // Should `frame` panic, the guard puts the buffer back without the half-built request,
        // so the requests queued before it keep their bytes and the stream stays whole.
        let mut guard = Unframe { out: &mut st.out, request: Some(request), start };
        frame(guard.request.as_mut().expect("set above"));
        let request = guard.request.take().expect("set above");
        drop(guard);
        let empty = request.framed().1 == 0;
        st.out = request.into_packed();
        if empty {
            st.out.truncate(start);
            panic!("an empty request gets no reply");
        }
        (st, start)
    }
}

/// One caller's lane on a [`PipeConn`] ([`PipeConn::lane`]). Dropping it discards the replies
/// still to come.
pub struct PipeLane {
    shared: Rc<Shared>,
    id: u32,
}

/// A lane carries state-changing calls only (the producers' enqueues): with a durability mode,
/// each of its requests is followed by the connection's `WAIT`.
impl ReplyLane for PipeLane {
    /// Queued without waking the driver: [`flush`](ReplyLane::flush) sends it.
    fn queue_with(&mut self, frame: impl FnOnce(&mut Request)) {
        let (mut st, start) = self.shared.frame_onto(frame);
        st.push_call(LANE | self.id, start);
    }

    /// Packed straight into the output buffer; a `pack` that panics leaves nothing of its
    /// request behind.
    fn queue_packed(&mut self, pack: impl FnOnce(&mut Vec<u8>)) {
        let mut st = self.shared.state.borrow_mut();
        let start = st.out.len();
        let guard = Truncate { out: &mut st.out, start };
        pack(guard.out);
        // Checked while the guard still cuts a bad request back out.
        assert!(guard.out.len() > start, "an empty request gets no reply");
        debug_assert!(Request::from_packed(&guard.out[start..]).is_some(), "one whole packed request");
        std::mem::forget(guard);
        st.push_call(LANE | self.id, start);
    }

    /// Writes the connection's unsent bytes (this lane's and any other caller's) in this poll,
    /// as far as the socket takes them without waiting; wakes the driver for the rest (TLS
    /// records the socket did not take included), or when the write failed (the driver then
    /// fails the connection with that error), or when the connection is down (the driver
    /// writes once it is back).
    fn flush(&mut self) {
        let mut st = self.shared.state.borrow_mut();
        if st.written == st.out.len() {
            return;
        }
        let sent = match self.shared.stream.try_borrow_mut().as_deref_mut() {
            // A no-op waker: should the socket be full, the driver (woken below) polls the
            // write again with its own, and is woken when there is room.
            Ok(Some(stream)) => match driver::flush(&mut st, stream, &mut Context::from_waker(Waker::noop())) {
                Ok(done) => done,
                Err(err) => {
                    st.write_error = Some(err);
                    false
                }
            },
            _ => false,
        };
        if !sent {
            st.wake_driver();
        }
    }

    fn try_next(&mut self) -> Option<Laned> {
        self.shared.state.borrow_mut().lanes[self.id as usize].replies.pop_front()
    }

    /// Exact, and leaves the registered waker as it was.
    fn ready(&mut self) -> Ready {
        Ready::of(&self.shared.state.borrow().lanes[self.id as usize].replies)
    }

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Ready> {
        let mut st = self.shared.state.borrow_mut();
        let lane = &mut st.lanes[self.id as usize];
        if lane.replies.is_empty() {
            register(&mut lane.waker, cx);
            return Poll::Pending;
        }
        Poll::Ready(Ready::of(&lane.replies))
    }
}

impl Drop for PipeLane {
    fn drop(&mut self) {
        let mut st = self.shared.state.borrow_mut();
        let lane = &mut st.lanes[self.id as usize];
        lane.closed = true;
        lane.replies = VecDeque::new();
        lane.waker = None;
    }
}

#[cfg(test)]
impl PipeConn {
    /// A connection that is never opened (no driver runs), for tests.
    pub(crate) fn unopened() -> PipeConn {
        PipeConn {
            shared: Rc::new(Shared { state: RefCell::new(State::new(Instant::now())), stream: RefCell::new(None) }),
        }
    }

    /// The bytes `frame` queues on a connection that is never opened.
    pub(crate) fn frame_for_test(frame: impl FnOnce(PipeConn)) -> Vec<u8> {
        let conn = PipeConn::unopened();
        frame(conn.clone());
        conn.unopened_out()
    }

    /// The output buffer of a connection that is never opened, for tests.
    pub(crate) fn unopened_out(&self) -> Vec<u8> {
        self.shared.state.borrow().out.clone()
    }
}

impl Wire for PipeConn {
    type Lane = PipeLane;

    fn lane(&self) -> PipeLane {
        PipeConn::lane(self)
    }

    fn open(
        connector: &Connector,
        opts: ConnectOptions,
        registry: Arc<ScriptRegistry>,
    ) -> impl Future<Output = Result<Self, CallError>> {
        PipeConn::connect(connector, opts, registry)
    }

    fn send(&mut self, request: &Request) -> impl Future<Output = Result<Value, CallError>> {
        PipeConn::send(self, request)
    }

    fn send_write(&mut self, request: &Request) -> impl Future<Output = Result<Value, CallError>> {
        PipeConn::send_write(self, request)
    }

    fn send_asking(&mut self, request: &Request) -> impl Future<Output = Result<Value, CallError>> {
        // Both are queued now, adjacent in the output buffer (send queues synchronously); the
        // call's WAIT, if any, comes after the call, so ASKING still applies to the call.
        let asking = PipeConn::send(self, &Request::from_args(&["ASKING"]));
        let call = PipeConn::send_write(self, request);
        async move {
            let _ = asking.await;
            call.await
        }
    }
}

/// Restores a connection's output buffer, cut back to `start`, when a request built onto it
/// ([`Shared::frame_onto`]) is dropped unfinished (its framing closure panicked).
struct Unframe<'a> {
    out: &'a mut Vec<u8>,
    request: Option<Request>,
    start: usize,
}

/// Cuts the output buffer back to `start` when dropped: the bytes of a request whose packing
/// panicked half-way never go out.
struct Truncate<'a> {
    out: &'a mut Vec<u8>,
    start: usize,
}

impl Drop for Truncate<'_> {
    fn drop(&mut self) {
        self.out.truncate(self.start);
    }
}

impl Drop for Unframe<'_> {
    fn drop(&mut self) {
        if let Some(request) = self.request.take() {
            let mut out = request.into_packed();
            out.truncate(self.start);
            *self.out = out;
        }
    }
}

/// The reply of one [`PipeConn::send`]. Dropping it before the reply abandons the request
/// (its reply is read and discarded).
pub struct Call {
    shared: Option<Rc<Shared>>,
    slot: u32,
}

impl Future for Call {
    type Output = Result<Value, CallError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(shared) = &self.shared else { panic!("Call polled after completion") };
        let mut st = shared.state.borrow_mut();
        let slot = &mut st.slots[self.slot as usize];
        match slot.reply.take() {
            Some(reply) => {
                let times = slot.times.take();
                // Overwritten, never merged: the task that awaited this call takes it in
                // this same poll, and a value left by a task that did not must not leak into
                // another task's call.
                hand_over_times(times);
                st.free.push(self.slot);
                drop(st);
                self.shared = None;
                Poll::Ready(reply)
            }
            None => {
                register(&mut slot.waker, cx);
                Poll::Pending
            }
        }
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        let Some(shared) = self.shared.take() else { return };
        let mut st = shared.state.borrow_mut();
        let slot = &mut st.slots[self.slot as usize];
        slot.waker = None;
        if slot.reply.take().is_some() {
            st.free.push(self.slot);
        } else {
            slot.abandoned = true;
        }
    }
}

impl State {
    /// A connection's state with nothing queued, as of `now`.
    fn new(now: Instant) -> State {
        State {
            out: Vec::new(),
            written: 0,
            queue: VecDeque::new(),
            unsent: 0,
            slots: Vec::new(),
            free: Vec::new(),
            lanes: Vec::new(),
            driver: None,
            driver_woken: false,
            write_error: None,
            waiting_since: now,
            last_read: now,
            wait: None,
            held: None,
        }
    }

    /// A `write` begun at `at` has taken the output buffer up to `written`: every request not
    /// stamped yet that begins before that offset was (at least partly) sent by it. A short
    /// write leaves the requests after it unstamped, for the write that reaches them.
    fn mark_sent(&mut self, at: Instant) {
        let first = self.queue.len() - self.unsent;
        for waiting in self.queue.range_mut(first..) {
            if waiting.start >= self.written {
                break;
            }
            waiting.sent_at = Some(at);
            self.unsent -= 1;
        }
    }

    /// [`push_waiting`](Self::push_waiting) for a state-changing call: with a durability mode,
    /// the connection's `WAIT` is copied right after the call's bytes and the call is marked
    /// [`WAITED`], so its two replies make one result.
    #[inline]
    fn push_call(&mut self, to: u32, start: usize) {
        let to = match &self.wait {
            None => to,
            Some(wait) => {
                self.out.extend_from_slice(&wait.request);
                to | WAITED
            }
        };
        self.push_waiting(to, start);
    }

    /// Puts the request packed at `out[start..]`, whose reply goes to `to` (a slot, or a lane
    /// with [`LANE`]), in the reply queue, without waking the driver (a lane's caller flushes).
    fn push_waiting(&mut self, to: u32, start: usize) {
        if self.queue.is_empty() {
            self.waiting_since = Instant::now();
        }
        self.queue.push_back(Waiting { to, start, sent_at: None });
        self.unsent += 1;
    }

    /// Wakes the driver, once until its next poll (one atomic task transition per batch, not
    /// per request).
    fn wake_driver(&mut self) {
        if !self.driver_woken {
            if let Some(driver) = &self.driver {
                driver.wake_by_ref();
                self.driver_woken = true;
            }
        }
    }

    /// Hands the next reply to the oldest request. Errors: a reply nobody asked for. Always
    /// inlined into the read loop, which calls it once per reply: a call would pass the reply
    /// through memory each time.
    #[inline(always)]
    fn deliver(&mut self, reply: Result<Value, CallError>, read_at: Instant) -> Result<(), CallError> {
        let Some(mut waiting) = self.queue.pop_front() else {
            return Err(CallError::Connection("a reply arrived that no request was waiting for".into()));
        };
        let reply = match waiting.to & WAITED {
            0 => reply,
            _ => match self.acknowledge(&mut waiting, reply) {
                Some(reply) => reply,
                None => return Ok(()),
            },
        };
        self.unsent = self.unsent.min(self.queue.len());
        let times = waiting.sent_at.map(|sent| Times { sent, read: read_at });
        if waiting.to & LANE != 0 {
            let lane = &mut self.lanes[(waiting.to & !LANE) as usize];
            if !lane.closed {
                lane.replies.push_back(Laned { result: reply, times });
                // One wake per batch: the lane re-registers when it finds itself empty.
                if let Some(waker) = lane.waker.take() {
                    waker.wake();
                }
            }
            return Ok(());
        }
        let id = waiting.to;
        let slot = &mut self.slots[id as usize];
        if slot.abandoned {
            *slot = Slot::default();
            self.free.push(id);
        } else {
            slot.reply = Some(reply);
            slot.times = times;
            if let Some(waker) = slot.waker.take() {
                waker.wake();
            }
        }
        Ok(())
    }

    /// One of the two replies of a [`WAITED`] call, `waiting` (just taken off the queue): the
    /// call's is held and the call put back at the front (`None`); with the `WAIT`'s, the one
    /// result ([`WaitAfter::acknowledged`]) for `waiting`, its mark cleared. Out of line: the
    /// read loop without a durability mode never comes here.
    #[cold]
    #[inline(never)]
    fn acknowledge(
        &mut self,
        waiting: &mut Waiting,
        reply: Result<Value, CallError>,
    ) -> Option<Result<Value, CallError>> {
        let Some(call) = self.held.take() else {
            self.held = Some(reply);
            self.queue.push_front(*waiting);
            return None;
        };
        waiting.to &= !WAITED;
        let wait = self.wait.as_ref().expect("a call is marked waited only on a connection with a WAIT");
        Some(wait.acknowledged(call, reply))
    }

    /// The connection is lost: every request in flight gets `err` (an unknown outcome), and
    /// the unsent bytes are dropped with them. (Requests still in `out` were never written;
    /// they are reported unknown too, which is conservative.)
    fn fail_all(&mut self, err: CallError) {
        let now = Instant::now();
        while !self.queue.is_empty() {
            let _ = self.deliver(Err(err.clone()), now);
        }
        self.out.clear();
        self.written = 0;
    }

    /// While reconnecting: fails the requests queued since the loss once the oldest has
    /// waited `timeout`; returns when that will be, if any wait.
    fn expire(&mut self, timeout: std::time::Duration) -> Option<Instant> {
        if self.queue.is_empty() {
            return None;
        }
        let deadline = self.waiting_since + timeout;
        if Instant::now() < deadline {
            return Some(deadline);
        }
        self.fail_all(CallError::Connection(format!("not reconnected within {timeout:?}")));
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three queued requests of 10 bytes each, none written yet.
    fn three_queued() -> State {
        let mut st = State::new(Instant::now());
        st.out = vec![0; 30];
        for i in 0..3u32 {
            st.slots.push(Slot::default());
            st.queue.push_back(Waiting { to: i, start: i as usize * 10, sent_at: None });
            st.unsent += 1;
        }
        st
    }

    #[test]
    fn a_short_write_stamps_only_the_requests_it_began_to_send() {
        let mut st = three_queued();
        let (first, second) = (Instant::now(), Instant::now() + std::time::Duration::from_micros(5));
        st.written = 5;
        st.mark_sent(first);
        let sent: Vec<_> = st.queue.iter().map(|w| w.sent_at).collect();
        assert_eq!(sent, [Some(first), None, None]);
        assert_eq!(st.unsent, 2);
        // The next write takes the rest of the second request and the start of the third.
        st.written = 21;
        st.mark_sent(second);
        let sent: Vec<_> = st.queue.iter().map(|w| w.sent_at).collect();
        assert_eq!(sent, [Some(first), Some(second), Some(second)]);
        assert_eq!(st.unsent, 0);
    }

    #[test]
    fn a_framing_closure_that_panics_leaves_the_queued_requests_whole() {
        let kept = PipeConn::frame_for_test(|conn| {
            drop(conn.send(&Request::from_args(&["PING"])));
            let mut lane = conn.lane();
            let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                lane.queue_with(|request| {
                    request.arg("SET").arg("k");
                    panic!("a frame that breaks half-way");
                })
            }));
            assert!(unwound.is_err());
            assert_eq!(conn.unopened_out(), b"*1\r\n$4\r\nPING\r\n");
            lane.queue_with(|request| {
                request.arg("ECHO").arg("x");
            });
        });
        assert_eq!(kept, b"*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$1\r\nx\r\n");
    }

    #[test]
    fn a_packing_closure_that_panics_leaves_the_queued_requests_whole() {
        let kept = PipeConn::frame_for_test(|conn| {
            let mut lane = conn.lane();
            lane.queue_packed(|out| out.extend_from_slice(b"*1\r\n$4\r\nPING\r\n"));
            let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                lane.queue_packed(|out| {
                    out.extend_from_slice(b"*2\r\n$3\r\nGET\r\n");
                    panic!("a pack that breaks half-way");
                })
            }));
            assert!(unwound.is_err());
            assert_eq!(conn.unopened_out(), b"*1\r\n$4\r\nPING\r\n");
            let empty = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| lane.queue_packed(|_| {})));
            assert!(empty.is_err(), "an empty request gets no reply");
            if cfg!(debug_assertions) {
                // Half a request, which debug builds catch: cut back out as well.
                let half = b"*2\r\n$3\r\nGET\r\n";
                let half = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    lane.queue_packed(|out| out.extend_from_slice(half))
                }));
                assert!(half.is_err(), "half a request is refused");
                assert_eq!(conn.unopened_out(), b"*1\r\n$4\r\nPING\r\n");
            }
            lane.queue_packed(|out| out.extend_from_slice(b"*2\r\n$4\r\nECHO\r\n$1\r\nx\r\n"));
        });
        assert_eq!(kept, b"*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$1\r\nx\r\n");
    }

    #[test]
    fn lanes_get_their_replies_in_order_with_times_between_other_calls() {
        let conn = PipeConn::unopened();
        let shared = conn.shared.clone();
        let (mut a, mut b) = (conn.lane(), conn.lane());
        a.queue(&Request::from_args(&["ECHO", "a1"]));
        let call = conn.send(&Request::from_args(&["ECHO", "c"]));
        b.queue(&Request::from_args(&["ECHO", "b1"]));
        a.queue(&Request::from_args(&["ECHO", "a2"]));
        let mut closed = conn.lane();
        closed.queue(&Request::from_args(&["ECHO", "gone"]));
        drop(closed);
        assert!(a.try_next().is_none());
        assert_eq!(a.ready(), Ready { count: 0, read: None });
        assert!(a.poll_ready(&mut Context::from_waker(Waker::noop())).is_pending());
        let (sent, read) = (Instant::now(), Instant::now() + std::time::Duration::from_micros(7));
        {
            let mut st = shared.state.borrow_mut();
            st.written = st.out.len();
            st.mark_sent(sent);
            for reply in ["a1", "c", "b1", "a2", "gone"] {
                st.deliver(Ok(Value::SimpleString(reply.into())), read).unwrap();
            }
            assert!(st.queue.is_empty());
            assert!(st.lanes[2].replies.is_empty(), "a dropped lane keeps no reply");
        }
        let text = |l: Laned| match l.result {
            Ok(Value::SimpleString(s)) => (s, l.times),
            other => panic!("{other:?}"),
        };
        let times = Some(Times { sent, read });
        // Counted without being taken, and as often as asked.
        assert_eq!(a.ready(), Ready { count: 2, read: Some(read) });
        let polled = a.poll_ready(&mut Context::from_waker(Waker::noop()));
        assert_eq!(polled, Poll::Ready(Ready { count: 2, read: Some(read) }));
        assert_eq!(b.ready().count, 1);
        assert_eq!(text(a.try_next().unwrap()), ("a1".into(), times));
        assert_eq!(text(a.try_next().unwrap()), ("a2".into(), times));
        assert!(a.try_next().is_none());
        assert_eq!(text(b.try_next().unwrap()), ("b1".into(), times));
        let mut call = std::pin::pin!(call);
        let got = call.as_mut().poll(&mut Context::from_waker(Waker::noop()));
        assert!(matches!(got, Poll::Ready(Ok(Value::SimpleString(ref s))) if s == "c"));
        assert_eq!(take_times(), times);
    }

    #[test]
    fn a_lost_connection_fails_a_lanes_requests_as_unsent() {
        let conn = PipeConn::unopened();
        let mut lane = conn.lane();
        let shared = conn.shared;
        lane.queue(&Request::from_args(&["PING"]));
        shared.state.borrow_mut().fail_all(CallError::Connection("lost".into()));
        // A reply failed before any write began to send it has no read time to give.
        assert_eq!(lane.ready(), Ready { count: 1, read: None });
        let reply = lane.try_next().expect("failed at once");
        assert!(matches!(reply.result, Err(CallError::Connection(_))) && reply.times.is_none());
    }

    #[test]
    fn a_failed_connection_leaves_no_request_unsent() {
        let mut st = three_queued();
        st.fail_all(CallError::Connection("lost".into()));
        assert!(st.queue.is_empty());
        assert_eq!(st.unsent, 0);
        assert!(st.slots.iter().all(|s| s.times.is_none() && matches!(s.reply, Some(Err(_)))));
    }
}
