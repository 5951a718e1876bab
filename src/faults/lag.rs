//! A `lag`: the replicas of a cluster's primary cut off from it (frozen, their links killed)
//! before `kill-primary` or `cluster-failover`, so what the primary acknowledges meanwhile
//! exists on it alone.

use super::cluster::{show, Shard, LOOK};
use super::nemesis::hold;
use crate::net::Control;
use crate::server::EmbeddedCluster;
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::watch;

/// Embedded nodes frozen for a lag. Dropping it resumes them: no way out of a fault (an
/// error, the run's end mid-lag) leaves a replica frozen.
pub(super) struct Frozen<'a> {
    cluster: &'a Mutex<EmbeddedCluster>,
    nodes: Vec<usize>,
}

impl Frozen<'_> {
    /// SIGCONT of every node still frozen.
    pub(super) fn thaw(&mut self) {
        let cluster = self.cluster.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for i in self.nodes.drain(..) {
            cluster.nodes()[i].server.freeze(false);
        }
    }
}

impl Drop for Frozen<'_> {
    fn drop(&mut self) {
        self.thaw();
    }
}

/// What a lag did, for the span's detail.
pub(super) struct Cut<'a> {
    pub frozen: Frozen<'a>,
    replicas_frozen: usize,
    links_killed: u64,
    lag: Duration,
}

impl Cut<'_> {
    pub(super) fn describe(&self) -> String {
        format!(
            "after a {} ms replication cut ({} replica(s) frozen, {} link(s) killed)",
            self.lag.as_millis(),
            self.replicas_frozen,
            self.links_killed
        )
    }
}

/// Resumes the replicas a lag froze, if there was one, and adds what it did to `detail`.
pub(super) fn resume(cut: Option<Cut<'_>>, detail: &mut String) {
    if let Some(mut cut) = cut {
        cut.frozen.thaw();
        detail.push(' ');
        detail.push_str(&cut.describe());
    }
}

/// Cuts `shard`'s primary off from its replicas for `lag`: SIGSTOP of every replica (an
/// embedded node), CLIENT KILL TYPE replica on the primary (the frozen replicas cannot
/// reconnect; a frozen replica's kernel would still take the stream in), then holds `lag`.
/// Returns with the replicas still frozen: the caller resumes them at its fault.
///
/// Errors: a replica that is not an embedded node, a refused CLIENT KILL, or the run's end
/// during the lag (the replicas are resumed and nothing else is done).
pub(super) async fn cut<'a>(
    cluster: &'a Mutex<EmbeddedCluster>,
    shard: &Shard,
    primary: &mut Control,
    lag: Duration,
    end: &mut watch::Receiver<bool>,
) -> Result<Cut<'a>, String> {
    let mut replicas = Vec::new();
    {
        let cluster = cluster.lock().expect("cluster");
        for address in &shard.replicas {
            let node = cluster.node_at(address.1).ok_or_else(|| format!("{} is no embedded node", show(address)))?;
            replicas.push(node);
        }
    }
    let mut frozen = Frozen { cluster, nodes: Vec::new() };
    for node in replicas {
        cluster.lock().expect("cluster").nodes()[node].server.freeze(true);
        frozen.nodes.push(node);
    }
    let kill = redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("replica").clone();
    let links_killed = match tokio::time::timeout(LOOK, kill.query_async::<u64>(primary)).await {
        Ok(Ok(n)) => n,
        Ok(Err(err)) => return Err(format!("CLIENT KILL TYPE replica on {}: {err}", show(&shard.primary))),
        Err(_) => {
            return Err(format!("CLIENT KILL TYPE replica on {}: no reply within {LOOK:?}", show(&shard.primary)))
        }
    };
    if hold(lag, end).await {
        return Err(format!("the load phase ended during the {} ms lag; the replicas were resumed", lag.as_millis()));
    }
    let replicas_frozen = frozen.nodes.len();
    Ok(Cut { frozen, replicas_frozen, links_killed, lag })
}
