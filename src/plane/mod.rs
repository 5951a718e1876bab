//! The control plane: one [`Control`] connection per node and the slot map, so every
//! control command for a queue (INFO aside) goes to the node that owns the queue's slot. On a
//! standalone server it is one connection. No module talks to "the server" as if there were
//! only one: they ask the plane ([`Route::conn_for`]).
//!
//! Above the protocol: it routes by a queue's slot, follows the protocol's redirects, and
//! holds the run's safety on a shared deployment: [`lock`] (the per-queue run lock) and
//! [`keys`] (the run's own keys: refuse existing ones, delete at the end, never flush).

pub mod barrier;
pub mod keys;
pub mod lock;

pub use keys::{delete_queue, ensure_clean, queue_keys};
pub use lock::RunLock;

use crate::keyspace::QueueKeys;
use crate::net::slot::slot;
use crate::net::topology::{discover, Kind, Topology};
use crate::net::{ConnectOptions, Connector, Control, NetError};
use crate::resp::CallError;
use std::sync::{Arc, Mutex};

/// Why the control plane refused or could not serve a run (all exit 2: the run did not start).
#[derive(Debug, thiserror::Error)]
pub enum PlaneError {
    /// The target's settings cannot be used (a TLS server name, a target kind not driven).
    #[error(transparent)]
    Net(NetError),
    /// Keys of the run's queues exist already.
    #[error("queue {queue} already has keys on the target (e.g. {example}); pass --force to delete them first, or choose other queues")]
    KeysExist {
        /// The queue.
        queue: String,
        /// One of its keys.
        example: String,
    },
    /// Another run holds the queue's run lock.
    #[error("queue {queue} is in use by another run ({holder}; lock {key}, expires in {} s unless renewed); wait for it, or choose other queues", ttl_ms.div_ceil(1000))]
    Locked {
        /// The queue.
        queue: String,
        /// The lock key.
        key: String,
        /// The holder's run id.
        holder: String,
        /// Its lease's remaining time, ms.
        ttl_ms: u64,
    },
    /// A command to the target failed (or its connection did).
    #[error("target: {0}")]
    Call(#[from] CallError),
}

/// A settings error stays one; a failed connection or command is a failed call to the target,
/// as the protocol classifies it.
impl From<NetError> for PlaneError {
    fn from(err: NetError) -> PlaneError {
        match err {
            NetError::BadUrl { .. } | NetError::Tls(_) | NetError::Unsupported(_) => PlaneError::Net(err),
            call => PlaneError::Call(call.into()),
        }
    }
}

/// Where the control commands of a queue go.
pub trait Route {
    /// The connection to the node that holds `keys`' slot.
    fn conn_for(&self, keys: &QueueKeys) -> Control;
}

/// A standalone connection routes everything to itself (tests, single servers).
impl Route for Control {
    fn conn_for(&self, _keys: &QueueKeys) -> Control {
        self.clone()
    }
}

/// The control plane of a target; clones share it.
#[derive(Clone)]
pub struct Plane {
    inner: Arc<Inner>,
}

struct Inner {
    seed: Control,
    opts: ConnectOptions,
    map: Mutex<Map>,
}

struct Map {
    topology: Topology,
    /// One connection per node of `topology.nodes`, same order.
    conns: Vec<Control>,
    /// Every replica of a cluster's primaries, as CLUSTER SLOTS lists them (the nodes a
    /// failover may promote).
    replicas: Vec<(String, u16)>,
}

impl Plane {
    /// Connects to the target, reads its topology and connects to every primary.
    ///
    /// Errors: the first connect (classified, naming the target), the topology read, or a
    /// node's connect.
    pub async fn open(connector: &Connector, opts: ConnectOptions) -> Result<Plane, PlaneError> {
        let seed = Control::connect(connector, opts).await?;
        let map = connect_map(&seed, opts).await?;
        Ok(Plane { inner: Arc::new(Inner { seed, opts, map: Mutex::new(map) }) })
    }

    /// A plane of its own to the same target (new connections, whose drivers run on the
    /// caller's runtime): for work that must go on while this plane's runtime is busy.
    ///
    /// Errors: as [`Plane::open`].
    pub async fn open_again(&self) -> Result<Plane, PlaneError> {
        Plane::open(self.inner.seed.connector(), self.inner.opts).await
    }

    /// The connection to the node the user named (the URL's).
    pub fn seed(&self) -> &Control {
        &self.inner.seed
    }

    /// The topology as last read.
    pub fn topology(&self) -> Topology {
        self.inner.map.lock().expect("plane map").topology.clone()
    }

    /// Every node's connection, in `topology().nodes` order.
    pub fn nodes(&self) -> Vec<Control> {
        self.inner.map.lock().expect("plane map").conns.clone()
    }

    /// The index of the node that owns `keys`' slot (0 when no node claims it: the request
    /// then meets a MOVED that tells where it is).
    pub fn node_of(&self, keys: &QueueKeys) -> usize {
        self.inner.map.lock().expect("plane map").topology.owner(slot(keys.lock.as_bytes())).unwrap_or(0)
    }

    /// The connection to the node that owns `key`'s slot (the first node when none claims it).
    pub fn conn_for_key(&self, key: &str) -> Control {
        let map = self.inner.map.lock().expect("plane map");
        let node = map.topology.owner(slot(key.as_bytes())).unwrap_or(0);
        map.conns[node].clone()
    }

    /// Every replica of the cluster's primaries as last read (none for a standalone server).
    pub fn replicas(&self) -> Vec<(String, u16)> {
        self.inner.map.lock().expect("plane map").replicas.clone()
    }

    /// Reads the slot map again (after a MOVED: a slot migrated; after a failover: a replica
    /// took over) from the first node that answers: the seed, then the nodes and replicas
    /// last known. Connections to nodes already known are kept; new nodes get new ones.
    ///
    /// Errors: the last node's topology read or a new node's connect, when none answered.
    pub async fn refresh(&self) -> Result<(), PlaneError> {
        let (mut candidates, replicas, known) = {
            let map = self.inner.map.lock().expect("plane map");
            (map.conns.clone(), map.replicas.clone(), map.conns.clone())
        };
        candidates.insert(0, self.inner.seed.clone());
        for (host, port) in replicas {
            let connector = self.inner.seed.connector().at(&host, port)?;
            if let Ok(conn) = Control::connect(&connector, self.inner.opts).await {
                candidates.push(conn);
            }
        }
        let mut last = None;
        for seed in &candidates {
            match connect_map_with(seed, self.inner.opts, &known).await {
                Ok(map) => {
                    *self.inner.map.lock().expect("plane map") = map;
                    return Ok(());
                }
                Err(err) => last = Some(err),
            }
        }
        Err(last.expect("the seed is a candidate"))
    }

    /// Runs `call` on the connection of `keys`' node, following the slot: after MOVED the map
    /// is read again; while the slot migrates (ASK, TRYAGAIN) the call is retried every 10 ms,
    /// for up to 2 s (a control command never needs ASKING: it waits for the migration to end).
    /// On a cluster, a node fault (a lost or refused connection, no reply, CLUSTERDOWN,
    /// LOADING) is waited out for up to [`FAULT_WAIT`] in all, the map read again every
    /// 100 ms: a failover moves the queue to a promoted replica. Control calls are reads or
    /// idempotent (a lock renewal by its owner), so one whose outcome is unknown may be sent
    /// again. A standalone server has no other node to move to: its fault is returned at once,
    /// so a lost server ends the run within its give-up window.
    ///
    /// Errors: `call`'s error, the last redirect, or the refresh's as [`CallError::Connection`].
    pub async fn on_queue<T, F, Fut>(&self, keys: &QueueKeys, mut call: F) -> Result<T, CallError>
    where
        F: FnMut(Control) -> Fut,
        Fut: std::future::Future<Output = Result<T, CallError>>,
    {
        let mut tries = 0;
        let cluster = self.inner.map.lock().expect("plane map").topology.kind == Kind::Cluster;
        // The deadline is wall time: each refresh may itself wait for dead nodes' timeouts.
        let give_up = std::time::Instant::now() + FAULT_WAIT;
        loop {
            match call(self.conn_for(keys)).await {
                Err(CallError::Redirect(redirect)) if tries < 200 => {
                    tries += 1;
                    if redirect.kind == crate::resp::RedirectKind::Moved {
                        self.refresh().await.map_err(|e| CallError::Connection(e.to_string()))?;
                    } else {
                        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    }
                }
                Err(err) if cluster && err.is_node_fault() && std::time::Instant::now() < give_up => {
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    // A failed read leaves the map as it was: the next try asks again.
                    let _ = self.refresh().await;
                }
                other => return other,
            }
        }
    }
}

/// How long a control call on a cluster waits out node faults in all: longer than a failover
/// takes with the default node timeouts.
pub const FAULT_WAIT: std::time::Duration = std::time::Duration::from_secs(20);

impl Route for Plane {
    fn conn_for(&self, keys: &QueueKeys) -> Control {
        let map = self.inner.map.lock().expect("plane map");
        let node = map.topology.owner(slot(keys.lock.as_bytes())).unwrap_or(0);
        map.conns[node].clone()
    }
}

async fn connect_map(seed: &Control, opts: ConnectOptions) -> Result<Map, PlaneError> {
    connect_map_with(seed, opts, &[]).await
}

/// The map as `seed` reads it, with a connection per node: `seed` itself, one of `known`
/// (kept from the last map), or a new one.
async fn connect_map_with(seed: &Control, opts: ConnectOptions, known: &[Control]) -> Result<Map, PlaneError> {
    let topology = discover(seed).await?;
    let replicas = match topology.kind {
        crate::net::topology::Kind::Cluster => crate::net::topology::replicas(seed).await,
        _ => Vec::new(),
    };
    let t = seed.connector().endpoint();
    let mut conns = Vec::with_capacity(topology.nodes.len());
    for node in &topology.nodes {
        let at = (node.host.clone(), node.port);
        if (node.host.as_str(), node.port) == (t.host.as_str(), t.port) || topology.nodes.len() == 1 {
            conns.push(seed.clone());
        } else if let Some(conn) = known.iter().find(|c| c.connector().host_port() == at) {
            conns.push(conn.clone());
        } else {
            conns.push(Control::connect(&seed.connector().at(&node.host, node.port)?, opts).await?);
        }
    }
    Ok(Map { topology, conns, replicas })
}

/// Names for `count` queues `<prefix>bench-K` (a shard's prefix, or none) spread evenly over the primaries of `topology`: queue i
/// goes to primary i mod P, as the lowest unused K whose slot that primary owns. (The default
/// names `bench-0 .. bench-(N-1)` land wherever their CRC16 puts them: 3 queues on 3 primaries
/// would often share one.)
pub fn spread_names(count: usize, topology: &Topology, prefix: &str) -> Vec<String> {
    let primaries = topology.nodes.len().max(1);
    let mut names: Vec<String> = Vec::with_capacity(count);
    for i in 0..count {
        let want = i % primaries;
        // Every primary owns about 1/P of the slots: the search ends within a few P names.
        let name = (0u64..)
            .map(|k| format!("{prefix}bench-{k}"))
            .find(|name| {
                let tag = format!("{{{name}}}");
                topology.owner(slot(tag.as_bytes())) == Some(want) && !names.contains(name)
            })
            .expect("an unbounded search ends");
        names.push(name);
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::topology::Node;

    fn node(port: u16, slots: (u16, u16)) -> Node {
        Node {
            address: format!("127.0.0.1:{port}"),
            host: "127.0.0.1".into(),
            port,
            role: "primary".into(),
            slots: vec![slots],
            version: String::new(),
            queues: Vec::new(),
            info_before: None,
            info_after: None,
        }
    }

    #[test]
    fn queue_names_spread_evenly_over_the_primaries_and_never_repeat() {
        let topology = Topology {
            kind: Kind::Cluster,
            nodes: vec![node(1, (0, 5460)), node(2, (5461, 10922)), node(3, (10923, 16383))],
        };
        let names = spread_names(30, &topology, "");
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), 30, "{names:?}");
        for (i, name) in names.iter().enumerate() {
            let tag = format!("{{{name}}}");
            assert_eq!(topology.owner(slot(tag.as_bytes())), Some(i % 3), "{name}");
        }
    }
}
