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
    /// The fleet's server, for a `--queue-mode shared` fleet: the merge checks the invariants
    /// over every shard's history against it, then deletes the fleet's keys. Not needed for
    /// a `sharded` fleet (each shard checked and cleaned up its own queues).
    #[arg(env = "EMQ_URL", long, value_name = "URL")]
    pub url: Option<String>,
    /// Authentication and TLS for --url.
    #[command(flatten)]
    pub target: super::TargetArgs,
}
