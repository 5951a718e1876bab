//! `emq-bench cost`'s flags.

use super::compare::parse_fraction;
use super::ServerArgs;
use crate::cost::{MAX_CALLS, MIN_CALLS};
use std::path::PathBuf;
use std::time::Duration;

/// `emq-bench cost`: the raw command-line values.
#[derive(Debug, Clone, clap::Args)]
pub struct CostArgs {
    /// The script directory to measure (default `lua`), or two, BASE then NEW, to compare.
    #[arg(long = "lua-dir", value_name = "DIR", num_args = 1)]
    pub lua_dirs: Vec<PathBuf>,
    /// Calls per script, arm and repetition (100..=1000000; promote and reap: jobs, 100 per call).
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u32).range(MIN_CALLS as i64..=MAX_CALLS as i64))]
    pub calls: u32,
    /// Measured rounds (1..=1000), each every phase on a fresh keyspace, after one short
    /// unrecorded warm-up; their blocks are pooled. With one directory (or --baseline): the
    /// rounds measured [default: 3]. With two: the most rounds the sequential gate may take
    /// [default: as many as --budget allows].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: Option<u32>,
    /// With two directories: how long the gate may measure before it gives up on the scripts
    /// still undecided (exit 3), e.g. 3m, 90s. It adds rounds of ABBA blocks until every
    /// script's verdict is decided, and starts no round it expects to end past the budget.
    #[arg(long, value_name = "DURATION", default_value = "3m", value_parser = parse_budget)]
    pub budget: Duration,
    /// Noise band: the smallest change of a script's cost that can be called a regression or an
    /// improvement, e.g. 3% or 0.03 [default: 3%].
    #[arg(long, value_name = "FRACTION", value_parser = parse_fraction)]
    pub noise_cost: Option<f64>,
    /// Half the widest 95% interval of a script's median paired ratio that still gives a
    /// verdict inside the noise band [default: 10%].
    #[arg(long, value_name = "FRACTION", value_parser = parse_fraction)]
    pub max_cv: Option<f64>,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Print Markdown (for a CI comment) instead of the table: with two arms, the scripts by
    /// the size of their change, largest first.
    #[arg(long)]
    pub markdown: bool,
    /// Also write `cost.json`, `cost.md` (the Markdown) and `junit.xml` into this folder
    /// (created).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Compare one --lua-dir (NEW) against a stored `cost.json` (its last arm: the NEW of a
    /// comparison, or its only one) instead of measuring BASE again. Unpaired (Mann–Whitney and
    /// the ratio of medians, as `compare`), so the machine's drift between the two runs is not
    /// cancelled: expect inconclusive more often than with two --lua-dir.
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// The embedded server.
    #[command(flatten)]
    pub server: ServerArgs,
    /// `--export-bmf`, `--export-gab` (the last directory's figures).
    #[command(flatten)]
    pub export: super::export::ExportArgs,
}

/// `--budget`: a duration from 1 s to 1 h.
fn parse_budget(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| format!("{s:?}: {e}"))?;
    if d < Duration::from_secs(1) || d > Duration::from_secs(3600) {
        return Err(format!("{s:?}: expected 1s to 1h"));
    }
    Ok(d)
}
