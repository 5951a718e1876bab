//! The `emq-bench` binary: parse the command line, call the library, map the result to an exit
//! code. This is the only exit point (0 success, 1 a run or check failed, 2 usage or input).

use clap::Parser;
use emq_bench::cli::{Cli, Command};
use emq_bench::cmd::{self, CommandOutcome};
use emq_bench::compare::Overall;
use emq_bench::load::stop::StopSignal;
use std::io::Write;
use std::process::ExitCode;

/// Writes the result to stdout. A closed pipe (`| head`) is the reader's choice, not an error
/// of the run: the exit code still reports the run, and nothing panics.
fn out(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush());
}

/// Prints a comparison and turns its verdict into an outcome (exit 0, 1 or 3).
fn verdict(result: cmd::compare::CompareResult) -> CommandOutcome {
    out(&result.output);
    match result.verdict {
        Overall::Pass => CommandOutcome::Success,
        Overall::Regression => CommandOutcome::Failed,
        Overall::Inconclusive => CommandOutcome::Inconclusive,
    }
}

/// The run's stop signal, fed by Ctrl-C, SIGTERM and SIGHUP: the first stops the run (the
/// check, the folder and the cleanup still run), the second aborts it (what waits on the server
/// is cut short, what can be written is written, the keys are kept), a third exits at once
/// (130), for a harness that is itself stuck. Each says what it does on stderr; `first` is
/// what the first one does.
fn stop_signal_saying(first: &'static str) -> StopSignal {
    use tokio::signal::unix::{signal, SignalKind};
    let (trigger, stop) = StopSignal::new();
    // Registered now, before the run starts, so an early signal is not lost.
    let (mut int, mut term, mut hup) =
        (signal(SignalKind::interrupt()).ok(), signal(SignalKind::terminate()).ok(), signal(SignalKind::hangup()).ok());
    tokio::spawn(async move {
        for count in 1.. {
            let name = tokio::select! {
                Some(_) = async { int.as_mut()?.recv().await } => "Ctrl-C",
                Some(_) = async { term.as_mut()?.recv().await } => "SIGTERM",
                Some(_) = async { hup.as_mut()?.recv().await } => "SIGHUP",
                else => return,
            };
            match count {
                1 => {
                    eprintln!("emq-bench: {name}: {first} (again: abort)");
                    trigger.stop();
                }
                2 => {
                    eprintln!(
                        "emq-bench: {name} again: aborting: no check, no cleanup, the run's keys are kept (again: exit now)"
                    );
                    trigger.abort();
                }
                _ => {
                    eprintln!("emq-bench: {name} a third time: exiting now");
                    std::process::exit(130);
                }
            }
        }
    });
    stop
}

/// [`stop_signal_saying`] for the commands that run load.
fn stop_signal() -> StopSignal {
    stop_signal_saying("stopping the run; the results folder is still written")
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The coordinator's runtime; load threads build their own current-thread runtimes.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
    let result = runtime.block_on(async {
        // Ctrl-C, SIGTERM (timeout, systemd, Docker, Kubernetes) and SIGHUP all end a run the
        // same way (see `stop_signal`). Only the commands that run something catch them;
        // `check` and `compare` keep the defaults.
        match cli.command {
            Command::Run(mut args) => {
                // Only `run` is a fleet's shard: a capacity search or an A/B inside a Slurm array
                // stays one process.
                args.array = emq_bench::cli::ArrayTask::read(|name| std::env::var(name).ok());
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
            Command::Server(args) => {
                let stop = stop_signal_saying("stopping the server");
                cmd::server::server(args, async move { stop.stopped().await }).await
            }
            Command::Compare(args) => Ok(verdict(cmd::compare::compare(args)?)),
            Command::Ab(args) => {
                let result = cmd::ab::ab(args, stop_signal()).await?;
                let outcome = verdict(result.compare);
                for failure in &result.failures {
                    eprintln!("emq-bench: FAIL {failure}");
                }
                Ok(if result.failures.is_empty() { outcome } else { CommandOutcome::Failed })
            }
            Command::Capacity(args) => {
                let json = args.run.json;
                let result = cmd::capacity::capacity(args, stop_signal()).await?;
                if json {
                    out(&(serde_json::to_string_pretty(&result.report).expect("report serializes") + "\n"));
                } else {
                    out(&result.table);
                }
                Ok(result.outcome)
            }
            Command::Cost(args) => {
                let json = args.json;
                let result = cmd::cost::cost(args).await?;
                if json {
                    out(&(serde_json::to_string_pretty(&result.report).expect("report serializes") + "\n"));
                } else {
                    out(&result.table);
                }
                Ok(match result.report.verdict {
                    None | Some(Overall::Pass) => CommandOutcome::Success,
                    Some(Overall::Regression) => CommandOutcome::Failed,
                    Some(Overall::Inconclusive) => CommandOutcome::Inconclusive,
                })
            }
            Command::Completions(args) => {
                out(&cmd::completions::completions(args.shell));
                Ok(CommandOutcome::Success)
            }
            Command::Man(args) => {
                match cmd::completions::man(&args)? {
                    cmd::completions::ManOutput::Page(page) => out(&page),
                    cmd::completions::ManOutput::Written(pages) => {
                        for page in pages {
                            out(&format!("{}\n", page.display()));
                        }
                    }
                }
                Ok(CommandOutcome::Success)
            }
            Command::Report(args) => {
                for path in cmd::report::report(args)? {
                    out(&format!("{}\n", path.display()));
                }
                Ok(CommandOutcome::Success)
            }
            Command::Merge(args) => {
                let json = args.json;
                let result = cmd::merge::merge(args).await?;
                if json {
                    out(&(serde_json::to_string_pretty(&result.summary).expect("summary serializes") + "\n"));
                } else {
                    out(&result.table);
                }
                for line in &result.failures {
                    eprintln!("emq-bench: FAIL {line}");
                }
                Ok(result.outcome)
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
        Ok(CommandOutcome::Success) => ExitCode::SUCCESS,
        Ok(CommandOutcome::Failed) => ExitCode::from(1),
        Ok(CommandOutcome::Inconclusive) => ExitCode::from(3),
        Err(err) => {
            eprintln!("emq-bench: {err}");
            if let Some(hint) = err.hint() {
                eprintln!("emq-bench: {hint}");
            }
            ExitCode::from(err.exit_code())
        }
    }
}
