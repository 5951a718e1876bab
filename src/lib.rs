//! emq-bench: a load harness, latency recorder and invariant checker for EchoMQ, the Valkey job
//! queue whose every state change is one Lua script (`docs/protocol.md`, EchoMQ v1.1).
//!
//! The modules, one concern each, from the bottom layer up; a module imports only modules of
//! the layers below it (`scripts/check-layers` fails the build's tests on a cycle):
//!
//! Leaves (nothing else of the crate):
//! - [`stats`]: pure statistics (median, CV, Mann–Whitney U, sign test, bootstrap intervals).
//! - [`atomic`]: one way to write a results file (`.tmp`, sync, rename).
//! - [`side_thread`]: a thread with a runtime of its own, for work beside the run.
//! - [`server`]: the embedded `valkey-server` (find, start on a free loopback port, stop).
//! - [`verdict`]: a run's typed end (verdict, findings, the keys' fate).
//! - [`names`]: names close to a misspelt one (a shipped scenario, a script), for messages.
//! - [`net`]: endpoint, TLS, connector and stream, the control connection, slots, topology, INFO.
//! - [`lua`]: the scripts by identity: EchoMQ's and BullMQ's catalog, protocols, outcome codes,
//!   EchoMQ's built-in sources.
//!
//! The transport and the names of a queue (over `net` and `lua`, no protocol):
//! - [`resp`]: the RESP transport: request framing, the pipe and control connections, lanes,
//!   the script registry and NOSCRIPT reload, call errors, the script client, cluster routes.
//! - [`keyspace`]: checked queue names and job ids, a queue's keys and depth places, job-id
//!   minting with the run's tag.
//!
//! The queue protocols and what they measure:
//! - [`payload`]: job payloads that carry their id and checksum (I4).
//! - [`plane`]: the queue-aware control plane: routing by slot, the run lock, the run's own keys.
//! - [`metrics`]: per-thread recorders, the interval swap and merge, job counters.
//! - [`history`]: the per-job outcome log and `history.bin`.
//! - [`probe`]: the server sampled every second on its own thread (`server.csv`).
//! - [`scenario`]: one struct per TOML table, validation, the resolved plan and its samplers.
//! - [`faults`]: the record of faults injected and seen, and the nemesis that injects them.
//! - [`queue`]: the queue-protocol seam the load drives (`QueueOps`, `Driver`, verbs, chores)
//!   and the typed replies both protocols answer with.
//! - [`echomq`]: EchoMQ v1.1's verbs, one per file, and `EchoOps`, its side of the seam.
//! - [`bullmq`]: BullMQ's verbs as its clients call them, its keys, data field and pinned
//!   release, and `BullOps`, its side of the seam.
//! - [`load`]: the driver: producers, consumers, maintenance, pacing, load threads (where a
//!   thread picks `EchoOps` or `BullOps`), the coordinator, stop signals.
//! - [`cost`]: each script's server cost per call, one phase per script.
//! - [`check`]: the invariants I1–I8 against the server's state and the run's history.
//!
//! Results, read and written:
//! - [`report`]: the results model (summary.json) and one writer per file of the folder.
//! - [`compare`]: two result sets → a verdict per metric.
//! - [`capacity`]: latency objectives, the search for the highest sustained rate, capacity.json.
//! - [`html`]: `report.html` and `compare.html`, drawn from a results folder's files.
//! - [`output`]: the progress line.
//! - [`ci`]: what CI reads: `junit.xml`, `summary.md`, the Bencher and github-action-benchmark
//!   exports.
//! - [`exposition`]: the metrics endpoint (`--metrics-addr`): the run's once-a-second figures
//!   as Prometheus text, served from a thread of its own.
//!
//! The top: [`cli`] (clap types only), [`error`] (errors by stage, exit codes) and [`cmd`] (one
//! file per subcommand; the run's stages and composition roots).

pub mod atomic;
pub mod bullmq;
pub mod capacity;
pub mod check;
pub mod ci;
pub mod cli;
pub mod cmd;
pub mod compare;
pub mod cost;
pub mod echomq;
pub mod error;
pub mod exposition;
pub mod faults;
pub mod history;
pub mod html;
pub mod keyspace;
pub mod load;
pub mod lua;
pub mod metrics;
pub mod names;
pub mod net;
pub mod output;
pub mod payload;
pub mod plane;
pub mod probe;
pub mod queue;
pub mod report;
pub mod resp;
pub mod scenario;
pub mod server;
pub mod side_thread;
pub mod stats;
pub mod verdict;

#[cfg(test)]
mod tests {
    /// The map above names every module this file declares, so a new module is placed in a
    /// layer when it is added.
    #[test]
    fn the_module_map_names_every_module() {
        let source = include_str!("lib.rs");
        let (map, code) = source.split_once("\npub mod ").expect("modules");
        let declared: Vec<&str> = std::iter::once(code)
            .chain(source.split("\npub mod ").skip(2))
            .map(|rest| rest.split(';').next().unwrap_or_default())
            .collect();
        assert!(declared.len() >= 20, "{declared:?}");
        for module in declared {
            assert!(map.contains(&format!("[`{module}`]")), "lib.rs's map does not name `{module}`");
        }
    }
}
