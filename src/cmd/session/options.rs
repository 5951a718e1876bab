//! A run's options, resolved once (hyperfine's `Options`): the command line and the scenario
//! file become one value with the plan, the target, the server, the connection settings and the
//! run's switches, every combination checked. `run`, `--repeat` and `ab` hold this, never the
//! raw flags; nothing after it parses or defaults a value again.

use crate::cli::{RunArgs, UNWISE_TIMEOUT};
use crate::error::AppError;
use crate::net::{ConnectOptions, TargetFlags};
use crate::protocol::Protocol;
use crate::scenario::{self, FaultKind, Plan, TargetPlan};
use crate::server::ServerOptions;
use std::path::PathBuf;
use std::time::Duration;

/// Everything a run needs to know before it touches a server.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The scenario file (copied into every results folder, its password masked).
    pub scenario_path: PathBuf,
    /// The scenario resolved with `--duration` and `--seed`; its queue names are final once
    /// the session has read the target's topology ([`Plan::with_queues`]).
    pub plan: Plan,
    /// The target URL: `--url`, else the scenario's `[target] url`; `None` starts an embedded
    /// server.
    pub url: Option<String>,
    /// Authentication and TLS: the command line's flags over the scenario's.
    pub flags: TargetFlags,
    /// The embedded server's binary and configuration (the scenario's options, then
    /// `--server-config`).
    pub server: ServerOptions,
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
    /// Run the invariant check after the run (`--no-check` turns it off).
    pub check: bool,
    /// Delete keys the run's queues already have instead of refusing to start.
    pub force: bool,
    /// Keep the run's keys on the server (`--keep`).
    pub keep: bool,
    /// The results folder (`--out`); `None`: `results/<UTC time>-<name>`.
    pub out: Option<PathBuf>,
    /// Repetitions (≥ 1).
    pub repeat: usize,
    /// The scripts' folder (`--lua-dir`); `None`: the protocol's default.
    pub lua_dir: Option<PathBuf>,
}

impl RunOptions {
    /// Reads the scenario and resolves `args` against it. Checks what no single flag or file
    /// can: the auth and TLS flags need a URL; a pause or freeze must not outlast `--give-up`;
    /// `freeze`, `restart` and `failover` faults need the embedded server.
    ///
    /// Errors: the scenario's ([`AppError::Scenario`]), or [`AppError::Usage`] naming the
    /// scenario file and the flag.
    pub fn resolve(args: &RunArgs) -> Result<RunOptions, AppError> {
        let plan = scenario::load(&args.scenario)?.with_overrides(args.duration, args.seed)?;
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
        // The scenario was checked without the flags: --url rules out the faults that act on
        // the embedded server's process.
        if let Some(fault) = plan.faults.iter().find(|f| f.kind.needs_embedded() && url.is_some()) {
            return Err(AppError::Usage(format!(
                "{}: a {} fault needs the embedded server, and --url names another (the harness can only \
                 freeze or restart a server it started)",
                args.scenario.display(),
                fault.kind.name()
            )));
        }
        let mut config: Vec<(String, String)> = match &plan.target {
            TargetPlan::Embedded { options } => options.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            TargetPlan::Url(_) => Vec::new(),
        };
        config.extend(args.server.server_config.iter().cloned());
        let server = ServerOptions { binary: args.server.server_bin.clone(), config, port: None };
        // Only a kill-connections fault needs the load's connections named (CLIENT SETNAME,
        // which a least-privilege user may not be allowed).
        let client_name =
            plan.faults.iter().any(|f| f.kind == FaultKind::KillConnections).then(crate::faults::load_client_name);
        let connect = ConnectOptions {
            response_timeout: args.timeout,
            transport: args.transport,
            client_name,
            ..ConnectOptions::default()
        };
        Ok(RunOptions {
            scenario_path: args.scenario.clone(),
            plan,
            url,
            flags,
            server,
            connect,
            give_up: args.give_up,
            threads: args.threads.max(1) as usize,
            quiet: args.quiet,
            progress_every: args.progress_every,
            check: !args.no_check,
            force: args.force,
            keep: args.keep,
            out: args.out.clone(),
            repeat: args.repeat.max(1) as usize,
            lua_dir: args.lua_dir.clone(),
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
