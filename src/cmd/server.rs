//! `emq-bench server`: start the embedded server (or cluster), print its URL(s), wait for Ctrl-C.

use super::CommandOutcome;
use crate::cli::ServerCmdArgs;
use crate::error::AppError;
use crate::server::{ClusterOptions, EmbeddedCluster, EmbeddedServer, Role, ServerOptions};
use std::future::Future;
use std::io::Write;

/// Starts the server, prints `redis://127.0.0.1:<port>/` on stdout and blocks until `shutdown`.
///
/// Errors: [`AppError::Server`] when no binary is found or it does not come up.
/// With `--cluster PxR`, starts an embedded cluster instead and prints each node's URL and
/// role (`redis://127.0.0.1:7000/ primary 0`, `... replica of primary 0`), one a line.
pub async fn server(args: ServerCmdArgs, shutdown: impl Future<Output = ()>) -> Result<CommandOutcome, AppError> {
    let options =
        ServerOptions { binary: args.server.server_bin, config: args.server.server_config, port: None, host: None };
    if let Some((primaries, replicas)) = args.cluster {
        let node_timeout = std::time::Duration::from_secs(2);
        let cluster = EmbeddedCluster::start(&ClusterOptions {
            primaries,
            replicas,
            node_timeout,
            server: options,
            own_addresses: false,
        })?;
        for node in cluster.nodes() {
            let role = match node.role {
                Role::Primary { index } => format!("primary {index}"),
                Role::Replica { of } => format!("replica of primary {of}"),
            };
            println!("{} {role}", node.server.url());
        }
        let _ = std::io::stdout().flush();
        eprintln!("emq-bench: a cluster of {} node(s) listening; Ctrl-C stops it", cluster.nodes().len());
        shutdown.await;
        drop(cluster);
        return Ok(CommandOutcome::Success);
    }
    let server = EmbeddedServer::start(&options)?;
    println!("{}", server.url());
    let _ = std::io::stdout().flush();
    eprintln!("emq-bench: {} (pid {}) listening; Ctrl-C stops it", server.binary().display(), server.pid());
    shutdown.await;
    server.stop();
    Ok(CommandOutcome::Success)
}
