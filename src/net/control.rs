//! The control connection: INFO, SCAN/UNLINK, queue depths, the checker's scan, the run lock
//! and cleanup. A redis-rs `MultiplexedConnection` over the run's [`Connector`] (so TLS and
//! AUTH are the load's own), re-opened with backoff after it is lost, as redis-rs'
//! `ConnectionManager` does (which cannot take a stream of ours). It is also the load's
//! reference transport, `--transport redis-rs`.

use super::connector::{Connector, Stream, QUOTED};
use super::tls::TlsInfo;
use super::{ConnectOptions, NetError};
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{AsyncConnectionConfig, Cmd, Pipeline, RedisConnectionInfo, RedisError, RedisFuture, Value};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Reconnect backoff: 10 ms doubling to 1 s.
const MIN_BACKOFF: Duration = Duration::from_millis(10);
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// A control connection; clones share it. `Send + Sync`: the coordinator, the lock renewer
/// and the checker hold clones.
#[derive(Clone)]
pub struct Control {
    inner: Arc<Inner>,
}

struct Inner {
    connector: Connector,
    opts: ConnectOptions,
    state: Mutex<State>,
}

struct State {
    conn: Option<MultiplexedConnection>,
    /// No new connect attempt before this instant (backoff after a failure).
    retry_at: Option<Instant>,
    backoff: Duration,
    tls: Option<TlsInfo>,
}

impl Control {
    /// Connects to the connector's target (the first connect must succeed).
    ///
    /// Errors: the connect, TLS or AUTH/SELECT failure, classified; a refused connect names
    /// the target (its password masked).
    pub async fn connect(connector: &Connector, opts: ConnectOptions) -> Result<Control, NetError> {
        // A failed first connect names the target (password masked): the bare reply does not
        // say which server or user was meant.
        let target = connector.endpoint();
        let (conn, tls) = open(connector, opts).await.map_err(|e| match e {
            NetError::Connection(msg) => {
                // A plain connection to a TLS port is cut at the first command.
                let hint = if target.tls.is_none() && (msg.contains("reset") || msg.contains("closed")) {
                    super::connector::TLS_HINT
                } else {
                    ""
                };
                NetError::Connection(format!("{}: {msg}{hint}", target.display()))
            }
            NetError::Server(msg) => NetError::Server(format!("{}: {msg}", target.display())),
            other => other,
        })?;
        let state = State { conn: Some(conn), retry_at: None, backoff: MIN_BACKOFF, tls };
        Ok(Control { inner: Arc::new(Inner { connector: connector.clone(), opts, state: Mutex::new(state) }) })
    }

    /// The connector the connection was opened with.
    pub fn connector(&self) -> &Connector {
        &self.inner.connector
    }

    /// The options the connection was opened with (the checker opens its row stream with them).
    pub fn opts(&self) -> ConnectOptions {
        self.inner.opts
    }

    /// What the first TLS handshake negotiated (`None` for plain TCP).
    pub fn tls_info(&self) -> Option<TlsInfo> {
        self.inner.state.lock().expect("control state").tls.clone()
    }

    /// The live connection, re-opened (after the backoff) when it was lost.
    async fn current(&self) -> Result<MultiplexedConnection, RedisError> {
        let wait = {
            let st = self.inner.state.lock().expect("control state");
            if let Some(conn) = &st.conn {
                return Ok(conn.clone());
            }
            st.retry_at.map(|at| at.saturating_duration_since(Instant::now()))
        };
        if let Some(wait) = wait {
            tokio::time::sleep(wait).await;
        }
        let opened = open(&self.inner.connector, self.inner.opts).await;
        let mut st = self.inner.state.lock().expect("control state");
        match opened {
            Ok((conn, _)) => {
                super::connector::note_reconnect();
                st.backoff = MIN_BACKOFF;
                st.retry_at = None;
                Ok(st.conn.insert(conn).clone())
            }
            Err(err) => {
                st.retry_at = Some(Instant::now() + st.backoff);
                st.backoff = (st.backoff * 2).min(MAX_BACKOFF);
                Err(RedisError::from(std::io::Error::new(std::io::ErrorKind::ConnectionRefused, err.to_string())))
            }
        }
    }

    /// Forgets a connection that failed, so the next call opens a new one.
    fn lost(&self, err: &RedisError) {
        if err.is_io_error() || err.is_connection_dropped() || err.is_connection_refusal() || err.is_timeout() {
            self.inner.state.lock().expect("control state").conn = None;
        }
    }
}

/// Opens one connection: the connector's stream, then AUTH and SELECT by redis-rs.
async fn open(
    connector: &Connector,
    opts: ConnectOptions,
) -> Result<(MultiplexedConnection, Option<TlsInfo>), NetError> {
    let stream = connector.connect(opts.connect_timeout).await?;
    let tls = stream.tls_info();
    let t = connector.endpoint();
    let mut info = RedisConnectionInfo::default().set_db(t.db);
    if let Some(user) = &t.user {
        info = info.set_username(user);
    }
    if let Some(password) = &t.password {
        info = info.set_password(password.expose());
    }
    let config = AsyncConnectionConfig::new().set_response_timeout(Some(opts.response_timeout));
    let (stream, first) = FirstBytes::new(stream);
    let setup = MultiplexedConnection::new_with_config(&info, stream, config);
    let (conn, driver) = match tokio::time::timeout(opts.response_timeout, setup).await {
        Ok(Ok(opened)) => opened,
        Ok(Err(e)) => return Err(setup_error(connector, &first.lock().expect("first bytes"), &e)),
        Err(_) => return Err(NetError::Connection(format!("{}:{}: AUTH/SELECT timed out", t.host, t.port))),
    };
    tokio::spawn(driver);
    let mut conn = conn;
    if let Some(name) = opts.client_name {
        redis::cmd("CLIENT")
            .arg("SETNAME")
            .arg(name)
            .exec_async(&mut conn)
            .await
            .map_err(|e| NetError::from_redis(&e))?;
    }
    Ok((conn, tls))
}

/// Why redis-rs' setup (CLIENT SETINFO, AUTH, SELECT: it always reads a reply) failed, given
/// the first bytes the endpoint sent: not a Redis/Valkey server when they are not RESP, or
/// when it closed the connection before sending any; else redis-rs' error, classified.
fn setup_error(connector: &Connector, first: &[u8], err: &RedisError) -> NetError {
    if let Some(not_redis) = connector.not_resp(first) {
        return not_redis;
    }
    let closed = err.is_io_error() || err.is_connection_dropped();
    if first.is_empty() && closed && !err.is_timeout() {
        return connector.closed_without_reply();
    }
    NetError::from_redis(err)
}

/// The connector's stream, keeping a copy of the first [`QUOTED`] + 1 bytes read from it, so a
/// failed setup can say what the endpoint answered (an HTTP server's `HTTP/1.1 400 ...`)
/// instead of redis-rs' parser error. redis-rs owns the stream; the copy is shared.
struct FirstBytes {
    stream: Stream,
    first: Arc<Mutex<Vec<u8>>>,
    /// The copy is complete: later reads take no lock.
    full: bool,
}

impl FirstBytes {
    fn new(stream: Stream) -> (FirstBytes, Arc<Mutex<Vec<u8>>>) {
        let first = Arc::new(Mutex::new(Vec::new()));
        (FirstBytes { stream, first: first.clone(), full: false }, first)
    }
}

impl AsyncRead for FirstBytes {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.stream).poll_read(cx, buf);
        if !this.full && buf.filled().len() > before {
            let mut first = this.first.lock().expect("first bytes");
            let room = (QUOTED + 1).saturating_sub(first.len());
            let new = &buf.filled()[before..];
            first.extend_from_slice(&new[..new.len().min(room)]);
            this.full = first.len() > QUOTED;
        }
        polled
    }
}

impl AsyncWrite for FirstBytes {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

impl ConnectionLike for Control {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let mut conn = self.current().await?;
            let reply = conn.req_packed_command(cmd).await;
            if let Err(err) = &reply {
                self.lost(err);
            }
            reply
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let mut conn = self.current().await?;
            let reply = conn.req_packed_commands(cmd, offset, count).await;
            if let Err(err) = &reply {
                self.lost(err);
            }
            reply
        })
    }

    fn get_db(&self) -> i64 {
        self.inner.connector.endpoint().db
    }
}
