//! A Valkey Cluster of real `valkey-server` processes on loopback ports, for the cluster
//! tests: each node on a port below 55536 whose bus port (+10000) is free too, the slots split
//! evenly by CLUSTER ADDSLOTSRANGE, joined by CLUSTER MEET, ready at `cluster_state:ok`.

use emq_bench::server::{EmbeddedServer, ServerOptions};
use redis::aio::MultiplexedConnection;
use std::net::TcpListener;
use std::time::{Duration, Instant};

/// The running nodes; dropping it stops them.
pub struct Cluster {
    /// The nodes, in slot order (node i serves the i-th share of the slots).
    pub nodes: Vec<EmbeddedServer>,
    /// Each node's cluster id.
    pub ids: Vec<String>,
}

/// A free port below 55536 whose bus port is free too.
fn cluster_port() -> u16 {
    loop {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        if port < 55536 && TcpListener::bind(("127.0.0.1", port + 10000)).is_ok() {
            return port;
        }
    }
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
    /// Starts `n` primaries and waits (up to 20 s) until every node reports the cluster ok.
    pub async fn start(n: usize) -> Cluster {
        let mut nodes = Vec::new();
        for _ in 0..n {
            let options = ServerOptions {
                binary: None,
                config: vec![("cluster-enabled".into(), "yes".into()), ("cluster-node-timeout".into(), "5000".into())],
                port: Some(cluster_port()),
            };
            nodes.push(EmbeddedServer::start(&options).expect("start a cluster node"));
        }
        let share = 16384 / n;
        for (i, node) in nodes.iter().enumerate() {
            let first = i * share;
            let last = if i + 1 == n { 16383 } else { (i + 1) * share - 1 };
            let _: () = query(node, &["CLUSTER", "ADDSLOTSRANGE", &first.to_string(), &last.to_string()]).await;
        }
        for node in &nodes[1..] {
            let _: () = query(&nodes[0], &["CLUSTER", "MEET", "127.0.0.1", &node.port().to_string()]).await;
        }
        let mut ids = Vec::new();
        for node in &nodes {
            ids.push(query::<String>(node, &["CLUSTER", "MYID"]).await);
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        for node in &nodes {
            loop {
                let info: String = query(node, &["CLUSTER", "INFO"]).await;
                let known = format!("cluster_known_nodes:{n}");
                if info.contains("cluster_state:ok") && info.contains(&known) {
                    break;
                }
                assert!(Instant::now() < deadline, "the cluster did not come up: {info}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        Cluster { nodes, ids }
    }

    /// The URL of node 0 (any node's URL works for the harness).
    pub fn url(&self) -> String {
        self.nodes[0].url()
    }

    /// The index of the node that serves `slot`.
    pub async fn owner(&self, slot: u16) -> usize {
        let slots: Vec<redis::Value> = query(&self.nodes[0], &["CLUSTER", "SLOTS"]).await;
        for range in slots {
            let redis::Value::Array(parts) = range else { continue };
            let (redis::Value::Int(a), redis::Value::Int(b), redis::Value::Array(primary)) =
                (&parts[0], &parts[1], &parts[2])
            else {
                continue;
            };
            if (*a..=*b).contains(&i64::from(slot)) {
                let redis::Value::Int(port) = primary[1] else { continue };
                return self.nodes.iter().position(|n| i64::from(n.port()) == port).unwrap();
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
        let (src, dst) = (&self.nodes[from], &self.nodes[to]);
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
        order.extend((0..self.nodes.len()).filter(|i| *i != to && *i != from));
        for i in order {
            let _: () = query(&self.nodes[i], &["CLUSTER", "SETSLOT", &s, "NODE", &self.ids[to]]).await;
        }
        moved
    }
}
