//! `--export-bmf` and `--export-gab`, shared by `run`, `compare` and `cost`.

use std::path::PathBuf;

/// The benchmark-tracking exports (see `ci::bmf` and `ci::gab` for the files' shapes).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ExportArgs {
    /// Also write the figures in Bencher Metric Format (JSON, for `bencher run --adapter json
    /// --file FILE`): per script, throughput and p50/p99/p99.9 (ns) with their 95% intervals as
    /// lower_value/upper_value.
    #[arg(env = "EMQ_EXPORT_BMF", long, value_name = "FILE")]
    pub export_bmf: Option<PathBuf>,
    /// Also write github-action-benchmark's custom JSON (tool: customSmallerIsBetter): per
    /// script, p50/p99/p99.9 in ms and throughput as the time per op (µs/op = 1e6 / ops/s).
    #[arg(env = "EMQ_EXPORT_GAB", long, value_name = "FILE")]
    pub export_gab: Option<PathBuf>,
}

/// The shells `emq-bench completions` writes a script for.
pub use clap_complete::Shell;

/// `emq-bench completions`.
#[derive(Debug, Clone, clap::Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_name = "SHELL")]
    pub shell: Shell,
}

/// `emq-bench man`.
#[derive(Debug, Clone, clap::Args)]
pub struct ManArgs {
    /// Write one page per command into this folder (emq-bench.1, emq-bench-run.1, ...;
    /// created when missing) instead of the main page to stdout.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}
