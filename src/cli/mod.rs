//! The command line (clap derive). No logic here: the commands in `cmd/` resolve these values.

pub mod ab;
pub mod capacity;
pub mod compare;
pub mod cost;
pub mod export;
pub mod help;
pub mod merge;
pub mod metrics;
pub mod report;

use crate::net::Transport;
use crate::scenario::bounds::MAX_RUN;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

/// Shortest `--timeout`. A loopback script call's ordinary tail under load, and a cold SCRIPT
/// LOAD of every script, already take milliseconds: below 10 ms calls time out on a healthy
/// server, and each timeout drops the connection with every request on it (`1ms` fails a
/// run, `0s` its start).
pub const MIN_TIMEOUT: Duration = Duration::from_millis(10);
/// A `--timeout` below this is accepted with a warning: a server pause of that length (a
/// fork for a snapshot, a slow network) fails every request in flight, and the control plane
/// (lock renewal, the invariant scan, the cleanup) waits no longer either.
pub const UNWISE_TIMEOUT: Duration = Duration::from_millis(100);
/// Longest `--timeout`: a request unanswered for an hour is lost, and a stopping run waits up
/// to the timeout for the replies still in flight.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(3600);
/// `--timeout`'s default: a reply this late is an unknown outcome.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// `--give-up`'s default: how long the target may stay unreachable before a run ends.
pub const DEFAULT_GIVE_UP: Duration = Duration::from_secs(30);

/// `--progress-every`'s default: a progress line in a log every 10 s.
pub const DEFAULT_PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// `--barrier-timeout`'s default: pods of an Indexed Job are scheduled and pull their image
/// within it on a healthy cluster.
pub const DEFAULT_BARRIER_TIMEOUT: Duration = Duration::from_secs(120);

/// The memory the check gives the run's history at once, MiB (`--check-memory`): about two
/// million jobs of a closed-loop run fit it whole.
pub const DEFAULT_CHECK_MEMORY_MB: u64 = 512;

/// Shortest `--give-up`: the target is polled about once a second, so a shorter window cannot
/// be told apart from one failed poll (0 ended a run at its first blip).
pub const MIN_GIVE_UP: Duration = Duration::from_secs(1);
/// Longest `--give-up`: a day.
pub const MAX_GIVE_UP: Duration = Duration::from_secs(24 * 3600);

/// emq-bench: load, latency and invariant harness for the EchoMQ Valkey job queue.
#[derive(Debug, Parser)]
#[command(name = "emq-bench", version, about, long_about = None, after_help = help::TOP)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a scenario: drive producers and consumers, print a latency table per script, write a results folder.
    #[command(after_help = help::RUN)]
    Run(RunArgs),
    /// Start the embedded valkey-server on a free loopback port (or a cluster of them, --cluster) and print its URL(s) until Ctrl-C.
    #[command(after_help = help::SERVER)]
    Server(ServerCmdArgs),
    /// Check the invariants of docs/protocol.md against what the server holds for the given queues; exit 1 on any violation.
    #[command(after_help = help::CHECK)]
    Check(CheckArgs),
    /// Compare two results folders (BASE, NEW): per script ops/s, p50, p99, p99.9 and the job cycle's ops/s; exit 1 on a regression, 3 when inconclusive.
    #[command(after_help = help::COMPARE)]
    Compare(compare::CompareArgs),
    /// A/B two script directories: run them interleaved against one server (--repeat pairs), then compare; exit 1 on a regression, 3 when inconclusive.
    #[command(after_help = help::AB)]
    Ab(ab::AbArgs),
    /// Measure what each script costs the server per call (each script in a phase of its own, INFO commandstats); with two --lua-dir, compare them: exit 1 on a regression, 3 when inconclusive.
    #[command(after_help = help::COST)]
    Cost(cost::CostArgs),
    /// Re-render report.html (and compare.html) of an existing results folder from its files.
    #[command(after_help = help::REPORT)]
    Report(report::ReportArgs),
    /// Find the highest open-loop rate the target sustains while every --slo holds and the run is steady: probes doubled then bisected; capacity.json, capacity.html; exit 1 when nothing is sustained or a probe found a violation, 3 when the budget ran out first.
    #[command(after_help = help::CAPACITY)]
    Capacity(capacity::CapacityArgs),
    /// Merge a fleet's shards (`run --shards N`) into one results folder: histograms added, counters summed, one verdict; exit 1 when it fails or a shard is missing.
    #[command(after_help = help::MERGE)]
    Merge(merge::MergeArgs),
    /// Print a completion script for SHELL (bash, zsh, fish, elvish, powershell) to stdout.
    #[command(after_help = help::COMPLETIONS)]
    Completions(help::CompletionsArgs),
    /// Print the man page (roff) to stdout, or write one page per command with --dir.
    #[command(after_help = help::MAN)]
    Man(help::ManArgs),
}

/// `emq-bench check`.
#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// Target server URL: redis://[user[:password]@]host[:port][/db], or rediss:// for TLS.
    #[arg(long)]
    pub url: String,
    /// Authentication and TLS for the URL.
    #[command(flatten)]
    pub target: TargetArgs,
    /// A queue to check (repeatable; at least one, unless --history names the run's queues).
    #[arg(long = "queue", value_name = "Q", required_unless_present = "history")]
    pub queues: Vec<String>,
    /// Folder to write invariants.json into (created when missing).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print invariants.json to stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// The run's history (history.bin of its results folder): adds the checks that need it
    /// (I1 rows nobody enqueued, I4-I8 against what the harness saw). Run with --keep.
    #[arg(long, value_name = "FILE")]
    pub history: Option<PathBuf>,
    /// The queues' protocol, whose keyspace is read: echomq-v1 or bullmq (default: the
    /// history's, else echomq-v1).
    #[arg(long, value_name = "NAME", value_parser = parse_protocol)]
    pub protocol: Option<crate::lua::Protocol>,
    /// The memory the check gives the history at once, MiB (1..=1048576): a larger history is
    /// checked in parts by job number (up to 256), through temporary files beside it (about 2.5
    /// times its size; in the temp folder when its folder is read-only).
    #[arg(env = "EMQ_CHECK_MEMORY", long, value_name = "MIB", default_value_t = DEFAULT_CHECK_MEMORY_MB,
          value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    pub check_memory: u64,
}

fn parse_protocol(name: &str) -> Result<crate::lua::Protocol, String> {
    crate::lua::Protocol::from_name(name).ok_or_else(|| format!("{name:?}: expected echomq-v1 or bullmq"))
}

/// `emq-bench run`.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// The scenario file, or the name of a shipped one (`smoke`, `fencing-soak`, ...: the
    /// files of scenarios/, built into the binary).
    #[arg(env = "EMQ_SCENARIO", value_name = "SCENARIO")]
    pub scenario: PathBuf,
    /// Target server URL: redis://[user[:password]@]host[:port][/db], or rediss:// for TLS;
    /// overrides the scenario's [target] url. Without one, an embedded valkey-server is started.
    #[arg(env = "EMQ_URL", long)]
    pub url: Option<String>,
    /// Authentication and TLS for the URL (each overrides the scenario's [target] key).
    #[command(flatten)]
    pub target: TargetArgs,
    /// Directory of the Lua scripts to run (one file per script of the scenario's protocol);
    /// default: EchoMQ's scripts built into the binary, `.tools/bullmq/current/commands` for
    /// BullMQ (scripts/setup fetches them).
    #[arg(env = "EMQ_LUA_DIR", long, value_name = "DIR")]
    pub lua_dir: Option<PathBuf>,
    /// Results folder (default: results/<UTC time>-<scenario name>).
    #[arg(env = "EMQ_OUT", long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Run length, e.g. 30s or 2h (at most 7 days); overrides the scenario's duration or jobs.
    #[arg(env = "EMQ_DURATION", long, value_parser = parse_run_length)]
    pub duration: Option<std::time::Duration>,
    /// Seed of every random draw; overrides the scenario's seed.
    #[arg(env = "EMQ_SEED", long)]
    pub seed: Option<u64>,
    /// Any scenario key, KEY=VALUE with the key dotted by table (`--set producers.rate=2000
    /// --set consumers.work=2ms`; repeatable, at most 64; in $EMQ_SET separated by `;`): written
    /// into the scenario before it is read, so the value is checked as the file's own.
    #[arg(env = "EMQ_SET", long = "set", value_name = "KEY=VALUE", value_parser = parse_setting, value_delimiter = ';')]
    pub set: Vec<crate::scenario::settings::Setting>,
    /// The producers' open-loop rate, jobs/s over all producers: `--set producers.rate=R`.
    #[arg(env = "EMQ_RATE", long, value_name = "JOBS_PER_S")]
    pub rate: Option<f64>,
    /// Keep the run's keys on the server afterwards (default: delete them).
    #[arg(env = "EMQ_KEEP", long)]
    pub keep: bool,
    /// Delete keys the run's queues already have instead of refusing to start.
    #[arg(env = "EMQ_FORCE", long)]
    pub force: bool,
    /// No progress line.
    #[arg(env = "EMQ_QUIET", long)]
    pub quiet: bool,
    /// Print summary.json to stdout instead of the table.
    #[arg(env = "EMQ_JSON", long)]
    pub json: bool,
    /// Skip the invariant check after the run (history.bin is still written; `emq-bench check
    /// --history` can check later). For pure throughput benchmarks.
    #[arg(env = "EMQ_NO_CHECK", long)]
    pub no_check: bool,
    /// Stop the run at the first violation the live check finds (each job's history is checked
    /// a few seconds after it closes, while the load goes on): the load ends, the run's keys are
    /// kept as the evidence, and the run exits 1 with a verdict that names the violation.
    /// Without it a violation found live is reported at once and the run goes on.
    #[arg(env = "EMQ_FAIL_FAST", long, conflicts_with = "no_check")]
    pub fail_fast: bool,
    /// Which events history.bin keeps. `full`: every event (the history grows with every job).
    /// `violations`: the live check keeps the events of every job it could not pass, and drops
    /// those of a job once it passed and `clean` retired it, so a soak's history grows with its
    /// findings, not its jobs (needs `[maintenance] clean` and the live check). Either way the
    /// history is written in segments of at most 256 MiB (history.bin, history.1.bin, ...),
    /// which `check --history` and `merge` read in turn.
    #[arg(env = "EMQ_KEEP_HISTORY", long, value_enum, default_value = "full", conflicts_with = "no_check")]
    pub keep_history: crate::history::KeepHistory,
    /// The memory the check gives the run's history at once, MiB (1..=1048576): a history
    /// larger than that is checked in parts by job number (up to 256), through temporary files
    /// in the results folder (about 2.5 times the history's size), so the check's memory does
    /// not grow with the jobs done.
    #[arg(env = "EMQ_CHECK_MEMORY", long, value_name = "MIB", default_value_t = DEFAULT_CHECK_MEMORY_MB,
          value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    pub check_memory: u64,
    /// Repetitions, each on a fresh server state (the run's keys removed in between); results
    /// in rep-NNN/ folders plus merged.json (histograms merged, never averaged).
    #[arg(env = "EMQ_REPEAT", long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: u32,
    /// Load threads, each a current-thread runtime (tasks are spread over them).
    #[arg(env = "EMQ_THREADS", long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub threads: u16,
    /// Reply timeout, e.g. 5s (10ms..=1h; under 100ms warns): a request still waiting after it
    /// counts as a timeout (unknown outcome). With the pipe transport the connection is then
    /// dropped and re-opened, failing every request in flight on it, since replies come back in
    /// order. The control connection (lock, scan, cleanup) uses it too.
    #[arg(env = "EMQ_TIMEOUT", long, value_parser = parse_timeout, default_value = "5s")]
    pub timeout: std::time::Duration,
    /// How long the target may stay unreachable before the run gives up (1s..=24h): it then
    /// ends as interrupted and still writes its results folder (a dead server never holds a 2 h
    /// soak).
    #[arg(env = "EMQ_GIVE_UP", long, value_parser = parse_give_up, default_value = "30s")]
    pub give_up: std::time::Duration,
    /// The load connections: `pipe` (our own connection loop, the least client CPU per
    /// request) or `redis-rs` (redis-rs' multiplexed connection: the reference, more CPU).
    #[arg(env = "EMQ_TRANSPORT", long, value_enum, default_value_t = Transport::Pipe)]
    pub transport: Transport,
    /// Without a terminal (a pod's log, nohup, CI), the progress is one timestamped line on
    /// stderr after the load's first second, then one this often (1s..=1h).
    #[arg(env = "EMQ_PROGRESS_EVERY", long, value_parser = parse_progress_every, default_value = "10s")]
    pub progress_every: std::time::Duration,
    /// Run as one shard of a fleet of N processes (1..=1024) on the same target: each takes its
    /// exact share of the producers, consumers, connections and rate, and owns its queues
    /// (prefixed `s<I>.`); all start together at a barrier on the target. Needs --url. Default
    /// $SLURM_ARRAY_TASK_COUNT in a Slurm job array (`--shards 1` runs alone there), else 1.
    #[arg(env = "EMQ_SHARDS", long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub shards: Option<u32>,
    /// This process's index in the fleet, 0..N. Default, in this order: $JOB_COMPLETION_INDEX
    /// (a Kubernetes Indexed Job's pods), then $SLURM_ARRAY_TASK_ID (a Slurm job array's tasks,
    /// `--array=0-<N-1>`); else pass it (Nomad: $NOMAD_ALLOC_INDEX, srun: $SLURM_PROCID).
    #[arg(env = "JOB_COMPLETION_INDEX", long, value_name = "I")]
    pub shard: Option<u32>,
    /// The fleet's name (1-64 bytes of [A-Za-z0-9_.-]): its barrier's keys (`emq-fleet:{G}:*`)
    /// and its results folder; default `<scenario name>-<$SLURM_ARRAY_JOB_ID>` in a Slurm job
    /// array (a new group for every array), else the scenario's name.
    #[arg(env = "EMQ_GROUP", long, value_name = "G")]
    pub group: Option<String>,
    /// The Slurm job array this process runs in, if any: the defaults of --shard, --shards and
    /// --group. Not a flag: the binary reads it from the environment for `run` only.
    #[arg(skip)]
    pub array: ArrayTask,
    /// How long a shard waits at the start barrier for the others (1s..=1d); then it exits 2
    /// naming the indices that never arrived.
    #[arg(env = "EMQ_BARRIER_TIMEOUT", long, value_parser = parse_barrier_timeout, default_value = "120s")]
    pub barrier_timeout: std::time::Duration,
    /// How the fleet's shards use the queues: `sharded` (each owns its queues, prefixed
    /// `s<I>.`) or `shared` (all drive the same queues; the fleet's merge runs the one check
    /// over every shard's history and deletes the keys).
    #[arg(env = "EMQ_QUEUE_MODE", long, value_name = "MODE", default_value = "sharded", value_parser = parse_queue_mode)]
    pub queue_mode: crate::scenario::QueueMode,
    /// With --queue-mode shared: each shard's tasks, by index, comma-separated: `p`
    /// (producers), `c` (consumers) or `pc` (both, the default), e.g. `p,c,c`.
    #[arg(env = "EMQ_ROLES", long, value_name = "ROLES", value_parser = parse_roles)]
    pub roles: Option<ShardRoles>,
    /// Shards may run different scripts (a rolling upgrade: a new script on some shards only):
    /// the scripts' SHA-1s are left out of the configuration the shards must agree on. Each
    /// shard's summary.json names its own.
    #[arg(env = "EMQ_MIXED_SCRIPTS", long)]
    pub mixed_scripts: bool,
    /// The metrics endpoint (`--metrics-addr`, `--metrics-linger`).
    #[command(flatten)]
    pub metrics: metrics::MetricsArgs,
    /// The embedded server's options (used when there is no target URL).
    #[command(flatten)]
    pub server: ServerArgs,
    /// `--export-bmf`, `--export-gab`.
    #[command(flatten)]
    pub export: export::ExportArgs,
}

/// Authentication and TLS flags, shared by `run`, `ab` and `check` (memtier_benchmark's and
/// valkey-benchmark's names). A password is best given as $EMQ_PASSWORD, so it sits neither on
/// a command line nor in a scenario file; it never appears in a result, log or error.
#[derive(Debug, Clone, Default, Args)]
pub struct TargetArgs {
    /// ACL user name (overrides the URL's).
    #[arg(env = "EMQ_USER", long, value_name = "NAME")]
    pub user: Option<String>,
    /// Password (overrides the URL's; prefer $EMQ_PASSWORD, read when neither gives one).
    #[arg(long, value_name = "PASSWORD")]
    pub pass: Option<String>,
    /// Use TLS even for a redis:// URL (any TLS flag implies it).
    #[arg(env = "EMQ_TLS", long)]
    pub tls: bool,
    /// PEM file of the CA certificate(s) that sign the server's (default: the system's roots).
    #[arg(env = "EMQ_CACERT", long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// PEM client certificate, for a server with tls-auth-clients yes (with --key).
    #[arg(env = "EMQ_CERT", long, value_name = "FILE")]
    pub cert: Option<PathBuf>,
    /// PEM private key of --cert.
    #[arg(env = "EMQ_KEY", long, value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// Server name to send (SNI) and verify, when it is not the URL's host.
    #[arg(env = "EMQ_SNI", long, value_name = "NAME")]
    pub sni: Option<String>,
    /// Accept any server certificate (encrypted, not authenticated; test deployments only).
    #[arg(env = "EMQ_TLS_SKIP_VERIFY", long)]
    pub tls_skip_verify: bool,
}

impl TargetArgs {
    /// The flags as the target seam takes them.
    pub fn flags(&self) -> crate::net::TargetFlags {
        let TargetArgs { user, pass, tls, cacert, cert, key, sni, tls_skip_verify } = self.clone();
        crate::net::TargetFlags {
            pass: pass.map(crate::net::Secret::new),
            ..crate::net::TargetFlags::new(user, tls, cacert, cert, key, sni, tls_skip_verify)
        }
    }
}

/// Options of the embedded server, shared by `server` and `run`.
#[derive(Debug, Clone, Args)]
pub struct ServerArgs {
    /// The valkey-server binary (default: $EMQ_VALKEY_SERVER, .tools/bin, then PATH).
    #[arg(long, value_name = "PATH")]
    pub server_bin: Option<PathBuf>,
    /// An extra server config directive, NAME=VALUE (repeatable), e.g. --server-config io-threads=2.
    #[arg(long = "server-config", value_name = "NAME=VALUE", value_parser = parse_directive)]
    pub server_config: Vec<(String, String)>,
}

/// `emq-bench server`'s flags: the embedded server's, and the cluster's shape.
#[derive(Debug, Clone, Args)]
pub struct ServerCmdArgs {
    /// The binary and its config.
    #[command(flatten)]
    pub server: ServerArgs,
    /// Start an embedded cluster instead, PRIMARIESxREPLICAS (e.g. 3x1: three primaries with
    /// one replica each; node timeout 2 s).
    #[arg(long, value_name = "PxR", value_parser = parse_cluster)]
    pub cluster: Option<(usize, usize)>,
}

/// `PRIMARIESxREPLICAS`, primaries in 1..=16 and replicas in 0..=4 (the scenario's bounds).
fn parse_cluster(text: &str) -> Result<(usize, usize), String> {
    let expected =
        || format!("expected PRIMARIESxREPLICAS such as 3x1 (1..=16 primaries, 0..=4 replicas), found {text:?}");
    let (p, r) = text.split_once(['x', 'X']).ok_or_else(expected)?;
    let (p, r): (usize, usize) = (p.parse().map_err(|_| expected())?, r.parse().map_err(|_| expected())?);
    if !(1..=16).contains(&p) || r > 4 {
        return Err(expected());
    }
    Ok((p, r))
}

fn parse_directive(text: &str) -> Result<(String, String), String> {
    let (name, value) = text.split_once('=').ok_or_else(|| format!("expected NAME=VALUE, found {text:?}"))?;
    if name.is_empty() {
        return Err(format!("expected NAME=VALUE, found {text:?}"));
    }
    Ok((name.to_string(), value.to_string()))
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text).map_err(|e| format!("expected a duration with a unit like 30s or 250ms: {e}"))
}

/// A duration in `min..=max`; `why_min` and `why_max` say why each bound is there.
fn bounded(text: &str, (min, why_min): (Duration, &str), (max, why_max): (Duration, &str)) -> Result<Duration, String> {
    let d = parse_duration(text)?;
    let show = |d: Duration| humantime::format_duration(d).to_string();
    if d < min {
        return Err(format!("expected at least {}: {why_min}", show(min)));
    }
    if d > max {
        return Err(format!("expected at most {}: {why_max}", show(max)));
    }
    Ok(d)
}

/// `--timeout`: in [`MIN_TIMEOUT`]..=[`MAX_TIMEOUT`].
fn parse_timeout(text: &str) -> Result<Duration, String> {
    bounded(
        text,
        (MIN_TIMEOUT, "below it calls time out on a healthy loopback server, whose tail already takes milliseconds, and each timeout drops the connection"),
        (MAX_TIMEOUT, "a request unanswered that long is lost, and a stopping run waits this long for its replies"),
    )
}

/// `--set`: KEY=VALUE.
fn parse_setting(text: &str) -> Result<crate::scenario::settings::Setting, String> {
    crate::scenario::settings::Setting::parse(text)
}

/// A Slurm job array's task as its environment gives it, the values unparsed (the run resolves
/// them and says which variable is wrong). Every field is `None` outside an array.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArrayTask {
    /// `SLURM_ARRAY_TASK_ID`: this task's index in the array.
    pub task_id: Option<String>,
    /// `SLURM_ARRAY_TASK_COUNT`: the array's number of tasks.
    pub task_count: Option<String>,
    /// `SLURM_ARRAY_JOB_ID`: the array's job id, the same in every task.
    pub job_id: Option<String>,
}

impl ArrayTask {
    /// The variables Slurm sets in every task of a job array.
    pub const VARIABLES: [&'static str; 3] = ["SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_JOB_ID"];

    /// Reads the array's variables through `var` (the process's environment, or a test's map);
    /// an empty value counts as unset, as clap treats its own variables.
    pub fn read(var: impl Fn(&str) -> Option<String>) -> ArrayTask {
        let get = |name: &str| var(name).filter(|v| !v.is_empty());
        ArrayTask {
            task_id: get(Self::VARIABLES[0]),
            task_count: get(Self::VARIABLES[1]),
            job_id: get(Self::VARIABLES[2]),
        }
    }
}

/// `--queue-mode`: `sharded` or `shared`.
fn parse_queue_mode(text: &str) -> Result<crate::scenario::QueueMode, String> {
    crate::scenario::QueueMode::from_name(text).ok_or_else(|| format!("expected sharded or shared, found {text:?}"))
}

/// `--roles`: one role per shard, by index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardRoles(pub Vec<crate::scenario::ShardRole>);

/// `--roles`: `p`, `c` or `pc` per shard, comma-separated.
fn parse_roles(text: &str) -> Result<ShardRoles, String> {
    text.split(',')
        .map(|role| {
            crate::scenario::ShardRole::from_name(role)
                .ok_or_else(|| format!("expected p, c or pc for each shard (e.g. p,c,c), found {role:?}"))
        })
        .collect::<Result<_, _>>()
        .map(ShardRoles)
}

/// `--barrier-timeout`: 1s..=1d.
fn parse_barrier_timeout(text: &str) -> Result<Duration, String> {
    bounded(
        text,
        (Duration::from_secs(1), "the shards poll the barrier every 100 ms; a shorter wait is a race"),
        (Duration::from_secs(86_400), "a fleet that has not gathered in a day will not"),
    )
}

/// `--progress-every`: 1s..=1h.
fn parse_progress_every(text: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(text).map_err(|e| format!("{text:?}: {e}"))?;
    if !(Duration::from_secs(1)..=Duration::from_secs(3600)).contains(&d) {
        return Err(format!("{text:?}: expected 1s..=1h"));
    }
    Ok(d)
}

/// `--give-up`: in [`MIN_GIVE_UP`]..=[`MAX_GIVE_UP`].
fn parse_give_up(text: &str) -> Result<Duration, String> {
    bounded(
        text,
        (MIN_GIVE_UP, "the target is polled about once a second, so a shorter window is one failed poll"),
        (MAX_GIVE_UP, "a target unreachable for a day is not coming back within the run"),
    )
}

/// `--duration` of `run` and `ab`: more than zero, at most [`MAX_RUN`] (as the scenario's
/// `duration`).
///
/// # Errors
/// A message for clap (exit 2) naming the accepted shape or the bound that was passed.
pub fn parse_run_length(text: &str) -> Result<Duration, String> {
    let d =
        bounded(text, (Duration::ZERO, ""), (MAX_RUN, "a longer run's history outgrows memory, as the scenario's"))?;
    if d.is_zero() {
        return Err("expected a run length > 0".into());
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// clap's defaults are text ("5s", "30s"); the constants that `ab` and others use must
    /// say the same, so a change of one without the other fails here.
    #[test]
    fn the_timeout_defaults_are_the_constants() {
        let cli = Cli::parse_from(["emq-bench", "run", "scenarios/smoke.toml"]);
        let Command::Run(args) = cli.command else { panic!("run") };
        assert_eq!(args.timeout, DEFAULT_TIMEOUT);
        assert_eq!(args.give_up, DEFAULT_GIVE_UP);
        assert_eq!(args.progress_every, DEFAULT_PROGRESS_EVERY);
        assert_eq!(args.barrier_timeout, DEFAULT_BARRIER_TIMEOUT);
    }
}
