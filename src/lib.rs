//! emq-bench: a load harness, latency recorder and invariant checker for EchoMQ, the Valkey job
//! queue whose every state change is one Lua script (`../shared/PROTOCOL.md`, EchoMQ v1.1).
//!
//! Modules, one concern each:
//! - [`cli`]: the command line (clap derive), no logic.
//! - [`protocol`]: keyspace builders, job ids, the script registry and one typed function per verb.
//! - [`server`]: the embedded `valkey-server` (find, start on a free loopback port, stop).
//! - [`cost`]: each script's server cost per call, one phase per script.
//! - [`report`]: the results model and the writer seam every results file goes through.
//! - [`probe`]: the server sampled every second on its own thread (`server.csv`).
//! - [`html`]: `report.html` and `compare.html`, drawn from a results folder's files.

pub mod atomic;
pub mod check;
pub mod cli;
pub mod cmd;
pub mod compare;
pub mod cost;
pub mod error;
pub mod faults;
pub mod history;
pub mod html;
pub mod load;
pub mod metrics;
pub mod output;
pub mod probe;
pub mod protocol;
pub mod report;
pub mod scenario;
pub mod server;
pub mod side_thread;
pub mod stats;
pub mod target;
pub mod verdict;
