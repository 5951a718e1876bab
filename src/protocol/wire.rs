//! The one thing a verb needs from a connection: send a packed command, get its reply back.
//! Two transports implement it: the control connection, redis-rs over our stream
//! ([`Control`]: the control plane, and the load with `--transport redis-rs`), and our own
//! [`PipeConn`](super::pipe::PipeConn) (the load threads' default: no channel hop, timer or
//! allocation per request). Both connect through the run's one [`Connector`] (TCP or TLS).

use super::client::ConnectOptions;
use super::error::CallError;
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

    /// Sends `ASKING` and then `request` on this connection with nothing in between (a cluster
    /// ASK redirect: the flag holds for the next command only); returns `request`'s reply.
    fn send_asking(&mut self, request: &Request) -> impl Future<Output = Result<Value, CallError>>;
}

impl Wire for Control {
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
