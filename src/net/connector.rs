//! One connector for every connection of a run, load and control alike: TCP with
//! TCP_NODELAY, then TLS when the target asks for it. Its [`Stream`] is what both transports
//! read and write (rpc-perf's `Connector`/`Stream` shape: one enum, no boxing per call).

use super::endpoint::Endpoint;
use super::tls::TlsInfo;
use super::NetError;

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::TlsConnector;

thread_local! {
    /// Connections re-opened after a loss on this thread since the last [`take_reconnects`]:
    /// each load thread's connections are its own, so a plain cell, no atomic.
    static RECONNECTS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Counts one connection re-opened after a loss (both transports call it).
pub fn note_reconnect() {
    RECONNECTS.with(|n| n.set(n.get() + 1));
}

/// Reconnects on this thread since the last call (a load thread's flusher moves them into
/// its job counters, once a quarter second).
pub fn take_reconnects() -> u64 {
    RECONNECTS.with(std::cell::Cell::take)
}

/// The bytes a RESP2 or RESP3 reply may start with (RESP2 `+ - : $ *`, RESP3 `_ , # ! = ( % ~
/// > |`): a first answer that starts otherwise is not from a Redis/Valkey server.
const RESP_FIRST: &[u8] = b"+-:$*_,#!=(%~>|";

/// Appended to a non-RESP answer that a TLS port may have given to a plain connection.
pub(crate) const TLS_HINT: &str = " (if the port speaks TLS, use rediss:// or --tls)";

/// Bytes of a non-RESP answer quoted in the error.
pub(crate) const QUOTED: usize = 64;

/// Opens connections to one [`Endpoint`]. Cheap to clone (shared config); `Send + Sync`, so
/// every load thread holds a clone.
#[derive(Clone)]
pub struct Connector {
    endpoint: Arc<Endpoint>,
    tls: Option<(TlsConnector, ServerName<'static>)>,
    /// Where connections go after a failover the harness made ([`Connector::follow`]):
    /// shared by every clone, read once per connect (never per request).
    followed: Arc<std::sync::Mutex<Option<(String, u16)>>>,
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connector").field("endpoint", &self.endpoint.display()).finish()
    }
}

impl Connector {
    /// A connector for `endpoint`; builds its TLS config once.
    ///
    /// Errors: [`NetError::Tls`] from the TLS settings (unreadable CA, key without cert, ...).
    pub fn new(endpoint: Endpoint) -> Result<Connector, NetError> {
        let tls = match &endpoint.tls {
            Some(settings) => {
                Some((TlsConnector::from(settings.client_config()?), settings.server_name(&endpoint.host)?))
            }
            None => None,
        };
        Ok(Connector { endpoint: Arc::new(endpoint), tls, followed: Arc::default() })
    }

    /// Sends every connection opened from now on, by this connector and all its clones, to
    /// `host:port` (the new primary after a failover; the same TLS and auth settings). Open
    /// connections stay where they are until they are lost.
    pub fn follow(&self, host: &str, port: u16) {
        *self.followed.lock().expect("connector endpoint") = Some((host.to_string(), port));
    }

    /// Where connections go now: the target's host and port, or the followed ones.
    pub fn host_port(&self) -> (String, u16) {
        match &*self.followed.lock().expect("connector endpoint") {
            Some((host, port)) => (host.clone(), *port),
            None => (self.endpoint.host.clone(), self.endpoint.port),
        }
    }

    /// The endpoint every connection goes to.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The same settings for another endpoint (a cluster node).
    ///
    /// Errors: as [`Connector::new`].
    pub fn at(&self, host: &str, port: u16) -> Result<Connector, NetError> {
        Connector::new(self.endpoint.at(host, port))
    }

    /// The error for a new connection whose first answer, `first` (its first bytes, at least
    /// one), does not start like a RESP reply: the endpoint is not a Redis/Valkey server (e.g.
    /// an HTTP port). `None` when it does start like one: then the parser's own error says more.
    /// Both transports call it on a failed handshake, so both say the same.
    pub fn not_resp(&self, first: &[u8]) -> Option<NetError> {
        let &byte = first.first()?;
        if RESP_FIRST.contains(&byte) {
            return None;
        }
        let more = if first.len() > QUOTED { "..." } else { "" };
        let quoted = first[..first.len().min(QUOTED)].escape_ascii();
        // 0x15, 0x16: a TLS alert or handshake record, a TLS port answering plain TCP.
        let hint = if self.endpoint.tls.is_none() && matches!(byte, 0x15 | 0x16) { TLS_HINT } else { "" };
        Some(self.not_redis(format!("it replied \"{quoted}\"{more}{hint}")))
    }

    /// The error for a new connection closed (or reset) by the endpoint before it sent a byte
    /// of a reply to the handshake: what a non-Redis service, or a TLS port spoken to in plain
    /// TCP, does.
    pub fn closed_without_reply(&self) -> NetError {
        let hint = if self.endpoint.tls.is_none() { TLS_HINT } else { "" };
        self.not_redis(format!("it closed the connection without a reply{hint}"))
    }

    fn not_redis(&self, answer: String) -> NetError {
        NetError::NotRedis { addr: format!("{}:{}", self.endpoint.host, self.endpoint.port), answer }
    }

    /// Connects within `timeout` (TCP, then the TLS handshake).
    ///
    /// Errors: [`NetError::Connection`] naming the endpoint and the step that failed (a
    /// certificate the CA does not sign reads "TLS handshake: invalid peer certificate: ...").
    pub async fn connect(&self, timeout: Duration) -> Result<Stream, NetError> {
        let (host, port) = self.host_port();
        let lost = |what: &str, e: &dyn std::fmt::Display| NetError::Connection(format!("{host}:{port}: {what}: {e}"));
        let tcp = match tokio::time::timeout(timeout, TcpStream::connect((host.as_str(), port))).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) => return Err(lost("connect", &e)),
            Err(_) => return Err(lost("connect", &"timed out")),
        };
        // Requests are written in batches already; Nagle would hold back a lone one.
        tcp.set_nodelay(true).map_err(|e| lost("TCP_NODELAY", &e))?;
        let Some((connector, name)) = &self.tls else { return Ok(Stream::Tcp(tcp)) };
        match tokio::time::timeout(timeout, connector.connect(name.clone(), tcp)).await {
            Ok(Ok(tls)) => Ok(Stream::Tls(Box::new(tls))),
            Ok(Err(e)) => Err(lost("TLS handshake", &e)),
            Err(_) => Err(lost("TLS handshake", &"timed out")),
        }
    }
}

/// A connection to the target: plain TCP or TLS over TCP.
pub enum Stream {
    /// Plain TCP.
    Tcp(TcpStream),
    /// TLS (rustls) over TCP.
    Tls(Box<TlsStream<TcpStream>>),
}

impl Stream {
    /// The negotiated TLS version and cipher suite; `None` for plain TCP.
    pub fn tls_info(&self) -> Option<TlsInfo> {
        let Stream::Tls(tls) = self else { return None };
        let session = tls.get_ref().1;
        Some(TlsInfo {
            version: session.protocol_version().map(|v| format!("{v:?}")).unwrap_or_default(),
            cipher_suite: session.negotiated_cipher_suite().map(|s| format!("{:?}", s.suite())).unwrap_or_default(),
        })
    }
}

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
