//! What a run observes besides the load itself: the nodes' INFO before and after, the
//! invariant check, the run's queues, and the replica a failover fault needs.

use crate::check::{self, CheckOutcome};
use crate::error::AppError;
use crate::history::{HistoryHeader, HistoryParts, KeepHistory};
use crate::keyspace::ids::run_tag;
use crate::keyspace::{QueueKeys, QueueName};
use crate::load::coordinator::Driven;
use crate::net::{self, ConnectOptions, Connector, Endpoint, InfoSnapshot, Topology};
use crate::plane::Plane;
use crate::scenario::Plan;
use crate::server::{EmbeddedServer, ServerOptions};

/// The history's header for `driven`; without it (`None`), what the run's start knows: the
/// header a run killed before its end leaves (not drained, any job number issued, no job that
/// had to finish, incomplete).
/// `keep` is the run's `--keep-history`.
pub(super) fn history_header(plan: &Plan, keep: KeepHistory, driven: Option<&Driven>) -> HistoryHeader {
    HistoryHeader {
        seed: plan.seed,
        run_tag: run_tag(plan.id_seed()),
        queues: plan.queues.clone(),
        drained: driven.is_some_and(|d| d.drained),
        issued: driven.map_or(u64::MAX, |d| d.issued),
        max_attempts: plan.producers.max_attempts,
        must_finish: driven.is_some_and(|d| plan.consumers.count > 0 && d.interrupted.is_none()),
        protocol: plan.protocol,
        stream_shards: Vec::new(),
        event_version: crate::history::EVENT_VERSION,
        complete: driven.is_some(),
        retain_ms: plan.maintenance.clean.map(|_| plan.maintenance.retain.as_millis() as u64),
        keep,
    }
}

/// Checks every invariant against the server and the run's history (read back from history.bin,
/// in parts when it is larger than `--check-memory`). Returns the outcome (None with
/// `--no-check`: `check --history` can run later), or why the check could not run.
pub(super) async fn check_run(
    history: Result<&HistoryParts, &str>,
    driven: &Driven,
    plane: &Plane,
    queues: &[QueueKeys],
    no_check: bool,
) -> Result<Option<CheckOutcome>, String> {
    if no_check {
        return Ok(None);
    }
    if driven.depths.is_none() {
        return Err("the server could not be read at the end of the run".to_string());
    }
    let history = history.map_err(str::to_string)?;
    check::check(plane, queues, Some(history)).await.map(Some).map_err(|e| e.to_string())
}

/// Which side of the run an INFO reading is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum When {
    /// Before the load starts.
    Before,
    /// After the load and the drain, before the check and the cleanup.
    After,
}

impl std::fmt::Display for When {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            When::Before => "before",
            When::After => "after",
        })
    }
}

/// INFO of every node into `topology` (as its reading `when`), and their sum; `None` when a
/// node's INFO is denied or fails (said in `unavailable`).
pub(super) async fn node_info(
    plane: &Plane,
    topology: &mut Topology,
    when: When,
    unavailable: &mut Vec<String>,
) -> Option<InfoSnapshot> {
    let mut snapshots = Vec::new();
    let conns = plane.nodes();
    let topology_len = topology.nodes.len();
    for node in topology.nodes.iter_mut() {
        // By address: after a failover the plane's nodes are no longer the start's.
        let at = (node.host.clone(), node.port);
        // (A standalone server's one connection may follow a FAILOVER elsewhere: it is the node.)
        let found = match conns.as_slice() {
            [only] if topology_len == 1 => Some(only.clone()),
            _ => conns.iter().find(|c| c.connector().host_port() == at).cloned(),
        };
        let Some(mut conn) = found else {
            unavailable.push(format!("INFO of {} {when} the run: no longer a primary (failed over?)", node.address));
            continue;
        };
        match net::info(&mut conn).await {
            Ok(snapshot) => {
                node.version = snapshot.server_version.clone();
                match when {
                    When::Before => node.info_before = Some(snapshot.clone()),
                    When::After => node.info_after = Some(snapshot.clone()),
                }
                snapshots.push(snapshot);
            }
            Err(err) => unavailable.push(format!("INFO of {} {when} the run: {err}", node.address)),
        }
    }
    (snapshots.len() == topology.nodes.len()).then(|| InfoSnapshot::sum(&snapshots))
}

pub(super) fn queue_keys(plan: &Plan) -> Result<Vec<QueueKeys>, AppError> {
    plan.queues
        .iter()
        .map(|q| {
            QueueName::new(q)
                .map(|name| QueueKeys::for_protocol(name, plan.protocol))
                .map_err(|e| AppError::Usage(e.to_string()))
        })
        .collect()
}

/// How long a new replica may take to sync with its primary.
pub(super) const REPLICA_SYNC_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

/// Starts an embedded server with `options` as a replica of the embedded primary on
/// `primary_port` (REPLICAOF), and waits until its link to the primary is up.
///
/// Errors: the server does not start, or does not sync within [`REPLICA_SYNC_WITHIN`].
pub(super) async fn start_replica(
    options: &ServerOptions,
    primary_port: u16,
    connect: ConnectOptions,
) -> Result<EmbeddedServer, AppError> {
    let replica = EmbeddedServer::start(options)?;
    let connector = Connector::new(Endpoint::resolve(&replica.url(), &net::TargetFlags::default(), |_| None)?)?;
    let mut conn = net::Control::connect(&connector, ConnectOptions { client_name: None, ..connect })
        .await
        .map_err(|e| AppError::Prepare(e.into()))?;
    let call = |e: redis::RedisError| AppError::Prepare(crate::resp::CallError::from_redis(&e));
    redis::cmd("REPLICAOF").arg("127.0.0.1").arg(primary_port).exec_async(&mut conn).await.map_err(call)?;
    let deadline = std::time::Instant::now() + REPLICA_SYNC_WITHIN;
    loop {
        let info: String = redis::cmd("INFO").arg("replication").query_async(&mut conn).await.map_err(call)?;
        if info.lines().any(|l| l.trim() == "master_link_status:up") {
            return Ok(replica);
        }
        if std::time::Instant::now() > deadline {
            return Err(AppError::Usage(format!(
                "the replica for the failover fault (port {}) did not sync with the primary within {REPLICA_SYNC_WITHIN:?}",
                replica.port()
            )));
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
