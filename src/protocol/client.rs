//! The EchoMQ v1 client: one pipelined connection plus the script registry. The verbs live one
//! per file in `verbs/`, each a typed function over [`EchoClient::call`].

use super::error::CallError;
use super::registry::ScriptRegistry;
use super::request::Request;
use super::script::Script;
use super::wire::{Transport, Wire};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::Value;
use std::sync::Arc;
use std::time::Duration;

/// Connection settings. redis-rs times async calls out after 500 ms and leaves TCP_NODELAY off
/// by default; both are set here on purpose.
#[derive(Debug, Clone, Copy)]
pub struct ConnectOptions {
    /// Time to establish the TCP connection, ms resolution (redis-rs also bounds AUTH/SELECT
    /// by it; the pipe transport bounds its handshake, AUTH/SELECT/SCRIPT LOAD, by
    /// `response_timeout`).
    pub connect_timeout: Duration,
    /// Time to wait for one reply; past it the call is an unknown outcome ([`CallError::Timeout`]).
    pub response_timeout: Duration,
    /// The load threads' transport (the control plane always uses redis-rs).
    pub transport: Transport,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            connect_timeout: Duration::from_secs(2),
            response_timeout: Duration::from_secs(5),
            transport: Transport::Pipe,
        }
    }
}

/// Opens a pipelining connection to `url` with TCP_NODELAY on, that reconnects by itself.
///
/// Requests from clones of the returned connection share one socket and may be in flight
/// together; replies come back in order. A lost connection fails the requests in flight (an
/// unknown outcome) and is re-established with exponential backoff (10 ms doubling to 1 s) by
/// redis-rs' `ConnectionManager`, so a run survives a server restart.
/// Errors: a bad URL or a failed first connect, classified.
pub async fn connect(url: &str, opts: ConnectOptions) -> Result<ConnectionManager, CallError> {
    let client = redis::Client::open(url).map_err(|e| CallError::Connection(format!("{url}: {e}")))?;
    let info =
        client.get_connection_info().clone().set_tcp_settings(redis::io::tcp::TcpSettings::default().set_nodelay(true));
    let client = redis::Client::open(info).map_err(|e| CallError::Connection(e.to_string()))?;
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(opts.connect_timeout))
        .set_response_timeout(Some(opts.response_timeout))
        .set_min_delay(Duration::from_millis(10))
        .set_max_delay(Duration::from_secs(1))
        .set_exponent_base(2.0)
        .set_number_of_retries(3);
    // A refused or failed first connect names the URL (its password masked): the bare OS
    // error does not say which server was meant.
    ConnectionManager::new_with_config(client, config).await.map_err(|e| match CallError::from_redis(&e) {
        CallError::Connection(msg) => CallError::Connection(format!("{}: {msg}", crate::scenario::redact_url(url))),
        other => other,
    })
}

/// A connection and the scripts it calls, over either transport ([`Wire`]): redis-rs'
/// `ConnectionManager` (the default type) or the load threads' [`PipeConn`](super::pipe::PipeConn).
///
/// Cheap to clone: clones share the socket and the registry, so each load task holds its own
/// handle and keeps its own requests in flight. Each clone has its own scratch command, which
/// every verb rebuilds in place ([`Request`]): no allocation per request once it has grown.
pub struct EchoClient<W: Wire = ConnectionManager> {
    conn: W,
    registry: Arc<ScriptRegistry>,
    scratch: Request,
}

impl<W: Wire> Clone for EchoClient<W> {
    fn clone(&self) -> Self {
        EchoClient { conn: self.conn.clone(), registry: self.registry.clone(), scratch: Request::new() }
    }
}

impl EchoClient {
    /// Connects to `url` with redis-rs and `SCRIPT LOAD`s every script of `registry`.
    ///
    /// Errors: the connect failure or the first failed load.
    pub async fn connect(
        url: &str,
        opts: ConnectOptions,
        registry: Arc<ScriptRegistry>,
    ) -> Result<EchoClient, CallError> {
        EchoClient::open(url, opts, registry).await
    }

    /// The underlying connection, for plain commands (INFO, SCAN, ...).
    pub fn connection(&mut self) -> &mut ConnectionManager {
        &mut self.conn
    }
}

impl<W: Wire> EchoClient<W> {
    /// Connects to `url` over transport `W` and `SCRIPT LOAD`s every script of `registry`.
    ///
    /// Errors: the connect failure or the first failed load.
    pub async fn open(
        url: &str,
        opts: ConnectOptions,
        registry: Arc<ScriptRegistry>,
    ) -> Result<EchoClient<W>, CallError> {
        let conn = W::open(url, opts, registry.clone()).await?;
        Ok(EchoClient::from_connection(conn, registry))
    }

    /// Wraps an open connection without loading anything (calls still survive NOSCRIPT).
    pub fn from_connection(conn: W, registry: Arc<ScriptRegistry>) -> EchoClient<W> {
        EchoClient { conn, registry, scratch: Request::new() }
    }

    /// The registry the client calls.
    pub fn registry(&self) -> &ScriptRegistry {
        &self.registry
    }

    /// Starts `EVALSHA <sha of script> <numkeys>` in the client's scratch command; the verb
    /// appends keys and arguments, then [`call`](Self::call)s.
    pub(crate) fn evalsha(&mut self, script: Script, numkeys: usize) -> &mut Request {
        self.registry.evalsha_into(&mut self.scratch, script, numkeys);
        &mut self.scratch
    }

    /// Sends the scratch command built by [`evalsha`](Self::evalsha), reloading once on NOSCRIPT.
    pub(crate) async fn call(&mut self, script: Script) -> Result<Value, CallError> {
        self.registry.run(&mut self.conn, script, &self.scratch).await
    }
}

/// Reads an integer reply, or says which verb got which shape instead.
pub(crate) fn int_reply(script: Script, value: &Value) -> Result<i64, CallError> {
    match value {
        Value::Int(n) => Ok(*n),
        other => Err(CallError::Reply(format!("{} replied {other:?}, expected an integer", script.name()))),
    }
}
