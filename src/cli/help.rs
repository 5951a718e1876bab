//! Help beyond the flags: every subcommand's `--help` epilogue (examples that run as written
//! and the exit codes `main` gives: `crate::error::AppError::exit_code` and `cmd::CommandOutcome`), and
//! the flags of `completions` and `man`, which print the same help for a shell and for `man`.

use std::path::PathBuf;

/// `emq-bench` itself.
pub const TOP: &str = "\
Examples:
  emq-bench run smoke                                   # a shipped scenario on an embedded server
  emq-bench compare results/base results/new
  emq-bench completions bash > /etc/bash_completion.d/emq-bench

Exit codes (every command):
  0  pass
  1  a verdict said no: a run or check failed, a comparison found a regression
  2  usage or input error (nothing was judged)
  3  inconclusive: a comparison (compare, ab, cost) or a capacity search could not tell";

/// `emq-bench run`.
pub const RUN: &str = "\
Examples:
  emq-bench run smoke                                   # a shipped scenario on an embedded valkey-server
  emq-bench run scenarios/smoke.toml --duration 30s --out results/smoke
  emq-bench run smoke --url redis://127.0.0.1:6379 --set producers.rate=2000
  emq-bench run smoke --out results/ci --export-bmf bmf.json --export-gab gab.json
  cat results/ci/summary.md >> \"$GITHUB_STEP_SUMMARY\"

The results folder holds summary.json, summary.md, junit.xml, invariants.json, scripts.csv,
intervals.csv, latency.hlog, totals.hlog, server.csv, queue.csv, report.html, history.bin and
scenario.toml (the scenario as run, its password masked).

Exit codes:
  0  the run passed: no invariant violation, every threshold and default gate held
  1  the run failed (every reason printed after FAIL, and in summary.json's verdict)
  2  usage or input error: a bad flag or scenario, the target unusable before the load began";

/// `emq-bench check`.
pub const CHECK: &str = "\
How a run names its queues: the scenario's `queues` key, a name (default `bench`) or a count N
(`bench-0` .. `bench-<N-1>`; on a cluster, `bench-K` names chosen to spread the queues over
the primaries); a shard of a sharded fleet prefixes them with `s<I>.` (`s0.bench`). EchoMQ's
keys are `emq:{<queue>}:*`, BullMQ's `bull:{<queue>}:*`. A run's history.bin names its exact
queues (--history without --queue checks them all), and a run that keeps its keys prints the
check command to run.

The check reads the server the run wrote to (--url): an embedded server (a run without --url)
ends with its run, so only a run against a server that outlives it, a killed one included, can
be checked afterwards.

A history larger than --check-memory (default 512 MiB of decoded events) is checked in parts
by job number through temporary files beside it (about 2.5 times its size; in the temp folder
when its folder is read-only): the check then holds one part of the history
at a time, plus the scanned rows: about 350 bytes a job in all, where the server holds about
680 (scripts/bench-check-memory).

Examples:
  emq-bench run smoke --url redis://127.0.0.1:6379 --keep --out results/kept
  emq-bench check --url redis://127.0.0.1:6379 --history results/kept/history.bin
  emq-bench check --url redis://127.0.0.1:6379 --queue bench-0 --queue bench-1 --out results/recheck
  emq-bench check --url redis://127.0.0.1:6379 --queue bench --json   # throughput's one queue
  emq-bench check --url redis://127.0.0.1:6379 --history soak/history.bin --check-memory 256

Exit codes:
  0  no violation
  1  at least one violation (the first are printed; all in --out DIR/invariants.json)
  2  usage or input error: a bad URL, queue name or history file, the server unreachable";

/// `emq-bench compare`.
pub const COMPARE: &str = "\
Examples:
  emq-bench compare results/base results/new
  emq-bench compare results/base results/new --markdown --out results/cmp   # compare.md, junit.xml
  emq-bench compare results/base results/new --noise-tail 20% --export-bmf bmf.json

Each folder is one run or a repeated one (run --repeat N: rep-*/summary.json); a verdict needs
at least 3 repetitions a side. In junit.xml a regression is a <failure>, an inconclusive metric
an <error>.

Exit codes:
  0  no metric regressed and none was inconclusive
  1  at least one metric regressed
  2  usage or input error: a folder without summary.json, an option out of range
  3  inconclusive: too few repetitions or too much noise to tell";

/// `emq-bench ab`.
pub const AB: &str = "\
Examples:
  emq-bench ab scenarios/smoke.toml --lua-dir lua --lua-dir ../new/lua
  emq-bench ab smoke --lua-dir lua --lua-dir ../new/lua --repeat 7 --out results/ab --markdown

--lua-dir is given twice: BASE first, then NEW. Results: A/ and B/ (one rep-NNN/ per run),
compare.json, compare.md, compare.html and junit.xml in --out.

Exit codes:
  0  no metric regressed and none was inconclusive
  1  a metric regressed, or a run failed (printed after FAIL)
  2  usage or input error: not two --lua-dir, a bad scenario, the target unusable
  3  inconclusive: too few pairs or too much noise to tell";

/// `emq-bench cost`.
pub const COST: &str = "\
Examples:
  emq-bench cost                                        # the scripts in lua/
  emq-bench cost --lua-dir lua --lua-dir ../new/lua --out results/cost   # cost.json, cost.md, junit.xml
  emq-bench cost --lua-dir ../new/lua --baseline results/cost/cost.json --export-gab gab.json

Exit codes:
  0  one directory measured, or no script's cost regressed nor was inconclusive
  1  a script's cost regressed
  2  usage or input error: three --lua-dir, an unreadable directory or --baseline
  3  inconclusive: a script's change could not be told from the noise";

/// `emq-bench server`.
pub const SERVER: &str = "\
Examples:
  emq-bench server                                      # prints redis://127.0.0.1:<port>
  emq-bench server --cluster 3x1 --server-config io-threads=2

Exit codes:
  0  stopped by Ctrl-C or SIGTERM
  2  the server could not start (no valkey-server found, a bad --server-config)";

/// `emq-bench report`.
pub const REPORT: &str = "\
Examples:
  emq-bench report results/smoke                        # re-renders results/smoke/report.html

Exit codes:
  0  the pages were written (their paths are printed)
  1  a page could not be written
  2  not a results folder (no readable summary.json)";

/// `emq-bench capacity`.
pub const CAPACITY: &str = "\
Examples:
  emq-bench capacity smoke --slo \"claim.p99 < 5ms\" --out results/capacity
  emq-bench capacity my-producers-only.toml --slo \"enqueue.p99 < 2ms\"   # [consumers] count = 0

Exit codes:
  0  a sustained rate was found
  1  nothing was sustained, or a probe found a violation
  2  usage or input error
  3  the budget ran out before the search could tell, or the harness's own host was the
     bottleneck (client-bound probes are never counted against the deployment)";

/// `emq-bench merge`.
pub const MERGE: &str = "\
Examples:
  emq-bench merge results/fleet --out results/fleet-merged   # the shards' folders under it

Exit codes:
  0  the merged run passed
  1  it failed, or a shard is missing
  2  not a fleet's results folder";

/// `emq-bench completions`.
pub const COMPLETIONS: &str = "\
Examples:
  emq-bench completions bash > /etc/bash_completion.d/emq-bench
  emq-bench completions zsh > \"${fpath[1]}/_emq-bench\"
  emq-bench completions fish > ~/.config/fish/completions/emq-bench.fish

Exit codes:
  0  the script was written to stdout
  2  an unknown shell";

/// `emq-bench man`.
pub const MAN: &str = "\
Examples:
  emq-bench man | man -l -
  emq-bench man --dir /usr/local/share/man/man1         # emq-bench.1, emq-bench-run.1, ...

Exit codes:
  0  the page(s) were written
  1  a page could not be written (the file is named)";

/// The shells `emq-bench completions` writes a script for.
pub use clap_complete::Shell;

/// `emq-bench completions`.
#[derive(Debug, Clone, clap::Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_name = "SHELL")]
    pub shell: Shell,
}

/// `emq-bench man`.
#[derive(Debug, Clone, clap::Args)]
pub struct ManArgs {
    /// Write one page per command into this folder (emq-bench.1, emq-bench-run.1, ...;
    /// created when missing) instead of the main page to stdout.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}
