//! One node's INFO at one moment, and the per-second row between two of them.

use crate::net::info::{parse_info, CommandStat};
use std::collections::BTreeMap;

/// The INFO sections one sample reads: a single call per node per second.
pub const SECTIONS: [&str; 7] = ["server", "clients", "memory", "stats", "cpu", "commandstats", "latencystats"];

/// The INFO latencystats line of EVALSHA (every script call is one): the server's own latency
/// percentiles of the scripts.
const LATENCY_LINE: &str = "latency_percentiles_usec_evalsha";

/// What one INFO reply said, reduced to the sampled figures. Counters are cumulative since
/// the server started (or its last CONFIG RESETSTAT); a [`Row`] holds their differences.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Reading {
    /// `used_cpu_user`, s.
    pub cpu_user_s: f64,
    /// `used_cpu_sys`, s.
    pub cpu_sys_s: f64,
    /// `used_memory`, bytes.
    pub used_memory: u64,
    /// `used_memory_rss`, bytes.
    pub used_memory_rss: u64,
    /// `used_memory_scripts` (the script cache), bytes.
    pub used_memory_scripts: u64,
    /// The Lua VM: `used_memory_vm_eval` (Valkey 8+), else `used_memory_lua`, bytes.
    pub used_memory_lua: u64,
    /// `connected_clients`.
    pub connected_clients: u64,
    /// `total_commands_processed`.
    pub total_commands: u64,
    /// `cmdstat_*`: command → calls and µs, cumulative.
    pub commandstats: BTreeMap<String, CommandStat>,
    /// `latency_percentiles_usec_evalsha`: (p50, p99, p99.9) µs since the server started;
    /// `None` when the line is absent (no EVALSHA yet, tracking off, or an older server).
    pub evalsha_percentiles: Option<(f64, f64, f64)>,
    /// True when the reply had a `# Latencystats` section (Redis 7+ / Valkey 7.2+).
    pub has_latencystats: bool,
}

/// Parses the INFO text of [`SECTIONS`]; fields a server does not report read as 0.
pub fn parse(text: &str) -> Reading {
    // Memory, CPU in total and commandstats are parsed once, where the run's INFO is.
    let base = parse_info(text);
    let mut r = Reading { used_memory: base.used_memory, commandstats: base.commandstats, ..Reading::default() };
    let num = |v: &str| v.parse::<u64>().unwrap_or(0);
    for line in text.lines() {
        let line = line.trim_end();
        if line == "# Latencystats" {
            r.has_latencystats = true;
        }
        let Some((name, value)) = line.split_once(':') else { continue };
        match name {
            "used_cpu_user" => r.cpu_user_s = value.parse().unwrap_or(0.0),
            "used_cpu_sys" => r.cpu_sys_s = value.parse().unwrap_or(0.0),
            "used_memory_rss" => r.used_memory_rss = num(value),
            "used_memory_scripts" => r.used_memory_scripts = num(value),
            "used_memory_vm_eval" => r.used_memory_lua = num(value),
            "used_memory_lua" if r.used_memory_lua == 0 => r.used_memory_lua = num(value),
            "connected_clients" => r.connected_clients = num(value),
            "total_commands_processed" => r.total_commands = num(value),
            LATENCY_LINE => {
                let field = |key: &str| {
                    value.split(',').find_map(|f| f.split_once('=').filter(|(k, _)| *k == key)?.1.parse::<f64>().ok())
                };
                r.evalsha_percentiles =
                    Some((field("p50"), field("p99"), field("p99.9"))).and_then(|(a, b, c)| Some((a?, b?, c?)));
            }
            _ => {}
        }
    }
    r
}

/// One node over one sampling interval: rates from the difference of two readings, levels
/// (memory, clients, the server's latency percentiles) as the later reading says.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Row {
    /// Seconds since the run start (interval 0 of the measurement) at the later reading.
    pub t_s: f64,
    /// The node, `host:port`.
    pub node: String,
    /// The figures; `None` when the node did not answer INFO within the interval.
    pub figures: Option<Figures>,
}

/// The measured part of a [`Row`].
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Figures {
    /// User CPU over the interval, % of one core.
    pub cpu_user_pct: f64,
    /// System CPU over the interval, % of one core.
    pub cpu_sys_pct: f64,
    /// Levels at the later reading (its `commandstats` left empty: the interval's own are in
    /// [`commands`](Self::commands)).
    pub level: Reading,
    /// Commands processed per second over the interval (`total_commands_processed`).
    pub ops_per_sec: f64,
    /// Per command: calls and µs within the interval (commands with calls only).
    pub commands: BTreeMap<String, CommandStat>,
}

impl Figures {
    /// The figures between `before` and `after`, `secs` apart (> 0). A counter that went
    /// down (a restarted server) counts from 0.
    pub fn between(before: &Reading, after: &Reading, secs: f64) -> Figures {
        let secs = secs.max(1e-6);
        let pct = |a: f64, b: f64| if b >= a { (b - a) / secs * 100.0 } else { b / secs * 100.0 };
        let delta = |a: u64, b: u64| if b >= a { b - a } else { b };
        let commands = after
            .commandstats
            .iter()
            .filter_map(|(name, stat)| {
                let old = before.commandstats.get(name).cloned().unwrap_or_default();
                let calls = delta(old.calls, stat.calls);
                (calls > 0).then(|| (name.clone(), CommandStat { calls, usec: delta(old.usec, stat.usec) }))
            })
            .collect();
        Figures {
            cpu_user_pct: pct(before.cpu_user_s, after.cpu_user_s),
            cpu_sys_pct: pct(before.cpu_sys_s, after.cpu_sys_s),
            ops_per_sec: delta(before.total_commands, after.total_commands) as f64 / secs,
            commands,
            level: after.levels(),
        }
    }
}

impl Reading {
    /// This reading without its cumulative `commandstats` (empty): what a row keeps as its
    /// levels, the interval's own commands being in [`Figures::commands`]. A row a second per
    /// node over a long run then holds a few hundred bytes, not every command the server has
    /// ever served.
    fn levels(&self) -> Reading {
        Reading {
            cpu_user_s: self.cpu_user_s,
            cpu_sys_s: self.cpu_sys_s,
            used_memory: self.used_memory,
            used_memory_rss: self.used_memory_rss,
            used_memory_scripts: self.used_memory_scripts,
            used_memory_lua: self.used_memory_lua,
            connected_clients: self.connected_clients,
            total_commands: self.total_commands,
            commandstats: BTreeMap::new(),
            evalsha_percentiles: self.evalsha_percentiles,
            has_latencystats: self.has_latencystats,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: &str = "# Clients\r\nconnected_clients:7\r\n# Memory\r\nused_memory:1000\r\nused_memory_rss:6000\r\n\
        used_memory_vm_eval:300\r\nused_memory_scripts:512\r\n# Stats\r\ntotal_commands_processed:100\r\n\
        # CPU\r\nused_cpu_sys:1.0\r\nused_cpu_user:2.0\r\n# Commandstats\r\n\
        cmdstat_evalsha:calls=10,usec=70,usec_per_call=7.00\r\n# Latencystats\r\n\
        latency_percentiles_usec_evalsha:p50=5.0,p99=20.5,p99.9=40.1\r\n";

    #[test]
    fn info_is_reduced_to_the_sampled_figures() {
        let r = parse(INFO);
        assert_eq!(
            (r.used_memory, r.used_memory_rss, r.used_memory_lua, r.used_memory_scripts),
            (1000, 6000, 300, 512)
        );
        assert_eq!((r.connected_clients, r.total_commands), (7, 100));
        assert_eq!(r.evalsha_percentiles, Some((5.0, 20.5, 40.1)));
        assert!(r.has_latencystats);
        assert!(!parse("# Memory\r\nused_memory:1\r\n").has_latencystats, "an older server has no section");
    }

    #[test]
    fn a_row_is_the_difference_over_the_interval() {
        let before = parse(INFO);
        let after_text = INFO
            .replace("used_cpu_user:2.0", "used_cpu_user:2.5")
            .replace("total_commands_processed:100", "total_commands_processed:300")
            .replace("calls=10,usec=70", "calls=30,usec=210");
        let f = Figures::between(&before, &parse(&after_text), 2.0);
        assert!((f.cpu_user_pct - 25.0).abs() < 1e-9, "0.5 s of CPU in 2 s");
        assert_eq!(f.cpu_sys_pct, 0.0);
        assert_eq!(f.ops_per_sec, 100.0);
        assert_eq!(f.commands["evalsha"], CommandStat { calls: 20, usec: 140 });
        assert!(f.level.commandstats.is_empty(), "a row keeps the interval's commands only");
        assert_eq!(f.level.total_commands, 300);
    }
}
