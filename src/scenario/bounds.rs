//! Upper bounds of every count and size a scenario may set, and why each is what it is
//! (unbounded, a `pipeline = 1000000` holds gigabytes and sends nothing, and a
//! `producers.count = 4294967295` aborts on an allocation).
//!
//! The aim is that the largest scenario accepted fits comfortably in 24 GiB, beside the
//! embedded server that holds the queue on the same machine. Measured here (the `dev`
//! build, loopback valkey-server, 256-byte payloads, peak RSS of the harness):
//! - a producer lane (one request in flight: a tokio task, its payload buffer, its request's
//!   bytes in the connection's output buffer, a reply slot) ~7.9 KiB (100 000 lanes: 787 MB)
//!   with a task per lane: an upper bound, since a producer is one task with a window of
//!   `pipeline` entries (a reply handle, the job, its request's bytes), which holds less;
//! - a consumer lane ~4.4 KiB (100 000 lanes: 438 MB);
//! - a connection ~66 KiB (4 000: 265 MB; 64 KiB output and 64 KiB read buffers, TLS adds
//!   its own), and one connection on the server too.
//!
//! The largest accepted run therefore holds about 2 roles × [`MAX_LANES`] × 8 KiB = 4 GiB of
//! lanes, 2 × [`MAX_PAYLOAD_IN_FLIGHT`] of payload held at most three times (a producer's
//! request and the connection's buffer, where it is built and sent; a consumer's read buffer,
//! decoded reply and claimed job)
//! = 6 GiB, and 2 × [`MAX_CONNECTIONS`] × 128 KiB = 1 GiB: ~11 GiB, leaving ~13 GiB for the
//! server's copy of the jobs and the checker (~0.5 KiB per job, see [`MAX_JOBS`]).

use std::time::Duration;

/// Producer or consumer tasks per role (`producers.count`, `consumers.count`). Each task
/// has `pipeline` lanes, so [`MAX_LANES`] is the bound that holds memory; this one catches a
/// typo (`4294967295`) with a message naming the field itself.
pub const MAX_TASKS: u64 = 100_000;

/// Connections per role. Both roles at the bound (8192), plus the control and maintenance
/// connections, stay under valkey-server's default `maxclients` (10 000); each holds 128 KiB
/// of buffers (above).
pub const MAX_CONNECTIONS: u64 = 4096;

/// Requests in flight per task (`pipeline`). Replies come back in order, so the last of
/// 10 000 requests on one connection waits for the 9 999 before it (0.1 s at 100 000
/// calls/s): deeper pipelines only add queueing, until the last replies meet the reply
/// timeout.
pub const MAX_PIPELINE: u64 = 10_000;

/// Lanes per role: `count × pipeline`, each a task of up to ~8 KiB (measured above), so at
/// most ~2 GiB per role.
pub const MAX_LANES: u64 = 250_000;

/// Payload bytes in flight per role, before the ~3 copies the harness keeps of each (above):
/// producers `count × pipeline × largest payload`, consumers `count × pipeline × batch ×
/// largest payload` (a claim reply carries `batch` payloads). The largest payload of a
/// log-normal is its 99.999th percentile, the largest a long run draws
/// ([`SizeSampler::largest_drawn_bytes`](super::SizeSampler::largest_drawn_bytes)), not its
/// 64 MiB clamp.
pub const MAX_PAYLOAD_IN_FLIGHT: u64 = 1 << 30;

/// `jobs = N`. The checker holds ~0.5 KiB per job (its events, its row, the location-set
/// members) and the embedded server ~0.5 KiB plus the payload: 10 million jobs take ~5 GiB
/// each. A `duration` run is bounded by its throughput instead.
pub const MAX_JOBS: u64 = 10_000_000;

/// Entries of a list: `producers.priorities`, a `weighted` distribution. Drawn from
/// uniformly or by weight, a longer list only spells a typo or a generated file gone wrong.
pub const MAX_LIST: usize = 1000;

/// `producers.max_attempts`: a retry budget; the bound only catches typos (such as
/// u32::MAX), far past any retry policy.
pub const MAX_ATTEMPTS: u64 = 10_000;

/// `consumers.progress`: calls per job, each one request; past 1000 the run measures
/// `progress` alone.
pub const MAX_PROGRESS: u64 = 1000;

/// `consumers.batch`: the `claim` count ARGV; a reply carries `batch` payloads.
pub const MAX_BATCH: u64 = 1000;

/// `maintenance.limit`: ids one `reap` or `promote` call moves (one script call blocks the
/// server for as long as it runs).
pub const MAX_LIMIT: u64 = 100_000;

/// `maintenance.retain`: a week, as a run's length ([`MAX_RUN`]): keeping finished jobs longer
/// than the longest run is keeping them all.
pub const MAX_RETAIN: Duration = MAX_RUN;

/// `queues = N` (a sanity bound, not a protocol rule: 2 maintenance tasks per queue).
pub const MAX_QUEUES: u32 = 10_000;

/// `producers.rate` and each `stages[i].rate`, jobs/s over all producers. At 10 million jobs/s the schedule's gap is
/// 0.1 µs; no client sends that fast (a request costs the client microseconds of CPU, and a
/// single server runs well under a million scripts/s), and a faster schedule is only an
/// unmeasured closed loop whose every send is late.
pub const MAX_RATE: f64 = 10_000_000.0;

/// `[[stages]]` entries. A stage is a line of the load shape; a thousand draw any shape a run
/// of at most a week can show second by second, and more spell a generated file gone wrong.
pub const MAX_STAGES: usize = 1000;

/// One lane's best-case request rate for the rate warning: a lane has one call in flight, so it
/// completes at most one call per loopback EVALSHA round trip, taken as 50 µs (the p50 of a
/// one-lane closed loop, docs/performance-log.md).
pub const LANE_CALLS_PER_SEC: f64 = 20_000.0;

/// `duration`, `warmup` and `drain` (and `--duration`): a week. A longer run's history
/// (~30 bytes per job) outgrows memory at any useful rate, and a duration past the range of
/// `Instant` would panic (`duration = "500000000000y"`). The other durations (lease, poll, the
/// maintenance intervals, ...) are bounded by [`MAX_DURATION`](super::MAX_DURATION), 1 h.
pub const MAX_RUN: Duration = Duration::from_secs(7 * 24 * 3600);

/// Primaries of an embedded cluster: enough to spread queues, few enough for one machine.
pub const MAX_PRIMARIES: u64 = 16;
/// Replicas per primary of an embedded cluster.
pub const MAX_REPLICAS: u64 = 4;

/// `target.wait.replicas`: a replica set larger than 16 per primary is not one machine's
/// test, and the bound catches a typo (`replicas = 100`).
pub const MAX_WAIT_REPLICAS: u64 = 16;

/// `target.wait.timeout`: a minute of `WAIT` per call already stalls a connection's whole
/// pipeline behind it; past that the run measures nothing but the timeout.
pub const MAX_WAIT_TIMEOUT: Duration = Duration::from_secs(60);
