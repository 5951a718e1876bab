//! `emq-bench cost [--lua-dir A [--lua-dir B]]`: what each script costs the server per call
//! (see [`crate::cost`]), on a fresh embedded server. With two directories the two arms run in
//! alternating blocks (A B, B A, ...) and are compared per script pair by pair, sequentially
//! ([`gate`]): rounds of blocks until every script's confidence-sequence interval of the median
//! ratio decides against the noise band `--noise-cost`, or `--budget` is spent.

mod ci;
mod gate;
mod render;

pub use crate::cli::cost::CostArgs;
use crate::compare::verdict::{compare_metric, MetricComparison, Overall};
use crate::compare::{CompareOptions, Measure, Metric};
use crate::cost::{block_size, measure, ScriptCost, MIN_CALLS};
use crate::error::AppError;
use crate::lua::{Protocol, Script};
use crate::net::{ConnectOptions, Connector, Control, Endpoint, TargetFlags};
use crate::report::{write_atomic, ReportError};
use crate::resp::{CallError, PipeConn, ScriptClient, ScriptRegistry};
use crate::server::{EmbeddedServer, ServerOptions};
use crate::stats;
use gate::Gate;
pub use gate::Stop;
use render::{markdown, table};
use serde::{Deserialize, Serialize};
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// One script's costs over the blocks of every repetition, per arm, and with two arms their
/// comparison.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScriptCosts {
    /// The script.
    pub script: String,
    /// Calls per repetition and arm.
    pub calls: u64,
    /// Per arm, server µs per call inside the script, one value per block.
    pub us_per_call: Vec<Vec<f64>>,
    /// Per arm, server CPU µs per call (the script plus I/O), one value per block.
    pub cpu_us_per_call: Vec<Vec<f64>>,
    /// With two arms: NEW against BASE, pair by pair, by the sequential rule at the look that
    /// decided it (or the last; see [`crate::compare::sequential`]); against a stored
    /// baseline, unpaired ([`compare_metric`]).
    pub comparison: Option<MetricComparison>,
    /// With two arms measured now: when the sequential gate decided this script, or where it
    /// stood at the end.
    #[serde(default)]
    pub stop: Option<Stop>,
}

/// What `cost` measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CostReport {
    /// The script directories, BASE first.
    pub lua_dirs: Vec<String>,
    /// The server's version.
    pub server_version: String,
    /// Measured rounds (repetitions).
    pub repeat: u32,
    /// With two arms measured now: the sequential gate's budget, seconds.
    #[serde(default)]
    pub budget_s: Option<f64>,
    /// Seconds the measurement took, server start and warm-up included.
    #[serde(default)]
    pub seconds: f64,
    /// Per script.
    pub scripts: Vec<ScriptCosts>,
    /// With two arms, the verdict over the scripts.
    pub verdict: Option<Overall>,
    /// Per arm, the server CPU of one job's cycle, µs: the medians of enqueue, claim and
    /// complete CPU per call, summed.
    #[serde(default)]
    pub cycle_cpu_us: Vec<f64>,
}

/// What `cost` produced, for `main` to print and turn into an exit code.
pub struct CostResult {
    /// The report (what `--json` prints).
    pub report: CostReport,
    /// The table (or the Markdown, with `--markdown`).
    pub table: String,
}

/// Runs `emq-bench cost`. Errors: usage (three or more directories, options out of range), a
/// directory that cannot be read, the server's start, or a failed measurement.
pub async fn cost(args: CostArgs) -> Result<CostResult, AppError> {
    let started = Instant::now();
    let dirs = if args.lua_dirs.is_empty() { vec![PathBuf::from("lua")] } else { args.lua_dirs.clone() };
    if dirs.len() > 2 {
        return Err(AppError::Usage(format!("cost takes one or two --lua-dir, found {}", dirs.len())));
    }
    let baseline = match &args.baseline {
        Some(_) if dirs.len() != 1 => {
            return Err(AppError::Usage("--baseline takes one --lua-dir (NEW), not two".into()));
        }
        Some(file) => Some((file, read_baseline(file)?)),
        None => None,
    };
    let d = CompareOptions::default();
    let options = CompareOptions {
        noise_cost: args.noise_cost.unwrap_or(d.noise_cost),
        max_cv: args.max_cv.unwrap_or(d.max_cv),
        ..d
    };
    options.validate().map_err(AppError::Usage)?;
    super::exports::check(&args.export)?;
    let registries =
        dirs.iter().map(|dir| ScriptRegistry::from_dir(dir).map(Arc::new)).collect::<Result<Vec<_>, _>>()?;
    let server = EmbeddedServer::start(&ServerOptions {
        binary: args.server.server_bin.clone(),
        config: args.server.server_config.clone(),
        port: None,
        host: None,
    })?;
    let target = Endpoint::resolve(&server.url(), &TargetFlags::default(), |_| None)?;
    let connector = Connector::new(target)?;
    let opts = ConnectOptions { response_timeout: std::time::Duration::from_secs(30), ..ConnectOptions::default() };
    let control = Control::connect(&connector, opts).await.map_err(|e| AppError::Prepare(e.into()))?;
    let server_version = crate::net::info::info(&mut control.clone())
        .await
        .map(|snap| snap.server_version)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "unknown".into());

    // Every block of every repetition, in the order it ran.
    let block = block_size(args.calls);
    let mut blocks: Vec<(u32, ScriptCost)> = Vec::new();
    let sequential = dirs.len() == 2;
    let rounds = args.repeat.unwrap_or(if sequential { u32::MAX } else { 3 });
    let mut gate = Gate::new(options.clone());
    let mut measured = 0;
    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            // Repetition 0 is a short warm-up (caches, allocator, Lua), not recorded.
            for rep in 0..=rounds {
                let round_start = Instant::now();
                let _: () = redis::cmd("FLUSHALL")
                    .arg("SYNC")
                    .query_async(&mut control.clone())
                    .await
                    .map_err(|e| AppError::Prepare(CallError::from_redis(&e)))?;
                let mut clients = Vec::with_capacity(registries.len());
                for registry in &registries {
                    let client = ScriptClient::<PipeConn>::open(&connector, opts, registry.clone()).await;
                    clients.push(client.map_err(AppError::Prepare)?);
                }
                let calls = if rep == 0 { (args.calls / 10).max(MIN_CALLS) } else { args.calls };
                let seed = u64::from(rep) + 1;
                let (tag, mirrored) = (rep.to_string(), rep % 2 == 0);
                let costs = measure(&clients, &control, calls, block.min(calls as usize), seed, &tag, mirrored)
                    .await
                    .map_err(|e| AppError::Usage(format!("cost: {e}")))?;
                if rep == 0 {
                    continue;
                }
                blocks.extend(costs.into_iter().map(|c| (rep, c)));
                measured = rep;
                if sequential {
                    let before = gate.undecided().len();
                    let done = gate.look(rep, &blocks, started.elapsed());
                    let undecided = gate.undecided();
                    // A line when a script decides, and every tenth round.
                    if rep == 1 || undecided.len() != before || rep % 10 == 0 {
                        let state = if done {
                            "every script decided".to_string()
                        } else {
                            format!("undecided {}", undecided.join(", "))
                        };
                        eprintln!("cost: round {rep} ({:.0} s): {state}", started.elapsed().as_secs_f64());
                    }
                    // No round that would likely end past the budget: the last one's length
                    // is the estimate.
                    if done || started.elapsed() + round_start.elapsed() > args.budget {
                        break;
                    }
                }
            }
            Ok::<(), AppError>(())
        })
        .await?;
    drop(server);

    let mut scripts = script_rows(&blocks, dirs.len(), &gate);
    let mut lua_dirs: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    if let Some((file, stored)) = &baseline {
        against_baseline(&mut scripts, &mut lua_dirs, file, stored, &options);
    }
    let verdict = (lua_dirs.len() == 2)
        .then(|| Overall::of(scripts.iter().filter_map(|s| s.comparison.as_ref().map(|c| c.verdict))));
    let arms = lua_dirs.len();
    let cycle_cpu_us = (0..arms)
        .map(|arm| {
            let of = |name: &str| {
                scripts.iter().find(|s| s.script == name).and_then(|s| stats::median(&s.cpu_us_per_call[arm]))
            };
            ["enqueue", "claim", "complete"].iter().map(|name| of(name).unwrap_or(f64::NAN)).sum()
        })
        .collect();
    let report = CostReport {
        lua_dirs,
        server_version,
        repeat: measured,
        budget_s: sequential.then_some(args.budget.as_secs_f64()),
        seconds: started.elapsed().as_secs_f64(),
        scripts,
        verdict,
        cycle_cpu_us,
    };
    let md = markdown(&report, &options);
    if let Some(dir) = &args.out {
        write_folder(dir, &report, &md)?;
    }
    let errors = super::exports::write(&args.export, || ci::bmf(&report), || ci::gab(&report));
    if !errors.is_empty() {
        return Err(AppError::Usage(errors.join("; ")));
    }
    let table = if args.markdown { md } else { table(&report, &options) };
    Ok(CostResult { report, table })
}

/// One row per script the blocks measured (a script no arm's directory has, `clean` against
/// v1.1's scripts, ran in no block: no row), each arm's costs per block and the gate's verdict.
fn script_rows(blocks: &[(u32, ScriptCost)], arms: usize, gate: &Gate) -> Vec<ScriptCosts> {
    let mut scripts = Vec::new();
    // A script no arm's directory has (clean, against v1.1's scripts) ran in no block: no row.
    for &script in Protocol::EchoMqV1.scripts().iter().filter(|s| blocks.iter().any(|(_, c)| c.script == **s)) {
        let of = |arm: usize, f: fn(&ScriptCost) -> f64| -> Vec<f64> {
            blocks.iter().filter(|(_, c)| c.script == script && c.arm == arm).map(|(_, c)| f(c)).collect()
        };
        let us: Vec<Vec<f64>> = (0..arms).map(|arm| of(arm, |c| c.us_per_call)).collect();
        let cpu: Vec<Vec<f64>> = (0..arms).map(|arm| of(arm, |c| c.cpu_us_per_call)).collect();
        let calls = blocks.iter().filter(|(rep, c)| *rep == 1 && c.script == script).map(|(_, c)| c.calls).sum::<u64>()
            / arms as u64;
        let (comparison, stop) = gate.of(script).map_or((None, None), |(c, stop)| (Some(c), Some(stop)));
        scripts.push(ScriptCosts {
            script: script.name().into(),
            calls,
            us_per_call: us,
            cpu_us_per_call: cpu,
            comparison,
            stop,
        });
    }
    scripts
}

/// Makes the stored run `stored` (from `file`) the BASE arm: its last arm's costs go first in
/// every script's row and in `lua_dirs`, and each script is compared against them.
fn against_baseline(
    scripts: &mut [ScriptCosts],
    lua_dirs: &mut Vec<String>,
    file: &std::path::Path,
    stored: &CostReport,
    options: &CompareOptions,
) {
    // The stored run's last arm becomes BASE: the same layout as two arms measured now.
    for s in scripts.iter_mut() {
        let old = stored.scripts.iter().find(|o| o.script == s.script);
        let last = |v: &Vec<Vec<f64>>| v.last().cloned().unwrap_or_default();
        let (base_us, base_cpu) =
            old.map_or((Vec::new(), Vec::new()), |o| (last(&o.us_per_call), last(&o.cpu_us_per_call)));
        s.comparison = Some(compare_metric(
            Metric::script(&s.script, Measure::ServerUs),
            base_us.clone(),
            s.us_per_call[0].clone(),
            options,
        ));
        s.us_per_call.insert(0, base_us);
        s.cpu_us_per_call.insert(0, base_cpu);
    }
    let base = stored.lua_dirs.last().map_or("?", String::as_str);
    lua_dirs.insert(0, format!("{base} (stored in {}, valkey {})", file.display(), stored.server_version));
}

/// Writes cost.json, cost.md (`md`) and junit.xml into `dir`, creating it.
///
/// Errors: the folder or a file cannot be written.
fn write_folder(dir: &std::path::Path, report: &CostReport, md: &str) -> Result<(), AppError> {
    let io = |e: std::io::Error| AppError::Io { path: dir.display().to_string(), source: e };
    std::fs::create_dir_all(dir).map_err(io)?;
    let json = dir.join("cost.json");
    write_atomic(&json, |w| {
        serde_json::to_writer_pretty(&mut *w, report).map_err(|source| ReportError::Json { path: json.clone(), source })
    })?;
    write_atomic(&dir.join("cost.md"), |w| {
        w.write_all(md.as_bytes()).map_err(|source| ReportError::Io { path: dir.join("cost.md"), source })
    })?;
    ci::junit(report).write(&dir.join(crate::ci::junit::JUNIT_FILE))?;
    Ok(())
}

/// Reads a stored `cost.json`. Errors: [`AppError::Usage`] naming the file (exit 2).
fn read_baseline(file: &std::path::Path) -> Result<CostReport, AppError> {
    let text =
        std::fs::read_to_string(file).map_err(|e| AppError::Usage(format!("--baseline {}: {e}", file.display())))?;
    serde_json::from_str(&text)
        .map_err(|e| AppError::Usage(format!("--baseline {}: not a cost.json of emq-bench cost: {e}", file.display())))
}

/// The (BASE, NEW) µs-per-call pairs of `script`'s blocks: consecutive blocks of one repetition
/// (the arms take turns A B B A ..., so each pair is one block of each, back to back).
fn pairs_of(blocks: &[(u32, ScriptCost)], script: Script) -> Vec<(f64, f64)> {
    let mut pairs = Vec::new();
    let mut open: Option<(u32, ScriptCost)> = None;
    for (rep, cost) in blocks.iter().filter(|(_, c)| c.script == script) {
        match open.take() {
            Some((at, first)) if at == *rep && first.arm != cost.arm => {
                let (base, new) = if first.arm == 0 { (first, *cost) } else { (*cost, first) };
                pairs.push((base.us_per_call, new.us_per_call));
            }
            _ => open = Some((*rep, *cost)),
        }
    }
    pairs
}
