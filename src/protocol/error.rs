//! The typed outcome of a failed script call: the protocol's five `EMQ*` codes, other server
//! errors, malformed replies, and the two *unknown* outcomes (timeout, lost connection).

use super::script::ErrorCode;
use std::path::PathBuf;

/// Why a script call did not return a protocol success reply.
///
/// `Timeout` and `Connection` are kept apart from failures: the script may or may not have run
/// (Jepsen's `:info`), so the harness records them as unknown, never as a refusal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// An `EMQ*` error reply (PROTOCOL.md "Errors"); `code` is one of the five protocol codes.
    #[error("{} {message}", code.name())]
    Emq {
        /// `Kind`, `Arg`, `NoJob`, `State` or `Fence`.
        code: ErrorCode,
        /// The text after the code, as the script wrote it.
        message: String,
    },
    /// Any other server error reply (Lua runtime error, OOM, NOSCRIPT after the one retry, ...).
    #[error("server error: {0}")]
    Server(String),
    /// A success reply whose shape the protocol does not allow for this script.
    #[error("unexpected reply: {0}")]
    Reply(String),
    /// No reply within the response timeout: the outcome is unknown.
    #[error("timed out waiting for the reply")]
    Timeout,
    /// The connection failed before a reply arrived: the outcome is unknown.
    #[error("connection failed: {0}")]
    Connection(String),
}

impl CallError {
    /// The code under which the error is counted.
    pub fn code(&self) -> ErrorCode {
        match self {
            CallError::Emq { code, .. } => *code,
            CallError::Server(_) => ErrorCode::Server,
            CallError::Reply(_) => ErrorCode::Reply,
            CallError::Timeout => ErrorCode::Timeout,
            CallError::Connection(_) => ErrorCode::Connection,
        }
    }

    /// Classifies a redis-rs error. NOSCRIPT is a `Server` error here; the registry reloads
    /// and retries before it ever reaches a caller.
    pub fn from_redis(err: &redis::RedisError) -> CallError {
        if err.is_timeout() {
            return CallError::Timeout;
        }
        if err.is_io_error() || err.is_connection_dropped() || err.is_connection_refusal() {
            return CallError::Connection(err.to_string());
        }
        if let Some(code) = err.code() {
            let emq = match code {
                "EMQKIND" => Some(ErrorCode::Kind),
                "EMQARG" => Some(ErrorCode::Arg),
                "EMQNOJOB" => Some(ErrorCode::NoJob),
                "EMQSTATE" => Some(ErrorCode::State),
                "EMQFENCE" => Some(ErrorCode::Fence),
                _ => None,
            };
            if let Some(code) = emq {
                return CallError::Emq { code, message: err.detail().unwrap_or_default().to_string() };
            }
            return CallError::Server(err.to_string());
        }
        match err.kind() {
            redis::ErrorKind::Parse | redis::ErrorKind::UnexpectedReturnType => CallError::Reply(err.to_string()),
            _ => CallError::Server(err.to_string()),
        }
    }

    /// True for a NOSCRIPT reply (the server lost the script cache).
    pub(crate) fn is_noscript(err: &redis::RedisError) -> bool {
        err.code() == Some("NOSCRIPT")
    }
}

/// Why the script directory could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// A script file is missing or unreadable.
    #[error("cannot read script {path}: {source} (the Lua directory must hold one file per script of PROTOCOL.md)")]
    Read {
        /// The file that was tried.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}
