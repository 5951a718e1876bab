//! The one thing a verb needs from a connection: send a packed command, get its reply back.
//! Two transports implement it: the control connection, redis-rs over our stream
//! ([`Control`]: the control plane, and the load with `--transport redis-rs`), and our own
//! [`PipeConn`](super::pipe::PipeConn) (the load threads' default: no channel hop, timer or
//! allocation per request). Both connect through the run's one [`Connector`] (TCP or TLS).

use super::client::ConnectOptions;
use super::error::CallError;
use super::pipe::Times;
use super::registry::ScriptRegistry;
use super::request::Request;
use crate::target::{Connector, Control};
use redis::aio::ConnectionLike;
use redis::Value;
use std::future::Future;
use std::sync::Arc;

/// Which transport the load threads use (`--transport`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Transport {
    /// Our own connection loop (`PipeConn`), TCP or TLS: the least client CPU per request.
    #[default]
    Pipe,
    /// redis-rs' multiplexed connection: the reference path, about twice the client CPU per request.
    RedisRs,
}

/// A connection that sends one command and returns its reply.
///
/// The redis-rs transport turns each [`Request`] back into a `Cmd` (an allocation per call):
/// it is the fallback transport, not the measured one.
///
/// Error replies come back as `Err` ([`CallError::from_error_reply`]); a lost connection or a
/// timeout as [`CallError::Connection`] / [`CallError::Timeout`] (unknown outcomes).
pub trait Wire: Clone + 'static {
    /// The reply of a request queued by [`Wire::queue`]: it owns what it needs, so a caller
    /// can hold many at once (a producer's window of requests in flight).
    type Pending: Future<Output = Result<Value, CallError>> + Unpin + 'static;
    /// True when a queued call ([`Wire::queue`]) hands its send and read times over
    /// ([`take_times`](super::pipe::take_times)): the caller then reads no clock of its own.
    const TIMED: bool;

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

    /// Queues `request` now, behind every request queued before it, and returns its reply.
    /// No NOSCRIPT reload and no redirect is followed: the caller redoes such a call on the
    /// slow path ([`Wire::send`] through the registry).
    fn queue(&mut self, request: &Request) -> Self::Pending;

    /// [`Wire::queue`] of the request `frame` builds (from empty) where the transport sends
    /// from: the pipe frames it straight into its output buffer, with no copy of it (`frame`
    /// must not use this connection). The default builds a [`Request`] and queues it.
    fn queue_with(&mut self, frame: impl FnOnce(&mut Request)) -> Self::Pending {
        let mut request = Request::new();
        frame(&mut request);
        self.queue(&request)
    }

    /// Sends `ASKING` and then `request` on this connection with nothing in between (a cluster
    /// ASK redirect: the flag holds for the next command only); returns `request`'s reply.
    fn send_asking(&mut self, request: &Request) -> impl Future<Output = Result<Value, CallError>>;
}

/// A redis-rs call queued by [`Wire::queue`]: a local task per request (the reference
/// transport already allocates per call), so it is sent whether or not it is polled. The task
/// times the call itself (from just before redis-rs takes it to its reply) and hands the times
/// over as the pipe does ([`take_times`](super::pipe::take_times)), so a reply waiting behind
/// another is not timed when the producer gets to it.
pub struct ControlCall(tokio::task::JoinHandle<(Result<Value, CallError>, Times)>);

impl Future for ControlCall {
    type Output = Result<Value, CallError>;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0).poll(cx).map(|joined| match joined {
            Ok((result, times)) => {
                super::pipe::hand_over_times(Some(times));
                result
            }
            Err(e) => {
                super::pipe::hand_over_times(None);
                Err(CallError::Connection(format!("call task: {e}")))
            }
        })
    }
}

impl Wire for Control {
    type Pending = ControlCall;
    const TIMED: bool = true;

    /// Panics outside a `tokio::task::LocalSet` (the call is a local task).
    fn queue(&mut self, request: &Request) -> ControlCall {
        let mut conn = self.clone();
        let request = request.clone();
        ControlCall(tokio::task::spawn_local(async move {
            let sent = std::time::Instant::now();
            let result = conn.send(&request).await;
            (result, Times { sent, read: std::time::Instant::now() })
        }))
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
