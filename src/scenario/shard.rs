//! One shard of a fleet: the part of a plan one process of N runs (`run --shards N --shard I`).
//!
//! The split is exact, in the manner of k6's execution segments: shard `i` of `n` takes the
//! tasks `floor(total·i/n) .. floor(total·(i+1)/n)` of each role, so the shares add up to the
//! total for any `n`, and every task keeps its fleet-wide (global) index. The open-loop rate
//! goes with the producers (each producer sends `rate / producers` as in one process, its
//! uniform arrivals de-phased by its global index), so the union of the shards' intended sends
//! is one process's schedule. A `jobs` budget is split as the producers are.
//!
//! Two queue modes ([`QueueMode`]):
//! - `sharded` (the default): each shard owns its own queues (the scenario's names with the
//!   prefix `s<I>.`), so its consumers drain what its producers send, and its check, its run
//!   lock and its cleanup concern its keys only.
//! - `shared`: every shard drives the same queues, and a shard may hold producers only,
//!   consumers only or both (`--roles`): a claim on one machine, the completion on another.
//!   Producers split over the shards that produce, consumers over those that consume. The
//!   fleet mints one kind of job id (one run tag) and each shard its own job numbers (blocks
//!   interleaved by shard index), so the shards' histories join into one; the check and the
//!   cleanup wait for the fleet's merge, and one shard runs the maintenance chores.

use super::error::ScenarioError;
use super::file::Queues;
use super::plan::{OpenLoop, Plan, Stop};
use super::validate::is_valid_name;

/// Most shards a fleet may have.
pub const MAX_SHARDS: u32 = 1024;

/// How a fleet's shards share the queues (see the module doc).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum QueueMode {
    /// Each shard owns its queues (`s<I>.` prefixed).
    #[default]
    Sharded,
    /// Every shard drives the same queues.
    Shared,
}

impl QueueMode {
    /// The name flags and summary.json use: `sharded`, `shared`.
    pub fn name(self) -> &'static str {
        match self {
            QueueMode::Sharded => "sharded",
            QueueMode::Shared => "shared",
        }
    }

    /// The mode of this name.
    pub fn from_name(name: &str) -> Option<QueueMode> {
        [QueueMode::Sharded, QueueMode::Shared].into_iter().find(|m| m.name() == name)
    }
}

/// What one shard runs of the fleet's tasks: producers, consumers or both (`--roles`, one
/// `p`, `c` or `pc` per shard).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardRole {
    /// The shard takes a share of the producers.
    pub produces: bool,
    /// The shard takes a share of the consumers.
    pub consumes: bool,
}

impl ShardRole {
    /// Producers and consumers: every shard's role unless `--roles` says otherwise.
    pub const BOTH: ShardRole = ShardRole { produces: true, consumes: true };

    /// The role of `p`, `c` or `pc` (`cp`); `None` for anything else.
    pub fn from_name(name: &str) -> Option<ShardRole> {
        match name.trim() {
            "p" => Some(ShardRole { produces: true, consumes: false }),
            "c" => Some(ShardRole { produces: false, consumes: true }),
            "pc" | "cp" => Some(ShardRole::BOTH),
            _ => None,
        }
    }

    /// `p`, `c` or `pc`; `-` for a role with neither (no `--roles` spelling makes one).
    pub fn name(self) -> &'static str {
        match (self.produces, self.consumes) {
            (true, false) => "p",
            (false, true) => "c",
            (true, true) => "pc",
            (false, false) => "-",
        }
    }
}

/// How a fleet is laid out: its size, its queue mode and each shard's role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetLayout {
    /// The fleet's size (`--shards`).
    pub count: u32,
    /// `--queue-mode`.
    pub mode: QueueMode,
    /// One role per shard, by index (`--roles`; every shard [`ShardRole::BOTH`] by default).
    pub roles: Vec<ShardRole>,
}

impl FleetLayout {
    /// `count` shards of `mode`, each running producers and consumers.
    pub fn new(count: u32, mode: QueueMode) -> FleetLayout {
        FleetLayout { count, mode, roles: vec![ShardRole::BOTH; count as usize] }
    }

    /// The roles as `--roles` spells them (`p,c,c`).
    pub fn roles_text(&self) -> String {
        self.roles.iter().map(|r| r.name()).collect::<Vec<_>>().join(",")
    }

    /// Shard `index`'s position among the shards of one role, and how many have it:
    /// `None` when the shard does not have the role.
    fn place(&self, index: u32, has: impl Fn(&ShardRole) -> bool) -> Option<(u32, u32)> {
        let with: Vec<u32> = (0..self.count).filter(|&i| has(&self.roles[i as usize])).collect();
        let at = with.iter().position(|&i| i == index)?;
        Some((at as u32, with.len() as u32))
    }
}

/// Where a process sits in its fleet, and which tasks of the whole plan are its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shard {
    /// This shard's index, 0-based (`--shard`, or `$JOB_COMPLETION_INDEX`).
    pub index: u32,
    /// The fleet's size (`--shards`).
    pub count: u32,
    /// The fleet's name (`--group`): its barrier's keys, its results folder.
    pub group: String,
    /// How the fleet's shards share the queues.
    pub mode: QueueMode,
    /// The lowest index of a shard that runs consumers (0 when none does): in `shared` mode
    /// it alone runs the maintenance chores.
    pub maintainer: u32,
    /// Where this shard's job numbers sit among the fleet's.
    pub numbers: JobNumbers,
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

/// Job numbers a producer reserves at once from its process's counter: one atomic add per 16
/// jobs instead of one per job (a shared atomic per enqueue is a measurable cost), while the
/// last producers to run out of a `jobs = N` budget hold at most 16 each. A `shared` fleet's
/// shards interleave these blocks ([`JobNumbers`]).
pub const NUMBER_BLOCK: u64 = 16;

/// How a shard's job numbers sit among the fleet's: its process counts `0, 1, 2, ..` and
/// block `b` of [`NUMBER_BLOCK`] numbers is the fleet's block `b · stride + offset`. Outside
/// a `shared` fleet the numbers are the process's own (stride 1, offset 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobNumbers {
    /// How many shards of a `shared` fleet run producers, else 1.
    pub stride: u64,
    /// The shard's rank among them in a `shared` fleet, else 0.
    pub offset: u64,
}

impl JobNumbers {
    /// A process's own numbers: stride 1, offset 0.
    pub const OWN: JobNumbers = JobNumbers { stride: 1, offset: 0 };
}

impl JobNumbers {
    /// The fleet's number of the process's `local` number.
    pub fn global(self, local: u64) -> u64 {
        ((local / NUMBER_BLOCK) * self.stride + self.offset) * NUMBER_BLOCK + local % NUMBER_BLOCK
    }

    /// How many numbers the process may issue: their fleet numbers stay below `u32::MAX` (ids
    /// carry 32 bits, and `u32::MAX` marks an unknown job in a history).
    pub fn local_limit(self) -> u64 {
        u64::from(u32::MAX) / self.stride / NUMBER_BLOCK * NUMBER_BLOCK
    }

    /// One past the highest fleet number a process that issued `local` numbers can have used.
    pub fn issued_bound(self, local: u64) -> u64 {
        match local {
            0 => 0,
            n => self.global((n - 1) / NUMBER_BLOCK * NUMBER_BLOCK) + NUMBER_BLOCK,
        }
    }
}

impl Plan {
    /// This plan's part for shard `index` of `count` in `group`, queues `sharded`, every shard
    /// running producers and consumers (see [`Plan::for_fleet_shard`]).
    ///
    /// # Errors
    /// As [`Plan::for_fleet_shard`].
    pub fn for_shard(self, index: u32, count: u32, group: &str) -> Result<Plan, ScenarioError> {
        self.for_fleet_shard(index, group, &FleetLayout::new(count, QueueMode::Sharded))
    }

    /// This plan's part for shard `index` of the fleet `layout` in `group` (see the module doc).
    ///
    /// # Errors
    /// [`ScenarioError::Override`] naming `--shards` or `--roles` when a shard would get
    /// producers but no consumers in `sharded` mode (its queues would never drain), when a
    /// shard of a role would get none of its tasks, when a role's tasks have no shard, when a
    /// shard has nothing to do, or when a queue name with the shard's prefix is longer than
    /// 64 bytes.
    pub fn for_fleet_shard(self, index: u32, group: &str, layout: &FleetLayout) -> Result<Plan, ScenarioError> {
        let count = layout.count;
        let refuse = |flag: &str, found: String, expected: String| ScenarioError::Override {
            path: self.source.clone(),
            flag: flag.to_owned(),
            found,
            expected,
        };
        if layout.roles.len() != count as usize {
            return Err(refuse(
                "--roles",
                layout.roles_text(),
                format!("one role (p, c or pc) per shard: {count} of them, comma-separated"),
            ));
        }
        if layout.mode == QueueMode::Sharded && layout.roles.iter().any(|r| *r != ShardRole::BOTH) {
            return Err(refuse(
                "--roles",
                layout.roles_text(),
                "pc for every shard with --queue-mode sharded (each shard owns its queues and drains them itself); \
                 producers and consumers on different shards need --queue-mode shared"
                    .to_owned(),
            ));
        }
        let (producers_total, consumers_total) = (self.producers.count, self.consumers.count);
        // The share of one role's `total` tasks for shard `i`: `(first, len)` among the shards
        // that have the role; `(0, 0)` for the others.
        let part = |i: u32, total: u32, produces: bool| {
            let place = layout.place(i, |r| if produces { r.produces } else { r.consumes });
            place.map_or((0, 0), |(at, of)| {
                let (first, len) = share(u64::from(total), at, of);
                (first as u32, len as u32)
            })
        };
        let shards = |produces: bool| {
            layout.roles.iter().filter(|r| if produces { r.produces } else { r.consumes }).count() as u32
        };
        // Every shard's part is checked, not only this one's: each shard of a fleet refuses the
        // same split with the same message.
        let (flag, found) = match layout.mode {
            QueueMode::Sharded => ("--shards", count.to_string()),
            QueueMode::Shared => ("--roles", layout.roles_text()),
        };
        for (produces, total, what) in [(true, producers_total, "producers"), (false, consumers_total, "consumers")] {
            if total > 0 && shards(produces) == 0 {
                return Err(refuse(
                    flag,
                    found,
                    format!("at least one shard that runs {what} ({what}.count = {total})"),
                ));
            }
            if shards(produces) > total && total > 0 {
                return Err(refuse(
                    flag,
                    found,
                    format!("at most {what}.count = {total} shards running {what}: one would get none"),
                ));
            }
        }
        for i in 0..count {
            let (p, c) = (part(i, producers_total, true).1, part(i, consumers_total, false).1);
            if layout.mode == QueueMode::Sharded && p > 0 && c == 0 && consumers_total > 0 {
                return Err(refuse(
                    flag,
                    found,
                    format!(
                        "at most consumers.count = {consumers_total} shards: each shard owns its queues, and shard {i} \
                         would have producers but no consumer to drain them"
                    ),
                ));
            }
            if p == 0 && c == 0 {
                return Err(refuse(flag, found, format!("a task for every shard: shard {i} would have nothing to do")));
            }
        }
        let range = |total: u32, produces: bool| {
            let (first, count) = part(index, total, produces);
            TaskRange { first, count, total }
        };
        let producers = range(producers_total, true);
        let consumers = range(consumers_total, false);
        let queues: Vec<String> = match layout.mode {
            QueueMode::Sharded => self.queues.iter().map(|q| format!("{}{q}", queue_prefix(index))).collect(),
            QueueMode::Shared => self.queues.clone(),
        };
        if let Some(long) = queues.iter().find(|q| !is_valid_name(q)) {
            return Err(refuse(flag, found, format!("queue names of at most 64 bytes with the shard prefix: {long}")));
        }
        // Connections split as the tasks are, at least one for a shard with any task, never
        // more than its tasks.
        let connections = |total: u32, tasks: TaskRange, produces: bool| {
            let (_, len) = part(index, total, produces);
            len.clamp(u32::from(tasks.count > 0), tasks.count.max(1))
        };
        let mut plan = self;
        let fleet_producers = plan.producers.count.max(1);
        // A shard's share scales the whole shape: every stage's rates, and so their mean.
        let share = f64::from(producers.count) / f64::from(fleet_producers);
        plan.producers.open_loop = plan.producers.open_loop.map(|open| OpenLoop {
            rate_per_sec: open.rate_per_sec * share,
            stages: open.stages.map(|s| s.scaled(share)),
            ..open
        });
        plan.stop = match plan.stop {
            Stop::Jobs(jobs) => {
                let at = |i: u32| (u128::from(jobs) * u128::from(i) / u128::from(fleet_producers)) as u64;
                Stop::Jobs(at(producers.first + producers.count) - at(producers.first))
            }
            stop => stop,
        };
        plan.producers.connections = connections(plan.producers.connections, producers, true);
        plan.consumers.connections = connections(plan.consumers.connections, consumers, false);
        plan.producers.count = producers.count;
        plan.consumers.count = consumers.count;
        plan.queues = queues;
        let maintainer = layout.roles.iter().position(|r| r.consumes).unwrap_or(0) as u32;
        // Only the producing shards mint job numbers: the fleet's 2^32 are divided among them.
        let numbers = match layout.mode {
            QueueMode::Shared => layout
                .place(index, |r| r.produces)
                .map_or(JobNumbers::OWN, |(at, of)| JobNumbers { stride: u64::from(of), offset: u64::from(at) }),
            QueueMode::Sharded => JobNumbers::OWN,
        };
        plan.shard = Some(Shard {
            index,
            count,
            group: group.to_owned(),
            mode: layout.mode,
            maintainer,
            numbers,
            producers,
            consumers,
        });
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

    /// The queue mode of this process's fleet (`None` outside a fleet).
    pub fn queue_mode(&self) -> Option<QueueMode> {
        self.shard.as_ref().map(|s| s.mode)
    }

    /// True when the fleet's shards share their queues: the check and the cleanup are the
    /// merge's.
    pub fn shares_queues(&self) -> bool {
        self.queue_mode() == Some(QueueMode::Shared)
    }

    /// True when this process runs the maintenance chores (reap, promote): always, except in
    /// a `shared` fleet, where one shard does it for all.
    pub fn runs_maintenance(&self) -> bool {
        self.shard.as_ref().is_none_or(|s| s.mode == QueueMode::Sharded || s.index == s.maintainer)
    }

    /// Where this process's job numbers sit among its fleet's (see [`JobNumbers`]).
    pub fn job_numbers(&self) -> JobNumbers {
        self.shard.as_ref().map_or(JobNumbers::OWN, |shard| shard.numbers)
    }

    /// The seed of the run's job ids (their run tag): the scenario's seed, mixed with the
    /// shard's index in a `sharded` fleet so no two shards mint the same id. A `shared`
    /// fleet's shards keep one run tag (their job numbers differ).
    pub fn id_seed(&self) -> u64 {
        match &self.shard {
            Some(shard) if shard.mode == QueueMode::Sharded => {
                self.seed ^ (u64::from(shard.index) + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            }
            _ => self.seed,
        }
    }

    /// The prefix of generated queue names (`bench-N` on a cluster): a `sharded` fleet's
    /// shard's, else none.
    pub fn queue_prefix(&self) -> String {
        match &self.shard {
            Some(shard) if shard.mode == QueueMode::Sharded => queue_prefix(shard.index),
            _ => String::new(),
        }
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
                r += part.producers.open_loop.as_ref().unwrap().rate_per_sec;
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

    /// A `shared` fleet's shards interleave their job numbers: no two shards mint the same
    /// one, each shard's numbers increase, and the issued bound covers every number used.
    #[test]
    fn shared_job_numbers_interleave_and_never_collide() {
        for count in [1u64, 2, 3, 7, 64] {
            let mut seen = std::collections::HashSet::new();
            for index in 0..count {
                let numbers = JobNumbers { stride: count, offset: index };
                let globals: Vec<u64> = (0..500).map(|local| numbers.global(local)).collect();
                assert!(globals.windows(2).all(|w| w[0] < w[1]), "increasing on shard {index} of {count}");
                assert!(globals.iter().all(|g| seen.insert(*g)), "shard {index} of {count} repeats a number");
                assert!(numbers.issued_bound(500) > *globals.last().unwrap());
                let last = numbers.global(numbers.local_limit() - 1);
                assert!(last < u64::from(u32::MAX), "{last} fits a job number below the unknown-job mark");
            }
        }
    }

    /// `shared` queues with `p,c,c`: the producers all on shard 0, the consumers split over 1
    /// and 2, one set of queue names and one run tag, the chores on shard 1 only.
    #[test]
    fn a_shared_fleet_splits_by_role() {
        let whole = plan("[producers]\ncount = 3\n[consumers]\ncount = 4\n");
        let roles = ["p", "c", "c"].map(|r| ShardRole::from_name(r).unwrap()).to_vec();
        let layout = FleetLayout { count: 3, mode: QueueMode::Shared, roles };
        let parts: Vec<Plan> = (0..3).map(|i| whole.clone().for_fleet_shard(i, "g", &layout).unwrap()).collect();
        let counts: Vec<(u32, u32)> = parts.iter().map(|p| (p.producers.count, p.consumers.count)).collect();
        assert_eq!(counts, [(3, 0), (0, 2), (0, 2)]);
        assert!(parts.iter().all(|p| p.queues == whole.queues && p.id_seed() == whole.seed));
        let chores: Vec<bool> = parts.iter().map(Plan::runs_maintenance).collect();
        assert_eq!(chores, [false, true, false]);
        // The one producing shard has the fleet's whole number space.
        assert_eq!(parts[0].job_numbers(), JobNumbers::OWN);
        assert_eq!(parts[2].consumer_index(0), 2);
        let sharded = FleetLayout { mode: QueueMode::Sharded, ..layout };
        let err = whole.for_fleet_shard(0, "g", &sharded).unwrap_err().to_string();
        assert!(err.contains("--roles") && err.contains("--queue-mode shared"), "{err}");
    }
}
