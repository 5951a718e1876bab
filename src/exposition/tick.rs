//! One second of the run as the endpoint's gauges show it: made by the run's once-a-second
//! progress callback from what it already holds (the live snapshot, the queue depths, the plan).

use std::time::Duration;

use crate::load::coordinator::Depths;
use crate::metrics::{JobCounter, LiveSnapshot};
use crate::scenario::{FaultKind, Plan};

/// The gauges of one second.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tick {
    /// Time since the run start, s.
    pub elapsed_s: f64,
    /// Jobs in the run's queues by state (queue.csv's reading), when the read succeeded.
    pub depths: Option<Depths>,
    /// The open-loop rate the plan asks for over the last second, jobs/s (`None`: closed loop).
    pub requested_rate: Option<f64>,
    /// Jobs enqueued per second since the previous tick (the counter's difference).
    pub achieved_rate: f64,
    /// Jobs enqueued since the run start (warmup included).
    pub enqueued: u64,
    /// Every fault kind, and whether the plan's schedule has one of that kind under way now.
    pub faults: Vec<(FaultKind, bool)>,
}

impl Tick {
    /// The tick at `live`'s moment; `previous` (the last tick posted) gives the achieved rate.
    pub fn of(plan: &Plan, live: &LiveSnapshot, depths: Option<Depths>, previous: Option<&Tick>) -> Tick {
        let elapsed_s = live.elapsed.as_secs_f64();
        let enqueued = live.jobs[JobCounter::Enqueued.index()];
        let achieved_rate = match previous {
            Some(p) if elapsed_s > p.elapsed_s => {
                (enqueued.saturating_sub(p.enqueued)) as f64 / (elapsed_s - p.elapsed_s)
            }
            _ => 0.0,
        };
        let requested_rate = plan.producers.open_loop.as_ref().map(|open| match &open.stages {
            Some(stages) => stages.rate_over(elapsed_s - 1.0, elapsed_s).unwrap_or(0.0),
            None => open.rate_per_sec,
        });
        // Every kind, 0 when the plan has none: one dashboard query serves every scenario.
        let faults = FaultKind::ALL
            .into_iter()
            .map(|kind| {
                let planned = plan.faults.iter().filter(|f| f.kind == kind);
                let active = planned
                    .map(|f| Schedule { first: f.first, every: f.every, lasts: f.duration })
                    .any(|s| s.active_at(elapsed_s));
                (kind, active)
            })
            .collect();
        Tick { elapsed_s, depths, requested_rate, achieved_rate, enqueued, faults }
    }
}

/// When a fault is under way, as the plan schedules it.
struct Schedule {
    /// The first start, from the run start.
    first: Duration,
    /// The time between starts (`None`: once).
    every: Option<Duration>,
    /// How long each lasts.
    lasts: Duration,
}

impl Schedule {
    /// Whether the fault is under way `t_s` into the run: from each start (`first + n * every`)
    /// for its duration, at least one second (an instant fault shows for the tick after it).
    fn active_at(&self, t_s: f64) -> bool {
        let first = self.first.as_secs_f64();
        if t_s < first {
            return false;
        }
        let lasts = self.lasts.as_secs_f64().max(1.0);
        let since_start = match self.every.map(|e| e.as_secs_f64()).filter(|e| *e > 0.0) {
            Some(every) => (t_s - first) % every,
            None => t_s - first,
        };
        since_start < lasts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_fault_is_active_within_each_window_only() {
        let s = |secs| Duration::from_secs(secs);
        let f = Schedule { first: s(5), every: Some(s(10)), lasts: s(3) };
        assert!(!f.active_at(4.9));
        assert!(f.active_at(5.0));
        assert!(f.active_at(7.9));
        assert!(!f.active_at(8.1));
        assert!(f.active_at(15.5));
        let once = Schedule { first: s(5), every: None, lasts: s(0) };
        assert!(once.active_at(5.5), "an instant fault shows for one second");
        assert!(!once.active_at(6.5));
    }
}
