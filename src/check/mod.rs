//! The invariant checker: scan what the server holds for the run's queues, then verify the
//! invariants of docs/protocol.md ("Invariants the harness checks", I1–I8) against that
//! state alone (`structural`) and against the run's history (`against_history`).
//!
//! - [`state`]: the scanned server state (rows, location-set memberships, stray keys).
//! - [`scan`]: SCAN + pipelined reads into a [`state::ServerState`] (never KEYS).
//! - [`structural`]: what the server state alone can prove.
//! - [`violation`]: the violation model and `invariants.json`.
//! - [`live`]: the invariants a job's history alone shows, checked as the run goes.
//! - [`report`]: the `invariants.json` writer and the table of the first violations.
//! - [`bullmq`]: the same for a BullMQ 2.26.0 queue (`bull:{q}:*`): its reads and its rules.

pub mod bullmq;
pub mod history;
pub mod live;
pub mod outcome;
pub mod report;
pub mod rows;
pub mod scan;
pub mod state;
pub mod structural;
pub mod violation;

pub use bullmq::{check_bullmq, check_structural_bullmq, scan_bullmq};
pub use outcome::{check, CheckError, CheckOutcome, CheckSummary};
pub use report::{format_violations, InvariantsReport};
pub use scan::scan;
pub use state::{BullQueue, BullRow, Location, QueueState, Row, ServerState, StateField};
pub use structural::{check_structural, checked_jobs};
pub use violation::{Invariant, Violation};
