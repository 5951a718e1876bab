//! What the target is: a standalone server, or a Valkey Cluster (detected from
//! `cluster_enabled:1`, no flag needed), with its nodes and their slot ranges.
//!
//! A cluster whose slots all sit on one primary is driven like a standalone server (every key
//! of a queue shares one hash tag, and no command spans two queues). A cluster of several
//! primaries needs per-node routing with MOVED/ASK, which is not built yet: it is refused up
//! front with that reason rather than failing mid-run.

use super::control::Control;
use super::TargetError;
use serde::Serialize;

/// Standalone or cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// One server (or a primary whose replicas take no load).
    Standalone,
    /// Valkey Cluster.
    Cluster,
}

/// One node as the target described it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Node {
    /// `host:port` (the target's own for a standalone server).
    pub address: String,
    /// `primary` or `replica` (INFO replication's `role`: master/slave), `unknown` when denied.
    pub role: String,
    /// Slot ranges it serves, inclusive (empty for a standalone server).
    pub slots: Vec<(u16, u16)>,
}

/// The target's shape, for summary.json's `topology` and the table header.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Topology {
    /// Standalone or cluster.
    pub kind: Kind,
    /// Its nodes (one for a standalone server).
    pub nodes: Vec<Node>,
    /// Server figures that could not be read (e.g. INFO denied by ACL), with the error.
    pub unavailable: Vec<String>,
}

impl Topology {
    /// `standalone 127.0.0.1:6379 (primary)` or `cluster of 1 primary: ...`, for the table.
    pub fn describe(&self) -> String {
        let nodes: Vec<String> = self.nodes.iter().map(|n| format!("{} ({})", n.address, n.role)).collect();
        match self.kind {
            Kind::Standalone => format!("standalone {}", nodes.join(", ")),
            Kind::Cluster => format!("cluster of {} node(s): {}", self.nodes.len(), nodes.join(", ")),
        }
    }
}

/// Reads the target's topology through `control`.
///
/// Errors: [`TargetError::Unsupported`] for a cluster of more than one primary (the reason
/// names what is missing); a failed read that is not an ACL denial.
pub async fn discover(control: &Control) -> Result<Topology, TargetError> {
    let mut conn = control.clone();
    let t = control.connector().target();
    let mut unavailable = Vec::new();
    let info: Result<String, _> = redis::cmd("INFO").arg("replication").arg("cluster").query_async(&mut conn).await;
    let (role, cluster) = match info {
        Ok(text) => {
            let field = |name: &str| {
                text.lines().find_map(|l| l.trim_end().strip_prefix(name).and_then(|r| r.strip_prefix(':')).map(str::to_string))
            };
            let role = match field("role").as_deref() {
                Some("master") => "primary",
                Some("slave") => "replica",
                _ => "unknown",
            };
            (role.to_string(), field("cluster_enabled").as_deref() == Some("1"))
        }
        Err(err) => {
            unavailable.push(format!("INFO: {err}"));
            ("unknown".to_string(), false)
        }
    };
    let address = if t.host.contains(':') { format!("[{}]:{}", t.host, t.port) } else { format!("{}:{}", t.host, t.port) };
    if !cluster {
        return Ok(Topology { kind: Kind::Standalone, nodes: vec![Node { address, role, slots: Vec::new() }], unavailable });
    }
    // CLUSTER SLOTS: [[start, end, [host, port, id], replicas...], ...] (also on older servers).
    let slots: Vec<redis::Value> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query_async(&mut conn)
        .await
        .map_err(|e| TargetError::Call(crate::protocol::CallError::from_redis(&e)))?;
    let mut nodes: Vec<Node> = Vec::new();
    for range in slots {
        let redis::Value::Array(parts) = range else { continue };
        let (Some(redis::Value::Int(start)), Some(redis::Value::Int(end)), Some(redis::Value::Array(primary))) =
            (parts.first(), parts.get(1), parts.get(2))
        else {
            continue;
        };
        let host = match primary.first() {
            Some(redis::Value::BulkString(h)) if !h.is_empty() => String::from_utf8_lossy(h).into_owned(),
            _ => t.host.clone(),
        };
        let port = match primary.get(1) {
            Some(redis::Value::Int(p)) => *p,
            _ => 0,
        };
        let addr = format!("{host}:{port}");
        let range = (*start as u16, *end as u16);
        match nodes.iter_mut().find(|n| n.address == addr) {
            Some(node) => node.slots.push(range),
            None => nodes.push(Node { address: addr, role: "primary".into(), slots: vec![range] }),
        }
    }
    if nodes.len() > 1 {
        return Err(TargetError::Unsupported(format!(
            "{} is a Valkey Cluster of {} primaries ({}): routing each queue to the node that owns its \
             slot, with MOVED/ASK, is not built yet; a cluster whose slots all sit on one primary works",
            t.display(),
            nodes.len(),
            nodes.iter().map(|n| n.address.as_str()).collect::<Vec<_>>().join(", ")
        )));
    }
    Ok(Topology { kind: Kind::Cluster, nodes, unavailable })
}
