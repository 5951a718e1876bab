//! The maintenance chores a protocol asks for ([`QueueOps::CHORES`](super::QueueOps::CHORES)),
//! each run by load's maintenance loop on the scenario's interval.

use crate::scenario::MaintenancePlan;
use std::time::Duration;

/// Which maintenance verb a loop runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chore {
    /// `reap` expired leases back to pending (BullMQ: `moveStalledJobsToWait`).
    Reap,
    /// `promote` due delayed jobs to pending.
    Promote,
}

impl Chore {
    /// The scenario's interval for this chore.
    pub fn every(self, maintenance: &MaintenancePlan) -> Duration {
        match self {
            Chore::Reap => maintenance.reap,
            Chore::Promote => maintenance.promote,
        }
    }
}
