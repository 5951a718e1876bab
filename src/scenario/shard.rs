//! One shard of a fleet: the part of a plan one process of N runs (`run --shards N --shard I`).
//!
//! The split is exact, in the manner of k6's execution segments: shard `i` of `n` takes the
//! tasks `floor(total·i/n) .. floor(total·(i+1)/n)` of each role, so the shares add up to the
//! total for any `n`, and every task keeps its fleet-wide (global) index. The open-loop rate
//! goes with the producers (each producer sends `rate / producers` as in one process, its
//! uniform arrivals de-phased by its global index), so the union of the shards' intended sends
//! is one process's schedule. A `jobs` budget is split as the producers are.
//!
//! Queues are `sharded`: each shard owns its own queues (the scenario's names with the prefix
//! `s<I>.`), so its consumers drain what its producers send and its check, its run lock and
//! its cleanup concern its keys only.

use super::error::ScenarioError;
use super::file::Queues;
use super::plan::{OpenLoop, Plan, Stop};
use super::validate::is_valid_name;

/// Most shards a fleet may have.
pub const MAX_SHARDS: u32 = 1024;

/// Where a process sits in its fleet, and which tasks of the whole plan are its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shard {
    /// This shard's index, 0-based (`--shard`, or `$JOB_COMPLETION_INDEX`).
    pub index: u32,
    /// The fleet's size (`--shards`).
    pub count: u32,
    /// The fleet's name (`--group`): its barrier's keys, its results folder.
    pub group: String,
    /// This shard's producers in the fleet's numbering.
    pub producers: TaskRange,
    /// This shard's consumers in the fleet's numbering.
    pub consumers: TaskRange,
}

/// A shard's tasks of one role: global indices `first .. first + count` of `total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskRange {
    /// The global index of the shard's first task.
    pub first: u32,
    /// The shard's tasks.
    pub count: u32,
    /// The fleet's tasks of this role.
    pub total: u32,
}

/// Shard `index` of `count`'s part of `total` things: `(first, len)`, with
/// `first = floor(total·index/count)`. The parts of every index add up to `total` exactly.
pub fn share(total: u64, index: u32, count: u32) -> (u64, u64) {
    let at = |i: u32| ((u128::from(total) * u128::from(i)) / u128::from(count.max(1))) as u64;
    (at(index), at(index + 1) - at(index))
}

/// The prefix of a shard's queue names: `s<I>.`.
pub fn queue_prefix(index: u32) -> String {
    format!("s{index}.")
}

impl Plan {
    /// This plan's part for shard `index` of `count` in `group` (see the module doc).
    ///
    /// # Errors
    /// [`ScenarioError::Override`] naming `--shards` when a shard would get producers but no
    /// consumers (its queues would never drain) or nothing to do at all, or when a queue name
    /// with the shard's prefix is longer than 64 bytes.
    pub fn for_shard(self, index: u32, count: u32, group: &str) -> Result<Plan, ScenarioError> {
        let refuse = |expected: String| ScenarioError::Override {
            path: self.source.clone(),
            flag: "--shards".to_owned(),
            found: count.to_string(),
            expected,
        };
        let range = |total: u32| {
            let (first, len) = share(u64::from(total), index, count);
            TaskRange { first: first as u32, count: len as u32, total }
        };
        // Every shard's part is checked, not only this one's: each shard of a fleet refuses the
        // same split with the same message.
        for i in 0..count {
            let part = |total: u32| share(u64::from(total), i, count).1;
            let (p, c) = (part(self.producers.count), part(self.consumers.count));
            if p > 0 && c == 0 && self.consumers.count > 0 {
                return Err(refuse(format!(
                    "at most consumers.count = {} shards: each shard owns its queues, and shard {i} would have \
                     producers but no consumer to drain them",
                    self.consumers.count
                )));
            }
            if p == 0 && self.producers.count > 0 {
                return Err(refuse(format!(
                    "at most producers.count = {} shards: each shard owns its queues, and shard {i} would have no \
                     producer to fill them",
                    self.producers.count
                )));
            }
            if p == 0 && c == 0 {
                return Err(refuse(format!(
                    "at most consumers.count = {} shards: shard {i} would have nothing to do",
                    self.consumers.count
                )));
            }
        }
        let producers = range(self.producers.count);
        let consumers = range(self.consumers.count);
        let prefix = queue_prefix(index);
        let queues: Vec<String> = self.queues.iter().map(|q| format!("{prefix}{q}")).collect();
        if let Some(long) = queues.iter().find(|q| !is_valid_name(q)) {
            return Err(refuse(format!("queue names of at most 64 bytes with the shard prefix: {long}")));
        }
        // Connections split as the tasks are, at least one for a shard with any task, never
        // more than its tasks.
        let connections = |total: u32, tasks: u32| {
            let (_, len) = share(u64::from(total), index, count);
            (len as u32).clamp(u32::from(tasks > 0), tasks.max(1))
        };
        let mut plan = self;
        let fleet_producers = plan.producers.count.max(1);
        plan.producers.open_loop = plan.producers.open_loop.map(|open| OpenLoop {
            rate_per_sec: open.rate_per_sec * f64::from(producers.count) / f64::from(fleet_producers),
            ..open
        });
        plan.stop = match plan.stop {
            Stop::Jobs(jobs) => {
                let at = |i: u32| (u128::from(jobs) * u128::from(i) / u128::from(fleet_producers)) as u64;
                Stop::Jobs(at(producers.first + producers.count) - at(producers.first))
            }
            stop => stop,
        };
        plan.producers.connections = connections(plan.producers.connections, producers.count);
        plan.consumers.connections = connections(plan.consumers.connections, consumers.count);
        plan.producers.count = producers.count;
        plan.consumers.count = consumers.count;
        plan.queues = queues;
        plan.shard = Some(Shard { index, count, group: group.to_owned(), producers, consumers });
        Ok(plan)
    }

    /// Producer `p` of this process (0-based) in the fleet's numbering: its global index and
    /// the fleet's producer count (`(p, count)` outside a fleet).
    pub fn producer_slot(&self, p: usize) -> (usize, u32) {
        match &self.shard {
            Some(shard) => (shard.producers.first as usize + p, shard.producers.total),
            None => (p, self.producers.count),
        }
    }

    /// Consumer `c` of this process in the fleet's numbering (`c` outside a fleet).
    pub fn consumer_index(&self, c: usize) -> usize {
        self.shard.as_ref().map_or(c, |shard| shard.consumers.first as usize + c)
    }

    /// The seed of the run's job ids (their run tag): the scenario's seed, mixed with the
    /// shard's index in a fleet so no two shards mint the same id.
    pub fn id_seed(&self) -> u64 {
        match &self.shard {
            Some(shard) => self.seed ^ (u64::from(shard.index) + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            None => self.seed,
        }
    }

    /// The prefix of generated queue names (`bench-N` on a cluster): the shard's, else none.
    pub fn queue_prefix(&self) -> String {
        self.shard.as_ref().map(|s| queue_prefix(s.index)).unwrap_or_default()
    }

    /// True when the scenario names its queues by count (`queues = N`), so a cluster may
    /// choose names that spread them over its primaries.
    pub fn queues_by_count(&self) -> Option<u32> {
        match self.scenario.queues {
            Queues::Count(n) => Some(n),
            Queues::Name(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(extra: &str) -> Plan {
        let text = format!("name = \"t\"\nseed = 7\nduration = \"2s\"\nqueues = 2\n{extra}");
        super::super::parse(&text, std::path::Path::new("t.toml")).unwrap()
    }

    /// For every fleet size up to 64 and totals from 0 to 300 and large ones, the shards'
    /// parts cover the whole exactly, each starting where the one before it ended.
    #[test]
    fn shares_add_up() {
        let totals = (0..=300u64).chain([9_999_999, 10_000_000, u64::from(u32::MAX), u64::MAX / 2]);
        for total in totals {
            for count in 1..=64 {
                let mut next = 0;
                for i in 0..count {
                    let (first, len) = share(total, i, count);
                    assert_eq!(first, next, "total {total}, shard {i} of {count}");
                    next += len;
                }
                assert_eq!(next, total, "total {total} over {count}");
            }
        }
    }

    /// Producers, consumers, the open-loop rate and a jobs budget split over N shards add up
    /// to one process's, and every producer keeps its global index (seeded random plans).
    #[test]
    fn a_plan_splits_exactly() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(38);
        for _ in 0..300 {
            let (producers, consumers) = (rng.random_range(1..200u32), rng.random_range(1..200u32));
            let n = rng.random_range(1..=producers.min(consumers).min(64));
            let (rate, jobs) = (rng.random_range(1..100_000u32), rng.random_range(1..10_000_000u64));
            let whole = plan(&format!(
                "[producers]\ncount = {producers}\nconnections = 1\nrate = {rate}.0\n\
                 [consumers]\ncount = {consumers}\nconnections = 1\n"
            ));
            let whole = Plan { stop: Stop::Jobs(jobs), ..whole };
            let (mut p, mut c, mut r, mut j, mut globals) = (0, 0, 0.0, 0, Vec::new());
            for i in 0..n {
                let part = whole.clone().for_shard(i, n, "g").unwrap();
                p += part.producers.count;
                c += part.consumers.count;
                r += part.producers.open_loop.unwrap().rate_per_sec;
                if let Stop::Jobs(k) = part.stop {
                    j += k;
                }
                globals.extend((0..part.producers.count as usize).map(|k| part.producer_slot(k)));
                assert!(part.producers.connections >= 1 && part.producers.connections <= part.producers.count);
            }
            assert_eq!((p, c, j), (producers, consumers, jobs), "{producers} {consumers} over {n}");
            assert!((r - f64::from(rate)).abs() < 1e-6 * f64::from(rate), "{r} != {rate}");
            let want: Vec<(usize, u32)> = (0..producers as usize).map(|g| (g, producers)).collect();
            assert_eq!(globals, want);
        }
    }

    #[test]
    fn a_shard_owns_prefixed_queues_and_its_own_job_ids() {
        let whole = plan("[producers]\ncount = 3\n[consumers]\ncount = 3\n");
        let a = whole.clone().for_shard(0, 3, "g").unwrap();
        let b = whole.clone().for_shard(2, 3, "g").unwrap();
        assert_eq!(a.queues, ["s0.bench-0", "s0.bench-1"]);
        assert_eq!(b.queues, ["s2.bench-0", "s2.bench-1"]);
        assert_ne!(a.id_seed(), b.id_seed());
        assert_eq!((a.seed, b.seed), (whole.seed, whole.seed), "the scenario's draws stay the fleet's");
        assert_eq!(whole.id_seed(), whole.seed);
    }

    #[test]
    fn a_shard_with_producers_and_no_consumer_is_refused() {
        let whole = plan("[producers]\ncount = 4\n[consumers]\ncount = 2\n");
        // Consumers 0..2 over 3 shards: shard 0 gets none, and 1 of the 4 producers.
        let err = whole.clone().for_shard(0, 3, "g").unwrap_err().to_string();
        assert!(err.contains("--shards = 3") && err.contains("at most consumers.count = 2"), "{err}");
        assert!(whole.for_shard(0, 2, "g").is_ok());
    }
}
