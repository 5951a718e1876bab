//! INFO snapshots: the server figures a report needs, before and after a run.

use super::NetError;
use redis::aio::ConnectionLike;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What INFO said at one moment, reduced to what a run report needs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
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

impl InfoSnapshot {
    /// The sum of several nodes' snapshots (memory, CPU and commandstats added; the first
    /// node's version), for a cluster's totals.
    pub fn sum(nodes: &[InfoSnapshot]) -> InfoSnapshot {
        let mut total = InfoSnapshot {
            server_version: nodes.first().map(|n| n.server_version.clone()).unwrap_or_default(),
            ..InfoSnapshot::default()
        };
        for node in nodes {
            total.used_memory += node.used_memory;
            total.used_cpu_s += node.used_cpu_s;
            for (name, stat) in &node.commandstats {
                let entry = total.commandstats.entry(name.clone()).or_default();
                entry.calls += stat.calls;
                entry.usec += stat.usec;
            }
        }
        total
    }
}

/// One `cmdstat_<name>` line of INFO commandstats.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct CommandStat {
    /// Calls of the command.
    pub calls: u64,
    /// Server time spent in it, µs.
    pub usec: u64,
}

/// Reads INFO server, memory, cpu and commandstats.
pub async fn info<C: ConnectionLike>(conn: &mut C) -> Result<InfoSnapshot, NetError> {
    let text: String = redis::cmd("INFO")
        .arg("server")
        .arg("memory")
        .arg("cpu")
        .arg("commandstats")
        .query_async(conn)
        .await
        .map_err(|e| NetError::from_redis(&e))?;
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
