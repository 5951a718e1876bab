//! `emq-bench merge`'s flags.

use std::path::PathBuf;

/// `emq-bench merge`.
#[derive(Debug, Clone, clap::Args)]
pub struct MergeArgs {
    /// The shards' results folders, or a fleet's folder holding them (`shard-NNN/`).
    #[arg(value_name = "DIR", required = true)]
    pub dirs: Vec<PathBuf>,
    /// The merged folder (created; refused when it holds results already).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Print summary.json instead of the table.
    #[arg(long)]
    pub json: bool,
}
