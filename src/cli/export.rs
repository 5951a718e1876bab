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
