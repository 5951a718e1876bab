//! The server state of the run's queues as the scan read it: compact (no payload bytes kept),
//! so a million jobs fit in memory.

use crate::keyspace::JobId;
use crate::payload::PayloadCheck;
use std::collections::HashMap;

/// The places a job id can be: EchoMQ's five location sets and BullMQ's three further ones
/// (docs/bullmq-mapping.md section 1), as a bit each in membership masks (a `u8`). EchoMQ's
/// bits are those of v1.1 and never change, so masks read from older results keep their meaning.
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
    /// BullMQ's `bull:{q}:wait` (LIST): ready jobs of priority 0.
    Wait = 32,
    /// BullMQ's `bull:{q}:prioritized` (ZSET): ready jobs of priority > 0.
    Prioritized = 64,
    /// BullMQ's `bull:{q}:paused` (LIST): what `wait` holds while the queue is paused.
    Paused = 128,
}

impl Location {
    /// True for a place a job waits in (pending, delayed, active; BullMQ's wait, prioritized,
    /// paused): not yet completed or failed.
    pub fn is_unfinished(self) -> bool {
        !matches!(self, Location::Completed | Location::Failed)
    }

    /// EchoMQ's five location sets, in lifecycle order (also the `state` values).
    pub const ALL: [Location; 5] =
        [Location::Pending, Location::Delayed, Location::Active, Location::Completed, Location::Failed];

    /// BullMQ's seven locations (docs/bullmq-mapping.md section 6), in lifecycle order; BullMQ's
    /// `delayed`, `active`, `completed` and `failed` share EchoMQ's variants and bits.
    pub const BULLMQ: [Location; 7] = [
        Location::Wait,
        Location::Paused,
        Location::Prioritized,
        Location::Delayed,
        Location::Active,
        Location::Completed,
        Location::Failed,
    ];

    /// Every location of both protocols, in lifecycle order (EchoMQ's five keep their order).
    pub const EVERY: [Location; 8] = [
        Location::Pending,
        Location::Wait,
        Location::Paused,
        Location::Prioritized,
        Location::Delayed,
        Location::Active,
        Location::Completed,
        Location::Failed,
    ];

    /// The key suffix of the location (EchoMQ's: also the `state` value that names it).
    pub fn name(self) -> &'static str {
        match self {
            Location::Pending => "pending",
            Location::Delayed => "delayed",
            Location::Active => "active",
            Location::Completed => "completed",
            Location::Failed => "failed",
            Location::Wait => "wait",
            Location::Prioritized => "prioritized",
            Location::Paused => "paused",
        }
    }

    /// The bit of this location in a membership mask.
    pub const fn bit(self) -> u8 {
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

impl StateField {
    /// The place a job waits in, when its state names one ([`Location::is_unfinished`]).
    pub fn unfinished(&self) -> Option<Location> {
        match *self {
            StateField::Known(place) if place.is_unfinished() => Some(place),
            _ => None,
        }
    }
}

/// One job row (`emq:{q}:job:<id>`, or BullMQ's job hash `bull:{q}:<id>`), reduced to what the
/// invariants need. A BullMQ row fills the fields both protocols share (see each) and keeps the
/// rest in [`Row::bull`]; EchoMQ rows pay 8 bytes for that.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The `state` field; always [`StateField::Missing`] for BullMQ, which has none.
    pub state: StateField,
    /// The `attempts` field: `Some(Ok(n))`, `Some(Err(raw))` when not a non-negative integer,
    /// `None` when missing. Always `None` for BullMQ (its claim counter is [`BullRow::ats`]).
    pub attempts: Option<Result<u64, String>>,
    /// The payload's length in bytes, `None` when the field is missing. BullMQ: the decoded
    /// `data` (the raw field's length when it does not decode, see [`BullRow::data_undecodable`]).
    pub payload_len: Option<usize>,
    /// The payload check against the row's own id (identity + CRC-32 header; I4).
    pub payload_check: Option<PayloadCheck>,
    /// The CRC-32 the payload carries in its header (to compare with what was enqueued).
    pub payload_crc: Option<u32>,
    /// Fields outside `state attempts payload last_error progress group` (I3), by name (BullMQ:
    /// outside [`BULL_BORN_FIELDS`] and [`BULL_LATER_FIELDS`]), sorted.
    pub foreign_fields: Vec<String>,
    /// `last_error` is present (BullMQ: `failedReason`).
    pub has_last_error: bool,
    /// `last_error` is `stalled`: `reap` failed the job for good when its last lease expired
    /// (docs/protocol.md "Why v1.1": poison jobs end). BullMQ: `failedReason` is the deferred
    /// failure of a job that stalled past `maxStalledCount` (docs/bullmq-mapping.md section 5).
    pub stalled: bool,
    /// `progress` is present.
    pub has_progress: bool,
    /// BullMQ's own fields; `None` for an EchoMQ row.
    pub bull: Option<Box<BullRow>>,
}

impl Row {
    /// A row with no field read yet: no state, attempts or payload, no other field.
    pub fn empty() -> Row {
        Row {
            state: StateField::Missing,
            attempts: None,
            payload_len: None,
            payload_check: None,
            payload_crc: None,
            foreign_fields: Vec::new(),
            has_last_error: false,
            stalled: false,
            has_progress: false,
            bull: None,
        }
    }

    /// Records job `id`'s payload bytes: their length, the check against `id` and the CRC-32
    /// header ([`verify`](crate::payload::verify), I4); the bytes themselves are not kept.
    pub fn take_payload(&mut self, id: &JobId, payload: &[u8]) {
        self.payload_len = Some(payload.len());
        self.payload_check = Some(crate::payload::verify(id, payload));
        self.payload_crc = crate::payload::header_crc(payload);
    }
}

/// The fields of a BullMQ job hash that EchoMQ has no counterpart for (docs/bullmq-mapping.md
/// section 2). A counter is `Some(Ok(n))`, `Some(Err(raw))` when not a canonical non-negative
/// decimal integer, `None` when absent (BullMQ writes none of them at add).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BullRow {
    /// `ats`, attempts started: one per claim (moveToActive), stalls included. What the history
    /// compares with the accepted claims (EchoMQ's `attempts`).
    pub ats: Option<Result<u64, String>>,
    /// `atm`, attempts made: one per finished attempt (moveToFinished, retryJob, moveToDelayed).
    pub atm: Option<Result<u64, String>>,
    /// `stc`: times moveStalledJobsToWait moved the job back.
    pub stc: Option<Result<u64, String>>,
    /// `finishedOn`: the finishing call's timestamp, client ms since the Unix epoch.
    pub finished_on: Option<Result<u64, String>>,
    /// `returnvalue` is present.
    pub has_returnvalue: bool,
    /// `defa` is present: a deferred failure the next claimer must carry out.
    pub deferred_failure: bool,
    /// The key `bull:{q}:<id>:lock` exists (the claim's lease; seen by the scan).
    pub has_lock: bool,
    /// The fields written at add that are present: bit `i` for [`BULL_BORN_FIELDS`]`[i]`.
    pub born: u8,
    /// `data` is present but is not a JSON string of standard base64 ([`decode_data`]).
    ///
    /// [`decode_data`]: crate::bullmq::data::decode_data
    pub data_undecodable: bool,
}

/// The fields every BullMQ add writes in one HMSET (`storeJob` in `addStandardJob-9.lua`).
pub const BULL_BORN_FIELDS: [&str; 6] = ["name", "data", "opts", "timestamp", "delay", "priority"];

/// The fields BullMQ 2.26.0 may add later (docs/bullmq-mapping.md section 2: `storeJob`'s
/// optional ones, moveToActive, moveToFinished, retryJob, moveToDelayed, updateProgress,
/// moveStalledJobsToWait); any other field is foreign.
pub const BULL_LATER_FIELDS: [&str; 15] = [
    "parentKey",
    "parent",
    "rjk",
    "deid",
    "processedOn",
    "ats",
    "pb",
    "atm",
    "returnvalue",
    "failedReason",
    "finishedOn",
    "stacktrace",
    "progress",
    "stc",
    "defa",
];

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
    /// how long past its time a job left there is. BullMQ: `delayed`'s due time only, client
    /// ms (the score over 0x1000).
    pub deadlines: HashMap<JobId, f64>,
    /// What only a BullMQ queue has; `Some` marks the queue as BullMQ's, whose rules
    /// [`check_structural`](super::check_structural) then applies.
    pub bull: Option<Box<BullQueue>>,
}

/// The parts of a BullMQ queue's state that are not rows or memberships.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BullQueue {
    /// The queue's key prefix, `bull:{q}:`.
    pub prefix: String,
    /// Members of `bull:{q}:stalled` (the stall candidates) with a well-formed id, sorted.
    pub stalled: Vec<JobId>,
    /// Members of `bull:{q}:stalled` that are not job ids (lossy UTF-8), sorted.
    pub stray_stalled: Vec<String>,
    /// An id a LIST holds more than once, with the list: a job must be in one place once.
    pub repeated: Vec<(Location, JobId)>,
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
