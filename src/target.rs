//! The server under test: where load may go (loopback only), the run's own keys (refuse to
//! start on existing ones, delete them at the end, never flush a database) and INFO snapshots.

use crate::protocol::{CallError, QueueKeys};
use redis::aio::ConnectionLike;
use serde::Serialize;
use std::collections::BTreeMap;
use std::net::{IpAddr, ToSocketAddrs};

/// Why a target URL was refused.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// The URL does not parse as a redis:// URL (TLS is not built in: loopback only).
    #[error("target url {url:?} is not a usable redis:// URL: {reason}")]
    BadUrl {
        /// The URL as given.
        url: String,
        /// What is wrong.
        reason: String,
    },
    /// The host is not a loopback address: load only ever targets this machine.
    #[error("target url {url:?} resolves to {addr}, which is not a loopback address; emq-bench only sends load to 127.0.0.0/8 or ::1")]
    NotLoopback {
        /// The URL as given.
        url: String,
        /// The first non-loopback address it resolved to.
        addr: IpAddr,
    },
    /// Keys of the run's queues exist already.
    #[error("queue {queue} already has keys on the target (e.g. {example}); pass --force to delete them first, or choose other queues")]
    KeysExist {
        /// The queue.
        queue: String,
        /// One of its keys.
        example: String,
    },
    /// A command to the target failed.
    #[error("target: {0}")]
    Call(#[from] CallError),
}

/// Checks that `url` is a redis URL whose host resolves only to loopback addresses.
///
/// Errors: [`TargetError::BadUrl`] or [`TargetError::NotLoopback`].
pub fn check_loopback(url: &str) -> Result<(), TargetError> {
    let bad = |reason: String| TargetError::BadUrl { url: url.to_string(), reason };
    if url.starts_with("rediss://") {
        return Err(bad("TLS is not built in: load only ever targets loopback addresses".into()));
    }
    let client = redis::Client::open(url).map_err(|e| bad(e.to_string()))?;
    let (host, port) = match client.get_connection_info().addr() {
        redis::ConnectionAddr::Tcp(host, port) => (host.clone(), *port),
        redis::ConnectionAddr::TcpTls { host, port, .. } => (host.clone(), *port),
        other => return Err(bad(format!("unsupported address {other:?}"))),
    };
    let addrs = (host.as_str(), port).to_socket_addrs().map_err(|e| bad(format!("cannot resolve {host}: {e}")))?;
    for addr in addrs {
        if !addr.ip().is_loopback() {
            return Err(TargetError::NotLoopback { url: url.to_string(), addr: addr.ip() });
        }
    }
    Ok(())
}

/// SCAN `COUNT` per call: large, so a big keyspace is walked in few round trips.
const SCAN_COUNT: u64 = 10_000;

/// Every key of queue `keys` (SCAN with the queue's pattern; never KEYS). Stops after `limit`.
pub async fn queue_keys<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    limit: usize,
) -> Result<Vec<String>, CallError> {
    let mut cursor: u64 = 0;
    let mut found = Vec::new();
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(keys.scan_pattern())
            .arg("COUNT")
            .arg(SCAN_COUNT)
            .query_async(conn)
            .await
            .map_err(|e| CallError::from_redis(&e))?;
        found.extend(batch);
        if next == 0 || found.len() >= limit {
            found.truncate(limit);
            return Ok(found);
        }
        cursor = next;
    }
}

/// Refuses (or, with `force`, deletes) keys the run's queues already have.
///
/// Errors: [`TargetError::KeysExist`] naming the first such queue when `force` is false.
pub async fn ensure_clean<C: ConnectionLike>(
    conn: &mut C,
    queues: &[QueueKeys],
    force: bool,
) -> Result<u64, TargetError> {
    let mut deleted = 0;
    for keys in queues {
        if !force {
            if let Some(example) = queue_keys(conn, keys, 1).await?.into_iter().next() {
                return Err(TargetError::KeysExist { queue: keys.queue.to_string(), example });
            }
        } else {
            deleted += delete_queue(conn, keys).await?;
        }
    }
    Ok(deleted)
}

/// Deletes every key of queue `keys` with UNLINK in batches; returns how many. Touches no
/// other key and never flushes the database.
pub async fn delete_queue<C: ConnectionLike>(conn: &mut C, keys: &QueueKeys) -> Result<u64, CallError> {
    let mut deleted = 0;
    loop {
        let batch = queue_keys(conn, keys, SCAN_COUNT as usize).await?;
        if batch.is_empty() {
            return Ok(deleted);
        }
        let n: u64 = redis::cmd("UNLINK").arg(&batch).query_async(conn).await.map_err(|e| CallError::from_redis(&e))?;
        deleted += n;
    }
}

/// What INFO said at one moment, reduced to what a run report needs.
#[derive(Debug, Clone, Default, Serialize)]
pub struct InfoSnapshot {
    /// `redis_version`/`valkey_version`, e.g. "9.1.2".
    pub server_version: String,
    /// `used_memory`, bytes.
    pub used_memory: u64,
    /// `used_cpu_user` + `used_cpu_sys` of the server process, seconds.
    pub used_cpu_s: f64,
    /// `cmdstat_*` lines: command -> (calls, usec in total).
    pub commandstats: BTreeMap<String, CommandStat>,
}

/// One `cmdstat_<name>` line of INFO commandstats.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct CommandStat {
    /// Calls of the command.
    pub calls: u64,
    /// Server time spent in it, µs.
    pub usec: u64,
}

/// Reads INFO server, memory, cpu and commandstats.
pub async fn info<C: ConnectionLike>(conn: &mut C) -> Result<InfoSnapshot, CallError> {
    let text: String = redis::cmd("INFO")
        .arg("server")
        .arg("memory")
        .arg("cpu")
        .arg("commandstats")
        .query_async(conn)
        .await
        .map_err(|e| CallError::from_redis(&e))?;
    Ok(parse_info(&text))
}

/// Parses INFO text (`name:value` lines; `cmdstat_x:calls=1,usec=2,...`).
pub fn parse_info(text: &str) -> InfoSnapshot {
    let mut snap = InfoSnapshot::default();
    let mut cpu = 0.0;
    for line in text.lines() {
        let Some((name, value)) = line.trim_end().split_once(':') else { continue };
        match name {
            "valkey_version" => snap.server_version = value.to_string(),
            "redis_version" if snap.server_version.is_empty() => snap.server_version = value.to_string(),
            "used_memory" => snap.used_memory = value.parse().unwrap_or(0),
            "used_cpu_user" | "used_cpu_sys" => cpu += value.parse::<f64>().unwrap_or(0.0),
            _ => {
                if let Some(cmd) = name.strip_prefix("cmdstat_") {
                    let mut stat = CommandStat::default();
                    for field in value.split(',') {
                        match field.split_once('=') {
                            Some(("calls", v)) => stat.calls = v.parse().unwrap_or(0),
                            Some(("usec", v)) => stat.usec = v.parse().unwrap_or(0),
                            _ => {}
                        }
                    }
                    snap.commandstats.insert(cmd.to_string(), stat);
                }
            }
        }
    }
    snap.used_cpu_s = cpu;
    snap
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_targets_are_accepted() {
        assert!(check_loopback("redis://127.0.0.1:6379/").is_ok());
        assert!(check_loopback("redis://localhost:6379/0").is_ok());
        assert!(check_loopback("redis://user:pw@[::1]:6379/").is_ok());
        assert!(matches!(check_loopback("redis://10.1.2.3:6379/"), Err(TargetError::NotLoopback { .. })));
        assert!(matches!(check_loopback("http://x"), Err(TargetError::BadUrl { .. })));
        let tls = check_loopback("rediss://127.0.0.1:6379/").unwrap_err().to_string();
        assert!(tls.contains("TLS is not built in"), "{tls}");
    }

    #[test]
    fn info_text_is_reduced_to_the_report_fields() {
        let text = "# Server\r\nredis_version:7.2.4\r\nvalkey_version:9.1.2\r\n# Memory\r\nused_memory:1048576\r\n\
                    # CPU\r\nused_cpu_sys:1.5\r\nused_cpu_user:2.25\r\n# Commandstats\r\n\
                    cmdstat_evalsha:calls=10,usec=70,usec_per_call=7.00,rejected_calls=0,failed_calls=0\r\n";
        let snap = parse_info(text);
        assert_eq!(snap.server_version, "9.1.2");
        assert_eq!(snap.used_memory, 1_048_576);
        assert!((snap.used_cpu_s - 3.75).abs() < 1e-9);
        assert_eq!(snap.commandstats["evalsha"], CommandStat { calls: 10, usec: 70 });
    }
}
