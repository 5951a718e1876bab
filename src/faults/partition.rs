//! `partition`: the embedded cluster's primary of a queue's slot cut off from every other node
//! (the cluster bus and replication both) for `duration`, then healed; on the `majority` side
//! the harness is cut off from it too, on the `minority` side it still reaches it.
//!
//! Each node of a cluster started for a partition has an address of its own (127.0.0.(2+i))
//! and connects from it, while the harness connects from 127.0.0.1: a pair of DROP rules per
//! other node (see `firewall`) then isolates exactly the primary. On the minority side the
//! primary goes on acknowledging the harness's writes until it notices, after the cluster's
//! node timeout, that it lost the majority; meanwhile the majority promotes its replica, and
//! at the heal the old primary rejoins as that replica's replica, dropping what it alone held.

use super::cluster::{become_replica, connect, refresh, shard_of, show, wait_for_owner, Address, PROMOTION_SLACK};
use super::firewall::{Firewall, HARNESS};
use super::kinds::{Done, FaultTarget};
use super::nemesis::hold;
use crate::scenario::{FaultPlan, PartitionSide};
use std::net::Ipv4Addr;
use std::time::Instant;
use tokio::sync::watch;

/// A node's address as a 127.0.0.0/8 address; `Err` names the node when it is not one.
fn loopback(address: &Address) -> Result<Ipv4Addr, String> {
    match address.0.parse::<Ipv4Addr>() {
        Ok(ip) if ip.is_loopback() => Ok(ip),
        _ => Err(format!("{} is no 127.0.0.0/8 address: a partition cuts loopback addresses only", show(address))),
    }
}

/// Cuts the primary of the fault's queue off from every other node (and, on the majority side,
/// from the harness), holds `duration` while watching the other nodes for a new owner of the
/// slot, heals, then waits (the node timeout plus [`PROMOTION_SLACK`]) until the old primary
/// is a replica when one was promoted meanwhile. The rules go also when the load phase ends
/// first (the heal is then at once) or the fault's future is dropped.
pub(crate) async fn partition(
    fault: &FaultPlan,
    target: &FaultTarget<'_>,
    start: Instant,
    end: &mut watch::Receiver<bool>,
) -> Result<Done, String> {
    let cluster = target.cluster.ok_or("partition needs the embedded cluster")?;
    let plane = target.plane.borrow().clone().ok_or("no connection to the cluster")?;
    let shard = shard_of(fault, target, &plane).await?;
    let isolated = loopback(&shard.primary)?;
    if isolated == HARNESS {
        return Err(format!(
            "the primary {} shares {HARNESS} with the harness: the cluster was not started with an address per node",
            show(&shard.primary)
        ));
    }
    let mut others = Vec::new();
    for address in shard.nodes.iter().filter(|a| **a != shard.primary) {
        let ip = loopback(address)?;
        if ip == isolated || ip == HARNESS {
            return Err(format!("{} shares an address with another node or the harness", show(address)));
        }
        if !others.contains(&ip) {
            others.push(ip);
        }
    }
    // Every other node is watched for the new owner; connected now, before the cut.
    let mut watchers = Vec::new();
    for address in shard.nodes.iter().filter(|a| **a != shard.primary) {
        if let Ok(conn) = connect(&plane, address).await {
            watchers.push(conn);
        }
    }
    let mut firewall = Firewall::new()?;
    for other in &others {
        firewall.cut(isolated, *other)?;
    }
    if fault.side == PartitionSide::Majority {
        firewall.cut(isolated, HARNESS)?;
    }
    let cut = Instant::now();
    let mut detail = format!(
        "partition of {} from {} node(s), the harness on the {} side ({}), for {} ms",
        shard.describe(),
        others.len(),
        fault.side.name(),
        match fault.side {
            PartitionSide::Minority => "it still reaches the isolated primary",
            PartitionSide::Majority => "cut off from the isolated primary too",
        },
        fault.duration.as_millis()
    );
    let promoted = tokio::select! {
        seen = wait_for_owner(&watchers, shard.slot, |owner| *owner != shard.primary, fault.duration) => seen,
        _ = end.wait_for(|e| *e) => None,
    };
    match &promoted {
        Some((owner, seen)) => detail.push_str(&format!(
            "; {} promoted, seen at {:.2} s ({:.2} s after the cut)",
            show(owner),
            (*seen - start).as_secs_f64(),
            (*seen - cut).as_secs_f64()
        )),
        None => detail.push_str("; no replica promoted during the partition"),
    }
    let ended = hold(fault.duration.saturating_sub(cut.elapsed()), end).await;
    let removed = firewall.heal().map_err(|err| format!("{err}; {detail}"))?;
    let healed = Instant::now();
    detail.push_str(&format!(
        "; healed at {:.2} s{} ({removed} rule(s) removed)",
        (healed - start).as_secs_f64(),
        if ended { ", early: the load phase ended" } else { "" }
    ));
    let mut failed = None;
    if promoted.is_some() {
        let within = cluster.lock().expect("cluster").node_timeout() + PROMOTION_SLACK;
        // A failure from here on is the fault's (the old primary did not rejoin), after a heal
        // that happened: the detail keeps what was seen.
        let became = match connect(&plane, &shard.primary).await {
            Ok(mut node) => become_replica(&mut node, within).await,
            Err(err) => Err(err),
        };
        match became {
            Ok(of) => detail.push_str(&format!(
                "; {} a replica of {of} {:.2} s after the heal",
                show(&shard.primary),
                healed.elapsed().as_secs_f64()
            )),
            Err(last) => {
                failed = Some(format!("{} was no replica within {within:?} of the heal ({last})", show(&shard.primary)))
            }
        }
    }
    detail.push_str(&refresh(&plane).await);
    match failed {
        None => Ok((1, detail)),
        Some(err) => Err(format!("{err}; {detail}")),
    }
}
