//! `emq-bench cost [--lua-dir A [--lua-dir B]]`: what each script costs the server per call
//! (see [`crate::cost`]), on a fresh embedded server; with two directories, the two arms are
//! measured alternately (A B, B A, ...) and compared per script with the verdict rule of
//! `compare` (Mann–Whitney, bootstrap interval, noise band `--noise-cost`).

use super::compare::parse_fraction;
use crate::cli::ServerArgs;
use crate::compare::verdict::{judge, MetricComparison, Overall};
use crate::compare::{CompareOptions, Measure, Metric};
use crate::cost::{measure, ScriptCost, MAX_CALLS, MIN_CALLS};
use crate::error::AppError;
use crate::protocol::{ConnectOptions, EchoClient, PipeConn, Script, ScriptRegistry};
use crate::server::{EmbeddedServer, ServerOptions};
use crate::stats;
use crate::target::{Connector, Control, Target, TargetFlags};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

/// `emq-bench cost`: the raw command-line values.
#[derive(Debug, Clone, clap::Args)]
pub struct CostArgs {
    /// The script directory to measure (default `lua`), or two, BASE then NEW, to compare.
    #[arg(long = "lua-dir", value_name = "DIR", num_args = 1)]
    pub lua_dirs: Vec<PathBuf>,
    /// Calls per script and repetition (100..=1000000; promote and reap: jobs, 100 per call).
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u32).range(MIN_CALLS as i64..=MAX_CALLS as i64))]
    pub calls: u32,
    /// Measured repetitions per arm (1..=100), after one unrecorded warm-up of each.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeat: u32,
    /// Noise band: the smallest change of a script's cost that can be called a regression or an
    /// improvement, e.g. 3% or 0.03 [default: 3%].
    #[arg(long, value_name = "FRACTION", value_parser = parse_fraction)]
    pub noise_cost: Option<f64>,
    /// Largest coefficient of variation of a side before its verdict is inconclusive [default: 10%].
    #[arg(long, value_name = "FRACTION", value_parser = parse_fraction)]
    pub max_cv: Option<f64>,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// The embedded server.
    #[command(flatten)]
    pub server: ServerArgs,
}

/// One script's costs over the repetitions, per arm, and with two arms their comparison.
#[derive(Debug, Clone, Serialize)]
pub struct ScriptCosts {
    /// The script.
    pub script: &'static str,
    /// Calls per repetition.
    pub calls: u64,
    /// Per arm, server µs per call inside the script, one value per repetition.
    pub us_per_call: Vec<Vec<f64>>,
    /// Per arm, server CPU µs per call (the script plus I/O), one value per repetition.
    pub cpu_us_per_call: Vec<Vec<f64>>,
    /// With two arms: NEW against BASE.
    pub comparison: Option<MetricComparison>,
}

/// What `cost` measured.
#[derive(Debug, Clone, Serialize)]
pub struct CostReport {
    /// The script directories, BASE first.
    pub lua_dirs: Vec<String>,
    /// The server's version.
    pub server_version: String,
    /// Repetitions per arm.
    pub repeat: u32,
    /// Per script.
    pub scripts: Vec<ScriptCosts>,
    /// With two arms, the verdict over the scripts.
    pub verdict: Option<Overall>,
}

/// What `cost` produced, for `main` to print and turn into an exit code.
pub struct CostResult {
    /// The report (what `--json` prints).
    pub report: CostReport,
    /// The table.
    pub table: String,
}

/// Runs `emq-bench cost`. Errors: usage (three or more directories, options out of range), a
/// directory that cannot be read, the server's start, or a failed measurement.
pub async fn cost(args: CostArgs) -> Result<CostResult, AppError> {
    let dirs = if args.lua_dirs.is_empty() { vec![PathBuf::from("lua")] } else { args.lua_dirs.clone() };
    if dirs.len() > 2 {
        return Err(AppError::Usage(format!("cost takes one or two --lua-dir, found {}", dirs.len())));
    }
    let d = CompareOptions::default();
    let options = CompareOptions {
        noise_cost: args.noise_cost.unwrap_or(d.noise_cost),
        max_cv: args.max_cv.unwrap_or(d.max_cv),
        ..d
    };
    options.validate().map_err(AppError::Usage)?;
    let registries =
        dirs.iter().map(|dir| ScriptRegistry::from_dir(dir).map(Arc::new)).collect::<Result<Vec<_>, _>>()?;
    let server = EmbeddedServer::start(&ServerOptions {
        binary: args.server.server_bin.clone(),
        config: args.server.server_config.clone(),
        port: None,
    })?;
    let target = Target::resolve(&server.url(), &TargetFlags::default(), |_| None)?;
    let connector = Connector::new(target)?;
    let opts = ConnectOptions { response_timeout: std::time::Duration::from_secs(30), ..ConnectOptions::default() };
    let control = Control::connect(&connector, opts).await.map_err(AppError::Prepare)?;
    let info: String = redis::cmd("INFO").arg("server").query_async(&mut control.clone()).await.unwrap_or_default();
    // Valkey also reports the Redis version it is compatible with: its own goes first.
    let field = |name: &str| info.lines().find_map(|l| l.strip_prefix(name)).map(|v| v.trim().to_string());
    let server_version =
        field("valkey_version:").or_else(|| field("redis_version:")).unwrap_or_else(|| "unknown".into());

    // Per arm, per repetition, the costs of every script.
    let mut runs: Vec<Vec<Vec<ScriptCost>>> = vec![Vec::new(); dirs.len()];
    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            // Repetition 0 is the warm-up; arms alternate A B, B A, ... so drift hits both.
            for rep in 0..=args.repeat {
                let mut order: Vec<usize> = (0..dirs.len()).collect();
                if rep % 2 == 1 {
                    order.reverse();
                }
                for arm in order {
                    let _: () = redis::cmd("FLUSHALL")
                        .arg("SYNC")
                        .query_async(&mut control.clone())
                        .await
                        .map_err(|e| AppError::Prepare(crate::protocol::CallError::from_redis(&e)))?;
                    let client = EchoClient::<PipeConn>::open(&connector, opts, registries[arm].clone())
                        .await
                        .map_err(AppError::Prepare)?;
                    let costs = measure(&client, &control, args.calls, u64::from(rep) + 1, &format!("{rep}-{arm}"))
                        .await
                        .map_err(|e| AppError::Usage(format!("cost of {}: {e}", dirs[arm].display())))?;
                    if rep > 0 {
                        runs[arm].push(costs);
                    }
                }
            }
            Ok::<(), AppError>(())
        })
        .await?;
    drop(server);

    let mut scripts = Vec::new();
    for script in Script::ALL {
        let of = |arm: usize, f: fn(&ScriptCost) -> f64| -> Vec<f64> {
            runs[arm].iter().filter_map(|rep| rep.iter().find(|c| c.script == script)).map(f).collect()
        };
        let us: Vec<Vec<f64>> = (0..dirs.len()).map(|arm| of(arm, |c| c.us_per_call)).collect();
        let cpu: Vec<Vec<f64>> = (0..dirs.len()).map(|arm| of(arm, |c| c.cpu_us_per_call)).collect();
        let calls = runs[0].first().and_then(|rep| rep.iter().find(|c| c.script == script)).map_or(0, |c| c.calls);
        let comparison = (dirs.len() == 2)
            .then(|| judge(Metric::script(script.name(), Measure::ServerUs), us[0].clone(), us[1].clone(), &options));
        scripts.push(ScriptCosts { script: script.name(), calls, us_per_call: us, cpu_us_per_call: cpu, comparison });
    }
    let verdict =
        (dirs.len() == 2).then(|| Overall::of(scripts.iter().filter_map(|s| s.comparison.as_ref().map(|c| c.verdict))));
    let report = CostReport {
        lua_dirs: dirs.iter().map(|d| d.display().to_string()).collect(),
        server_version,
        repeat: args.repeat,
        scripts,
        verdict,
    };
    let table = table(&report, &options);
    Ok(CostResult { report, table })
}

/// The table: one row per script, the median µs per call of each arm (and its CV), and with
/// two arms the change, its interval and the verdict, then the overall verdict.
fn table(report: &CostReport, options: &CompareOptions) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "server cost per call, medians of {} repetitions on valkey {} (µs inside the script; CPU = script + I/O):",
        report.repeat, report.server_version
    );
    let med = |xs: &[f64]| stats::median(xs).unwrap_or(f64::NAN);
    let cv =
        |xs: &[f64]| stats::coefficient_of_variation(xs).map_or("-".to_string(), |cv| format!("{:.1}%", cv * 100.0));
    match report.lua_dirs.as_slice() {
        [dir] => {
            let _ = writeln!(out, "{dir}\n");
            let _ = writeln!(out, "{:<16} {:>8} {:>10} {:>6} {:>10}", "script", "calls", "µs/call", "cv", "CPU µs");
            for s in &report.scripts {
                let _ = writeln!(
                    out,
                    "{:<16} {:>8} {:>10.2} {:>6} {:>10.2}",
                    s.script,
                    s.calls,
                    med(&s.us_per_call[0]),
                    cv(&s.us_per_call[0]),
                    med(&s.cpu_us_per_call[0])
                );
            }
        }
        [base, new] => {
            let _ = writeln!(out, "BASE {base}\nNEW  {new}\n");
            let _ = writeln!(
                out,
                "{:<16} {:>10} {:>10} {:>8} {:>18} {:>8}  verdict",
                "script", "BASE µs", "NEW µs", "change", "95% CI", "p"
            );
            for s in &report.scripts {
                let Some(c) = &s.comparison else { continue };
                let ci = c.ci.map_or("-".to_string(), |ci| {
                    format!("{:+.1}% .. {:+.1}%", (ci.lo - 1.0) * 100.0, (ci.hi - 1.0) * 100.0)
                });
                let p = c.p_worse.zip(c.p_better).map_or("-".to_string(), |(w, b)| format!("{:.3}", w.min(b)));
                let _ = writeln!(
                    out,
                    "{:<16} {:>10.2} {:>10.2} {:>8} {:>18} {:>8}  {} ({})",
                    s.script,
                    med(&s.us_per_call[0]),
                    med(&s.us_per_call[1]),
                    c.change.map_or("-".to_string(), |x| format!("{:+.1}%", x * 100.0)),
                    ci,
                    p,
                    c.verdict.word(),
                    c.reason
                );
            }
            if let Some(verdict) = report.verdict {
                let _ = writeln!(
                    out,
                    "\nverdict: {} (noise band {:.0}%, alpha {})",
                    verdict.word(),
                    options.noise_cost * 100.0,
                    options.alpha
                );
            }
        }
        _ => {}
    }
    out
}
