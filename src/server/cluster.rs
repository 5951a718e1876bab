//! An embedded Valkey Cluster: real `valkey-server` processes on loopback, `primaries` of them
//! serving the 16384 slots in even shares, each with `replicas` replicas, ready once every
//! node reports `cluster_state:ok` and every replica's link to its primary is up.
//!
//! Each node's port is below 55536 so that its cluster bus port (port + 10000) exists, and is
//! picked only when that bus port is free too; ports differ between nodes even when their
//! addresses do (a node is found by its port). With [`ClusterOptions::own_addresses`] node `i`
//! listens on, announces and connects from 127.0.0.(2+i) (all of 127.0.0.0/8 is loopback on
//! Linux), so a firewall rule can cut one node off while the harness, on 127.0.0.1, is told
//! apart from every node. Dropping the cluster stops every node.

use super::{EmbeddedServer, ServerError, ServerOptions};
use std::net::{Ipv4Addr, TcpListener};
use std::time::{Duration, Instant};

/// How to start an embedded cluster.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// Primaries, each serving an even share of the slots (1..=16).
    pub primaries: usize,
    /// Replicas per primary (0..=4).
    pub replicas: usize,
    /// `cluster-node-timeout`: how long a silent node takes to be marked failed (and its
    /// replica promoted).
    pub node_timeout: Duration,
    /// The binary and extra config of every node (its `port` and `host` are ignored: each
    /// node gets its own).
    pub server: ServerOptions,
    /// Each node on an address of its own, 127.0.0.(2+i) (for `partition`); otherwise every
    /// node is on 127.0.0.1.
    pub own_addresses: bool,
}

/// What a node is in the cluster as started (a failover may change it later).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Serves the `index`-th share of the slots.
    Primary {
        /// The share, `0..primaries`.
        index: usize,
    },
    /// Replicates the primary at node index `of`.
    Replica {
        /// The node index of its primary.
        of: usize,
    },
}

/// One node of an [`EmbeddedCluster`].
pub struct ClusterNode {
    /// The process.
    pub server: EmbeddedServer,
    /// Its cluster id (CLUSTER MYID).
    pub id: String,
    /// Its role at the start.
    pub role: Role,
}

/// A running cluster; dropping it stops every node.
pub struct EmbeddedCluster {
    nodes: Vec<ClusterNode>,
    node_timeout: Duration,
}

/// How long the cluster gets to reach `cluster_state:ok` with every replica in sync.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

impl EmbeddedCluster {
    /// Starts the nodes, assigns the slots (CLUSTER ADDSLOTSRANGE), joins them (CLUSTER MEET),
    /// makes each replica CLUSTER REPLICATE its primary, and waits (up to 30 s) until every
    /// node reports the cluster ok, knows every node, and every replica's link is up.
    ///
    /// Nodes come first in primary order, then the replicas of primary 0, of primary 1, ...
    ///
    /// Errors: a node that does not start ([`ServerError`]), a refused cluster command, or a
    /// cluster not ready in time, as [`ServerError::NotReady`] naming the node and its state.
    pub fn start(options: &ClusterOptions) -> Result<EmbeddedCluster, ServerError> {
        let total = options.primaries * (1 + options.replicas);
        let mut nodes = Vec::with_capacity(total);
        let mut roles: Vec<Role> = (0..options.primaries).map(|index| Role::Primary { index }).collect();
        for of in 0..options.primaries {
            roles.extend((0..options.replicas).map(|_| Role::Replica { of }));
        }
        if options.own_addresses && total > 250 {
            let source = std::io::Error::other(format!("{total} nodes do not fit 127.0.0.2..=127.0.0.251"));
            return Err(ServerError::Spawn { binary: options.server.binary.clone().unwrap_or_default(), source });
        }
        let mut ports = Vec::with_capacity(total);
        for (i, role) in roles.into_iter().enumerate() {
            let host = if options.own_addresses { Ipv4Addr::new(127, 0, 0, 2 + i as u8) } else { Ipv4Addr::LOCALHOST };
            let mut config = vec![
                ("cluster-enabled".to_string(), "yes".to_string()),
                ("cluster-node-timeout".to_string(), options.node_timeout.as_millis().to_string()),
            ];
            if options.own_addresses {
                config.push(("cluster-announce-ip".to_string(), host.to_string()));
            }
            config.extend(options.server.config.iter().cloned());
            let port = cluster_port(host, &ports);
            ports.push(port);
            let server = ServerOptions {
                binary: options.server.binary.clone(),
                config,
                port: Some(port),
                host: options.own_addresses.then_some(host),
            };
            let server = EmbeddedServer::start(&server)?;
            let id = query::<String>(&server, &["CLUSTER", "MYID"])?;
            nodes.push(ClusterNode { server, id, role });
        }
        let cluster = EmbeddedCluster { nodes, node_timeout: options.node_timeout };
        cluster.form(options.primaries)?;
        cluster.wait_ready()?;
        Ok(cluster)
    }

    fn form(&self, primaries: usize) -> Result<(), ServerError> {
        let share = 16384 / primaries;
        for node in &self.nodes {
            if let Role::Primary { index } = node.role {
                let first = index * share;
                let last = if index + 1 == primaries { 16383 } else { (index + 1) * share - 1 };
                query::<()>(&node.server, &["CLUSTER", "ADDSLOTSRANGE", &first.to_string(), &last.to_string()])?;
            }
        }
        let first = &self.nodes[0].server;
        for node in &self.nodes[1..] {
            let (host, port) = (node.server.host().to_string(), node.server.port().to_string());
            query::<()>(first, &["CLUSTER", "MEET", &host, &port])?;
        }
        // A replica can only REPLICATE a node it already knows: wait for the gossip first.
        let deadline = Instant::now() + READY_TIMEOUT;
        for node in &self.nodes {
            let Role::Replica { of } = node.role else { continue };
            let primary = &self.nodes[of].id;
            loop {
                let known: String = query(&node.server, &["CLUSTER", "NODES"])?;
                if known.contains(primary.as_str()) {
                    break;
                }
                self.before(deadline, &node.server, format!("it never learnt of its primary {primary}"))?;
            }
            query::<()>(&node.server, &["CLUSTER", "REPLICATE", primary])?;
        }
        Ok(())
    }

    fn wait_ready(&self) -> Result<(), ServerError> {
        let deadline = Instant::now() + READY_TIMEOUT;
        let known = format!("cluster_known_nodes:{}", self.nodes.len());
        for node in &self.nodes {
            loop {
                let info: String = query(&node.server, &["CLUSTER", "INFO"])?;
                let synced = match node.role {
                    Role::Primary { .. } => true,
                    Role::Replica { .. } => {
                        let replication: String = query(&node.server, &["INFO", "replication"])?;
                        replication.contains("master_link_status:up")
                    }
                };
                if info.contains("cluster_state:ok") && info.contains(&known) && synced {
                    break;
                }
                self.before(deadline, &node.server, format!("not ready (in sync: {synced}):\n{info}"))?;
            }
        }
        Ok(())
    }

    /// Sleeps a little before another look, or fails when `deadline` passed.
    fn before(&self, deadline: Instant, node: &EmbeddedServer, reason: String) -> Result<(), ServerError> {
        if Instant::now() > deadline {
            return Err(ServerError::NotReady {
                binary: node.binary().to_path_buf(),
                host: node.host(),
                port: node.port(),
                reason: format!("the cluster did not form within {READY_TIMEOUT:?}: {reason}"),
                log: String::new(),
            });
        }
        std::thread::sleep(Duration::from_millis(50));
        Ok(())
    }

    /// Starts again every node whose process has ended (a fault killed it), each on its port
    /// and data directory, so its nodes.conf makes it rejoin: as a replica of the node promoted
    /// in its place, or as the primary of its own slots when none was; then waits (up to 30 s)
    /// until every node reports the cluster ok and knows every node, and every replica (by its
    /// role now: failovers swap them) has its link to its primary up. A node that does not
    /// answer yet is asked again until then. Returns how many nodes were started again (0:
    /// nothing to wait for).
    ///
    /// Errors: a node that does not start, or a cluster not settled in time, as
    /// [`ServerError::NotReady`] naming the node and what it reported last.
    pub fn restore(&mut self) -> Result<usize, ServerError> {
        let mut restarted = Vec::new();
        for (i, node) in self.nodes.iter_mut().enumerate() {
            if node.server.exited() {
                node.server.start_again()?;
                restarted.push(i);
            }
        }
        if restarted.is_empty() {
            return Ok(0);
        }
        let deadline = Instant::now() + READY_TIMEOUT;
        let known = format!("cluster_known_nodes:{}", self.nodes.len());
        for node in &self.nodes {
            loop {
                let read = query::<String>(&node.server, &["CLUSTER", "INFO"])
                    .and_then(|info| Ok((info, query::<String>(&node.server, &["INFO", "replication"])?)));
                let last = match read {
                    Ok((info, replication)) => {
                        let replica = replication.contains("role:slave");
                        let settled = info.contains("cluster_state:ok")
                            && info.contains(&known)
                            && (!replica || replication.contains("master_link_status:up"));
                        if settled {
                            break;
                        }
                        format!("{info}\n{replication}")
                    }
                    Err(err) => err.to_string(),
                };
                self.before(deadline, &node.server, format!("not settled after a restart:\n{last}"))?;
            }
        }
        Ok(restarted.len())
    }

    /// Every node: primaries first, then the replicas in primary order.
    pub fn nodes(&self) -> &[ClusterNode] {
        &self.nodes
    }

    /// Every node, mutable (a fault restarts or kills one).
    pub fn nodes_mut(&mut self) -> &mut [ClusterNode] {
        &mut self.nodes
    }

    /// Its `cluster-node-timeout`: how long a silent primary takes to be failed over.
    pub fn node_timeout(&self) -> Duration {
        self.node_timeout
    }

    /// The URL of the first primary (any node's URL works for a cluster client).
    pub fn url(&self) -> String {
        self.nodes[0].server.url()
    }

    /// The index of the node listening on `port`, if any.
    pub fn node_at(&self, port: u16) -> Option<usize> {
        self.nodes.iter().position(|n| n.server.port() == port)
    }
}

/// A free port on `host` below 55536 whose bus port (+10000) is free too, and none of `taken`
/// (another node's port, or its bus port).
fn cluster_port(host: Ipv4Addr, taken: &[u16]) -> u16 {
    loop {
        let Ok(port) = TcpListener::bind((host, 0)).and_then(|l| l.local_addr()).map(|a| a.port()) else {
            continue;
        };
        let clashes =
            taken.iter().any(|t| [*t, t + 10000].contains(&port) || [*t, t + 10000].contains(&(port + 10000)));
        if port < 55536 && !clashes && TcpListener::bind((host, port + 10000)).is_ok() {
            return port;
        }
    }
}

/// One command to `node` on a connection of its own; a refusal names the command and node.
fn query<T: redis::FromRedisValue>(node: &EmbeddedServer, args: &[&str]) -> Result<T, ServerError> {
    let failed = |e: redis::RedisError| ServerError::NotReady {
        binary: node.binary().to_path_buf(),
        host: node.host(),
        port: node.port(),
        reason: format!("{} answered {e}, expected success", args.join(" ")),
        log: String::new(),
    };
    let client = redis::Client::open(node.url()).map_err(failed)?;
    let mut conn = client.get_connection_with_timeout(Duration::from_secs(2)).map_err(failed)?;
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query(&mut conn).map_err(failed)
}
