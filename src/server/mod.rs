//! The embedded server: a real `valkey-server` on a free loopback port, persistence off by
//! default, stopped when the handle is dropped (also on panic) or when this process dies; and
//! an embedded cluster of them ([`EmbeddedCluster`]).

mod cluster;
mod locate;
mod process;

pub use cluster::{ClusterNode, ClusterOptions, EmbeddedCluster, Role};
pub use locate::{find_server_binary, SERVER_ENV, TOOLS_SERVER};
pub use process::{EmbeddedServer, ServerOptions};

use std::path::PathBuf;

/// Why the embedded server could not be started.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// No server binary was found.
    #[error("no valkey-server found (tried: {}); run scripts/setup to install one under .tools/, install valkey-server or redis-server, or name a binary with --server-bin or {}", tried.join(", "), SERVER_ENV)]
    NotFound {
        /// Every place that was tried, in order.
        tried: Vec<String>,
    },
    /// The binary could not be run, or its data directory made.
    #[error("cannot start {binary}: {source}")]
    Spawn {
        /// The server binary.
        binary: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The server exited or did not answer PING in time.
    #[error("{binary} did not come up on {host}:{port}: {reason}\n--- server log ---\n{log}")]
    NotReady {
        /// The server binary.
        binary: PathBuf,
        /// The loopback address it was given.
        host: std::net::Ipv4Addr,
        /// The port it was given.
        port: u16,
        /// What happened (exit status, timeout).
        reason: String,
        /// The tail of the server's log.
        log: String,
    },
}
