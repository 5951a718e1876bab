//! A Valkey Cluster of real `valkey-server` processes on loopback ports, for the cluster
//! tests: the product's [`EmbeddedCluster`], plus what the tests do to it (find a slot's owner,
//! migrate a slot).

use emq_bench::server::{ClusterOptions, EmbeddedCluster, EmbeddedServer, ServerOptions};
use redis::aio::MultiplexedConnection;
use std::time::Duration;

/// The running nodes; dropping it stops them.
pub struct Cluster {
    /// The product's cluster (primaries first, then replicas).
    pub inner: EmbeddedCluster,
    /// Each node's cluster id.
    pub ids: Vec<String>,
}

/// A connection to `node`.
pub async fn conn(node: &EmbeddedServer) -> MultiplexedConnection {
    redis::Client::open(node.url()).unwrap().get_multiplexed_async_connection().await.unwrap()
}

async fn query<T: redis::FromRedisValue>(node: &EmbeddedServer, args: &[&str]) -> T {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query_async(&mut conn(node).await).await.unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

impl Cluster {
    /// Starts `n` primaries and waits until every node reports the cluster ok.
    pub async fn start(n: usize) -> Cluster {
        Cluster::replicated(n, 0, Duration::from_secs(5)).await
    }

    /// Starts `n` primaries with `replicas` replicas each (`node_timeout`), through the
    /// product's [`EmbeddedCluster`].
    pub async fn replicated(n: usize, replicas: usize, node_timeout: Duration) -> Cluster {
        let options = ClusterOptions {
            primaries: n,
            replicas,
            node_timeout,
            server: ServerOptions::default(),
            own_addresses: false,
        };
        // Started on the test's own thread, not block_in_place's (whose thread may end while
        // the cluster runs): the nodes die with the thread that started them.
        let inner = EmbeddedCluster::start(&options).expect("start a cluster");
        let ids = inner.nodes().iter().map(|n| n.id.clone()).collect();
        Cluster { inner, ids }
    }

    /// Node `i`: the primaries in slot order (node i serves the i-th share of the slots), then
    /// the replicas.
    pub fn node(&self, i: usize) -> &EmbeddedServer {
        &self.inner.nodes()[i].server
    }

    /// Every node's server, in [`node`](Self::node) order.
    pub fn servers(&self) -> impl Iterator<Item = &EmbeddedServer> {
        self.inner.nodes().iter().map(|n| &n.server)
    }

    /// The URL of node 0 (any node's URL works for the harness).
    pub fn url(&self) -> String {
        self.node(0).url()
    }

    /// The index of the node that serves `slot`.
    pub async fn owner(&self, slot: u16) -> usize {
        let slots: Vec<redis::Value> = query(self.node(0), &["CLUSTER", "SLOTS"]).await;
        for range in slots {
            let redis::Value::Array(parts) = range else { continue };
            let (redis::Value::Int(a), redis::Value::Int(b), redis::Value::Array(primary)) =
                (&parts[0], &parts[1], &parts[2])
            else {
                continue;
            };
            if (*a..=*b).contains(&i64::from(slot)) {
                let redis::Value::Int(port) = primary[1] else { continue };
                return self.servers().position(|n| i64::from(n.port()) == port).unwrap();
            }
        }
        panic!("no node serves slot {slot}");
    }

    /// Moves `slot` from node `from` to node `to` the way valkey-cli's resharding does:
    /// IMPORTING on the target, MIGRATING on the source, MIGRATE of every key (all of them per
    /// MIGRATE call, so a queue's keys never sit split for long), then SETSLOT NODE on every
    /// node. Returns how many keys moved.
    pub async fn migrate_slot(&self, slot: u16, from: usize, to: usize) -> usize {
        let s = slot.to_string();
        let (src, dst) = (self.node(from), self.node(to));
        let _: () = query(dst, &["CLUSTER", "SETSLOT", &s, "IMPORTING", &self.ids[from]]).await;
        let _: () = query(src, &["CLUSTER", "SETSLOT", &s, "MIGRATING", &self.ids[to]]).await;
        let mut moved = 0;
        loop {
            let keys: Vec<String> = query(src, &["CLUSTER", "GETKEYSINSLOT", &s, "100000"]).await;
            if keys.is_empty() {
                break;
            }
            let port = dst.port().to_string();
            let mut args = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "10000", "KEYS"];
            args.extend(keys.iter().map(String::as_str));
            let _: () = query(src, &args).await;
            moved += keys.len();
        }
        // The target first, then the source, then the rest (as the cluster tutorial orders it).
        let mut order = vec![to, from];
        order.extend((0..self.ids.len()).filter(|i| *i != to && *i != from));
        for i in order {
            let _: () = query(self.node(i), &["CLUSTER", "SETSLOT", &s, "NODE", &self.ids[to]]).await;
        }
        moved
    }
}
