//! The server state of the run's queues as the scan read it: compact (no payload bytes kept),
//! so a million jobs fit in memory.

use crate::load::payload::PayloadCheck;
use crate::protocol::JobId;
use std::collections::HashMap;

/// The five location sets, as a bit each in [`Row`]/membership masks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Location {
    /// `emq:{q}:pending`.
    Pending = 1,
    /// `emq:{q}:delayed`.
    Delayed = 2,
    /// `emq:{q}:active`.
    Active = 4,
    /// `emq:{q}:completed`.
    Completed = 8,
    /// `emq:{q}:failed`.
    Failed = 16,
}

impl Location {
    /// Every location, in lifecycle order.
    pub const ALL: [Location; 5] =
        [Location::Pending, Location::Delayed, Location::Active, Location::Completed, Location::Failed];

    /// The set's suffix and the `state` value that names it.
    pub fn name(self) -> &'static str {
        match self {
            Location::Pending => "pending",
            Location::Delayed => "delayed",
            Location::Active => "active",
            Location::Completed => "completed",
            Location::Failed => "failed",
        }
    }

    /// The bit of this location in a membership mask.
    pub fn bit(self) -> u8 {
        self as u8
    }
}

/// A row's `state` field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateField {
    /// One of the five protocol states.
    Known(Location),
    /// A value outside the protocol (kept verbatim, lossy UTF-8).
    Other(String),
    /// No `state` field.
    Missing,
}

/// One job row (`emq:{q}:job:<id>`), reduced to what the invariants need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The `state` field.
    pub state: StateField,
    /// The `attempts` field: `Some(Ok(n))`, `Some(Err(raw))` when not a non-negative integer,
    /// `None` when missing.
    pub attempts: Option<Result<u64, String>>,
    /// The payload's length in bytes, `None` when the field is missing.
    pub payload_len: Option<usize>,
    /// The payload check against the row's own id (identity + CRC-32 header; I4).
    pub payload_check: Option<PayloadCheck>,
    /// The CRC-32 the payload carries in its header (to compare with what was enqueued).
    pub payload_crc: Option<u32>,
    /// Fields outside `state attempts payload last_error progress group` (I3), by name.
    pub foreign_fields: Vec<String>,
    /// `last_error` is present.
    pub has_last_error: bool,
    /// `last_error` is `stalled`: `reap` failed the job for good when its last lease expired
    /// (PROTOCOL.md v1.1 "Poison jobs end").
    pub stalled: bool,
    /// `progress` is present.
    pub has_progress: bool,
}

/// One queue's keys as scanned.
#[derive(Debug, Clone, Default)]
pub struct QueueState {
    /// The queue name.
    pub queue: String,
    /// Job rows by id.
    pub rows: HashMap<JobId, Row>,
    /// Location-set memberships by id: a mask of [`Location::bit`]s.
    pub members: HashMap<JobId, u8>,
    /// Keys under `emq:{q}:` that are neither a job row with a well-formed id nor one of the
    /// five location sets (a row with an ill-formed id lands here too).
    pub stray_keys: Vec<String>,
    /// Location-set members that are not well-formed job ids: (set, member lossy UTF-8).
    pub stray_members: Vec<(Location, String)>,
    /// Scores of the `active` (lease deadline) and `delayed` (due time) members, server ms:
    /// how long past its time a job left there is.
    pub deadlines: HashMap<JobId, f64>,
}

/// Every queue of the run.
#[derive(Debug, Clone, Default)]
pub struct ServerState {
    /// One entry per queue, in the run's order.
    pub queues: Vec<QueueState>,
    /// The server's clock when the scan began, ms since the Unix epoch (the scripts' time
    /// source, so it compares with lease deadlines and due times); `None` if not read.
    pub now_ms: Option<u64>,
}
