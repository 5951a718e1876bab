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
    /// Any other server error reply (Lua runtime error, OOM, ...).
    #[error("server error: {0}")]
    Server(String),
    /// `NOSCRIPT`: the server has no script with that SHA (restarted, `SCRIPT FLUSH`). The
    /// registry reloads and retries once before this reaches a caller; counted as `server`.
    #[error("server error: NOSCRIPT {0}")]
    NoScript(String),
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
            CallError::Server(_) | CallError::NoScript(_) => ErrorCode::Server,
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
            return CallError::from_error_reply(code, err.detail().unwrap_or_default());
        }
        match err.kind() {
            redis::ErrorKind::Parse | redis::ErrorKind::UnexpectedReturnType => CallError::Reply(err.to_string()),
            _ => CallError::Server(err.to_string()),
        }
    }

    /// Classifies a server error reply `-<code> <detail>` (RESP: the code is the first word).
    pub fn from_error_reply(code: &str, detail: &str) -> CallError {
        let emq = match code {
            "EMQKIND" => ErrorCode::Kind,
            "EMQARG" => ErrorCode::Arg,
            "EMQNOJOB" => ErrorCode::NoJob,
            "EMQSTATE" => ErrorCode::State,
            "EMQFENCE" => ErrorCode::Fence,
            "NOSCRIPT" => return CallError::NoScript(detail.to_string()),
            _ => return CallError::Server(format!("{code} {detail}")),
        };
        CallError::Emq { code: emq, message: detail.to_string() }
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
