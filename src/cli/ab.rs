//! `emq-bench ab`'s flags.

use super::compare::CompareFlags;
use super::ServerArgs;
use crate::net::Transport;
use std::path::PathBuf;

/// `emq-bench ab`: the raw command-line values. The usage line names `--lua-dir` twice:
/// clap's own shows a repeatable flag once.
#[derive(Debug, Clone, clap::Args)]
#[command(override_usage = "emq-bench ab [OPTIONS] --lua-dir <A> --lua-dir <B> <SCENARIO>")]
pub struct AbArgs {
    /// The scenario file; prefer `jobs = N` over a duration, so every run has the same length
    /// (server cost per script grows with the sorted sets).
    #[arg(value_name = "SCENARIO")]
    pub scenario: PathBuf,
    /// The two script directories, BASE then NEW: `--lua-dir A --lua-dir B` (given twice).
    #[arg(long = "lua-dir", value_name = "DIR", num_args = 1, required = true)]
    pub lua_dirs: Vec<PathBuf>,
    /// Repetitions per arm (pairs); α = 0.01 needs about 5 a side.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: u32,
    /// Unrecorded runs of each arm before the measured pairs (caches, allocator, CPU clock
    /// settle), like hyperfine's --warmup.
    #[arg(long, default_value_t = 1)]
    pub warmup_runs: u32,
    /// Results folder (default: results/<UTC time>-<name>); arms in A/ and B/.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Run length per repetition (at most 7 days); overrides the scenario's duration or jobs.
    #[arg(long, value_parser = super::parse_run_length)]
    pub duration: Option<std::time::Duration>,
    /// Seed of the runs and of the A/B order.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Target server URL (redis:// or rediss://); default: an embedded server.
    #[arg(long)]
    pub url: Option<String>,
    /// Authentication and TLS for the URL.
    #[command(flatten)]
    pub target: super::TargetArgs,
    /// Delete keys the run's queues already have instead of refusing to start.
    #[arg(long)]
    pub force: bool,
    /// No progress line.
    #[arg(long)]
    pub quiet: bool,
    /// Load threads.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub threads: u16,
    /// The load connections' transport (see `run --transport`).
    #[arg(long, value_enum, default_value_t = Transport::Pipe)]
    pub transport: Transport,
    /// The comparison's options (alpha, noise bands, max CV, markdown, latency kind).
    #[command(flatten)]
    pub compare: CompareFlags,
    /// The embedded server's options.
    #[command(flatten)]
    pub server: ServerArgs,
}
