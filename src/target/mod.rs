//! The target seam: where load goes and how. Every connection of a run, load and control,
//! comes from one [`Connector`] built from one resolved [`Target`] (endpoint, auth, db, TLS),
//! and every control-plane command goes through [`Control`], which knows the [`Topology`].
//!
//! - [`spec`]: the URL and flags resolved once into a [`Target`]; passwords as [`Secret`]s.
//! - [`tls`]: `--tls`, `--cacert`, `--cert`/`--key`, `--sni`, `--tls-skip-verify` → rustls.
//! - [`connector`]: TCP (+ TLS) connections as one [`Stream`] type.
//! - [`control`]: the control connection (redis-rs over our stream, reconnecting).
//! - [`topology`]: standalone or cluster, nodes and slots.
//! - [`plane`]: the control plane: a connection per node, each queue's commands to its node.
//! - [`slot`]: cluster key slots (CRC16 of the hash tag).
//! - [`lock`]: the per-queue run lock.
//! - [`keys`]: the run's own keys (refuse existing ones, delete at the end, never flush).
//! - [`info`]: INFO snapshots.
//!
//! Any host is accepted: safety on a shared deployment rests on touching only the run's own
//! keys, refusing to start on existing ones, never flushing, and the run lock.

pub mod connector;
pub mod control;
pub mod info;
pub mod keys;
pub mod lock;
pub mod plane;
pub mod slot;
pub mod spec;
pub mod tls;
pub mod topology;

pub use connector::{Connector, Stream};
pub use control::Control;
pub use info::{info, parse_info, CommandStat, InfoSnapshot};
pub use keys::{delete_queue, ensure_clean, queue_keys};
pub use lock::RunLock;
pub use plane::{Plane, Route};
pub use spec::{redact_url, Secret, Target, TargetFlags, PASSWORD_ENV};
pub use tls::{TlsInfo, TlsSettings};
pub use topology::Topology;

use crate::protocol::CallError;

/// Why a target could not be used (all exit 2: the run did not start).
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
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
    /// Keys of the run's queues exist already.
    #[error("queue {queue} already has keys on the target (e.g. {example}); pass --force to delete them first, or choose other queues")]
    KeysExist {
        /// The queue.
        queue: String,
        /// One of its keys.
        example: String,
    },
    /// Another run holds the queue's run lock.
    #[error("queue {queue} is in use by another run ({holder}; lock {key}, expires in {} s unless renewed); wait for it, or choose other queues", ttl_ms.div_ceil(1000))]
    Locked {
        /// The queue.
        queue: String,
        /// The lock key.
        key: String,
        /// The holder's run id.
        holder: String,
        /// Its lease's remaining time, ms.
        ttl_ms: u64,
    },
    /// A target kind the harness cannot drive yet, with what is missing.
    #[error("{0}")]
    Unsupported(String),
    /// A command to the target failed.
    #[error("target: {0}")]
    Call(#[from] CallError),
}
