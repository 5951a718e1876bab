//! The one thing a verb needs from a connection: send a packed command, get its reply back.
//! Two transports implement it: the control connection, redis-rs over our stream
//! ([`Control`]: the control plane, and the load with `--transport redis-rs`), and our own
//! [`PipeConn`](super::pipe::PipeConn) (the load threads' default: no channel hop, timer or
//! allocation per request). Both connect through the run's one [`Connector`] (TCP or TLS).

use super::error::CallError;
use super::lane::{Laned, Ready, ReplyLane};
use super::pipe::Times;
use super::registry::ScriptRegistry;
use super::request::Request;
use crate::net::{ConnectOptions, Connector, Control};
use redis::aio::ConnectionLike;
use redis::Value;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;
use tokio::task::JoinHandle;

/// A connection that sends one command and returns its reply.
///
/// The redis-rs transport turns each [`Request`] back into a `Cmd` (an allocation per call):
/// it is the fallback transport, not the measured one.
///
/// Error replies come back as `Err` ([`CallError::from_error_reply`]); a lost connection or a
/// timeout as [`CallError::Connection`] / [`CallError::Timeout`] (unknown outcomes).
pub trait Wire: Clone + 'static {
    /// A caller's queue of requests on this connection, whose replies come back in order with
    /// their send and read times ([`ReplyLane`]): a producer's window of requests in flight.
    type Lane: ReplyLane;

    /// Opens a connection through `connector` on which every script of `registry` is loaded.
    ///
    /// Errors: a failed connect, TLS handshake or AUTH, or a failed `SCRIPT LOAD`.
    fn open(
        connector: &Connector,
        opts: ConnectOptions,
        registry: Arc<ScriptRegistry>,
    ) -> impl Future<Output = Result<Self, CallError>>;

    /// Sends `request` and waits for its reply.
    fn send(&mut self, request: &Request) -> impl Future<Output = Result<Value, CallError>>;

    /// Sends `request`, a state-changing call (a script call), and waits for its reply: on a
    /// connection with a durability mode ([`Durability::Wait`](crate::net::Durability::Wait))
    /// followed by `WAIT` in the same write and acknowledged only as it says. The default is
    /// [`send`](Self::send): the redis-rs transport has no durability mode (a run refuses
    /// `[target] wait` with it).
    fn send_write(&mut self, request: &Request) -> impl Future<Output = Result<Value, CallError>> {
        self.send(request)
    }

    /// A new lane on this connection. No NOSCRIPT reload and no redirect is followed on it:
    /// the caller redoes such a call on the slow path ([`Wire::send`] through the registry).
    fn lane(&self) -> Self::Lane;

    /// Sends `ASKING` and then `request`, a state-changing call as [`send_write`](Self::send_write)
    /// takes it, on this connection with nothing in between (a cluster ASK redirect: the flag
    /// holds for the next command only); returns `request`'s reply.
    fn send_asking(&mut self, request: &Request) -> impl Future<Output = Result<Value, CallError>>;
}

/// A lane on the redis-rs transport: a local task per request (the reference transport
/// already allocates per call), so each is sent whether or not the lane is polled, and the
/// lane takes their replies in order. Each task times its call itself (from just before
/// redis-rs takes it to its reply), so a reply waiting behind another is not timed when the
/// caller gets to it.
pub struct ControlLane {
    conn: Control,
    calls: VecDeque<JoinHandle<(Result<Value, CallError>, Times)>>,
    /// Replies of finished calls not taken yet, in order.
    done: VecDeque<Laned>,
}

impl ReplyLane for ControlLane {
    /// Panics outside a `tokio::task::LocalSet` (the call is a local task).
    fn queue_with(&mut self, frame: impl FnOnce(&mut Request)) {
        let mut request = Request::new();
        frame(&mut request);
        assert!(request.framed().1 > 0, "an empty request gets no reply");
        let mut conn = self.conn.clone();
        self.calls.push_back(tokio::task::spawn_local(async move {
            let sent = Instant::now();
            let result = conn.send(&request).await;
            (result, Times { sent, read: Instant::now() })
        }));
    }

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Ready> {
        // Finished calls move to `done`, in order: a join handle hands its output out once.
        while let Some(call) = self.calls.front_mut() {
            let Poll::Ready(joined) = Pin::new(call).poll(cx) else { break };
            self.calls.pop_front();
            self.done.push_back(match joined {
                Ok((result, times)) => Laned { result, times: Some(times) },
                Err(e) => Laned { result: Err(CallError::Connection(format!("call task: {e}"))), times: None },
            });
        }
        match self.done.is_empty() {
            true => Poll::Pending,
            false => Poll::Ready(Ready::of(&self.done)),
        }
    }

    fn try_next(&mut self) -> Option<Laned> {
        if self.done.is_empty() {
            let _ = self.ready();
        }
        self.done.pop_front()
    }
}

impl Wire for Control {
    type Lane = ControlLane;

    fn lane(&self) -> ControlLane {
        ControlLane { conn: self.clone(), calls: VecDeque::new(), done: VecDeque::new() }
    }
    async fn open(
        connector: &Connector,
        opts: ConnectOptions,
        registry: Arc<ScriptRegistry>,
    ) -> Result<Self, CallError> {
        let mut conn = Control::connect(connector, opts).await?;
        registry.load_all(&mut conn).await?;
        Ok(conn)
    }

    async fn send(&mut self, request: &Request) -> Result<Value, CallError> {
        // redis-rs hands error replies back as a value, not as an `Err`.
        match self.req_packed_command(&request.to_cmd()).await {
            Ok(Value::ServerError(err)) => Err(CallError::from_redis(&err.into())),
            Ok(value) => Ok(value),
            Err(err) => Err(CallError::from_redis(&err)),
        }
    }

    async fn send_asking(&mut self, request: &Request) -> Result<Value, CallError> {
        // One pipeline: redis-rs writes both commands back to back on its one socket.
        let mut pipe = redis::pipe();
        pipe.ignore_errors().cmd("ASKING").add_command(request.to_cmd());
        let replies: Vec<Value> = pipe.query_async(self).await.map_err(|e| CallError::from_redis(&e))?;
        match replies.into_iter().nth(1) {
            Some(Value::ServerError(err)) => Err(CallError::from_redis(&err.into())),
            Some(value) => Ok(value),
            None => Err(CallError::Reply("ASKING pipeline returned fewer than 2 replies".into())),
        }
    }
}
