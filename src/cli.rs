//! The command line (clap derive). No logic here: `main` turns these values into a plan.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// emq-bench: load, latency and invariant harness for the EchoMQ Valkey job queue.
#[derive(Debug, Parser)]
#[command(name = "emq-bench", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start the embedded valkey-server on a free loopback port and print its URL until Ctrl-C.
    Server(ServerArgs),
}

/// Options of the embedded server, shared by `server` and `run`.
#[derive(Debug, Clone, Args)]
pub struct ServerArgs {
    /// The valkey-server binary (default: $EMQ_VALKEY_SERVER, .tools/bin, then PATH).
    #[arg(long, value_name = "PATH")]
    pub server_bin: Option<PathBuf>,
    /// An extra server config directive, NAME=VALUE (repeatable), e.g. --server-config io-threads=2.
    #[arg(long = "server-config", value_name = "NAME=VALUE", value_parser = parse_directive)]
    pub server_config: Vec<(String, String)>,
}

fn parse_directive(text: &str) -> Result<(String, String), String> {
    let (name, value) = text.split_once('=').ok_or_else(|| format!("expected NAME=VALUE, found {text:?}"))?;
    if name.is_empty() {
        return Err(format!("expected NAME=VALUE, found {text:?}"));
    }
    Ok((name.to_string(), value.to_string()))
}
