//! EchoMQ v1.1 (docs/protocol.md "Why v1.1") through whole runs: the fencing soak drains with 500
//! orphans planted in its sets, poison jobs end failed by stall and check clean, and a run whose
//! drain cannot finish names every job it left behind (I7, "stuck job").

mod support;

use emq_bench::check::Invariant;
use emq_bench::cli::RunArgs;
use emq_bench::cmd::run::run;
use emq_bench::cmd::CommandOutcome;
use emq_bench::keyspace::JobIdGen;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn args(scenario: &Path, out: &Path, url: String) -> RunArgs {
    RunArgs { url: Some(url), ..support::run_args(scenario, out) }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fencing_soak_drains_with_500_orphans_planted_mid_run() {
    let tmp = tempfile::tempdir().unwrap();
    let server = support::server();
    let scenario = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/fencing-soak.toml");
    let mut a = args(&scenario, tmp.path(), server.url());
    a.duration = Some(Duration::from_secs(4));
    let url = server.url();
    // 500 row-less ids (another run's tag) at the head of active and of delayed, 1 s in: the
    // soak's `limit` is 500, so in v1 they blocked reap and promote for good.
    let planter = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let client = redis::Client::open(url).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let mut ids = JobIdGen::new(99_999);
        let mut pipe = redis::pipe();
        for _ in 0..500 {
            pipe.cmd("ZADD").arg("emq:{bench-0}:active").arg(1).arg(ids.next_id().as_str()).ignore();
            pipe.cmd("ZADD").arg("emq:{bench-1}:delayed").arg(1).arg(ids.next_id().as_str()).ignore();
        }
        pipe.exec_async(&mut conn).await.unwrap();
    });
    let result = run(a, std::future::pending()).await.unwrap();
    planter.await.unwrap();
    assert_eq!(result.outcome, CommandOutcome::Success, "{:?}", result.failures);
    assert!(result.summary.drained, "the soak did not drain");
    let check = result.summary.check.as_ref().expect("a check ran");
    assert_eq!(check.violations_total, 0, "{check:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poison_jobs_end_failed_by_stall_and_check_clean() {
    let tmp = tempfile::tempdir().unwrap();
    let server = support::server();
    // Every attempt stalls: each job is claimed max_attempts times, then reap fails it.
    let scenario = tmp.path().join("poison.toml");
    std::fs::write(
        &scenario,
        "name = \"poison\"\nseed = 8\njobs = 30\ndrain = \"20s\"\n\
         [producers]\ncount = 1\nmax_attempts = 2\n\
         [consumers]\ncount = 2\nlease = \"20ms\"\nstall = 1.0\n\
         [maintenance]\nreap = \"5ms\"\n",
    )
    .unwrap();
    let result = run(args(&scenario, &tmp.path().join("out"), server.url()), std::future::pending()).await.unwrap();
    assert_eq!(result.outcome, CommandOutcome::Success, "{:?}", result.failures);
    let jobs = &result.summary.jobs;
    assert_eq!(jobs["failed_by_stall"], 30, "{jobs:?}");
    assert_eq!(jobs["claimed"], 60, "each job claimed exactly max_attempts times: {jobs:?}");
    assert_eq!(jobs["completed"], 0);
    assert!(result.table.contains("failed by stall 30"), "{}", result.table);
    let check = result.summary.check.as_ref().expect("a check ran");
    assert_eq!(check.violations_total, 0, "{check:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_drain_cannot_finish_names_every_stuck_job() {
    let tmp = tempfile::tempdir().unwrap();
    // A reap that never reaps: stalled leases stay in active past their deadline.
    let lua = support::lua_copy(tmp.path(), "lua-noreap", "reap", |source| {
        let gate = "local t = redis.call('TIME')";
        assert!(source.contains(gate), "reap.lua changed; update this test");
        source.replacen(gate, "do return 0 end\nlocal t = redis.call('TIME')", 1)
    });
    let server = support::server();
    let scenario = tmp.path().join("stuck.toml");
    std::fs::write(
        &scenario,
        "name = \"stuck\"\nseed = 9\njobs = 40\ndrain = \"1s\"\n\
         [producers]\ncount = 1\n\
         [consumers]\ncount = 2\nlease = \"30ms\"\nstall = 0.25\n",
    )
    .unwrap();
    let mut a = args(&scenario, &tmp.path().join("out"), server.url());
    a.lua_dir = Some(lua);
    let result = run(a, std::future::pending()).await.unwrap();
    assert_eq!(result.outcome, CommandOutcome::Failed);
    support::assert_verdict_in_summary(&result);
    assert!(!result.summary.drained);
    let stalled = result.summary.jobs["stalled"];
    assert!(stalled > 0, "nothing stalled: {:?}", result.summary.jobs);
    let text = std::fs::read_to_string(tmp.path().join("out/invariants.json")).unwrap();
    let report: serde_json::Value = serde_json::from_str(&text).unwrap();
    let stuck: Vec<&serde_json::Value> = report["violations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| {
            v["invariant"] == serde_json::json!(Invariant::I7) && v["found"].as_str().unwrap().starts_with("stuck job")
        })
        .collect();
    assert_eq!(stuck.len() as u64, stalled, "one stuck job per stalled lease: {text}");
    for v in &stuck {
        let found = v["found"].as_str().unwrap();
        assert!(found.contains("state active, lease passed") && found.contains("attempts 1"), "{found}");
        assert!(v["job"].as_str().unwrap().starts_with("JOB"), "{v}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_evicted_with_every_trace_is_named_by_its_id() {
    let tmp = tempfile::tempdir().unwrap();
    let server = support::server();
    let scenario = tmp.path().join("small.toml");
    std::fs::write(&scenario, "name = \"evict\"\nseed = 12\njobs = 50\n[consumers]\ncount = 1\n").unwrap();
    let out = tmp.path().join("out");
    let result =
        run(RunArgs { keep: true, ..args(&scenario, &out, server.url()) }, std::future::pending()).await.unwrap();
    assert_eq!(result.outcome, CommandOutcome::Success, "{:?}", result.failures);
    // Remove one completed job's row and its completed member: nothing on the server names it.
    let mut conn = support::client(&server).await.connection().clone();
    let ids: Vec<String> =
        redis::cmd("ZRANGE").arg("emq:{bench}:completed").arg(0).arg(0).query_async(&mut conn).await.unwrap();
    let id = ids[0].clone();
    let _: () = redis::cmd("DEL").arg(format!("emq:{{bench}}:job:{id}")).query_async(&mut conn).await.unwrap();
    let _: () = redis::cmd("ZREM").arg("emq:{bench}:completed").arg(&id).query_async(&mut conn).await.unwrap();
    let (header, streams) = emq_bench::history::file::load(&out.join("history.bin")).unwrap();
    let history = emq_bench::history::History::merge(header, &streams).unwrap();
    let queues = [emq_bench::keyspace::QueueKeys::new(emq_bench::keyspace::QueueName::new("bench").unwrap())];
    let history = emq_bench::history::HistoryParts::from(history);
    let violations = emq_bench::check::check(&conn, &queues, Some(&history)).await.unwrap().report.violations;
    let lost: Vec<_> = violations.iter().filter(|v| v.invariant == Invariant::I7).collect();
    assert_eq!(lost.len(), 1, "{violations:#?}");
    let label = lost[0].job.as_deref().unwrap();
    assert!(label.starts_with(&id), "the lost job is named {label}, not by its id {id}");
}

/// Consumers that cannot keep up leave a backlog: the verdict says "drain incomplete" with the
/// counts by place, and the check finds no violation in jobs still waiting their turn (I7 is
/// for jobs lost, or stuck past their lease or due time).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_left_by_slow_consumers_is_a_drain_incomplete_not_lost_jobs() {
    let tmp = tempfile::tempdir().unwrap();
    let server = support::server();
    let scenario = tmp.path().join("backlog.toml");
    std::fs::write(
        &scenario,
        "name = \"backlog\"\nseed = 13\njobs = 400\ndrain = \"500ms\"\n\
         [producers]\ncount = 1\n\
         [consumers]\ncount = 1\nwork = \"20ms\"\nlease = \"5s\"\n",
    )
    .unwrap();
    let out = tmp.path().join("out");
    let result =
        run(RunArgs { keep: true, ..args(&scenario, &out, server.url()) }, std::future::pending()).await.unwrap();
    assert_eq!(result.outcome, CommandOutcome::Failed);
    support::assert_verdict_in_summary(&result);
    assert!(!result.summary.drained);
    // `emq-bench check --history` on the kept keys says the same: a backlog, no violation, exit 1.
    let checked = std::process::Command::new(env!("CARGO_BIN_EXE_emq-bench"))
        .args(["check", "--url", &server.url(), "--history"])
        .arg(out.join("history.bin"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&checked.stdout);
    assert_eq!(checked.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("drain incomplete") && stdout.contains("no violations"), "{stdout}");
    let kinds: Vec<_> = result.summary.verdict.as_ref().expect("a verdict").findings.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, [emq_bench::verdict::FindingKind::DrainIncomplete], "{:?}", result.failures);
    let pending = result.summary.depths_end.expect("read at the end").pending;
    assert!(pending > 100, "a backlog of hundreds of jobs: {pending}");
    assert!(result.failures[0].contains(&format!("pending {pending}")), "{:?}", result.failures);
    // The oldest waiting job was enqueued near the start: about the run's length before the end.
    let oldest = result.summary.check.as_ref().and_then(|c| c.oldest_unfinished_s).expect("an oldest job");
    assert!(oldest > 0.2 && oldest < 120.0, "{oldest}");
    assert!(result.failures[0].contains("the oldest enqueued"), "{:?}", result.failures);
    let check = result.summary.check.as_ref().expect("a check ran");
    assert_eq!(check.violations_total, 0, "{check:?}");
}
