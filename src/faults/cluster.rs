//! The faults that act on a Valkey Cluster: `kill-primary` (SIGKILL of the embedded node that
//! is the primary of a queue's slot, optionally restarted) and `cluster-failover` (CLUSTER
//! FAILOVER sent to a replica of that primary, on any cluster), each optionally after a `lag`
//! that cuts the primary's replicas off so what it acknowledges meanwhile exists on it alone;
//! and what `partition` (in `partition`) shares with them: finding the shard, watching for
//! its new owner, waiting for a node to become a replica.
//!
//! Where things are is read from the cluster itself (CLUSTER SLOTS, through the nemesis's own
//! connections), never from the roles the embedded cluster started with: an earlier failover
//! has moved them. Every wait is bounded, and each span's detail says what was seen and when,
//! or `failed: ` with what did not happen.

use super::kinds::{Done, FaultTarget};
use super::lag::{cut, resume};
use super::nemesis::hold;
use crate::net::slot::slot;
use crate::net::topology::{parse_slots, SlotRange};
use crate::net::{ConnectOptions, Control};
use crate::plane::Plane;
use crate::scenario::FaultPlan;
use crate::server::EmbeddedCluster;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// A node's address as CLUSTER SLOTS gives it.
pub(super) type Address = (String, u16);

/// How long one look at a node (a connect, a CLUSTER SLOTS) may take: a frozen or dead node
/// must not hold the fault.
pub(super) const LOOK: Duration = Duration::from_secs(1);
/// How often the new owner of a slot is looked for.
const POLL: Duration = Duration::from_millis(50);
/// How long a promotion may take beyond the cluster's node timeout (the election, a manual
/// failover's handshake); on a cluster the harness did not start, whose node timeout is
/// unknown, the whole wait is this plus [`UNKNOWN_NODE_TIMEOUT`].
pub(super) const PROMOTION_SLACK: Duration = Duration::from_secs(10);
/// The node timeout assumed for a cluster the harness did not start (Valkey's default is 15 s,
/// but a manual failover does not wait for it).
const UNKNOWN_NODE_TIMEOUT: Duration = Duration::from_secs(5);

/// The primary that owns a queue's slot, its replicas, and the run's queues it serves.
pub(super) struct Shard {
    /// The queue's slot.
    pub slot: u16,
    /// The primary.
    pub primary: Address,
    /// Its replicas, as CLUSTER SLOTS lists them.
    pub replicas: Vec<Address>,
    /// Every node CLUSTER SLOTS names (primaries and replicas), the primary included.
    pub nodes: Vec<Address>,
    /// The run's queues whose slot the primary owns.
    pub queues: Vec<String>,
}

impl Shard {
    /// `127.0.0.1:7000 (primary of slot 4091, queues bench-0)`, as each span names it.
    pub fn describe(&self) -> String {
        format!("{} (primary of slot {}, queues {})", show(&self.primary), self.slot, self.queues.join(", "))
    }
}

/// `host:port`.
pub(super) fn show(address: &Address) -> String {
    format!("{}:{}", address.0, address.1)
}

/// Reads the slot map from the first of the nemesis's connections that answers and finds
/// the shard of `fault`'s queue.
pub(super) async fn shard_of(fault: &FaultPlan, target: &FaultTarget<'_>, plane: &Plane) -> Result<Shard, String> {
    let keys = target.queues.get(fault.queue).ok_or("the fault's queue is not one of the run's")?;
    let wanted = slot(keys.lock.as_bytes());
    let mut last = String::from("no node to ask");
    for node in plane.nodes() {
        let ranges = match cluster_slots(&node).await {
            Ok(ranges) => ranges,
            Err(err) => {
                last = err;
                continue;
            }
        };
        let Some(owner) = ranges.iter().find(|r| (r.start..=r.end).contains(&wanted)) else {
            last = format!("{} serves no range with slot {wanted}", node.connector().endpoint().display());
            continue;
        };
        let (primary, replicas) = (owner.primary.clone(), owner.replicas.clone());
        let mut nodes: Vec<Address> = Vec::new();
        for range in &ranges {
            for address in std::iter::once(&range.primary).chain(&range.replicas) {
                if !nodes.contains(address) {
                    nodes.push(address.clone());
                }
            }
        }
        let queues = target
            .queues
            .iter()
            .filter(|q| {
                let s = slot(q.lock.as_bytes());
                ranges.iter().any(|r| r.primary == primary && (r.start..=r.end).contains(&s))
            })
            .map(|q| q.queue.to_string())
            .collect();
        return Ok(Shard { slot: wanted, primary, replicas, nodes, queues });
    }
    Err(format!("the slot map could not be read: {last}"))
}

/// CLUSTER SLOTS through `node`, within [`LOOK`].
async fn cluster_slots(node: &Control) -> Result<Vec<SlotRange>, String> {
    let mut conn = node.clone();
    let host = node.connector().endpoint().host.clone();
    let cmd = redis::cmd("CLUSTER").arg("SLOTS").clone();
    match tokio::time::timeout(LOOK, cmd.query_async::<redis::Value>(&mut conn)).await {
        Ok(Ok(reply)) => Ok(parse_slots(&reply, &host)),
        Ok(Err(err)) => Err(format!("{}: {err}", node.connector().endpoint().display())),
        Err(_) => Err(format!("{}: no reply within {LOOK:?}", node.connector().endpoint().display())),
    }
}

/// A connection of the nemesis's own (same TLS and auth) to `address`, within [`LOOK`].
pub(super) async fn connect(plane: &Plane, address: &Address) -> Result<Control, String> {
    let connector = plane.seed().connector().at(&address.0, address.1).map_err(|e| e.to_string())?;
    let opts = ConnectOptions { client_name: None, ..plane.seed().opts() };
    match tokio::time::timeout(LOOK, Control::connect(&connector, opts)).await {
        Ok(conn) => conn.map_err(|e| e.to_string()),
        Err(_) => Err(format!("{}: no connection within {LOOK:?}", show(address))),
    }
}

/// Looks through `nodes` every [`POLL`] until one reports a primary of `slot` that `wanted`
/// accepts, for at most `within`; returns that primary and when it was first seen.
pub(super) async fn wait_for_owner(
    nodes: &[Control],
    slot: u16,
    wanted: impl Fn(&Address) -> bool,
    within: Duration,
) -> Option<(Address, Instant)> {
    let deadline = Instant::now() + within;
    loop {
        for node in nodes {
            let Ok(ranges) = cluster_slots(node).await else { continue };
            let owner = ranges.into_iter().find(|r| (r.start..=r.end).contains(&slot)).map(|r| r.primary);
            if let Some(owner) = owner.filter(|o| wanted(o)) {
                return Some((owner, Instant::now()));
            }
        }
        if Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The nemesis's map read again after a fault moved a slot (its connection to a dead node
/// fails meanwhile); a note for the detail when that failed.
pub(super) async fn refresh(plane: &Plane) -> String {
    match plane.refresh().await {
        Ok(()) => String::new(),
        Err(err) => format!("; the slot map could not be read again: {err}"),
    }
}

/// `kill-primary`: SIGKILL of the embedded node that is the primary of the fault's queue
/// (after the `lag`, if any, with its replicas resumed at the kill), then waits (the node
/// timeout plus [`PROMOTION_SLACK`]) until another node owns the slot; with `restart`, starts
/// the killed node again `duration` after the kill (at once when the load phase ends first)
/// and waits until it is a replica. Blocks this (the nemesis's own) thread during the restart:
/// the new process is tied to it.
pub(crate) async fn kill_primary(
    fault: &FaultPlan,
    target: &FaultTarget<'_>,
    start: Instant,
    end: &mut watch::Receiver<bool>,
) -> Result<Done, String> {
    let cluster = target.cluster.ok_or("kill-primary needs the embedded cluster")?;
    let plane = target.plane.borrow().clone().ok_or("no connection to the cluster")?;
    let shard = shard_of(fault, target, &plane).await?;
    let victim = cluster
        .lock()
        .expect("cluster")
        .node_at(shard.primary.1)
        .ok_or_else(|| format!("the primary {} is no embedded node", show(&shard.primary)))?;
    // Every other node is watched for the new owner; connected now, before any is frozen.
    let mut watchers = Vec::new();
    for address in shard.nodes.iter().filter(|a| **a != shard.primary) {
        if let Ok(conn) = connect(&plane, address).await {
            watchers.push(conn);
        }
    }
    let mut primary = connect(&plane, &shard.primary).await?;
    let cut = match fault.lag {
        Some(lag) => Some(cut(cluster, &shard, &mut primary, lag, end).await?),
        None => None,
    };
    cluster.lock().expect("cluster").nodes_mut()[victim].server.kill();
    let killed = Instant::now();
    let mut detail = format!("SIGKILL of {}", shard.describe());
    resume(cut, &mut detail);
    let node_timeout = cluster.lock().expect("cluster").node_timeout();
    let within = node_timeout + PROMOTION_SLACK;
    let promoted = wait_for_owner(&watchers, shard.slot, |owner| *owner != shard.primary, within).await;
    let mut failed = Vec::new();
    match &promoted {
        Some((owner, seen)) => detail.push_str(&format!(
            "; {} promoted, seen at {:.2} s ({:.2} s after the kill)",
            show(owner),
            (*seen - start).as_secs_f64(),
            (*seen - killed).as_secs_f64()
        )),
        None => failed.push(format!("no new primary of slot {} within {within:?} of the kill", shard.slot)),
    }
    if fault.restart {
        hold(fault.duration.saturating_sub(killed.elapsed()), end).await;
        match restart(cluster, victim, &plane, &shard.primary, within).await {
            Ok(rejoined) => detail.push_str(&format!("; restarted {:.2} s after the kill, {rejoined}", {
                killed.elapsed().as_secs_f64()
            })),
            Err(err) => failed.push(err),
        }
    }
    detail.push_str(&refresh(&plane).await);
    match failed.is_empty() {
        true => Ok((1, detail)),
        false => Err(format!("{}; {detail}", failed.join("; "))),
    }
}

/// Starts the killed node `victim` again on its port and data directory (its nodes.conf makes
/// it rejoin, as a replica of the node promoted in its place) and waits, up to `within`, until
/// it says it is a replica. Returns what it became.
async fn restart(
    cluster: &Mutex<EmbeddedCluster>,
    victim: usize,
    plane: &Plane,
    address: &Address,
    within: Duration,
) -> Result<String, String> {
    let began = Instant::now();
    cluster.lock().expect("cluster").nodes_mut()[victim]
        .server
        .start_again()
        .map_err(|e| format!("the killed node did not start again: {e}"))?;
    let mut node = connect(plane, address).await?;
    let became = become_replica(&mut node, within).await;
    became
        .map(|of| format!("a replica of {of} {:.2} s later", began.elapsed().as_secs_f64()))
        .map_err(|last| format!("the restarted node {} was no replica within {within:?} ({last})", show(address)))
}

/// Reads `node`'s INFO replication every [`POLL`] until it says it is a replica, for at most
/// `within`; returns its primary's `host:port`, or (`Err`) the role it had last.
pub(super) async fn become_replica(node: &mut Control, within: Duration) -> Result<String, String> {
    let deadline = Instant::now() + within;
    let mut last = String::from("no answer");
    loop {
        let info = redis::cmd("INFO").arg("replication").clone();
        if let Ok(Ok(text)) = tokio::time::timeout(LOOK, info.query_async::<String>(node)).await {
            let field = |name: &str| text.lines().find_map(|l| l.strip_prefix(name)).map(str::trim).map(str::to_owned);
            if field("role:").as_deref() == Some("slave") {
                let host = field("master_host:").unwrap_or_default();
                let port = field("master_port:").unwrap_or_default();
                return Ok(format!("{host}:{port}"));
            }
            last = format!("role {}", field("role:").unwrap_or_default());
        }
        if Instant::now() > deadline {
            return Err(last);
        }
        tokio::time::sleep(POLL).await;
    }
}

/// `cluster-failover`: CLUSTER FAILOVER (`mode`) sent to the first replica of the fault's
/// queue's primary (after the `lag`, if any, with the replicas resumed just before), then
/// waits (the node timeout plus [`PROMOTION_SLACK`]) until that replica owns the slot.
pub(crate) async fn cluster_failover(
    fault: &FaultPlan,
    target: &FaultTarget<'_>,
    start: Instant,
    end: &mut watch::Receiver<bool>,
) -> Result<Done, String> {
    let plane = target.plane.borrow().clone().ok_or("no connection to the cluster")?;
    let shard = shard_of(fault, target, &plane).await?;
    let chosen = shard
        .replicas
        .first()
        .cloned()
        .ok_or_else(|| format!("the primary {} of slot {} has no replica", show(&shard.primary), shard.slot))?;
    // Connected before any node is frozen.
    let mut replica = connect(&plane, &chosen).await?;
    let cut = match (fault.lag, target.cluster) {
        (Some(lag), Some(cluster)) => {
            let mut primary = connect(&plane, &shard.primary).await?;
            Some(cut(cluster, &shard, &mut primary, lag, end).await?)
        }
        (Some(_), None) => return Err("a lag needs the embedded cluster".into()),
        (None, _) => None,
    };
    let mut command = redis::cmd("CLUSTER");
    command.arg("FAILOVER");
    if let Some(option) = fault.failover.option() {
        command.arg(option);
    }
    let spelled = format!("CLUSTER FAILOVER{}", fault.failover.option().map(|o| format!(" {o}")).unwrap_or_default());
    let mut detail = format!("{spelled} to {}, replica of {}", show(&chosen), shard.describe());
    resume(cut, &mut detail);
    let sent = Instant::now();
    match tokio::time::timeout(LOOK, command.exec_async(&mut replica)).await {
        Ok(Ok(())) => {}
        Ok(Err(err)) => return Err(format!("{spelled} on {}: {err}", show(&chosen))),
        Err(_) => return Err(format!("{spelled} on {}: no reply within {LOOK:?}", show(&chosen))),
    }
    let node_timeout = target.cluster.map_or(UNKNOWN_NODE_TIMEOUT, |c| c.lock().expect("cluster").node_timeout());
    let within = node_timeout + PROMOTION_SLACK;
    let promoted = wait_for_owner(std::slice::from_ref(&replica), shard.slot, |owner| *owner == chosen, within).await;
    let Some((_, seen)) = promoted else {
        return Err(format!("{} did not own slot {} within {within:?}; {detail}", show(&chosen), shard.slot));
    };
    detail.push_str(&format!(
        "; {} promoted, seen at {:.2} s ({:.2} s after the command)",
        show(&chosen),
        (seen - start).as_secs_f64(),
        (seen - sent).as_secs_f64()
    ));
    detail.push_str(&refresh(&plane).await);
    Ok((1, detail))
}
