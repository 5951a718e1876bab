//! `emq-bench report`'s flags.

use std::path::PathBuf;

/// `emq-bench report`.
#[derive(Debug, Clone, clap::Args)]
pub struct ReportArgs {
    /// A results folder (of `run`, `run --repeat`, `compare --out` or `ab`).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}
