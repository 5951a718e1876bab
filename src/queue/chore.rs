//! The maintenance chores a protocol asks for ([`QueueOps::CHORES`](super::QueueOps::CHORES)),
//! each run by load's maintenance loop on the scenario's interval.

use crate::keyspace::QueueKeys;
use crate::scenario::MaintenancePlan;
use std::time::Duration;

/// Which maintenance verb a loop runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chore {
    /// `reap` expired leases back to pending (BullMQ: `moveStalledJobsToWait`).
    Reap,
    /// `promote` due delayed jobs to pending.
    Promote,
    /// `clean` finished jobs past the retention age from both finished sets (EchoMQ v1.2).
    Clean,
}

impl Chore {
    /// The scenario's interval for this chore; `None` when the scenario turns it off (only
    /// `clean` can be off).
    pub fn every(self, maintenance: &MaintenancePlan) -> Option<Duration> {
        match self {
            Chore::Reap => Some(maintenance.reap),
            Chore::Promote => Some(maintenance.promote),
            Chore::Clean => maintenance.clean,
        }
    }
}

/// One of a queue's two finished sets, the ones `clean` takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishedSet {
    /// `emq:{q}:completed`.
    Completed,
    /// `emq:{q}:failed`.
    Failed,
}

impl FinishedSet {
    /// Both sets, in the order a `clean` chore visits them.
    pub const BOTH: [FinishedSet; 2] = [FinishedSet::Completed, FinishedSet::Failed];

    /// The set's key in `keys`' queue.
    pub fn key(self, keys: &QueueKeys) -> &str {
        match self {
            FinishedSet::Completed => &keys.completed,
            FinishedSet::Failed => &keys.failed,
        }
    }

    /// The set's number in a history's retirement event (0 completed, 1 failed).
    pub fn bit(self) -> u32 {
        match self {
            FinishedSet::Completed => 0,
            FinishedSet::Failed => 1,
        }
    }
}
