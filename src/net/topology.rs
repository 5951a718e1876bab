//! What the target is: a standalone server, or a Valkey Cluster (detected from
//! `cluster_enabled:1`, no flag needed), with its nodes and their slot ranges.
//!
//! Every key of a queue shares one hash tag, so a queue lives on the one primary that owns its
//! slot; no command spans two queues. [`Plane`](super::plane::Plane) routes by this map.

use super::control::Control;
use super::NetError;
use serde::{Deserialize, Serialize};

/// Standalone or cluster.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// One server (or a primary whose replicas take no load).
    #[default]
    Standalone,
    /// Valkey Cluster.
    Cluster,
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Kind::Standalone => "standalone",
            Kind::Cluster => "cluster",
        })
    }
}

/// One node as the target described it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Node {
    /// `host:port` (the target's own for a standalone server).
    pub address: String,
    /// Host to connect to (IPv6 without brackets).
    #[serde(skip)]
    pub host: String,
    /// Port to connect to.
    #[serde(skip)]
    pub port: u16,
    /// `valkey_version`/`redis_version` from its INFO (empty when denied).
    pub version: String,
    /// The run's queues whose slot it owns.
    pub queues: Vec<String>,
    /// INFO figures before the run (absent when denied).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub info_before: Option<super::info::InfoSnapshot>,
    /// INFO figures after the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub info_after: Option<super::info::InfoSnapshot>,
    /// `primary` or `replica` (INFO replication's `role`: master/slave), `unknown` when denied.
    pub role: String,
    /// Slot ranges it serves, inclusive (empty for a standalone server).
    pub slots: Vec<(u16, u16)>,
}

/// The target's shape, for summary.json's `topology` and the table header.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Topology {
    /// Standalone or cluster.
    pub kind: Kind,
    /// Its nodes (one for a standalone server).
    pub nodes: Vec<Node>,
}

impl Topology {
    /// `standalone 127.0.0.1:6379 (primary)` or `cluster of 3 node(s): 127.0.0.1:7000
    /// (primary; queues bench-0), ...`, for the table's header line.
    pub fn describe(&self) -> String {
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|n| match (self.kind, n.queues.is_empty()) {
                (Kind::Cluster, false) => format!("{} ({}; queues {})", n.address, n.role, n.queues.join(", ")),
                _ => format!("{} ({})", n.address, n.role),
            })
            .collect();
        match self.kind {
            Kind::Standalone => format!("standalone {}", nodes.join(", ")),
            Kind::Cluster => format!("cluster of {} node(s): {}", self.nodes.len(), nodes.join(", ")),
        }
    }
}

/// Reads the target's topology through `control`: INFO replication/cluster, and on a cluster
/// CLUSTER SLOTS (every primary with its slot ranges; replicas take no load).
///
/// Errors: a failed CLUSTER SLOTS on a cluster, or one without any slot served.
pub async fn discover(control: &Control) -> Result<Topology, NetError> {
    let mut conn = control.clone();
    let t = control.connector().endpoint();
    let info: Result<String, _> = redis::cmd("INFO").arg("replication").arg("cluster").query_async(&mut conn).await;
    let (role, cluster) = match info {
        Ok(text) => {
            let field = |name: &str| {
                text.lines()
                    .find_map(|l| l.trim_end().strip_prefix(name).and_then(|r| r.strip_prefix(':')).map(str::to_string))
            };
            let role = match field("role").as_deref() {
                Some("master") => "primary",
                Some("slave") => "replica",
                _ => "unknown",
            };
            (role.to_string(), field("cluster_enabled").as_deref() == Some("1"))
        }
        // A node that cannot be reached tells nothing of the topology (it would read as a
        // standalone server of one node).
        Err(err) if matches!(NetError::from_redis(&err), NetError::Connection(_) | NetError::Timeout) => {
            return Err(NetError::from_redis(&err));
        }
        // A denied INFO is reported by the run's per-node INFO reads (summary.json's
        // `target.unavailable`), not here.
        Err(_) => {
            // Without INFO, CLUSTER SLOTS tells: a standalone server refuses it ("cluster
            // support disabled"), a cluster node answers with its map.
            let probe: Result<Vec<redis::Value>, _> = redis::cmd("CLUSTER").arg("SLOTS").query_async(&mut conn).await;
            ("unknown".to_string(), probe.is_ok_and(|slots| !slots.is_empty()))
        }
    };
    if !cluster {
        let node = node(&t.host, t.port, &role, Vec::new());
        return Ok(Topology { kind: Kind::Standalone, nodes: vec![node] });
    }
    let slots: redis::Value =
        redis::cmd("CLUSTER").arg("SLOTS").query_async(&mut conn).await.map_err(|e| NetError::from_redis(&e))?;
    let mut nodes: Vec<Node> = Vec::new();
    for range in parse_slots(&slots, &t.host) {
        let (host, port) = range.primary;
        let slots = (range.start, range.end);
        match nodes.iter_mut().find(|n| n.host == host && n.port == port) {
            Some(node) => node.slots.push(slots),
            None => nodes.push(node(&host, port, "primary", vec![slots])),
        }
    }
    if nodes.is_empty() {
        return Err(NetError::Unsupported(format!(
            "{}: the cluster serves no slot (CLUSTER SLOTS is empty)",
            t.display()
        )));
    }
    for n in &mut nodes {
        n.slots.sort_unstable();
    }
    // A stable order, so a queue's node index means the same in every load thread.
    nodes.sort_by(|a, b| (a.host.as_str(), a.port).cmp(&(b.host.as_str(), b.port)));
    Ok(Topology { kind: Kind::Cluster, nodes })
}

/// One range of a CLUSTER SLOTS reply: its slots, inclusive, and where they are served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotRange {
    /// First slot.
    pub start: u16,
    /// Last slot (inclusive).
    pub end: u16,
    /// The primary's host and port.
    pub primary: (String, u16),
    /// Its replicas' hosts and ports.
    pub replicas: Vec<(String, u16)>,
}

/// Reads a CLUSTER SLOTS reply, `[[start, end, [host, port, id], replica...], ...]` (also the
/// older servers' shape); a node with an empty host is on `default_host` (the node asked).
/// Entries of another shape are skipped: an empty list means no slot is served.
pub fn parse_slots(reply: &redis::Value, default_host: &str) -> Vec<SlotRange> {
    let redis::Value::Array(ranges) = reply else { return Vec::new() };
    let address = |value: &redis::Value| {
        let redis::Value::Array(parts) = value else { return None };
        let host = match parts.first() {
            Some(redis::Value::BulkString(h)) if !h.is_empty() => String::from_utf8_lossy(h).into_owned(),
            _ => default_host.to_string(),
        };
        match parts.get(1) {
            Some(redis::Value::Int(port)) => Some((host, u16::try_from(*port).ok()?)),
            _ => None,
        }
    };
    let mut out = Vec::with_capacity(ranges.len());
    for range in ranges {
        let redis::Value::Array(parts) = range else { continue };
        let (Some(redis::Value::Int(start)), Some(redis::Value::Int(end)), Some(primary)) =
            (parts.first(), parts.get(1), parts.get(2).and_then(address))
        else {
            continue;
        };
        let replicas = parts.iter().skip(3).filter_map(address).collect();
        out.push(SlotRange { start: *start as u16, end: *end as u16, primary, replicas });
    }
    out
}

/// The replicas of every primary of a cluster, as CLUSTER SLOTS lists them through `control`
/// (none for a standalone server, or where CLUSTER SLOTS is refused).
pub async fn replicas(control: &Control) -> Vec<(String, u16)> {
    let reply: Result<redis::Value, _> = redis::cmd("CLUSTER").arg("SLOTS").query_async(&mut control.clone()).await;
    let host = control.connector().endpoint().host.clone();
    let mut out: Vec<(String, u16)> = Vec::new();
    for range in reply.map(|r| parse_slots(&r, &host)).unwrap_or_default() {
        for replica in range.replicas {
            if !out.contains(&replica) {
                out.push(replica);
            }
        }
    }
    out.sort();
    out
}

fn node(host: &str, port: u16, role: &str, slots: Vec<(u16, u16)>) -> Node {
    let address = if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") };
    Node {
        address,
        host: host.to_string(),
        port,
        role: role.to_string(),
        slots,
        version: String::new(),
        queues: Vec::new(),
        info_before: None,
        info_after: None,
    }
}

impl Topology {
    /// The index (into `nodes`) of the node that owns `slot`; node 0 for a standalone server.
    pub fn owner(&self, slot: u16) -> Option<usize> {
        if self.kind == Kind::Standalone {
            return Some(0);
        }
        self.nodes.iter().position(|n| n.slots.iter().any(|&(a, b)| (a..=b).contains(&slot)))
    }
}
