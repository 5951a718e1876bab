//! The `emq-bench` binary: parse the command line, call the library, map the result to an exit
//! code. This is the only exit point (0 success, 1 a run or check failed, 2 usage or input).

use clap::Parser;
use emq_bench::cli::{Cli, Command};
use emq_bench::cmd::{self, Outcome};
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The coordinator's runtime; load threads build their own current-thread runtimes.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Run(args) => {
                let json = args.json;
                let result = cmd::run::run(args, ctrl_c).await?;
                if json {
                    println!("{}", serde_json::to_string_pretty(&result.summary).expect("summary serializes"));
                } else {
                    print!("{}", result.table);
                }
                for failure in &result.failures {
                    eprintln!("emq-bench: FAIL {failure}");
                }
                Ok(result.outcome)
            }
            Command::Server(args) => cmd::server::server(args, ctrl_c).await,
        }
    });
    match result {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::Failed) => ExitCode::from(1),
        Err(err) => {
            eprintln!("emq-bench: {err}");
            ExitCode::from(err.exit_code())
        }
    }
}
