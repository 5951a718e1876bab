//! The typed outcome of a failed script call: the protocol's five `EMQ*` codes, other server
//! errors, malformed replies, and the *unknown* outcomes (timeout, lost connection, a call its
//! `WAIT` did not acknowledge).

use crate::lua::ErrorCode;
use std::path::PathBuf;

/// Why a script call did not return a protocol success reply.
///
/// `Timeout` and `Connection` are kept apart from failures: the script may or may not have run
/// (Jepsen's `:info`), so the harness records them as unknown, never as a refusal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// An `EMQ*` error reply (docs/protocol.md "Errors"), or one of BullMQ's refusals (a negative
    /// integer reply, extendLock's `0`: `bullmq::codes`), with an empty `message`
    /// (no allocation: the code says it all).
    #[error("{} {message}", code.name())]
    Emq {
        /// `Kind`, `Arg`, `NoJob`, `State` or `Fence`; or a BullMQ code ([`ErrorCode::is_bullmq`]).
        code: ErrorCode,
        /// The text after the code, as the script wrote it.
        message: String,
    },
    /// Any other server error reply (a Lua runtime error; OOM, LOADING, READONLY and BUSY are
    /// counted under their own codes, see [`CallError::code`]).
    #[error("server error: {0}")]
    Server(String),
    /// `NOSCRIPT`: the server has no script with that SHA (restarted, `SCRIPT FLUSH`). The
    /// registry reloads and retries once before this reaches a caller; counted as `NOSCRIPT`.
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
    /// The call was never written: its node's connection was down and could not be opened
    /// again (connection refused). The script did not run, so the call may be sent again.
    #[error("not sent: {0}")]
    Unsent(String),
    /// The endpoint's first answer to a new connection was not RESP (an HTTP server, say), or
    /// it closed the connection without a byte: not a Redis/Valkey server. Only a connection's
    /// handshake reports it (see [`Connector::not_resp`](crate::net::Connector::not_resp)).
    #[error("not a Redis/Valkey server at {addr}: {answer}")]
    NotRedis {
        /// `host:port`.
        addr: String,
        /// What it answered: `it replied "HTTP/1.1 400 ..."` (the first bytes, escaped) or
        /// `it closed the connection without a reply`.
        answer: String,
    },
    /// The call ran on the primary, but the `WAIT` sent right after it on the same connection
    /// (`[target] wait`) answered fewer than `replicas` within its timeout: not acknowledged,
    /// its outcome unknown (a failover may lose it). Counted as `wait_short`.
    #[error("WAIT answered {acked} of {replicas} replicas in {timeout_ms} ms")]
    WaitShort {
        /// Replicas that acknowledged the connection's writes, as WAIT replied.
        acked: i64,
        /// Replicas asked for.
        replicas: u32,
        /// WAIT's timeout, ms.
        timeout_ms: u64,
    },
    /// The `WAIT` sent right after a call that succeeded answered with an error or with no
    /// integer (an ACL that denies WAIT, a node that became a replica): the call is not
    /// acknowledged and its outcome unknown, counted as `wait_short` too.
    #[error("WAIT after the call failed: {0}")]
    WaitFailed(String),
    /// A Valkey Cluster redirect: the call did not run here. The load follows it (and counts
    /// it as a redirect, never as an error); counted as `server` if it ever reaches a count.
    #[error("cluster redirect: {0}")]
    Redirect(Redirect),
}

/// Why and where a cluster node sent a call elsewhere.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind:?} slot {slot} to {host}:{port}")]
pub struct Redirect {
    /// MOVED, ASK or TRYAGAIN.
    pub kind: RedirectKind,
    /// The slot (0 for TRYAGAIN, which names none).
    pub slot: u16,
    /// The node to ask; empty when the server left it out (then: the same host).
    pub host: String,
    /// Its port (0 for TRYAGAIN).
    pub port: u16,
}

/// The three redirects of the cluster specification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedirectKind {
    /// The slot lives on another node for good: update the map, send there.
    Moved,
    /// The slot is migrating and this key is already on the target: send there once, after
    /// `ASKING`.
    Ask,
    /// The slot is migrating and the call's keys are split between the nodes: retry shortly.
    TryAgain,
}

impl Redirect {
    /// Parses the detail of `-MOVED 3999 127.0.0.1:6381` / `-ASK ...` (`kind` from the code).
    fn parse(kind: RedirectKind, detail: &str) -> Option<Redirect> {
        if kind == RedirectKind::TryAgain {
            return Some(Redirect { kind, slot: 0, host: String::new(), port: 0 });
        }
        let (slot, addr) = detail.trim().split_once(' ')?;
        let (host, port) = addr.rsplit_once(':')?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        Some(Redirect { kind, slot: slot.parse().ok()?, host: host.to_string(), port: port.parse().ok()? })
    }
}

impl CallError {
    /// The code under which the error is counted.
    pub fn code(&self) -> ErrorCode {
        match self {
            CallError::Emq { code, .. } => *code,
            CallError::NoScript(_) => ErrorCode::NoScript,
            CallError::Server(reply) => match reply.split(' ').next().unwrap_or_default() {
                "OOM" => ErrorCode::Oom,
                "LOADING" => ErrorCode::Loading,
                "READONLY" => ErrorCode::ReadOnly,
                "BUSY" => ErrorCode::Busy,
                "NOSCRIPT" => ErrorCode::NoScript,
                _ => ErrorCode::Server,
            },
            CallError::Reply(_) => ErrorCode::Reply,
            CallError::Timeout => ErrorCode::Timeout,
            CallError::Connection(_) | CallError::Unsent(_) | CallError::NotRedis { .. } => ErrorCode::Connection,
            CallError::Redirect(_) => ErrorCode::Server,
            CallError::WaitShort { .. } | CallError::WaitFailed(_) => ErrorCode::WaitShort,
        }
    }

    /// True when the script certainly did not run and the refusal is a cluster's passing state,
    /// so the same call may be sent again after a pause: never written ([`CallError::Unsent`]),
    /// `CLUSTERDOWN` (a failed primary not yet replaced), `LOADING` (a node loading its data).
    /// MOVED, ASK and TRYAGAIN are redirects, followed apart.
    pub fn is_refused_for_now(&self) -> bool {
        match self {
            CallError::Unsent(_) => true,
            CallError::Server(reply) => reply.starts_with("CLUSTERDOWN ") || reply.starts_with("LOADING "),
            _ => false,
        }
    }

    /// True when the call's node may be gone (the connection failed, no reply in time, or it
    /// could not be reached): the slot map is worth reading again. The call itself is sent
    /// again only when [`is_refused_for_now`](Self::is_refused_for_now) says so.
    pub fn is_node_fault(&self) -> bool {
        matches!(self, CallError::Connection(_) | CallError::Timeout | CallError::Unsent(_))
            || self.is_refused_for_now()
    }

    /// Classifies a redis-rs error. NOSCRIPT is a `Server` error here; the registry reloads
    /// and retries before it ever reaches a caller.
    pub fn from_redis(err: &redis::RedisError) -> CallError {
        crate::net::NetError::from_redis(err).into()
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
            "MOVED" | "ASK" | "TRYAGAIN" => {
                let kind = match code {
                    "MOVED" => RedirectKind::Moved,
                    "ASK" => RedirectKind::Ask,
                    _ => RedirectKind::TryAgain,
                };
                return Redirect::parse(kind, detail)
                    .map(CallError::Redirect)
                    .unwrap_or_else(|| CallError::Server(format!("{code} {detail}")));
            }
            _ => return CallError::Server(format!("{code} {detail}")),
        };
        CallError::Emq { code: emq, message: detail.to_string() }
    }
}

/// Why the script directory could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// A script file is missing or unreadable.
    #[error("cannot read script {path}: {source} (the Lua directory must hold one file per script: docs/protocol.md)")]
    Read {
        /// The file that was tried.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// BullMQ's scripts were not fetched: they are never built in nor copied into the
    /// repository.
    #[error(
        "BullMQ's scripts are not at {dir}: run scripts/setup (it fetches the pinned release), or pass --lua-dir DIR"
    )]
    NotFetched {
        /// Where they were looked for.
        dir: PathBuf,
    },
    /// The binary was built without EchoMQ's scripts (cargo feature `embedded-lua` off, as
    /// `scripts/regress` builds it).
    #[error("this emq-bench is built without EchoMQ's scripts (cargo feature embedded-lua): pass --lua-dir DIR")]
    NotEmbedded,
    /// A script file holds nothing but white space.
    #[error("script {path} is empty (the Lua directory must hold one script per file of docs/protocol.md)")]
    Empty {
        /// The file.
        path: PathBuf,
    },
}

/// The network layer's failures as call outcomes: a lost connection and a timeout stay
/// unknown outcomes, an error reply is classified by its code as any script's would be.
impl From<crate::net::NetError> for CallError {
    fn from(err: crate::net::NetError) -> CallError {
        use crate::net::NetError;
        match err {
            NetError::Connection(msg) => CallError::Connection(msg),
            NetError::Timeout => CallError::Timeout,
            NetError::NotRedis { addr, answer } => CallError::NotRedis { addr, answer },
            NetError::Server(text) => {
                let (code, detail) = text.split_once(' ').unwrap_or((text.as_str(), ""));
                CallError::from_error_reply(code, detail)
            }
            NetError::Reply(msg) => CallError::Reply(msg),
            other @ (NetError::BadUrl { .. } | NetError::Tls(_) | NetError::Unsupported(_)) => {
                CallError::Connection(other.to_string())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A redirect read by redis-rs (the control connection and `--transport redis-rs`) and by
    /// the pipe transport's decoder classifies alike.
    #[test]
    fn cluster_redirects_are_classified_on_both_transports() {
        for (wire, want) in [
            (
                &b"-MOVED 3999 127.0.0.1:6381\r\n"[..],
                Redirect { kind: RedirectKind::Moved, slot: 3999, host: "127.0.0.1".into(), port: 6381 },
            ),
            (b"-ASK 12 [::1]:7000\r\n", Redirect { kind: RedirectKind::Ask, slot: 12, host: "::1".into(), port: 7000 }),
            (b"-MOVED 5 :7001\r\n", Redirect { kind: RedirectKind::Moved, slot: 5, host: String::new(), port: 7001 }),
            (
                b"-TRYAGAIN Multiple keys request during rehashing of slot\r\n",
                Redirect { kind: RedirectKind::TryAgain, slot: 0, host: String::new(), port: 0 },
            ),
        ] {
            let value = redis::parse_redis_value(wire).unwrap();
            let redis::Value::ServerError(err) = value else { panic!("{value:?}") };
            assert_eq!(CallError::from_redis(&err.into()), CallError::Redirect(want.clone()), "redis-rs: {wire:?}");
            let piped = crate::resp::pipe::reply::decode(wire).unwrap().unwrap().0;
            assert_eq!(piped, Err(CallError::Redirect(want)), "pipe: {wire:?}");
        }
    }
}
