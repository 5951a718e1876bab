//! The invariant checker: scan what the server holds for the run's queues, then verify the
//! invariants of PROTOCOL.md ("Invariants the harness checks after a run", I1–I8) against that
//! state alone (`structural`) and against the run's history (`against_history`).
//!
//! - [`state`]: the scanned server state (rows, location-set memberships, stray keys).
//! - [`scan`]: SCAN + pipelined reads into a [`state::ServerState`] (never KEYS).
//! - [`structural`]: what the server state alone can prove.
//! - [`violation`]: the violation model and `invariants.json`.

pub mod state;
pub mod violation;

pub use state::{Location, QueueState, Row, ServerState, StateField};
pub use violation::{Invariant, Violation};
