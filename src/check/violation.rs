//! Violations: which invariant, which job, what was expected, what was found.

use serde::{Deserialize, Serialize};

/// The invariants of docs/protocol.md ("Invariants the harness checks").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Invariant {
    /// I1 row-unique: one row per accepted id; no row the harness did not enqueue.
    I1,
    /// I2 one-location: each id is in exactly one location set, the one its `state` names.
    I2,
    /// I3 field-set: born fields present; no field outside the allowed set.
    I3,
    /// I4 payload-intact: stored payload equals the bytes sent (and what each claim returned).
    I4,
    /// I5 attempts-monotonic: tokens 1, 2, 3, … none reused; final `attempts` = number of claims.
    I5,
    /// I6 fenced: accepted fenced calls carried the then-current token; one terminal outcome.
    I6,
    /// I7 no-loss: every accepted job ends in one state; after a drain, completed or failed.
    I7,
    /// I8 duplicate-enqueue: a repeated id returned 0 and changed nothing.
    I8,
}

impl Invariant {
    /// Every invariant, in order.
    pub const ALL: [Invariant; 8] = [
        Invariant::I1,
        Invariant::I2,
        Invariant::I3,
        Invariant::I4,
        Invariant::I5,
        Invariant::I6,
        Invariant::I7,
        Invariant::I8,
    ];

    /// `I1` .. `I8`.
    pub fn id(self) -> &'static str {
        match self {
            Invariant::I1 => "I1",
            Invariant::I2 => "I2",
            Invariant::I3 => "I3",
            Invariant::I4 => "I4",
            Invariant::I5 => "I5",
            Invariant::I6 => "I6",
            Invariant::I7 => "I7",
            Invariant::I8 => "I8",
        }
    }

    /// The protocol's short name, e.g. `row-unique`.
    pub fn name(self) -> &'static str {
        match self {
            Invariant::I1 => "row-unique",
            Invariant::I2 => "one-location",
            Invariant::I3 => "field-set",
            Invariant::I4 => "payload-intact",
            Invariant::I5 => "attempts-monotonic",
            Invariant::I6 => "fenced",
            Invariant::I7 => "no-loss",
            Invariant::I8 => "duplicate-enqueue",
        }
    }
}

/// One broken promise, with the evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// Which invariant.
    pub invariant: Invariant,
    /// The queue.
    pub queue: String,
    /// The job id (or the key, for a key that is not a job row), when there is one.
    pub job: Option<String>,
    /// What the protocol requires here.
    pub expected: String,
    /// What the server state or the history shows.
    pub found: String,
    /// When the history shows it, µs since the run start: the acknowledgement of a lost
    /// enqueue, the first hand-out of a token handed out twice, the first of two terminal
    /// outcomes (what the failover table attributes to a fault's window); `None` for what
    /// only the end state shows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_us: Option<u64>,
}
