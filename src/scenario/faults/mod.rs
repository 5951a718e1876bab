//! `[[faults]]`: the nemesis schedule (Jepsen's nemesis is the model): faults injected on
//! purpose during the load phase, so a soak tests fencing under faults, not only contention.
//!
//! ```toml
//! [[faults]]
//! kind = "kill-connections"   # CLIENT KILL of the harness's own load connections
//! every = "4s"                # repeat; the first at `at` (default: one `every` in)
//!
//! [[faults]]
//! kind = "pause"              # CLIENT PAUSE for `duration`; mode "write" (default) or "all"
//! at = "3s"
//! duration = "1s"
//! mode = "write"
//!
//! [[faults]]
//! kind = "restart"            # embedded server only: stop it ("term" or "kill") and start it
//! at = "6s"                   # again on the same port and data directory
//! signal = "kill"
//!
//! [[faults]]
//! kind = "kill-primary"       # embedded cluster only: SIGKILL of the primary of `queue`'s slot
//! at = "4s"
//! queue = "bench-0"           # default: the scenario's first queue
//! lag = "300ms"               # first cut its replicas off for this long (1ms..=60s)
//! restart = true              # and start it again `duration` after the kill (it rejoins
//! duration = "5s"             # as a replica of the promoted node)
//!
//! [[faults]]
//! kind = "cluster-failover"   # any cluster: CLUSTER FAILOVER sent to a replica of `queue`'s primary
//! at = "8s"
//! mode = "takeover"           # "default" (nothing lost), "force" or "takeover"
//! lag = "300ms"               # embedded cluster only: the replicas cut off first
//!
//! [[faults]]
//! kind = "partition"          # embedded cluster only, in a network namespace of its own:
//! at = "4s"                   # `queue`'s primary cut off from every other node (iptables)
//! duration = "5s"             # for this long, then healed
//! side = "minority"           # the harness still reaches it ("majority": cut off from it too)
//! ```
//! Kinds: `kill-connections`, `pause`, `script-flush` (SCRIPT FLUSH), `maxmemory` (lowered to
//! the memory in use, `noeviction`, for `duration`), and with the embedded server `freeze`
//! (SIGSTOP for `duration`, then SIGCONT), `restart` and `failover` (to an embedded replica
//! started with the run: FAILOVER, then every connection follows the new primary). What
//! survives a restart is what the `[target] server` persistence options keep
//! (`appendonly = "yes"`, `appendfsync = "always"`).
//!
//! On a cluster: `kill-primary` (the embedded cluster only: `[target] cluster`, no url) and
//! `cluster-failover` (any Valkey Cluster the user may administer). Both act on the primary
//! that owns `queue`'s slot, a name from the scenario's `queues` (with `queues = N` on a
//! cluster the run renames its queues to spread them over the primaries: `bench-K` then means
//! the run's (K+1)-th queue). `lag` cuts the replication link first, so what the primary
//! acknowledges during the lag exists on it alone: every replica of that primary is frozen
//! (SIGSTOP), the primary drops its replica connections (CLIENT KILL TYPE replica; a frozen
//! replica cannot reconnect, and freezing alone is not enough: its kernel still receives the
//! stream), the lag is held, then the replicas are resumed at the kill, or just before the
//! CLUSTER FAILOVER. `kill-primary` without `lag` kills at once; its span ends when a new
//! primary of the slot is seen. `cluster-failover` in the default mode loses nothing even
//! after a lag (the replica catches up in the handshake); `force` and `takeover` lose the
//! lag's writes. `partition` cuts the primary off from every other node (the cluster bus and
//! replication) with iptables rules for `duration`; `side` says whether the harness stays with
//! it (`minority`) or with the rest (`majority`).

mod modes;
mod resolve;
#[cfg(test)]
mod tests;

pub use modes::{FailoverMode, ModeSpec, PartitionSide, PauseMode, RestartSignal};
pub(crate) use resolve::{faults, Within};

use super::units::HumanDuration;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The most `[[faults]]` entries a scenario may have.
pub const MAX_FAULTS: usize = 64;

/// One `[[faults]]` entry as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    /// What to do.
    pub kind: FaultKind,
    /// When, counted from the start of the run (the first time, with `every`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<HumanDuration>,
    /// Repeat this often during the load phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every: Option<HumanDuration>,
    /// How long the fault lasts (`pause`, `freeze`, `maxmemory`, `partition`; `kill-primary`
    /// with `restart`: how long the node stays down).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<HumanDuration>,
    /// `pause`: `write` (the default) or `all`; `cluster-failover`: `default` (the default),
    /// `force` or `takeover`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ModeSpec>,
    /// `restart` only: `term` (SIGTERM, a clean shutdown, the default) or `kill` (SIGKILL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<RestartSignal>,
    /// `kill-primary`, `cluster-failover` and `partition`: the queue whose primary is acted on
    /// (a name of the scenario's `queues`; default the first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// `kill-primary` and `cluster-failover` on the embedded cluster: how long the primary's
    /// replicas are cut off before the fault (1 ms..=60 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag: Option<HumanDuration>,
    /// `kill-primary` only: start the killed node again `duration` after the kill.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart: Option<bool>,
    /// `partition` only: `minority` (the default: the harness stays with the isolated
    /// primary) or `majority` (the harness is cut off from it too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub side: Option<PartitionSide>,
}

/// The fault kinds. TOML: kebab-case strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// CLIENT KILL of the load's own connections (by their client name, `emq-bench-load`).
    KillConnections,
    /// CLIENT PAUSE WRITE (or ALL) for `duration`.
    Pause,
    /// SCRIPT FLUSH: the load must load its scripts again (NOSCRIPT).
    ScriptFlush,
    /// `maxmemory` lowered to the memory in use, policy `noeviction`, for `duration`: writes
    /// are refused with OOM.
    Maxmemory,
    /// SIGSTOP of the embedded server for `duration`, then SIGCONT.
    Freeze,
    /// The embedded server stopped (`signal`) and started again on its port and data directory.
    Restart,
    /// FAILOVER to the embedded replica the run started (REPLICAOF the primary); every
    /// connection then follows the new primary, and the old one becomes its replica.
    Failover,
    /// SIGKILL of the embedded cluster's node that is the primary of `queue`'s slot (after
    /// `lag` cut off from its replicas); the cluster promotes one of its replicas.
    KillPrimary,
    /// CLUSTER FAILOVER (`mode`) sent to a replica of `queue`'s primary (after `lag` cut off
    /// from it, on the embedded cluster).
    ClusterFailover,
    /// The embedded cluster's primary of `queue`'s slot cut off from every other node (cluster
    /// bus and replication) by iptables rules for `duration`, then healed; `side` says which
    /// side the harness is on. Needs a network namespace of the run's own.
    Partition,
}

/// What a fault kind acts on, beyond a connection to every node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// Any target that allows the commands.
    Commands,
    /// A Valkey Cluster (embedded or not) that allows the commands.
    Cluster,
    /// The embedded server's process (one server, no url).
    EmbeddedServer,
    /// The embedded cluster's processes (`[target] cluster`, no url).
    EmbeddedCluster,
}

/// The run's target as the scenario's validation sees it (a `--url` flag may replace it:
/// the run's options check the faults again then).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetShape {
    /// A url: a deployment the harness did not start.
    Url,
    /// The embedded server.
    EmbeddedServer,
    /// The embedded cluster.
    EmbeddedCluster,
}

impl FaultKind {
    /// Every kind, in declaration order.
    pub const ALL: [FaultKind; 10] = [
        FaultKind::KillConnections,
        FaultKind::Pause,
        FaultKind::ScriptFlush,
        FaultKind::Maxmemory,
        FaultKind::Freeze,
        FaultKind::Restart,
        FaultKind::Failover,
        FaultKind::KillPrimary,
        FaultKind::ClusterFailover,
        FaultKind::Partition,
    ];

    /// The kind as the scenario spells it (and summary.json, intervals.csv and the table).
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::KillConnections => "kill-connections",
            FaultKind::Pause => "pause",
            FaultKind::ScriptFlush => "script-flush",
            FaultKind::Maxmemory => "maxmemory",
            FaultKind::Freeze => "freeze",
            FaultKind::Restart => "restart",
            FaultKind::Failover => "failover",
            FaultKind::KillPrimary => "kill-primary",
            FaultKind::ClusterFailover => "cluster-failover",
            FaultKind::Partition => "partition",
        }
    }

    /// True when every fault of the kind lasts a `duration` (a `kill-primary` lasts one only
    /// with `restart`).
    pub fn lasts(self) -> bool {
        matches!(self, FaultKind::Pause | FaultKind::Freeze | FaultKind::Maxmemory | FaultKind::Partition)
    }

    /// What the kind needs besides connections (`cluster-failover` with a `lag` needs the
    /// embedded cluster: [`FaultPlan::needs`]).
    pub fn needs(self) -> Needs {
        match self {
            FaultKind::Freeze | FaultKind::Restart | FaultKind::Failover => Needs::EmbeddedServer,
            FaultKind::KillPrimary | FaultKind::Partition => Needs::EmbeddedCluster,
            FaultKind::ClusterFailover => Needs::Cluster,
            FaultKind::KillConnections | FaultKind::Pause | FaultKind::ScriptFlush | FaultKind::Maxmemory => {
                Needs::Commands
            }
        }
    }

    /// True when the kind acts on the primary of one queue (`queue`).
    pub fn on_a_queue(self) -> bool {
        matches!(self, FaultKind::KillPrimary | FaultKind::ClusterFailover | FaultKind::Partition)
    }

    /// True when the kind takes a `lag` (its replicas cut off before the fault).
    fn takes_lag(self) -> bool {
        matches!(self, FaultKind::KillPrimary | FaultKind::ClusterFailover)
    }
}

/// One resolved fault.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultPlan {
    /// What to do.
    pub kind: FaultKind,
    /// The first time, from the run start.
    pub first: Duration,
    /// The repeat period, if any.
    pub every: Option<Duration>,
    /// How long it lasts (zero for the instant kinds and `restart`, whose length is the
    /// server's own; for `kill-primary` with `restart`, how long the node stays down).
    pub duration: Duration,
    /// `pause`'s mode.
    pub mode: PauseMode,
    /// `cluster-failover`'s mode.
    pub failover: FailoverMode,
    /// `restart`'s signal.
    pub signal: RestartSignal,
    /// `kill-primary`, `cluster-failover` and `partition`: the index, in the plan's `queues`,
    /// of the queue whose primary is acted on (an index, not a name: a cluster run renames its
    /// queues).
    pub queue: usize,
    /// `kill-primary` and `cluster-failover`: how long the replicas are cut off first.
    pub lag: Option<Duration>,
    /// `kill-primary`: start the killed node again after `duration`.
    pub restart: bool,
    /// `partition`: which side the harness's connections are on.
    pub side: PartitionSide,
}

impl FaultPlan {
    /// What this fault needs: its kind's, and the embedded cluster for a `lag` (only a
    /// process the harness started can be frozen).
    pub fn needs(&self) -> Needs {
        match (self.kind, self.lag) {
            (FaultKind::ClusterFailover, Some(_)) => Needs::EmbeddedCluster,
            (kind, _) => kind.needs(),
        }
    }

    /// The field a refusal for a target without [`FaultPlan::needs`] names: `lag` when the
    /// lag is what needs the embedded cluster, else `kind`.
    pub fn needs_field(&self) -> &'static str {
        match (self.kind.needs(), self.needs()) {
            (kind, plan) if kind == plan => "kind",
            _ => "lag",
        }
    }

    /// Whether `target` gives what the fault needs; `Err` says what it needs, as a refusal's
    /// "expected". With a url, a fault that needs a cluster is let through (the run finds out).
    pub fn fits(&self, target: TargetShape) -> Result<(), String> {
        match (self.needs(), target) {
            (Needs::Commands, _) | (Needs::Cluster, TargetShape::Url | TargetShape::EmbeddedCluster) => Ok(()),
            (Needs::EmbeddedServer, TargetShape::EmbeddedServer) => Ok(()),
            (Needs::EmbeddedCluster, TargetShape::EmbeddedCluster) => Ok(()),
            (Needs::Cluster, TargetShape::EmbeddedServer) => {
                Err("a Valkey Cluster ([target] cluster, or a url of a cluster): CLUSTER FAILOVER needs one".into())
            }
            (Needs::EmbeddedServer, TargetShape::EmbeddedCluster) => {
                Err("one embedded server, not an embedded cluster (kill-primary and cluster-failover act on a cluster)"
                    .into())
            }
            (Needs::EmbeddedServer, TargetShape::Url) => Err(
                "the embedded server (no [target] url): the harness can only freeze, restart or fail over a server \
                 it started"
                    .into(),
            ),
            (Needs::EmbeddedCluster, _) if self.needs_field() == "lag" => Err(
                "no lag here: a lag freezes the replicas, and only the embedded cluster's ([target] cluster, no url) \
                 can be frozen"
                    .into(),
            ),
            (Needs::EmbeddedCluster, _) => Err(
                "the embedded cluster ([target] cluster, no url): the harness can only kill or partition a node it \
                 started"
                    .into(),
            ),
        }
    }

    /// How many times it fires before `until` (what [`FaultPlan::times`] would list, without
    /// a limit or a list).
    pub fn count_before(&self, until: Duration) -> usize {
        if self.first >= until {
            return 0;
        }
        match self.every {
            None => 1,
            Some(every) => ((until - self.first).as_nanos().saturating_sub(1) / every.as_nanos().max(1)) as usize + 1,
        }
    }

    /// The times it fires before `until` (the end of the load phase), in order; at most
    /// `limit` of them.
    pub fn times(&self, until: Duration, limit: usize) -> Vec<Duration> {
        let mut out = Vec::new();
        let mut at = self.first;
        while at < until && out.len() < limit {
            out.push(at);
            match self.every {
                Some(every) => at += every,
                None => break,
            }
        }
        out
    }
}
