//! Job-level counters the driver bumps (not per script): how many jobs moved through each step.

/// One job-level counter; `index()` is dense so counters live in a plain `[u64; JobCounter::COUNT]`.
///
/// These count *job outcomes* as the driver interprets replies (an `enqueue` reply of `0` is a
/// duplicate, a `fail` reply of `retry` is a retry, ...), separately from the per-script call
/// counts, which count *calls*.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum JobCounter {
    /// `enqueue`/`enqueue_delayed` replied 1: a new job.
    Enqueued,
    /// `enqueue`/`enqueue_delayed` replied 0: the id already existed (row untouched).
    Duplicates,
    /// Jobs handed out by `claim` (one per entry of its reply array).
    Claimed,
    /// `complete` replied 1.
    Completed,
    /// `fail` replied `retry`.
    Retried,
    /// `fail` replied `failed`: attempts exhausted.
    Failed,
    /// Expired leases returned to pending by `reap` (the sum of its replies).
    Reaped,
    /// Delayed jobs moved to pending by `promote` (the sum of its replies).
    Promoted,
    /// `complete` refused with `EMQFENCE`/`EMQSTATE` for a worker whose lease was reaped.
    StaleRefused,
    /// Open-loop sends later than intended by more than the caller's threshold (1 ms).
    LateSends,
    /// Attempts a consumer abandoned on purpose (the `stall` fraction): the lease must expire.
    Stalled,
    /// Stale (zombie) `complete` calls that the server accepted: the job was still held with
    /// that token (not yet reaped), so this is legal, but it means the zombie was not stale.
    StaleAccepted,
    /// Claimed payloads whose identity or checksum did not match what was enqueued (I4).
    PayloadCorrupt,
    /// Duplicate enqueues (a re-used id) that replied 1 instead of 0 (I8).
    DuplicateAccepted,
    /// Jobs `reap` failed for good because their last lease expired (`last_error = stalled`,
    /// docs/protocol.md "Why v1.1": poison jobs end). `reap`'s reply counts them among the reaped,
    /// so this is read from the server at the end (the check's scan), not bumped by the driver.
    FailedByStall,
    /// Cluster redirects (MOVED, ASK, TRYAGAIN) the load followed: each a call re-sent to the
    /// node that owns the slot now, never counted as an error or as throughput.
    Redirects,
    /// Load connections re-opened after a loss (a fault seen: server restart, CLIENT KILL, a
    /// reply timeout that dropped the connection). Counted per second, so faults have times.
    Reconnects,
    /// Calls a cluster refused with CLUSTERDOWN (it could not serve the slot: a failover under
    /// way, or too few primaries reachable) that the load waited out and sent again. Counted
    /// per second, so the failover table can say how long the cluster answered it.
    ClusterDown,
    /// Calls refused before they ran for another passing reason, waited out and sent again:
    /// LOADING (a node loading its data), or queued on a node that could not be reached.
    RefusedWaited,
    /// Finished jobs whose rows `clean` removed (the retention chore; the sum of its replies'
    /// lengths).
    Retired,
}

impl JobCounter {
    /// Every counter, in `index()` order.
    pub const ALL: [JobCounter; 20] = [
        JobCounter::Enqueued,
        JobCounter::Duplicates,
        JobCounter::Claimed,
        JobCounter::Completed,
        JobCounter::Retried,
        JobCounter::Failed,
        JobCounter::Reaped,
        JobCounter::Promoted,
        JobCounter::StaleRefused,
        JobCounter::LateSends,
        JobCounter::Stalled,
        JobCounter::StaleAccepted,
        JobCounter::PayloadCorrupt,
        JobCounter::DuplicateAccepted,
        JobCounter::FailedByStall,
        JobCounter::Redirects,
        JobCounter::Reconnects,
        JobCounter::ClusterDown,
        JobCounter::RefusedWaited,
        JobCounter::Retired,
    ];

    /// Number of counters (the length of `[u64; JobCounter::COUNT]`).
    pub const COUNT: usize = 20;

    /// Dense index in `0..JobCounter::COUNT`.
    pub fn index(self) -> usize {
        self as usize
    }

    /// Snake-case name, as JSON keys and the jobs line use it.
    pub fn name(self) -> &'static str {
        match self {
            JobCounter::Enqueued => "enqueued",
            JobCounter::Duplicates => "duplicates",
            JobCounter::Claimed => "claimed",
            JobCounter::Completed => "completed",
            JobCounter::Retried => "retried",
            JobCounter::Failed => "failed",
            JobCounter::Reaped => "reaped",
            JobCounter::Promoted => "promoted",
            JobCounter::StaleRefused => "stale_refused",
            JobCounter::LateSends => "late_sends",
            JobCounter::Stalled => "stalled",
            JobCounter::StaleAccepted => "stale_accepted",
            JobCounter::PayloadCorrupt => "payload_corrupt",
            JobCounter::DuplicateAccepted => "duplicate_accepted",
            JobCounter::FailedByStall => "failed_by_stall",
            JobCounter::Redirects => "redirects",
            JobCounter::Reconnects => "reconnects",
            JobCounter::ClusterDown => "cluster_down_waited",
            JobCounter::RefusedWaited => "refused_waited",
            JobCounter::Retired => "retired",
        }
    }
}
