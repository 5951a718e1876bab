//! Reply lanes: one caller's queued requests on one connection, whose replies come back to it
//! in the order it queued them, each with its send and read times.
//!
//! Why not a future per request: a producer holds a window of up to `pipeline` enqueues in
//! flight. With a future each, every reply would go through a reply slot, a waker, a poll of
//! the future, a thread-local hand-over of its times and a typed wrapper. A lane is one queue
//! the connection's driver appends to and the caller pops from: one wake-up per read, the
//! times beside the reply.
//! Replies on one connection come back in send order, so a lane never reorders.

use super::error::CallError;
use super::pipe::Times;
use super::request::Request;
use redis::Value;
use std::collections::VecDeque;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

/// One reply taken off a lane.
#[derive(Debug)]
pub struct Laned {
    /// The reply, an error reply as `Err` ([`CallError::from_error_reply`]), or the transport's
    /// error: [`CallError::Connection`] / [`CallError::Timeout`] (unknown outcomes).
    pub result: Result<Value, CallError>,
    /// When the request went out and its reply came in; `None` when it failed before any write
    /// began to send it (the connection was lost first).
    pub times: Option<Times>,
}

/// A caller's queue of requests on one connection ([`Wire::lane`](super::Wire::lane)).
///
/// No NOSCRIPT reload and no redirect is followed on a lane: such a reply comes back as its
/// error, and the caller redoes the call on the routed path.
pub trait ReplyLane: 'static {
    /// Queues the request `frame` builds (from empty) behind every request queued on the
    /// connection before it, framed where the transport sends from (the pipe: straight into
    /// its output buffer; `frame` must not use the connection).
    ///
    /// Panics on a request without arguments (the server answers none: every later reply
    /// would go to the wrong request).
    fn queue_with(&mut self, frame: impl FnOnce(&mut Request));

    /// Queues the one request `pack` appends packed (`*<n>\r\n` and its `n` bulk strings,
    /// as [`Request::write_packed`] writes them), as [`queue_with`](Self::queue_with) does:
    /// for a caller whose framing is pre-built down to the header (the producers' enqueue,
    /// which then keeps no argument count per request). The default packs into a buffer of its
    /// own and queues the request parsed back.
    /// `pack` must not use the connection (the pipe's state is borrowed while it runs).
    ///
    /// Panics when `pack` appends anything but one whole request (in the pipe: nothing, or,
    /// in debug builds, not one request).
    fn queue_packed(&mut self, pack: impl FnOnce(&mut Vec<u8>)) {
        let mut packed = Vec::new();
        pack(&mut packed);
        let request = Request::from_packed(&packed).expect("a lane's packed request is one whole request");
        self.queue(&request);
    }

    /// Queues `request` as [`queue_with`](Self::queue_with) does.
    fn queue(&mut self, request: &Request) {
        let (framed, count) = request.framed();
        self.queue_with(|out| out.push_framed(framed, count));
    }

    /// Sends the requests this lane queued, from the caller's task, as far as the connection
    /// takes them now; its writer sends the rest. A caller queues a batch of requests, then
    /// flushes once: the pipe's lane queues without waking its connection's driver, so a
    /// batch costs one `write` in the caller's own poll instead of a wake-up and a poll of the
    /// driver. Requests queued on a pipe lane go out at its next `flush` at the latest. The
    /// default does nothing (a transport that sends each request as it is queued).
    fn flush(&mut self) {}

    /// How many replies are in and not taken yet (at least one), and the read time of the
    /// newest of them; `Pending` (the waker registered) while none is. Polled with nothing
    /// queued, it stays pending.
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Ready>;

    /// [`poll_ready`](Self::poll_ready) asking for no wake-up: `count` 0 when no reply is in.
    /// The default polls with a no-op waker, which may replace the waker an earlier
    /// `poll_ready` registered: a caller polls with its own waker again before it waits (the
    /// pipe's lane overrides this and leaves the waker alone).
    fn ready(&mut self) -> Ready {
        match self.poll_ready(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(ready) => ready,
            Poll::Pending => Ready { count: 0, read: None },
        }
    }

    /// Takes the reply of the oldest request of this lane if it is in ([`ready`](Self::ready)
    /// counts them), asking for no wake-up.
    fn try_next(&mut self) -> Option<Laned>;
}

/// The replies a lane has in ([`ReplyLane::poll_ready`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ready {
    /// Replies in and not taken: the next `count` [`ReplyLane::try_next`] calls return one each.
    pub count: usize,
    /// When the newest of them was read; `None` when it has no times (it failed before any
    /// write began to send it) or none is in.
    pub read: Option<Instant>,
}

impl Ready {
    /// The count and newest read time of `replies`, a lane's replies in, oldest first.
    pub fn of(replies: &VecDeque<Laned>) -> Ready {
        Ready { count: replies.len(), read: replies.back().and_then(|r| r.times).map(|t| t.read) }
    }
}

/// Waits until `lane` has a reply in ([`ReplyLane::poll_ready`]), without taking it.
pub fn ready<L: ReplyLane>(lane: &mut L) -> impl std::future::Future<Output = Ready> + '_ {
    std::future::poll_fn(move |cx| lane.poll_ready(cx))
}

/// Awaits the next reply of `lane` and takes it ([`ReplyLane::poll_ready`], [`ReplyLane::try_next`]).
pub async fn next<L: ReplyLane>(lane: &mut L) -> Laned {
    ready(lane).await;
    lane.try_next().expect("a lane that counted a reply in hands it out")
}
