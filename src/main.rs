//! The `emq-bench` binary: parse the command line, call the library, map the result to an exit
//! code. This is the only exit point (0 success, 1 a run or check failed, 2 usage or input).

use clap::Parser;
use emq_bench::cli::{Cli, Command};
use emq_bench::cmd::{self, Outcome};
use emq_bench::compare::Overall;
use std::io::Write;
use std::process::ExitCode;

/// Writes the result to stdout. A closed pipe (`| head`) is the reader's choice, not an error
/// of the run: the exit code still reports the run, and nothing panics.
fn out(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush());
}

/// Prints a comparison and turns its verdict into an outcome (exit 0, 1 or 3).
fn verdict(result: cmd::compare::CompareResult) -> Outcome {
    out(&result.output);
    match result.verdict {
        Overall::Pass => Outcome::Success,
        Overall::Regression => Outcome::Failed,
        Overall::Inconclusive => Outcome::Inconclusive,
    }
}

/// Resolves at the first Ctrl-C, SIGTERM or SIGHUP, saying which on stderr.
fn stop_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{signal, SignalKind};
    // Registered now, before the run starts, so an early signal is not lost.
    let mut term = signal(SignalKind::terminate()).ok();
    let mut hup = signal(SignalKind::hangup()).ok();
    async move {
        let name = tokio::select! {
            _ = tokio::signal::ctrl_c() => "Ctrl-C",
            Some(_) = async { term.as_mut()?.recv().await } => "SIGTERM",
            Some(_) = async { hup.as_mut()?.recv().await } => "SIGHUP",
        };
        eprintln!("emq-bench: {name}: stopping the run; the results folder is still written");
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The coordinator's runtime; load threads build their own current-thread runtimes.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
    let result = runtime.block_on(async {
        // Ctrl-C, SIGTERM (timeout, systemd, Docker, Kubernetes) and SIGHUP all end a run the
        // same way: load stops, the folder is written, the keys are cleaned up. Only the
        // commands that run something catch them; `check` and `compare` keep the defaults.
        match cli.command {
            Command::Run(args) => {
                let json = args.json;
                let result = cmd::run::run(args, stop_signal()).await?;
                if json {
                    out(&(serde_json::to_string_pretty(&result.summary).expect("summary serializes") + "\n"));
                } else {
                    out(&result.table);
                }
                for failure in &result.failures {
                    eprintln!("emq-bench: FAIL {failure}");
                }
                Ok(result.outcome)
            }
            Command::Server(args) => cmd::server::server(args, stop_signal()).await,
            Command::Compare(args) => Ok(verdict(cmd::compare::compare(args)?)),
            Command::Ab(args) => {
                let result = cmd::ab::ab(args, stop_signal()).await?;
                let outcome = verdict(result.compare);
                for failure in &result.failures {
                    eprintln!("emq-bench: FAIL {failure}");
                }
                Ok(if result.failures.is_empty() { outcome } else { Outcome::Failed })
            }
            Command::Check(args) => {
                let json = args.json;
                let result = cmd::check::check(args).await?;
                if json {
                    out(&(serde_json::to_string_pretty(&result.report).expect("report serializes") + "\n"));
                } else {
                    out(&result.table);
                }
                Ok(result.outcome)
            }
        }
    });
    match result {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::Failed) => ExitCode::from(1),
        Ok(Outcome::Inconclusive) => ExitCode::from(3),
        Err(err) => {
            eprintln!("emq-bench: {err}");
            ExitCode::from(err.exit_code())
        }
    }
}
