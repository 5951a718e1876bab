//! A run's options, resolved once (hyperfine's `Options`): the command line and the scenario
//! file become one value with the plan, the target, the server, the connection settings and the
//! run's switches, every combination checked. `run`, `--repeat` and `ab` hold this, never the
//! raw flags; nothing after it parses or defaults a value again.

use crate::cli::{RunArgs, UNWISE_TIMEOUT};
use crate::error::AppError;
use crate::lua::Protocol;
use crate::net::{ConnectOptions, Durability, TargetFlags, Transport};
use crate::scenario::{self, FaultKind, Plan, TargetPlan, TargetShape};
use crate::server::{ClusterOptions, ServerOptions};
use std::path::PathBuf;
use std::time::Duration;

/// Everything a run needs to know before it touches a server.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The scenario file (copied into every results folder, its password masked).
    pub scenario_path: PathBuf,
    /// The `--set`s (and `--rate`) written into the scenario before it was read; the results
    /// folder's scenario.toml has them applied.
    pub settings: Vec<scenario::settings::Setting>,
    /// The scenario resolved with `--set`, `--rate`, `--duration` and `--seed`; its queue names are final once
    /// the session has read the target's topology ([`Plan::with_queues`]).
    pub plan: std::sync::Arc<Plan>,
    /// The target URL: `--url`, else the scenario's `[target] url`; `None` starts an embedded
    /// server.
    pub url: Option<String>,
    /// Authentication and TLS: the command line's flags over the scenario's.
    pub flags: TargetFlags,
    /// The embedded server's binary and configuration (the scenario's options, then
    /// `--server-config`).
    pub server: ServerOptions,
    /// The embedded cluster to start instead of one server (`[target] cluster` without a URL).
    pub cluster: Option<ClusterOptions>,
    /// The load's connections: the reply timeout, the transport, a client name when a
    /// kill-connections fault must find them.
    pub connect: ConnectOptions,
    /// How long the target may stay unreachable before the run gives up.
    pub give_up: Duration,
    /// Load threads (≥ 1).
    pub threads: usize,
    /// No progress output.
    pub quiet: bool,
    /// Without a terminal, a progress line this often.
    pub progress_every: Duration,
    /// Run the invariant check after the run, and the live check during it (`--no-check`
    /// turns both off).
    pub check: bool,
    /// Stop at the first violation the live check finds, keeping the keys (`--fail-fast`).
    pub fail_fast: bool,
    /// Which events the history keeps (`--keep-history`).
    pub keep_history: crate::history::KeepHistory,
    /// The memory the check gives the history at once, bytes (`--check-memory`).
    pub check_memory_bytes: u64,
    /// Delete keys the run's queues already have instead of refusing to start.
    pub force: bool,
    /// Keep the run's keys on the server (`--keep`).
    pub keep: bool,
    /// The results folder (`--out`); `None`: `results/<UTC time>-<name>`. A fleet's shard
    /// writes `shard-<I>/` inside `--out` (default `results/fleet-<group>`).
    pub out: Option<PathBuf>,
    /// Repetitions (≥ 1).
    pub repeat: usize,
    /// The scripts' folder (`--lua-dir`); `None`: the protocol's default.
    pub lua_dir: Option<PathBuf>,
    /// Set when this process is one shard of a fleet (`--shards` > 1); the plan is then the
    /// shard's part ([`Plan::for_shard`]).
    pub fleet: Option<FleetOptions>,
}

/// How a shard meets its fleet.
#[derive(Debug, Clone)]
pub struct FleetOptions {
    /// Where it waits for the others.
    pub barrier: crate::plane::barrier::ShardArrival,
    /// `--mixed-scripts`: the scripts' SHA-1s stay out of the configuration the shards agree on.
    pub mixed_scripts: bool,
    /// How many of the fleet's shards run producers (`--roles`).
    pub producing_shards: u32,
}

/// `t0` is this long after the last shard arrives: time for every shard to read it (they poll
/// every 100 ms) and to open its load connections.
pub const START_MARGIN: Duration = Duration::from_secs(2);

/// What every shard of a fleet must agree on, hashed: the scenario as resolved (its password
/// masked), the fleet's size, the emq-bench version, the target's host and port, the timeout,
/// the transport and whether the check runs (the scripts' SHA-1s join it once they are read). Two CRC-32s of different seeds: a check against a mistake, not an attack.
fn fleet_config(plan: &Plan, layout: &crate::scenario::FleetLayout, url: &str, args: &RunArgs) -> String {
    let mut scenario = plan.scenario.clone();
    scenario.target = scenario.target.redacted();
    let text = format!(
        "{}|{}|{}|{}|mixed scripts {}|{}|{}|{:?}|{:?}|check {}",
        serde_json::to_string(&scenario).unwrap_or_default(),
        layout.count,
        layout.mode.name(),
        layout.roles_text(),
        args.mixed_scripts,
        env!("CARGO_PKG_VERSION"),
        crate::scenario::redact_url(url),
        args.timeout,
        args.transport,
        !args.no_check,
    );
    let mut second = crc32fast::Hasher::new_with_initial(0x454d_5142);
    second.update(text.as_bytes());
    format!("{:08x}{:08x}", crc32fast::hash(text.as_bytes()), second.finalize())
}

/// Resolves `--shards`, `--shard` and `--group`: `None` for one process, else the shard's plan
/// and its place at the barrier.
fn resolve_fleet(args: &RunArgs, plan: Plan, url: Option<&str>) -> Result<(Plan, Option<FleetOptions>), AppError> {
    let scenario = args.scenario.display();
    let usage = |message: String| AppError::Usage(format!("{scenario}: {message}"));
    let array = ArrayFleet::parse(&args.array).map_err(usage)?;
    let shards = args.shards.or(array.count).unwrap_or(1);
    if shards <= 1 {
        let fleet_only = [
            (args.queue_mode == crate::scenario::QueueMode::Shared, "--queue-mode shared"),
            (args.roles.is_some(), "--roles"),
            (args.mixed_scripts, "--mixed-scripts"),
        ];
        if let Some((_, flag)) = fleet_only.iter().find(|(given, _)| *given) {
            return Err(usage(format!("{flag}: a fleet's flag; expected --shards N (N > 1) with it")));
        }
        return Ok((plan, None));
    }
    let Some(url) = url else {
        return Err(usage(format!(
            "--shards {shards}: a fleet needs --url (or [target] url): every shard must drive the same server, and \
             each would start an embedded server of its own (scripts/fleet starts one for a local fleet)"
        )));
    };
    let Some(index) = args.shard.or(array.index) else {
        return Err(usage(format!(
            "--shards {shards}: which shard is this? Pass --shard I (0..{shards}) or set JOB_COMPLETION_INDEX or \
             SLURM_ARRAY_TASK_ID"
        )));
    };
    if index >= shards {
        // An index from the array that is out of range means the array's indices do not start
        // at 0 (`--array=1-3`): say how to number it.
        let hint = if args.shard.is_none() { " (a Slurm array of N shards is --array=0-<N-1>)" } else { "" };
        return Err(usage(format!("--shard {index}: expected an index below --shards {shards}{hint}")));
    }
    if args.repeat > 1 {
        return Err(usage("--repeat with --shards: a fleet runs once; run the fleet again instead".into()));
    }
    if !plan.faults.is_empty() {
        return Err(usage(format!(
            "[[faults]] with --shards {shards}: every shard would inject them; run the nemesis from one process"
        )));
    }
    // A Slurm array's job id is new for every submission, so an array's fleet never finds the
    // barrier of an earlier one under the same name.
    let group = args.group.clone().unwrap_or_else(|| match &array.job_id {
        Some(job) => format!("{}-{job}", plan.name),
        None => plan.name.clone(),
    });
    if !crate::scenario::validate::is_valid_name(&group) {
        return Err(usage(format!("--group {group:?}: expected 1-64 bytes of [A-Za-z0-9_.-]")));
    }
    let mut layout = crate::scenario::FleetLayout::new(shards, args.queue_mode);
    if let Some(roles) = &args.roles {
        layout.roles = roles.0.clone();
    }
    let config = fleet_config(&plan, &layout, url, args);
    let plan = plan.for_fleet_shard(index, &group, &layout)?;
    let barrier = crate::plane::barrier::ShardArrival {
        group,
        index,
        shards,
        config,
        margin: START_MARGIN,
        timeout: args.barrier_timeout,
    };
    let producing_shards = layout.roles.iter().filter(|r| r.produces).count() as u32;
    Ok((plan, Some(FleetOptions { barrier, mixed_scripts: args.mixed_scripts, producing_shards })))
}

/// A Slurm job array's task, parsed: the fallbacks of `--shard`, `--shards` and `--group`.
#[derive(Debug, Default)]
struct ArrayFleet {
    index: Option<u32>,
    count: Option<u32>,
    job_id: Option<String>,
}

impl ArrayFleet {
    /// Parses the variables; an error names the variable and its value.
    fn parse(task: &crate::cli::ArrayTask) -> Result<ArrayFleet, String> {
        let number = |name: &str, value: &Option<String>, range: std::ops::RangeInclusive<u32>| {
            value
                .as_deref()
                .map(|text| match text.parse::<u32>() {
                    Ok(n) if range.contains(&n) => Ok(n),
                    _ => Err(format!("{name}={text:?}: expected a number in {}..={}", range.start(), range.end())),
                })
                .transpose()
        };
        Ok(ArrayFleet {
            index: number("SLURM_ARRAY_TASK_ID", &task.task_id, 0..=u32::MAX)?,
            count: number("SLURM_ARRAY_TASK_COUNT", &task.task_count, 1..=1024)?,
            job_id: task.job_id.clone(),
        })
    }
}

impl RunOptions {
    /// Reads the scenario and resolves `args` against it. Checks what no single flag or file
    /// can: the auth and TLS flags need a URL; a pause or freeze must not outlast `--give-up`;
    /// `freeze`, `restart` and `failover` faults need the embedded server.
    ///
    /// Errors: the scenario's ([`AppError::Scenario`]), or [`AppError::Usage`] naming the
    /// scenario file and the flag.
    pub fn resolve(args: &RunArgs) -> Result<RunOptions, AppError> {
        // `--rate R` is `--set producers.rate=R`, after the other settings.
        let mut settings = args.set.clone();
        if let Some(rate) = args.rate {
            let key = vec!["producers".to_owned(), "rate".to_owned()];
            settings.push(scenario::settings::Setting { key, value: toml::Value::Float(rate) });
        }
        let plan = match scenario::load_with(&args.scenario, &settings) {
            Ok(plan) => plan,
            // A scenario whose rate follows [[stages]] has no single rate to replace: said as
            // the flag's error, not as a `--set` the user never typed.
            Err(err) => match args.rate.and_then(|_| scenario::load_with(&args.scenario, &args.set).ok()) {
                Some(plain) if plain.producers.open_loop.as_ref().is_some_and(|open| open.stages.is_some()) => {
                    return Err(AppError::Usage(format!(
                        "{}: --rate {}: the scenario's rate follows its [[stages]]; expected no --rate (change \
                         the stages' rates instead)",
                        args.scenario.display(),
                        args.rate.unwrap_or_default()
                    )));
                }
                _ => return Err(err.into()),
            },
        };
        let plan = plan.with_overrides(args.duration, args.seed)?;
        let url = args.url.clone().or(match &plan.target {
            TargetPlan::Url(url) => Some(url.clone()),
            TargetPlan::Embedded { .. } => None,
        });
        let flags = args.target.flags().merge(&plan.scenario.target.flags());
        if url.is_none() && flags != TargetFlags::default() {
            return Err(AppError::Usage("--user, --pass and the TLS flags need --url (or [target] url)".into()));
        }
        // A pause or freeze as long as --give-up would end the run as unreachable: no soak.
        if let Some(fault) = plan
            .faults
            .iter()
            .find(|f| matches!(f.kind, FaultKind::Pause | FaultKind::Freeze) && f.duration >= args.give_up)
        {
            return Err(AppError::Usage(format!(
                "{}: a {} of {} would outlast --give-up ({}): the run would end as unreachable; \
                 shorten it or raise --give-up",
                args.scenario.display(),
                fault.kind.name(),
                humantime::format_duration(fault.duration),
                humantime::format_duration(args.give_up)
            )));
        }
        let mut config: Vec<(String, String)> = match &plan.target {
            TargetPlan::Embedded { options, .. } => options.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            TargetPlan::Url(_) => Vec::new(),
        };
        config.extend(args.server.server_config.iter().cloned());
        let server = ServerOptions { binary: args.server.server_bin.clone(), config, port: None, host: None };
        let cluster = match (&plan.target, &url) {
            (TargetPlan::Embedded { cluster: Some(shape), .. }, None) => Some(ClusterOptions {
                primaries: shape.primaries,
                replicas: shape.replicas,
                node_timeout: shape.node_timeout,
                server: server.clone(),
                // A partition's rules tell the nodes apart by address.
                own_addresses: plan.faults.iter().any(|f| f.kind == FaultKind::Partition),
            }),
            _ => None,
        };
        // The scenario was checked against its own target; --url may name another, which
        // rules out the faults that act on a process the harness started.
        let shape = match (&url, &cluster) {
            (Some(_), _) => TargetShape::Url,
            (None, Some(_)) => TargetShape::EmbeddedCluster,
            (None, None) => TargetShape::EmbeddedServer,
        };
        let unfit = plan.faults.iter().enumerate().find_map(|(i, f)| f.fits(shape).err().map(|why| (i, f, why)));
        if let Some((i, fault, why)) = unfit {
            let by = if url.is_some() { ", and --url names another target" } else { "" };
            return Err(AppError::Usage(format!(
                "{}: faults[{i}].{}: a {} fault needs {why}{by}",
                args.scenario.display(),
                fault.needs_field(),
                fault.kind.name()
            )));
        }
        // A partition's rules may only go into a network namespace of the run's own: refused
        // before anything starts, as a bad scenario is.
        if let Some(i) = plan.faults.iter().position(|f| f.kind == FaultKind::Partition) {
            crate::faults::partition_refusal()
                .map_err(|why| AppError::Usage(format!("{}: faults[{i}].kind: {why}", args.scenario.display())))?;
        }
        check_durability(args, &plan, shape, cluster.as_ref())?;
        let (plan, fleet) = resolve_fleet(args, plan, url.as_deref())?;
        check_keep_history(args, &plan)?;
        // Only a kill-connections fault needs the load's connections named (CLIENT SETNAME,
        // which a least-privilege user may not be allowed).
        let client_name =
            plan.faults.iter().any(|f| f.kind == FaultKind::KillConnections).then(crate::faults::load_client_name);
        // A call's WAIT may hold its connection for its own timeout: the reply timeout is that
        // much longer, so a WAIT waiting out a lagging replica is never taken for a dead server.
        let connect = ConnectOptions {
            response_timeout: args.timeout + plan.durability.hold(),
            transport: args.transport,
            client_name,
            durability: plan.durability,
            ..ConnectOptions::default()
        };
        Ok(RunOptions {
            scenario_path: args.scenario.clone(),
            settings,
            plan: std::sync::Arc::new(plan),
            url,
            flags,
            server,
            cluster,
            connect,
            give_up: args.give_up,
            threads: args.threads.max(1) as usize,
            quiet: args.quiet,
            progress_every: args.progress_every,
            check: !args.no_check,
            fail_fast: args.fail_fast,
            keep_history: args.keep_history,
            check_memory_bytes: args.check_memory.saturating_mul(1 << 20),
            force: args.force,
            keep: args.keep,
            out: match &fleet {
                // Each shard writes its own folder inside the fleet's: `merge` finds them there.
                Some(fleet) => Some(
                    args.out
                        .clone()
                        .unwrap_or_else(|| PathBuf::from("results").join(format!("fleet-{}", fleet.barrier.group)))
                        .join(crate::report::fleet::shard_folder(fleet.barrier.index)),
                ),
                None => args.out.clone(),
            },
            repeat: args.repeat.max(1) as usize,
            lua_dir: args.lua_dir.clone(),
            fleet,
        })
    }

    /// What is legal but unwise in the options, one message each: a reply timeout under
    /// [`UNWISE_TIMEOUT`], [`Plan::warnings`], BullMQ's limits, a fault that never fires.
    pub fn warnings(&self) -> Vec<String> {
        let plan = &self.plan;
        let mut out = Vec::new();
        let timeout = self.connect.response_timeout;
        if timeout < UNWISE_TIMEOUT {
            out.push(format!(
                "--timeout {} is short: a server pause that long (a snapshot's fork, a slow network) fails every \
                 request in flight, and the lock renewal, the invariant scan and the cleanup time out too",
                humantime::format_duration(timeout)
            ));
        }
        out.extend(plan.warnings());
        if plan.protocol == Protocol::BullMq {
            if plan.consumers.batch > 1 {
                out.push(format!(
                    "consumers.batch = {}: BullMQ's moveToActive takes one job per call, so each claim takes one",
                    plan.consumers.batch
                ));
            }
            if let scenario::Backoff::Exponential { max, .. } = plan.consumers.backoff {
                out.push(format!(
                    "consumers.backoff.exponential.max = {}: BullMQ's exponential backoff has no cap (2^attempts made x base)",
                    humantime::format_duration(max)
                ));
            }
        }
        if let scenario::Stop::Duration(load) = plan.stop {
            for fault in plan.faults.iter().filter(|f| f.count_before(load) == 0) {
                out.push(format!(
                    "the {} fault at {} never fires: the load phase is {} long",
                    fault.kind.name(),
                    humantime::format_duration(fault.first),
                    humantime::format_duration(load)
                ));
            }
        }
        out
    }

    /// The reply timeout of every call.
    pub fn timeout(&self) -> Duration {
        self.connect.response_timeout
    }
}

/// `--keep-history violations` drops only what the live check passed of jobs `clean` retired:
/// refused (exit 2) without retention, or where the run has no live check (a `shared` fleet's
/// shard holds part of each job's history; the merge checks it whole).
fn check_keep_history(args: &RunArgs, plan: &Plan) -> Result<(), AppError> {
    if args.keep_history.is_full() {
        return Ok(());
    }
    if plan.maintenance.clean.is_none() {
        return Err(AppError::Usage(format!(
            "{}: --keep-history violations drops the events of jobs `clean` retired, and this run retires none: set [maintenance] clean (e.g. --set maintenance.clean=\"1s\")",
            args.scenario.display()
        )));
    }
    if plan.shares_queues() {
        return Err(AppError::Usage(
            "--keep-history violations: a shared fleet's shard has no live check (the merge needs every shard's whole history)".into(),
        ));
    }
    Ok(())
}

/// Refuses a `[target] wait` that could never be acknowledged: on the redis-rs transport
/// (which sends no `WAIT`), on the embedded standalone server (no replica), or on an embedded
/// cluster with fewer replicas per primary than asked. A `--url` deployment's replicas are
/// counted when the session opens.
fn check_durability(
    args: &RunArgs,
    plan: &Plan,
    shape: TargetShape,
    cluster: Option<&ClusterOptions>,
) -> Result<(), AppError> {
    let Durability::Wait { replicas, .. } = plan.durability else { return Ok(()) };
    let scenario = args.scenario.display();
    if args.transport == Transport::RedisRs {
        return Err(AppError::Usage(format!(
            "{scenario}: target.wait needs the pipe transport: --transport redis-rs sends no WAIT"
        )));
    }
    let has = match (shape, cluster) {
        (TargetShape::EmbeddedServer, _) => 0,
        (TargetShape::EmbeddedCluster, Some(c)) => c.replicas as u64,
        _ => return Ok(()),
    };
    if u64::from(replicas) > has {
        let target = match shape {
            TargetShape::EmbeddedServer => "the embedded server has no replica".to_owned(),
            _ => format!("the embedded cluster has {has} replica(s) per primary"),
        };
        return Err(AppError::Usage(format!(
            "{scenario}: target.wait.replicas = {replicas}, but {target}: every call would be unacknowledged; \
             use [target] cluster = {{ replicas = {replicas} }} or a --url deployment with replicas"
        )));
    }
    Ok(())
}
