//! `emq-bench run` with `protocol = "bullmq"` end to end: BullMQ's pinned scripts (installed by
//! scripts/setup) driven against an embedded server, every mapped script called, the checker
//! clean with the history, the release recorded; and a planted bug in BullMQ's own
//! moveToActive (`ats` never counted) caught by the history's I5.

mod support;

use emq_bench::bullmq::release::BULLMQ_INSTALL;
use emq_bench::check::Invariant;
use emq_bench::cmd::run::run;
use emq_bench::cmd::CommandOutcome;
use emq_bench::lua::Protocol;
use emq_bench::net::Transport;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn bullmq_args(scenario: &str, out: &Path) -> emq_bench::cli::RunArgs {
    let mut a = support::run_args(&root().join("scenarios").join(scenario), out);
    a.lua_dir = Some(root().join(BULLMQ_INSTALL).join("commands"));
    a
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bullmq_smoke_calls_every_mapped_script_and_checks_clean() {
    bullmq_smoke_over(Transport::Pipe).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bullmq_smoke_runs_over_the_redis_rs_transport_too() {
    bullmq_smoke_over(Transport::RedisRs).await;
}

async fn bullmq_smoke_over(transport: Transport) {
    let tmp = tempfile::tempdir().unwrap();
    let result = run(
        emq_bench::cli::RunArgs { transport, ..bullmq_args("bullmq-smoke.toml", tmp.path()) },
        std::future::pending(),
    )
    .await
    .unwrap();
    assert_eq!(result.outcome, CommandOutcome::Success, "{:?}", result.failures);
    for &script in Protocol::BullMq.scripts() {
        let row = result.summary.scripts.iter().find(|s| s.script == script.name());
        assert!(row.is_some_and(|s| s.ok > 0), "{} was never called successfully", script.name());
        // The producers' scripts are rated over the load phase, the rest over load + drain.
        let window = if script.is_enqueue() { "load" } else { "measured" };
        assert_eq!(row.unwrap().window, window, "{}", script.name());
    }
    let jobs = &result.summary.jobs;
    for counter in ["duplicates", "retried", "reaped", "stalled", "stale_refused"] {
        assert!(jobs[counter] > 0, "{counter} is 0: {jobs:?}");
    }
    assert_eq!(jobs["payload_corrupt"], 0);
    // A job BullMQ's stall check moves to failed (its stall limit reached) ends there: it is
    // counted as failed by stall, not as failed (CI on e9da405: completed 860, failed by stall
    // 1, of 861 enqueued).
    let ended = jobs["completed"] + jobs["failed"] + jobs["failed_by_stall"];
    assert_eq!(ended, jobs["enqueued"], "every job ends once: {jobs:?}");
    let check = result.summary.check.as_ref().expect("checked");
    assert!(check.with_history && check.violations_total == 0, "{check:?}");
    assert_eq!(check.checked_jobs as u64, jobs["enqueued"]);

    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(tmp.path().join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["target"]["protocol"], "bullmq");
    assert_eq!(summary["target"]["bullmq"]["version"], "2.26.0");
    assert_eq!(summary["target"]["bullmq"]["differs"], serde_json::json!([]));
    assert_eq!(summary["target"]["script_sha1"].as_object().unwrap().len(), 10);
    assert!(tmp.path().join("report.html").is_file());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_to_active_that_does_not_count_attempts_is_caught() {
    let tmp = tempfile::tempdir().unwrap();
    let commands = root().join(BULLMQ_INSTALL).join("commands");
    let broken = tmp.path().join("broken");
    std::fs::create_dir(&broken).unwrap();
    for &script in Protocol::BullMq.scripts() {
        let source = std::fs::read_to_string(commands.join(script.file_name())).unwrap();
        let source = if script.name() == "moveToActive" {
            let planted = source.replace(r#"rcall("HINCRBY", jobKey, "ats", 1)"#, "");
            assert_ne!(planted, source, "the planted line is in moveToActive");
            planted
        } else {
            source
        };
        std::fs::write(broken.join(script.file_name()), source).unwrap();
    }
    let mut a = bullmq_args("bullmq-smoke.toml", &tmp.path().join("out"));
    a.lua_dir = Some(broken);
    let result = run(a, std::future::pending()).await.unwrap();
    assert_eq!(result.outcome, CommandOutcome::Failed);
    support::assert_verdict_in_summary(&result);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(tmp.path().join("out/summary.json")).unwrap()).unwrap();
    assert_eq!(summary["target"]["bullmq"]["differs"], serde_json::json!(["moveToActive"]));
    let check = result.summary.check.as_ref().expect("checked");
    assert!(check.by_invariant.get(Invariant::I5.id()).is_some_and(|&n| n > 0), "{check:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn emq_bench_check_reads_a_kept_bullmq_run_and_names_a_corrupted_job() {
    let server = support::server();
    let tmp = tempfile::tempdir().unwrap();
    let mut a = bullmq_args("bullmq-smoke.toml", &tmp.path().join("out"));
    a.url = Some(server.url());
    a.keep = true;
    a.duration = Some(std::time::Duration::from_millis(1500));
    let result = run(a, std::future::pending()).await.unwrap();
    assert_eq!(result.outcome, CommandOutcome::Success, "{:?}", result.failures);
    let check_args = |history: bool| emq_bench::cli::CheckArgs {
        url: server.url(),
        target: Default::default(),
        queues: if history { Vec::new() } else { vec!["bench-0".into(), "bench-1".into()] },
        out: None,
        json: false,
        history: history.then(|| tmp.path().join("out/history.bin")),
        // From the history's header when it is given.
        protocol: (!history).then_some(Protocol::BullMq),
        check_memory: emq_bench::cli::DEFAULT_CHECK_MEMORY_MB,
    };
    for history in [false, true] {
        let checked = emq_bench::cmd::check::check(check_args(history)).await.unwrap();
        assert_eq!(checked.outcome, CommandOutcome::Success, "history {history}: {}", checked.table);
        assert_eq!(checked.report.checked_jobs as u64, result.summary.jobs["enqueued"]);
    }
    // One completed job's data changed on the server: I4, named, with and without the history.
    let mut conn = support::client(&server).await.connection().clone();
    let ids: Vec<String> =
        redis::cmd("ZRANGE").arg("bull:{bench-0}:completed").arg(0).arg(0).query_async(&mut conn).await.unwrap();
    let key = format!("bull:{{bench-0}}:{}", ids[0]);
    let _: () = redis::cmd("HSET").arg(&key).arg("data").arg("\"AAAA\"").query_async(&mut conn).await.unwrap();
    for history in [false, true] {
        let checked = emq_bench::cmd::check::check(check_args(history)).await.unwrap();
        assert_eq!(checked.outcome, CommandOutcome::Failed);
        assert!(
            checked.report.violations.iter().any(|v| v.invariant == Invariant::I4 && v.job.as_deref() == Some(&ids[0])),
            "history {history}: {}",
            checked.table
        );
    }
}
