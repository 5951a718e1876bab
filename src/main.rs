//! The `emq-bench` binary: parse the command line, call the library, map the result to an exit
//! code. This is the only exit point (0 success, 1 a check or threshold failed, 2 usage or input).

use clap::Parser;
use emq_bench::cli::{Cli, Command};
use emq_bench::server::{EmbeddedServer, ServerOptions};
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Server(args) => {
            let options = ServerOptions { binary: args.server_bin, config: args.server_config };
            let server = match EmbeddedServer::start(&options) {
                Ok(server) => server,
                Err(err) => {
                    eprintln!("emq-bench: {err}");
                    return ExitCode::from(2);
                }
            };
            println!("{}", server.url());
            eprintln!("emq-bench: {} (pid {}) listening; Ctrl-C stops it", server.binary().display(), server.pid());
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
            let _ = runtime.block_on(tokio::signal::ctrl_c());
            server.stop();
            ExitCode::SUCCESS
        }
    }
}
