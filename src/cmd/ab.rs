//! `emq-bench ab SCENARIO --lua-dir A --lua-dir B --repeat N`: the two script sets run
//! interleaved against the same server — A B or B A per pair, the order drawn from the seed —
//! so drift hits both arms equally; then the arms are compared (see `compare`).

use super::compare::{compare, CompareArgs, CompareResult};
use super::session::{check_out, results_dir, RunOptions, Session};
pub use crate::cli::ab::AbArgs;
use crate::cli::{RunArgs, DEFAULT_GIVE_UP, DEFAULT_PROGRESS_EVERY, DEFAULT_TIMEOUT};
use crate::error::AppError;
use crate::load::stop::StopSignal;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::path::PathBuf;

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
        set: Vec::new(),
        rate: None,
        keep: false,
        force: args.force,
        quiet: args.quiet,
        json: false,
        no_check: false,
        fail_fast: false,
        keep_history: Default::default(),
        check_memory: crate::cli::DEFAULT_CHECK_MEMORY_MB,
        repeat: args.repeat,
        threads: args.threads,
        timeout: DEFAULT_TIMEOUT,
        give_up: DEFAULT_GIVE_UP,
        progress_every: DEFAULT_PROGRESS_EVERY,
        transport: args.transport,
        shards: None,
        shard: None,
        group: None,
        array: Default::default(),
        barrier_timeout: crate::cli::DEFAULT_BARRIER_TIMEOUT,
        queue_mode: crate::scenario::QueueMode::Sharded,
        roles: None,
        mixed_scripts: false,
        metrics: Default::default(),
        server: args.server.clone(),
        export: Default::default(),
    };
    check_out(run_args.out.as_deref())?;
    let options = RunOptions::resolve(&run_args)?;
    let (mut session, registries) = Session::open(&options, &[Some(&base_dir), Some(&new_dir)]).await?;
    // The lock is released however the series ends.
    let outcome = async {
        let arms = [("A", registries[0].clone()), ("B", registries[1].clone())];
        let dir = results_dir(options.out.as_deref(), &session.plan().name)?;
        let mut failures = Vec::new();
        for k in 1..=args.warmup_runs {
            for (name, registry) in &arms {
                let warm_dir = dir.join("warmup").join(format!("{name}-{k:03}"));
                let (result, _) = session.rep(registry.clone(), &warm_dir, false, stop.clone()).await?;
                failures.extend(result.failures.iter().map(|f| format!("warmup/{name}-{k:03}: {f}")));
            }
        }
        let mut order_rng = SmallRng::seed_from_u64(session.plan().seed ^ 0xab);
        'pairs: for k in 1..=args.repeat {
            let order = if order_rng.random_bool(0.5) { [0, 1] } else { [1, 0] };
            for arm in order {
                let (name, registry) = &arms[arm];
                let rep_dir = dir.join(name).join(format!("rep-{k:03}"));
                let (result, _) = session.rep(registry.clone(), &rep_dir, false, stop.clone()).await?;
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
            export: Default::default(),
        })?;
        Ok(AbResult { compare, failures })
    }
    .await;
    session.close(&stop).await;
    outcome
}
