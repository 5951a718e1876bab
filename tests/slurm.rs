//! A fleet through a real scheduler: `deploy/slurm/fleet.sbatch` as a Slurm job array on a
//! one-node cluster the test starts (`support::slurm`), `deploy/slurm/merge.sbatch` after it
//! with `--dependency=afterany`, exactly as a user submits them. Each task finds its shard, the
//! fleet's size and its group in the array's environment. The tests wait by polling `squeue`
//! and read each task's end from `scontrol`; the cluster, its jobs and the Valkey servers are
//! stopped at the end of each test. Without Slurm (not root, packages missing) they say
//! "skipped: no Slurm", except under `CI=true`.
//!
//! First, without a scheduler: how `run` reads a Slurm array's environment.

mod support;

use emq_bench::cli::{ArrayTask, RunArgs};
use emq_bench::cmd::session::RunOptions;
use emq_bench::report::run_summary::RunSummary;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use support::slurm::{text, Slurm, TaskEnd};

/// The repository's file `path`, absolute (a job's working directory is the submitter's).
fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// `run fencing-soak` on a URL, in a Slurm array task of `array`.
fn in_array(array: ArrayTask, change: impl FnOnce(&mut RunArgs)) -> Result<RunOptions, emq_bench::error::AppError> {
    let mut args = RunArgs {
        url: Some("redis://127.0.0.1:1".into()),
        array,
        ..support::run_args(&repo("scenarios/fencing-soak.toml"), Path::new("/tmp/unused"))
    };
    args.out = None;
    change(&mut args);
    RunOptions::resolve(&args)
}

/// A task of a 3-task array with job id 4242.
fn task(id: &str) -> ArrayTask {
    ArrayTask { task_id: Some(id.into()), task_count: Some("3".into()), job_id: Some("4242".into()) }
}

#[test]
fn a_slurm_array_task_is_a_shard_of_the_arrays_size_under_the_arrays_job_id() {
    let options = in_array(task("2"), |_| {}).unwrap();
    let barrier = &options.fleet.as_ref().expect("a fleet's shard").barrier;
    assert_eq!((barrier.index, barrier.shards, barrier.group.as_str()), (2, 3, "fencing-soak-4242"));
    assert_eq!(options.out, Some(PathBuf::from("results/fleet-fencing-soak-4242/shard-002")));
}

#[test]
fn the_flags_and_kubernetes_index_come_before_the_arrays_variables() {
    let options = in_array(task("2"), |args| {
        args.shard = Some(1); // --shard, or JOB_COMPLETION_INDEX (clap reads it for --shard)
        args.shards = Some(2);
        args.group = Some("mine".into());
    })
    .unwrap();
    let barrier = &options.fleet.as_ref().unwrap().barrier;
    assert_eq!((barrier.index, barrier.shards, barrier.group.as_str()), (1, 2, "mine"));
    // --shards 1 inside an array: one process, as a sweep of independent runs wants.
    let alone = in_array(task("2"), |args| args.shards = Some(1)).unwrap();
    assert!(alone.fleet.is_none());
    // Outside an array nothing changes: one process, or a shard that must be told its index.
    assert!(in_array(ArrayTask::default(), |_| {}).unwrap().fleet.is_none());
    let err = in_array(ArrayTask::default(), |args| args.shards = Some(3)).unwrap_err().to_string();
    assert!(err.contains("JOB_COMPLETION_INDEX or SLURM_ARRAY_TASK_ID"), "{err}");
}

#[test]
fn an_array_that_is_no_fleet_is_refused_naming_the_variable() {
    let err = in_array(task("3"), |_| {}).unwrap_err().to_string();
    assert!(err.contains("--shard 3: expected an index below --shards 3") && err.contains("--array=0-<N-1>"), "{err}");
    let err = in_array(ArrayTask { task_count: Some("x".into()), ..task("0") }, |_| {}).unwrap_err().to_string();
    assert!(err.contains("SLURM_ARRAY_TASK_COUNT=\"x\""), "{err}");
    let err = in_array(ArrayTask { task_count: Some("2000".into()), ..task("0") }, |_| {}).unwrap_err().to_string();
    assert!(err.contains("SLURM_ARRAY_TASK_COUNT=\"2000\": expected a number in 1..=1024"), "{err}");
}

/// The binary reads the variables itself, in the order `--help` gives: JOB_COMPLETION_INDEX
/// before SLURM_ARRAY_TASK_ID. (Refused before anything connects: the URL is a closed port.)
#[test]
fn the_binary_reads_the_arrays_environment_for_run() {
    let run = |env: &[(&str, &str)]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_emq-bench"));
        cmd.args(["run", "fencing-soak", "--url", "redis://127.0.0.1:1"]);
        for var in ArrayTask::VARIABLES.iter().chain(&["JOB_COMPLETION_INDEX", "EMQ_SHARDS", "EMQ_GROUP"]) {
            cmd.env_remove(var);
        }
        cmd.envs(env.iter().copied()).output().unwrap()
    };
    let out = run(&[("SLURM_ARRAY_TASK_COUNT", "4"), ("SLURM_ARRAY_TASK_ID", "0")]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("--shards = 4, expected at most producers.count = 3"), "{}", text(&out));
    let out = run(&[("SLURM_ARRAY_TASK_COUNT", "3"), ("SLURM_ARRAY_TASK_ID", "0"), ("JOB_COMPLETION_INDEX", "7")]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("--shard 7: expected an index below --shards 3"), "{}", text(&out));
    let help = Command::new(env!("CARGO_BIN_EXE_emq-bench")).args(["run", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout).split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        help.contains("$JOB_COMPLETION_INDEX (a Kubernetes Indexed Job's pods), then $SLURM_ARRAY_TASK_ID"),
        "{help}"
    );
}

/// A fleet submitted to `slurm`: the array of `tasks` tasks running `fleet.sbatch SCENARIO
/// ARGS`, and the merge after it.
struct Submitted {
    array: String,
    merge: String,
    out: PathBuf,
    logs: PathBuf,
    submitted: Instant,
}

impl Submitted {
    fn new(slurm: &Slurm, dir: &Path, url: &str, bin: &Path, run: &[&str]) -> Submitted {
        let (out, logs) = (dir.join("fleet"), dir.join("logs"));
        std::fs::create_dir_all(&logs).unwrap();
        let env = [("EMQ_URL", url), ("EMQ_OUT", out.to_str().unwrap()), ("EMQ_BENCH_BIN", bin.to_str().unwrap())];
        let submitted = Instant::now();
        let task_log = format!("--output={}/task-%a.out", logs.display());
        let script = repo("deploy/slurm/fleet.sbatch");
        let mut args = vec!["--array=0-2", task_log.as_str(), script.to_str().unwrap()];
        args.extend_from_slice(run);
        let array = slurm.sbatch(&args, &env);
        let after = format!("--dependency=afterany:{array}");
        let merge_log = format!("--output={}/merge.out", logs.display());
        let merge_script = repo("deploy/slurm/merge.sbatch");
        let merge = slurm.sbatch(&[&after, &merge_log, merge_script.to_str().unwrap(), out.to_str().unwrap()], &env);
        Submitted { array, merge, out, logs, submitted }
    }

    /// Waits for the merge job to leave the queue (it runs once every task has ended); its
    /// exit code and log.
    fn wait_merge(&self, slurm: &Slurm, limit: Duration) -> (i32, String) {
        let gone = slurm.wait_gone(&self.merge, limit);
        let logs = self.logs();
        assert!(gone, "the merge job {} still queued after {limit:?}:\n{logs}\n{}", self.merge, slurm.logs());
        let ends = slurm.ends(&self.merge);
        assert_eq!(ends.len(), 1, "{ends:?}");
        (ends[0].2, std::fs::read_to_string(self.logs.join("merge.out")).unwrap_or_default())
    }

    /// Every task's and the merge's log.
    fn logs(&self) -> String {
        let mut names: Vec<_> = std::fs::read_dir(&self.logs).unwrap().flatten().map(|e| e.path()).collect();
        names.sort();
        names
            .iter()
            .map(|p| format!("--- {}\n{}", p.display(), std::fs::read_to_string(p).unwrap_or_default()))
            .collect()
    }
}

/// The fencing soak as a 3-task array in `shared` mode (p,c,c) on a 3-primary cluster: every
/// task exits 0, the shards started together, and the merge job's folder holds the fleet's one
/// passing verdict with zero violations over every job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_fleet_runs_as_a_slurm_array_and_the_dependent_merge_passes() {
    let Some(slurm) = Slurm::start() else { return };
    let cluster = support::cluster::Cluster::start(3).await;
    let tmp = tempfile::tempdir().unwrap();
    let scenario = repo("scenarios/fencing-soak.toml");
    let run = ["--duration", "6s", "--queue-mode", "shared", "--roles", "p,c,c", "--quiet"];
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_emq-bench"));
    let run: Vec<&str> = std::iter::once(scenario.to_str().unwrap()).chain(run).collect();
    let fleet = Submitted::new(&slurm, tmp.path(), &cluster.url(), &bin, &run);
    let (slurm, fleet, (code, log)) = tokio::task::spawn_blocking(move || {
        let end = fleet.wait_merge(&slurm, Duration::from_secs(80));
        (slurm, fleet, end)
    })
    .await
    .unwrap();
    let wall = fleet.submitted.elapsed();
    let tasks = slurm.ends(&fleet.array);
    let codes: Vec<(Option<u32>, i32)> = tasks.iter().map(|t| (t.0, t.2)).collect();
    assert_eq!(codes, [(Some(0), 0), (Some(1), 0), (Some(2), 0)], "{tasks:?}\n{}", fleet.logs());
    assert_eq!(code, 0, "merge: {log}\n{}", fleet.logs());
    let merged = RunSummary::read(&fleet.out.join("merged/summary.json")).expect("merged");
    assert_eq!(merged.passed(), Some(true), "{:?}", merged.verdict);
    let check = merged.check.as_ref().expect("the merge checked");
    assert!(check.with_history && check.violations_total == 0, "{check:?}");
    let enqueued = merged.jobs["enqueued"];
    let finished = merged.jobs["completed"] + merged.jobs["failed"] + merged.jobs["failed_by_stall"];
    assert!(enqueued > 100 && finished == enqueued, "every job finished: {:?}", merged.jobs);
    let record = merged.fleet.as_ref().unwrap();
    assert_eq!(record.group, format!("fencing-soak-{}", fleet.array), "the group is the array's job id");
    assert_eq!((record.shards, record.merged.len(), record.missing.len()), (3, 3, 0));
    // The figure README's "A fleet on Slurm" quotes.
    eprintln!(
        "slurm fleet: start spread {:.2} ms, wall time {:.1} s from sbatch to the merge's end",
        record.start_spread_ms,
        wall.as_secs_f64()
    );
    drop(slurm);
}

/// Shard 1 of a running fleet ended by `scancel` with `scancel_args`; the merge job's exit code
/// and log, and the tasks' ends.
fn cancel_shard_1(scancel_args: &[&str]) -> Option<(i32, String, Vec<TaskEnd>)> {
    let slurm = Slurm::start()?;
    let server = support::server();
    let tmp = tempfile::tempdir().unwrap();
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_emq-bench"));
    let fleet = Submitted::new(&slurm, tmp.path(), &server.url(), &bin, &["fencing-soak", "--duration", "10s"]);
    // Mid-run: shard 1 has written its first summary.json (every 3 s, marked running).
    let summary = fleet.out.join("shard-001/summary.json");
    let until = Instant::now() + Duration::from_secs(40);
    while !summary.is_file() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(summary.is_file(), "shard 1 never started its load:\n{}", fleet.logs());
    let task = format!("{}_1", fleet.array);
    let out = slurm.command("scancel").args(scancel_args).arg(&task).output().unwrap();
    assert!(out.status.success(), "scancel {task}: {}", text(&out));
    let (code, log) = fleet.wait_merge(&slurm, Duration::from_secs(60));
    assert!(slurm.wait_gone(&fleet.array, Duration::from_secs(1)), "the array still queued");
    let tasks = slurm.ends(&fleet.array);
    // The others end on their own: 0, or 1 for the last one when it merged a failing fleet.
    assert!(
        [&tasks[0], &tasks[2]].iter().all(|t| t.2 == 0 || t.2 == 1),
        "the other shards ran to their end: {tasks:?}\n{}",
        fleet.logs()
    );
    assert_eq!(code, 1, "merge: {log}\n{}", fleet.logs());
    let merged = RunSummary::read(&fleet.out.join("merged/summary.json")).expect("merged");
    assert_eq!(merged.passed(), Some(false));
    Some((code, log, tasks))
}

/// `scancel <array>_1` mid-run: Slurm sends the task SIGTERM, on which the shard stops its load
/// and writes its folder as interrupted; the fleet fails, and the merge job after the array
/// exits 1 naming shard 1. Nothing is left queued.
#[test]
fn a_cancelled_task_fails_the_fleet_at_the_dependent_merge_naming_its_shard() {
    let Some((_, log, tasks)) = cancel_shard_1(&[]) else { return };
    assert_eq!(tasks[1].1, "CANCELLED", "{tasks:?}");
    assert!(log.contains("shard 1: run interrupted"), "the merge names shard 1: {log}");
}

/// A task that dies outright, as on a lost node: a signal it does not handle (`scancel --full
/// --signal=USR1`; Slurm turns a KILL into a cancel, whose SIGTERM comes first). Shard 1 writes
/// no end, no shard merges, and the merge job merges what is there and exits 1 naming shard 1
/// as missing.
#[test]
fn a_killed_task_is_a_missing_shard_at_the_dependent_merge() {
    let Some((_, log, tasks)) = cancel_shard_1(&["--full", "--signal=USR1"]) else { return };
    assert_eq!(tasks[1].3, libc::SIGUSR1, "shard 1 died of the signal: {tasks:?}");
    assert!(log.contains("shard(s) 1 of 3 missing"), "the merge names shard 1 missing: {log}");
}

/// A fenceless `complete.lua` on task 2 only (its node's emq-bench finds other scripts,
/// `--mixed-scripts`, as a rolling upgrade would): the fleet's check catches the stale
/// completions, and the merge job exits 1 naming shard 2.
#[test]
fn a_fenceless_complete_on_one_task_fails_the_merge_job_naming_its_shard() {
    let Some(slurm) = Slurm::start() else { return };
    let server = support::server();
    let tmp = tempfile::tempdir().unwrap();
    let scenario = support::held_zombie_soak(tmp.path());
    let broken = support::fenceless_lua(tmp.path(), "lua-broken");
    // The binary task 2 runs: the same emq-bench, with the broken scripts.
    let wrapper = tmp.path().join("emq-bench-task");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nif [ \"$SLURM_ARRAY_TASK_ID\" = 2 ]; then export EMQ_LUA_DIR='{}'; fi\nexec '{}' \"$@\"\n",
            broken.display(),
            env!("CARGO_BIN_EXE_emq-bench")
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let run = [scenario.to_str().unwrap(), "--duration", "4s", "--queue-mode", "shared", "--roles", "p,c,c"];
    let fleet = Submitted::new(&slurm, tmp.path(), &server.url(), &wrapper, &[&run[..], &["--mixed-scripts"]].concat());
    let (code, log) = fleet.wait_merge(&slurm, Duration::from_secs(80));
    assert_eq!(code, 1, "merge: {log}\n{}", fleet.logs());
    let merged = RunSummary::read(&fleet.out.join("merged/summary.json")).expect("merged");
    let check = merged.check.as_ref().expect("the merge checked");
    assert!(check.by_invariant.get("I6").copied().unwrap_or(0) >= 1, "{check:?}");
    let report = std::fs::read_to_string(fleet.out.join("merged/invariants.json")).unwrap();
    assert!(report.contains("(shard 2)"), "{report}");
    assert!(log.contains("FAIL"), "the merge job's log says why: {log}");
}
