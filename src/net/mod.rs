//! The network seam, a leaf: where connections go and how they are opened. Every connection of
//! a run, load and control, comes from one [`Connector`] built from one resolved [`Endpoint`]
//! (host, port, auth, db, TLS). Nothing here knows a queue, a script or a protocol: those sit
//! above, in `resp` (the RESP transports), `echomq` and `bullmq` (the queue protocols) and
//! `plane` (the queue-aware control plane: routing by slot, the run lock, the run's own keys).
//!
//! - [`endpoint`]: the URL and flags resolved once into an [`Endpoint`]; passwords as [`Secret`]s.
//! - [`tls`]: `--tls`, `--cacert`, `--cert`/`--key`, `--sni`, `--tls-skip-verify` → rustls.
//! - [`connector`]: TCP (+ TLS) connections as one [`Stream`] type.
//! - [`options`]: timeouts, the load's transport, the client name, the durability mode.
//! - [`control`]: the control connection (redis-rs over our stream, reconnecting).
//! - [`topology`]: standalone or cluster, nodes and slots.
//! - [`slot`]: cluster key slots (CRC16 of the hash tag).
//! - [`info`]: INFO snapshots.
//!
//! Any host is accepted: safety on a shared deployment rests on touching only the run's own
//! keys, refusing to start on existing ones, never flushing, and the run lock (`plane`).

pub mod connector;
pub mod control;
pub mod endpoint;
pub mod info;
pub mod options;
pub mod slot;
pub mod tls;
pub mod topology;

pub use connector::{Connector, Stream};
pub use control::Control;
pub use endpoint::{redact_url, AuthRefusal, Endpoint, Secret, TargetFlags, PASSWORD_ENV};
pub use info::{info, parse_info, CommandStat, InfoSnapshot};
pub use options::{ConnectOptions, Durability, Transport};
pub use tls::{TlsInfo, TlsSettings};
pub use topology::Topology;

/// Why a connection, a setting or a control command of the network layer failed. The
/// transport turns it into its own `CallError` (timeouts and lost connections stay
/// unknown outcomes there).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetError {
    /// The URL does not parse as a `redis://` or `rediss://` URL.
    #[error("target url {url:?} is not usable: {reason}")]
    BadUrl {
        /// The URL as given, password masked.
        url: String,
        /// What is wrong.
        reason: String,
    },
    /// The TLS settings cannot be used (a missing or unreadable file, a key without its
    /// certificate, an invalid server name).
    #[error("TLS: {0}")]
    Tls(String),
    /// A target kind the harness cannot drive yet, with what is missing.
    #[error("{0}")]
    Unsupported(String),
    /// The connection failed, or was lost before a reply arrived.
    #[error("connection failed: {0}")]
    Connection(String),
    /// No reply within the response timeout.
    #[error("timed out waiting for the reply")]
    Timeout,
    /// The endpoint's first answer to a new connection was not RESP (an HTTP server, say), or
    /// it closed the connection without a byte: not a Redis/Valkey server.
    #[error("not a Redis/Valkey server at {addr}: {answer}")]
    NotRedis {
        /// `host:port`.
        addr: String,
        /// What it answered: `it replied "HTTP/1.1 400 ..."` (the first bytes, escaped) or
        /// `it closed the connection without a reply`.
        answer: String,
    },
    /// An error reply, `<CODE> <detail>` as the server wrote it (e.g. `NOPERM ...`).
    #[error("server error: {0}")]
    Server(String),
    /// A reply whose shape the command does not allow.
    #[error("unexpected reply: {0}")]
    Reply(String),
}

impl NetError {
    /// Classifies a redis-rs error: timeouts and lost connections apart, an error reply with
    /// its code first, a reply of the wrong shape.
    pub fn from_redis(err: &redis::RedisError) -> NetError {
        if err.is_timeout() {
            return NetError::Timeout;
        }
        if err.is_io_error() || err.is_connection_dropped() || err.is_connection_refusal() {
            return NetError::Connection(err.to_string());
        }
        if let Some(code) = err.code() {
            return NetError::Server(format!("{code} {}", err.detail().unwrap_or_default()));
        }
        match err.kind() {
            redis::ErrorKind::Parse | redis::ErrorKind::UnexpectedReturnType => NetError::Reply(err.to_string()),
            _ => NetError::Server(err.to_string()),
        }
    }
}
