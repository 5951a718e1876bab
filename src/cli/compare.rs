//! `emq-bench compare`'s flags, and the verdict options `ab` shares with it.

use crate::compare;
use std::path::PathBuf;

/// `emq-bench compare`: the raw command-line values (resolved into [`CompareOptions`]).
#[derive(Debug, Clone, clap::Args)]
pub struct CompareArgs {
    /// The base results folder: one run (summary.json) or a repeated run (rep-*/summary.json).
    #[arg(value_name = "BASE")]
    pub base: PathBuf,
    /// The new results folder, same layouts.
    #[arg(value_name = "NEW")]
    pub new: PathBuf,
    /// The verdict's options.
    #[command(flatten)]
    pub flags: CompareFlags,
    /// Folder to write compare.json, compare.md, compare.html and junit.xml into (created
    /// when missing).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Seed of the bootstrap resampling [default: 1].
    #[arg(long)]
    pub seed: Option<u64>,
    /// `--export-bmf`, `--export-gab` (NEW's figures).
    #[command(flatten)]
    pub export: super::export::ExportArgs,
}

/// The verdict's options, shared by `compare` and `ab`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct CompareFlags {
    /// Significance level of the one-sided Mann-Whitney test [default: 0.01].
    #[arg(long)]
    pub alpha: Option<f64>,
    /// Noise band of throughput, e.g. 5% or 0.05 [default: 5%].
    #[arg(long, value_name = "FRACTION", value_parser = parse_fraction)]
    pub noise_throughput: Option<f64>,
    /// Noise band of p50 latency [default: 5%].
    #[arg(long, value_name = "FRACTION", value_parser = parse_fraction)]
    pub noise_p50: Option<f64>,
    /// Noise band of p99 and p99.9 latency [default: 15%].
    #[arg(long, value_name = "FRACTION", value_parser = parse_fraction)]
    pub noise_tail: Option<f64>,
    /// Largest coefficient of variation of a side before a metric is inconclusive [default: 10%].
    #[arg(long, value_name = "FRACTION", value_parser = parse_fraction)]
    pub max_cv: Option<f64>,
    /// Print the Markdown version instead of the table.
    #[arg(long)]
    pub markdown: bool,
    /// Which latency to compare: from the intended send (default), or the service time from
    /// the actual send (the script's own cost, without open-loop pacing jitter).
    #[arg(long, value_enum, default_value_t = compare::LatencyKind::Intended)]
    pub latency: compare::LatencyKind,
}

/// Parses a fraction written as a percentage (`5%`) or a number in [0, 1] (`0.05`); a bare
/// number above 1 is refused as ambiguous.
pub fn parse_fraction(text: &str) -> Result<f64, String> {
    let (number, scale) = match text.trim().strip_suffix('%') {
        Some(percent) => (percent.trim(), 0.01),
        None => (text.trim(), 1.0),
    };
    let value: f64 = number.parse().map_err(|_| format!("expected a fraction like 5% or 0.05, found {text:?}"))?;
    let value = value * scale;
    if !(0.0..=1.0).contains(&value) {
        return Err(format!("expected a fraction between 0% and 100% (5% or 0.05), found {text:?}"));
    }
    Ok(value)
}
