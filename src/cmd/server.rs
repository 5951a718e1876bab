//! `emq-bench server`: start the embedded server, print its URL, wait for Ctrl-C.

use super::Outcome;
use crate::cli::ServerArgs;
use crate::error::AppError;
use crate::server::{EmbeddedServer, ServerOptions};
use std::future::Future;
use std::io::Write;

/// Starts the server, prints `redis://127.0.0.1:<port>/` on stdout and blocks until `shutdown`.
///
/// Errors: [`AppError::Server`] when no binary is found or it does not come up.
pub async fn server(args: ServerArgs, shutdown: impl Future<Output = ()>) -> Result<Outcome, AppError> {
    let server =
        EmbeddedServer::start(&ServerOptions { binary: args.server_bin, config: args.server_config, port: None })?;
    println!("{}", server.url());
    let _ = std::io::stdout().flush();
    eprintln!("emq-bench: {} (pid {}) listening; Ctrl-C stops it", server.binary().display(), server.pid());
    shutdown.await;
    server.stop();
    Ok(Outcome::Success)
}
