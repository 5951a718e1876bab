//! What each fault kind does to the target, and how it is undone.

use super::nemesis::{hold, load_client_name};
use super::record::{FaultSpan, SpanKind};
use crate::keyspace::QueueKeys;
use crate::net::Control;
use crate::plane::Plane;
use crate::scenario::{FaultKind, FaultPlan, PauseMode};
use crate::server::{EmbeddedCluster, EmbeddedServer};
use redis::RedisError;
use std::cell::RefCell;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// What the faults act on: every node (through the nemesis's own connections), the run's
/// queues, and what the harness started: the server process (the current primary) and its
/// replica (for `failover`, which swaps the two), or the cluster's nodes.
pub(crate) struct FaultTarget<'a> {
    /// The nemesis's own connection per node (re-opened after a failover).
    pub plane: RefCell<Option<Plane>>,
    /// The run's queues, in the plan's order (a fault's `queue` indexes them).
    pub queues: &'a [QueueKeys],
    /// The embedded server's current primary process, when the harness started it.
    pub server: Option<&'a Mutex<EmbeddedServer>>,
    /// The embedded replica started for `failover` (after one, the old primary's process).
    pub replica: RefCell<Option<EmbeddedServer>>,
    /// The embedded cluster's nodes, when the harness started them.
    pub cluster: Option<&'a Mutex<EmbeddedCluster>>,
}

/// The result of one fault: how many things it hit, and what it did (or why it failed).
pub(crate) type Done = (u64, String);

/// Injects `fault` now and returns its span (from when it began to when it was undone).
pub(crate) async fn inject(
    fault: &FaultPlan,
    target: &FaultTarget<'_>,
    start: Instant,
    end: &mut watch::Receiver<bool>,
) -> FaultSpan {
    let nodes = target.plane.borrow().as_ref().map(Plane::nodes).unwrap_or_default();
    // A connection broken by an earlier fault (a restart) is found by this PING and re-opened
    // by the fault's own first command, instead of failing it.
    for node in &nodes {
        let mut conn = node.clone();
        let ping = redis::cmd("PING");
        let _ = tokio::time::timeout(Duration::from_secs(1), ping.query_async::<String>(&mut conn)).await;
    }
    let began = Instant::now();
    let done = match fault.kind {
        FaultKind::KillConnections => kill_connections(&nodes).await,
        FaultKind::Pause => pause(&nodes, fault.duration, fault.mode, end).await,
        FaultKind::ScriptFlush => on_every(&nodes, "SCRIPT FLUSH", |mut c| async move {
            redis::cmd("SCRIPT").arg("FLUSH").exec_async(&mut c).await.map(|()| 1)
        })
        .await
        .map_err(|e| e.to_string()),
        FaultKind::Maxmemory => maxmemory(&nodes, fault.duration, end).await,
        FaultKind::Freeze => freeze(target.server, fault.duration, end).await,
        FaultKind::Restart => restart(target.server, fault.signal == crate::scenario::RestartSignal::Kill),
        FaultKind::Failover => failover(target, end).await,
        FaultKind::KillPrimary => super::cluster::kill_primary(fault, target, start, end).await,
        FaultKind::ClusterFailover => super::cluster::cluster_failover(fault, target, start, end).await,
        FaultKind::Partition => super::partition::partition(fault, target, start, end).await,
    };
    let applied = done.is_ok();
    let (count, detail) = done.unwrap_or_else(|err| (0, format!("failed: {err}")));
    FaultSpan {
        kind: SpanKind::Injected(fault.kind),
        applied,
        from_s: (began - start).as_secs_f64(),
        to_s: (Instant::now() - start).as_secs_f64(),
        count,
        detail,
        effects: None,
        queue: fault.kind.on_a_queue().then(|| {
            let name = target.queues.get(fault.queue).map_or_else(|| "?".to_string(), |k| k.queue.to_string());
            format!("{name} (queue {} of {})", fault.queue + 1, target.queues.len())
        }),
    }
}

/// Runs `call` on every node; the sum of its counts, described as `what on N node(s)`.
async fn on_every<F, Fut>(nodes: &[Control], what: &str, call: F) -> Result<Done, RedisError>
where
    F: Fn(Control) -> Fut,
    Fut: std::future::Future<Output = Result<u64, RedisError>>,
{
    let mut count = 0;
    for node in nodes {
        count += call(node.clone()).await?;
    }
    Ok((count, format!("{what} on {} node(s)", nodes.len())))
}

/// CLIENT KILL ID of every connection named [`load_client_name`] on every node: this run's
/// load connections, nobody else's.
async fn kill_connections(nodes: &[Control]) -> Result<Done, String> {
    let mut killed = 0;
    for node in nodes {
        let mut conn = node.clone();
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .arg("TYPE")
            .arg("normal")
            .query_async(&mut conn)
            .await
            .map_err(|e| e.to_string())?;
        let name = format!("name={}", load_client_name());
        for line in list.lines().filter(|l| l.split(' ').any(|field| field == name)) {
            let Some(id) = line.split(' ').find_map(|field| field.strip_prefix("id=")) else { continue };
            let n: u64 = redis::cmd("CLIENT")
                .arg("KILL")
                .arg("ID")
                .arg(id)
                .query_async(&mut conn)
                .await
                .map_err(|e| e.to_string())?;
            killed += n;
        }
    }
    Ok((killed, format!("CLIENT KILL of the load connections on {} node(s)", nodes.len())))
}

/// CLIENT PAUSE for `d` on every node; CLIENT UNPAUSE when the run ends first.
async fn pause(
    nodes: &[Control],
    d: Duration,
    mode: PauseMode,
    end: &mut watch::Receiver<bool>,
) -> Result<Done, String> {
    let mode = match mode {
        PauseMode::Write => "WRITE",
        PauseMode::All => "ALL",
    };
    for node in nodes {
        let mut conn = node.clone();
        redis::cmd("CLIENT")
            .arg("PAUSE")
            .arg(d.as_millis() as u64)
            .arg(mode)
            .exec_async(&mut conn)
            .await
            .map_err(|e| e.to_string())?;
    }
    if hold(d, end).await {
        for node in nodes {
            let mut conn = node.clone();
            let mut unpause = redis::cmd("CLIENT");
            unpause.arg("UNPAUSE");
            let _ = tokio::time::timeout(Duration::from_secs(1), unpause.exec_async(&mut conn)).await;
        }
    }
    Ok((0, format!("CLIENT PAUSE {} {mode} on {} node(s)", d.as_millis(), nodes.len())))
}

/// `maxmemory` lowered to each node's memory in use, policy `noeviction`, for `d`; then both
/// set back to what they were on every node lowered, each tried three times (also when
/// lowering a later node failed). A limit not set back is an error (the run then fails).
async fn maxmemory(nodes: &[Control], d: Duration, end: &mut watch::Receiver<bool>) -> Result<Done, String> {
    let mut lowered = Vec::new();
    let mut lowered_to = Vec::new();
    let mut failed = None;
    for node in nodes {
        match lower(node).await {
            Ok((limit, policy, used)) => {
                lowered.push((node, limit, policy));
                lowered_to.push(format!("{used} B"));
            }
            Err(err) => {
                failed = Some(err.to_string());
                break;
            }
        }
    }
    if failed.is_none() {
        hold(d, end).await;
    }
    let mut not_restored = Vec::new();
    for (node, limit, policy) in lowered {
        let mut last = None;
        for attempt in 0..3 {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            let mut conn = node.clone();
            let mut set = redis::cmd("CONFIG");
            set.arg("SET").arg("maxmemory").arg(&limit).arg("maxmemory-policy").arg(&policy);
            match set.exec_async(&mut conn).await {
                Ok(()) => {
                    last = None;
                    break;
                }
                Err(e) => last = Some(e.to_string()),
            }
        }
        if let Some(err) = last {
            not_restored.push(format!("{} (was {limit}, {policy}): {err}", node.connector().endpoint().display()));
        }
    }
    if !not_restored.is_empty() {
        return Err(format!("maxmemory could not be set back on {}", not_restored.join("; ")));
    }
    if let Some(err) = failed {
        return Err(err);
    }
    Ok((
        0,
        format!(
            "maxmemory lowered to the memory in use ({}), noeviction, for {} ms",
            lowered_to.join(", "),
            d.as_millis()
        ),
    ))
}

/// Lowers one node's `maxmemory` to its memory in use with `noeviction`; returns the limit
/// and policy it had, and the new limit.
async fn lower(node: &Control) -> Result<(String, String, u64), RedisError> {
    let mut conn = node.clone();
    let limit: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("maxmemory").query_async(&mut conn).await?;
    let policy: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("maxmemory-policy").query_async(&mut conn).await?;
    let info: String = redis::cmd("INFO").arg("memory").query_async(&mut conn).await?;
    let used = info.lines().find_map(|l| l.strip_prefix("used_memory:")).and_then(|v| v.trim().parse::<u64>().ok());
    let Some(used) = used else {
        return Err(RedisError::from((redis::ErrorKind::Parse, "INFO memory has no used_memory")));
    };
    let (limit, policy) = (limit.get(1).cloned().unwrap_or_default(), policy.get(1).cloned().unwrap_or_default());
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory-policy")
        .arg("noeviction")
        .arg("maxmemory")
        .arg(used)
        .exec_async(&mut conn)
        .await?;
    Ok((limit, policy, used))
}

/// SIGSTOP of the embedded server for `d`, then SIGCONT (at once when the run ends first).
async fn freeze(
    server: Option<&Mutex<EmbeddedServer>>,
    d: Duration,
    end: &mut watch::Receiver<bool>,
) -> Result<Done, String> {
    let server = server.ok_or("freeze needs the embedded server")?;
    server.lock().expect("server").freeze(true);
    hold(d, end).await;
    server.lock().expect("server").freeze(false);
    Ok((0, format!("SIGSTOP for {} ms, then SIGCONT", d.as_millis())))
}

/// Stops the embedded server (SIGTERM or SIGKILL) and starts it again on its port and data
/// directory. Blocks this (the nemesis's own) thread while the server is down.
fn restart(server: Option<&Mutex<EmbeddedServer>>, kill: bool) -> Result<Done, String> {
    let server = server.ok_or("restart needs the embedded server")?;
    let mut server = server.lock().expect("server");
    let persistence: Vec<String> = server
        .config()
        .iter()
        .filter(|(k, _)| matches!(k.as_str(), "appendonly" | "appendfsync" | "save"))
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    let down = server.restart(kill).map_err(|e| e.to_string())?;
    let persistence = if persistence.is_empty() { "no persistence".to_string() } else { persistence.join(", ") };
    let signal = if kill { "SIGKILL" } else { "SIGTERM" };
    Ok((1, format!("{signal}, answering again after {:.2} s ({persistence})", down.as_secs_f64())))
}

/// How long a failover may take (the replica catching up, then promoted).
const FAILOVER_WITHIN: Duration = Duration::from_secs(10);

/// The lines of `conn`'s INFO replication that start with one of `keys`.
async fn replication_lines(conn: &mut Control, keys: &[&str]) -> Result<Vec<String>, String> {
    let info: String = redis::cmd("INFO").arg("replication").query_async(conn).await.map_err(|e| e.to_string())?;
    Ok(info.lines().filter(|l| keys.iter().any(|k| l.starts_with(k))).map(str::to_owned).collect())
}

/// FAILOVER from the embedded primary to its replica, then makes every connection follow:
/// the connectors point at the new primary, the old primary's client connections are killed
/// (they reconnect there), the nemesis re-opens its own, and the two processes swap roles in
/// `target`. Writes that reach the old primary meanwhile are refused with READONLY. Once
/// FAILOVER is sent it is seen through (or aborted after [`FAILOVER_WITHIN`]), even when the
/// load phase ends meanwhile.
async fn failover(target: &FaultTarget<'_>, end: &watch::Receiver<bool>) -> Result<Done, String> {
    let began = Instant::now();
    let server = target.server.ok_or("failover needs the embedded server")?;
    let replica_port = target.replica.borrow().as_ref().map(EmbeddedServer::port).ok_or("no replica was started")?;
    let plane = target.plane.borrow().clone().ok_or("no connection to the primary")?;
    let mut primary = plane.seed().clone();
    let connector = primary.connector().clone();
    let replica_connector = connector.at("127.0.0.1", replica_port).map_err(|e| e.to_string())?;
    let mut replica =
        Control::connect(&replica_connector, crate::net::ConnectOptions::default()).await.map_err(|e| e.to_string())?;
    // The replica must be in sync (after an earlier failover it syncs again with its new primary).
    let deadline = Instant::now() + FAILOVER_WITHIN;
    loop {
        if replication_lines(&mut primary, &["slave0:"]).await?.iter().any(|l| l.contains("state=online")) {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!("the replica on port {replica_port} was not in sync within {FAILOVER_WITHIN:?}"));
        }
        // Not begun yet: a load phase that ends meanwhile ends the fault (no FAILOVER sent).
        if *end.borrow() {
            return Err("the load phase ended while the replica was still syncing; no FAILOVER sent".into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    redis::cmd("FAILOVER")
        .arg("TO")
        .arg("127.0.0.1")
        .arg(replica_port)
        .arg("TIMEOUT")
        .arg(FAILOVER_WITHIN.as_millis() as u64)
        .exec_async(&mut primary)
        .await
        .map_err(|e| e.to_string())?;
    let promoted_by = Instant::now() + FAILOVER_WITHIN;
    loop {
        let role: Vec<redis::Value> = redis::cmd("ROLE").query_async(&mut replica).await.map_err(|e| e.to_string())?;
        if matches!(role.first(), Some(redis::Value::BulkString(b)) if b.as_slice() == b"master") {
            break;
        }
        if Instant::now() > promoted_by {
            // Say where it stuck (the primary's failover state and view of the replica, the
            // replica's link), read before the abort changes them: the servers' logs are gone
            // with a test's temporary folder.
            // A failed INFO leaves its lines out: the timeout is the error to report.
            let mut seen =
                replication_lines(&mut primary, &["master_failover_state:", "slave0:"]).await.unwrap_or_default();
            seen.extend(
                replication_lines(&mut replica, &["master_link_status:", "master_sync_in_progress:"])
                    .await
                    .unwrap_or_default(),
            );
            let _ = redis::cmd("FAILOVER").arg("ABORT").exec_async(&mut primary).await;
            return Err(format!(
                "the replica on port {replica_port} was not promoted within {FAILOVER_WITHIN:?} ({})",
                seen.join(", ")
            ));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The roles changed: from here on the processes and the connectors say so first, so a
    // step that fails below cannot leave a later freeze or restart acting on the replica.
    {
        let mut current = server.lock().expect("server");
        let mut replica = target.replica.borrow_mut();
        std::mem::swap(&mut *current, replica.as_mut().expect("checked above"));
    }
    let (_, old_port) = connector.host_port();
    connector.follow("127.0.0.1", replica_port);
    // Every other connection to the old primary (load, coordinator, run lock) is killed and
    // reconnects to the new one. A connection that read the old endpoint just before `follow`
    // may connect after a kill: kill again until only this one is left (a READONLY reply alone
    // would not move it).
    let mut killed = 0u64;
    for _ in 0..20 {
        let n: u64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("normal")
            .arg("SKIPME")
            .arg("yes")
            .query_async(&mut primary)
            .await
            .map_err(|e| e.to_string())?;
        killed += n;
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .arg("TYPE")
            .arg("normal")
            .query_async(&mut primary)
            .await
            .map_err(|e| e.to_string())?;
        if list.lines().count() <= 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let reopened = plane.open_again().await.map_err(|e| format!("the new primary: {e}"))?;
    *target.plane.borrow_mut() = Some(reopened);
    Ok((
        1,
        format!(
            "FAILOVER from port {old_port} to {replica_port} in {:.2} s; {killed} connections moved over",
            began.elapsed().as_secs_f64()
        ),
    ))
}
