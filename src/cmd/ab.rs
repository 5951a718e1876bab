//! `emq-bench ab SCENARIO --lua-dir A --lua-dir B --repeat N`: the two script sets run
//! interleaved against the same server — A B or B A per pair, the order drawn from the seed —
//! so drift hits both arms equally; then the arms are compared (see `compare`).

use super::compare::{compare, CompareArgs, CompareFlags, CompareResult};
use super::session::{check_out, results_dir, Session};
use crate::cli::{RunArgs, ServerArgs};
use crate::error::AppError;
use crate::load::stop::StopSignal;
use crate::protocol::Transport;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::path::PathBuf;

/// `emq-bench ab`: the raw command-line values.
#[derive(Debug, Clone, clap::Args)]
pub struct AbArgs {
    /// The scenario file; prefer `jobs = N` over a duration, so every run has the same length
    /// (server cost per script grows with the sorted sets).
    #[arg(value_name = "SCENARIO")]
    pub scenario: PathBuf,
    /// The two script directories, BASE then NEW: `--lua-dir A --lua-dir B`.
    #[arg(long = "lua-dir", value_name = "DIR", num_args = 1, required = true)]
    pub lua_dirs: Vec<PathBuf>,
    /// Repetitions per arm (pairs); α = 0.01 needs about 5 a side.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: u32,
    /// Unrecorded runs of each arm before the measured pairs (caches, allocator, CPU clock
    /// settle), like hyperfine's --warmup.
    #[arg(long, default_value_t = 1)]
    pub warmup_runs: u32,
    /// Results folder (default: results/<UTC time>-<name>); arms in A/ and B/.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Run length per repetition (at most 7 days); overrides the scenario's duration or jobs.
    #[arg(long, value_parser = crate::cli::parse_run_length)]
    pub duration: Option<std::time::Duration>,
    /// Seed of the runs and of the A/B order.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Target server URL (redis:// or rediss://); default: an embedded server.
    #[arg(long)]
    pub url: Option<String>,
    /// Authentication and TLS for the URL.
    #[command(flatten)]
    pub target: crate::cli::TargetArgs,
    /// Delete keys the run's queues already have instead of refusing to start.
    #[arg(long)]
    pub force: bool,
    /// No progress line.
    #[arg(long)]
    pub quiet: bool,
    /// Load threads.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub threads: u16,
    /// The load connections' transport (see `run --transport`).
    #[arg(long, value_enum, default_value_t = Transport::Pipe)]
    pub transport: Transport,
    /// The comparison's options (alpha, noise bands, max CV, markdown, latency kind).
    #[command(flatten)]
    pub compare: CompareFlags,
    /// The embedded server's options.
    #[command(flatten)]
    pub server: ServerArgs,
}

/// What `ab` found: the comparison, and the failures of its runs.
pub struct AbResult {
    /// B (new) against A (base).
    pub compare: CompareResult,
    /// Every failure of every run, `A/rep-001: ...` (a violation, a threshold, an
    /// interruption): any makes `ab` exit 1 whatever the comparison says.
    pub failures: Vec<String>,
}

/// Runs both arms interleaved, then compares B (new) against A (base).
///
/// Errors: usage (not exactly two `--lua-dir`), scenario, scripts, server and target errors.
/// Runs that fail (a violation, an interruption) are listed in [`AbResult::failures`]; an
/// interrupted run ends the series.
pub async fn ab(args: AbArgs, stop: impl Into<StopSignal>) -> Result<AbResult, AppError> {
    let stop = stop.into();
    let [base_dir, new_dir] = <[PathBuf; 2]>::try_from(args.lua_dirs.clone()).map_err(|dirs| {
        AppError::Usage(format!("ab needs exactly two --lua-dir (BASE then NEW), got {}", dirs.len()))
    })?;
    let run_args = RunArgs {
        scenario: args.scenario.clone(),
        url: args.url.clone(),
        target: args.target.clone(),
        lua_dir: Some(base_dir.clone()),
        out: args.out.clone(),
        duration: args.duration,
        seed: args.seed,
        keep: false,
        force: args.force,
        quiet: args.quiet,
        json: false,
        no_check: false,
        repeat: args.repeat,
        threads: args.threads,
        timeout: std::time::Duration::from_secs(5),
        give_up: std::time::Duration::from_secs(30),
        transport: args.transport,
        server: args.server.clone(),
    };
    check_out(run_args.out.as_deref())?;
    let (mut session, registries) = Session::open(&run_args, &[Some(&base_dir), Some(&new_dir)]).await?;
    // The lock is released however the series ends.
    let outcome = async {
        let arms = [("A", base_dir, registries[0].clone()), ("B", new_dir, registries[1].clone())];
        let dir = results_dir(&run_args, &session.plan)?;
        let mut failures = Vec::new();
        for k in 1..=args.warmup_runs {
            for (name, lua_dir, registry) in &arms {
                let warm_dir = dir.join("warmup").join(format!("{name}-{k:03}"));
                let (result, _) = session.rep(registry.clone(), lua_dir, &warm_dir, false, stop.clone()).await?;
                failures.extend(result.failures.iter().map(|f| format!("warmup/{name}-{k:03}: {f}")));
            }
        }
        let mut order_rng = SmallRng::seed_from_u64(session.plan.seed ^ 0xab);
        'pairs: for k in 1..=args.repeat {
            let order = if order_rng.random_bool(0.5) { [0, 1] } else { [1, 0] };
            for arm in order {
                let (name, lua_dir, registry) = &arms[arm];
                let rep_dir = dir.join(name).join(format!("rep-{k:03}"));
                let (result, _) = session.rep(registry.clone(), lua_dir, &rep_dir, false, stop.clone()).await?;
                failures.extend(result.failures.iter().map(|f| format!("{name}/rep-{k:03}: {f}")));
                if result.summary.interrupted {
                    break 'pairs;
                }
            }
        }
        let compare = compare(CompareArgs {
            base: dir.join("A"),
            new: dir.join("B"),
            flags: args.compare,
            out: Some(dir),
            seed: args.seed,
        })?;
        Ok(AbResult { compare, failures })
    }
    .await;
    session.close(&stop).await;
    outcome
}
