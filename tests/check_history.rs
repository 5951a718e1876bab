//! The checker can fail: planted violations after real runs, and a real protocol bug (a
//! `complete.lua` without its fence) caught by the fencing soak. Every test here runs the
//! harness against a real embedded server.

mod support;

use emq_bench::check::{self, Invariant, Violation};
use emq_bench::cli::RunArgs;
use emq_bench::cmd::run::run;
use emq_bench::cmd::CommandOutcome;
use emq_bench::history::{file, Event, History, HistoryParts, Kind, Outcome as Seen};
use emq_bench::keyspace::ids::job_number;
use emq_bench::keyspace::{QueueKeys, QueueName};
use redis::AsyncCommands;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn args(scenario: &Path, out: &Path, url: String) -> RunArgs {
    RunArgs { url: Some(url), keep: true, ..support::run_args(scenario, out) }
}

const SMALL: &str = "name = \"plant\"\nseed = 5\njobs = 200\ndrain = \"10s\"\n\
    [producers]\ncount = 1\npipeline = 4\n[consumers]\ncount = 1\npipeline = 2\nfail = 0.2\n";

/// Runs SMALL against `server`, keeping the keys; returns the results folder's history.
async fn small_run(server: &emq_bench::server::EmbeddedServer, dir: &Path) -> History {
    std::fs::write(dir.join("s.toml"), SMALL).unwrap();
    let result = run(args(&dir.join("s.toml"), &dir.join("out"), server.url()), std::future::pending()).await.unwrap();
    assert_eq!(result.outcome, CommandOutcome::Success, "{:?}", result.failures);
    let (header, streams) = file::load(&dir.join("out/history.bin")).unwrap();
    History::merge(header, &streams).unwrap()
}

async fn check_now(server: &emq_bench::server::EmbeddedServer, history: &History) -> Vec<Violation> {
    check_parts(server, &HistoryParts::from(history.clone())).await
}

/// Checks the history's queues against it.
async fn check_parts(server: &emq_bench::server::EmbeddedServer, history: &HistoryParts) -> Vec<Violation> {
    let conn = support::client(server).await.connection().clone();
    let queues: Vec<QueueKeys> =
        history.header().queues.iter().map(|q| QueueKeys::new(QueueName::new(q).unwrap())).collect();
    check::check(&conn, &queues, Some(history)).await.unwrap().report.violations
}

/// `violations` in an order that does not depend on how the history was cut.
fn sorted(mut violations: Vec<Violation>) -> Vec<String> {
    let mut lines: Vec<String> = violations.drain(..).map(|v| format!("{v:?}")).collect();
    lines.sort();
    lines
}

fn assert_names(violations: &[Violation], invariant: Invariant, job: &str) {
    assert!(
        violations.iter().any(|v| v.invariant == invariant && v.job.as_deref() == Some(job)),
        "expected {invariant:?} on {job}, got {violations:#?}"
    );
}

/// Runs `emq-bench check --url <server> ARGS...` and returns its output.
fn check_command(server: &emq_bench::server::EmbeddedServer, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_emq-bench"))
        .args(["check", "--url", &server.url()])
        .args(args)
        .output()
        .unwrap()
}

/// A completed job of the run: its id, its key and its final token.
async fn completed_job(server: &emq_bench::server::EmbeddedServer) -> (String, String, u64) {
    let mut conn = support::client(server).await.connection().clone();
    let ids: Vec<String> = conn.zrange("emq:{bench}:completed", 0, 0).await.unwrap();
    let id = ids.into_iter().next().expect("a completed job");
    let key = format!("emq:{{bench}}:job:{id}");
    let attempts: u64 = conn.hget(&key, "attempts").await.unwrap();
    (id, key, attempts)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_run_checks_clean_and_planted_history_violations_are_named() {
    let server = support::server();
    let tmp = tempfile::tempdir().unwrap();
    let mut history = small_run(&server, tmp.path()).await;
    assert!(check_now(&server, &history).await.is_empty());

    let (id, _, token) = completed_job(&server).await;
    let number = job_number(&emq_bench::keyspace::JobId::parse(id.as_bytes()).unwrap());
    // A second completion accepted for the same job (I6).
    let last = *history.events.iter().rfind(|e| e.job == number).unwrap();
    history.events.push(Event {
        kind: Kind::Complete,
        outcome: Seen::Ok,
        token: token as u32,
        sent_us: last.done_us + 10,
        done_us: last.done_us + 20,
        ..last
    });
    history.events.sort_by_key(|e| (e.job, e.sent_us, e.done_us));
    assert_names(&check_now(&server, &history).await, Invariant::I6, &id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planted_server_state_violations_are_named() {
    let server = support::server();
    let tmp = tempfile::tempdir().unwrap();
    let history = small_run(&server, tmp.path()).await;
    let mut conn = support::client(&server).await.connection().clone();
    let completed: Vec<String> = conn.zrange("emq:{bench}:completed", 0, 3).await.unwrap();
    let key = |id: &str| format!("emq:{{bench}}:job:{id}");

    // attempts rolled back (I5).
    let _: () = conn.hset(key(&completed[0]), "attempts", 0).await.unwrap();
    // a row deleted (I7 loss; its member stays, so I2 names the orphan too).
    let _: () = conn.del(key(&completed[1])).await.unwrap();
    // a payload byte changed (I4).
    let mut payload: Vec<u8> = conn.hget(key(&completed[2]), "payload").await.unwrap();
    let last = payload.len() - 1;
    payload[last] ^= 0x20;
    let _: () = conn.hset(key(&completed[2]), "payload", payload).await.unwrap();
    // a row nobody enqueued, with this run's tag and an unused job number (I1).
    let stranger = emq_bench::keyspace::JobIdGen::new(5).mint(999_999).to_string();
    let _: () = conn
        .hset_multiple(
            key(&stranger),
            &[("state", "completed"), ("attempts", "1"), ("payload", "xxxxxxxxxxxxxxxxxxxxxxxx")],
        )
        .await
        .unwrap();
    let _: () = conn.zadd("emq:{bench}:completed", &stranger, 1).await.unwrap();

    let violations = check_now(&server, &history).await;
    assert_names(&violations, Invariant::I5, &completed[0]);
    assert_names(&violations, Invariant::I7, &completed[1]);
    assert_names(&violations, Invariant::I4, &completed[2]);
    assert_names(&violations, Invariant::I1, &stranger);

    // The same history read back in parts (a budget of a few hundred bytes cuts it into many):
    // the same violations, none twice.
    let parts = HistoryParts::read(&tmp.path().join("out/history.bin"), 600, tmp.path()).unwrap();
    assert!(parts.count() > 4, "{} parts", parts.count());
    assert_eq!(sorted(check_parts(&server, &parts).await), sorted(violations));
    drop(parts);
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().flatten().map(|e| e.file_name()).collect();
    assert!(!left.iter().any(|name| name.to_string_lossy().starts_with(".history-parts")), "{left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fencing_soak_passes_and_shows_contention() {
    let tmp = tempfile::tempdir().unwrap();
    let server = support::server();
    let scenario = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/fencing-soak.toml");
    let mut a = args(&scenario, tmp.path(), server.url());
    a.keep = false;
    a.duration = Some(Duration::from_secs(4));
    let result = run(a, std::future::pending()).await.unwrap();
    assert_eq!(result.outcome, CommandOutcome::Success, "{:?}", result.failures);
    let jobs = &result.summary.jobs;
    assert!(jobs["reaped"] > 0 && jobs["stale_refused"] > 0, "{jobs:?}");
    let check = result.summary.check.as_ref().expect("a check ran");
    assert_eq!(check.violations_total, 0);
    assert!(check.jobs_with_retries > 0, "{check:?}");
    assert!(result.summary.history_bytes_per_job.unwrap() <= 64.0, "{:?}", result.summary.history_bytes_per_job);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_complete_script_without_its_fence_fails_the_soak_on_i6() {
    let tmp = tempfile::tempdir().unwrap();
    let lua = support::fenceless_lua(tmp.path(), "lua-broken");

    let server = support::server();
    let scenario = support::held_zombie_soak(tmp.path());
    let mut a = args(&scenario, tmp.path(), server.url());
    a.lua_dir = Some(lua);
    a.duration = Some(Duration::from_secs(4));
    let result = run(a, std::future::pending()).await.unwrap();
    assert_eq!(result.outcome, CommandOutcome::Failed);
    support::assert_verdict_in_summary(&result);
    let check = result.summary.check.as_ref().expect("a check ran");
    // ~60 zombies land on held jobs (about 118 I6 findings here): a handful would mean the
    // retuning above stopped working.
    assert!(check.by_invariant.get("I6").copied().unwrap_or(0) >= 10, "{check:?}");
    let text = std::fs::read_to_string(tmp.path().join("invariants.json")).unwrap();
    assert!(text.contains("\"I6\""), "{text}");

    // Checked again from its history.bin in parts (the keys stay: the run failed): the same
    // stale completes, found once each.
    let parts = HistoryParts::read(&tmp.path().join("history.bin"), 4_000, tmp.path()).unwrap();
    assert!(parts.count() > 4, "{} parts", parts.count());
    let again = check_parts(&server, &parts).await;
    let i6 = again.iter().filter(|v| v.invariant == Invariant::I6).count();
    assert_eq!(Some(&i6), check.by_invariant.get("I6"), "{again:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_check_command_rechecks_a_kept_run_from_its_history_file() {
    let server = support::server();
    let tmp = tempfile::tempdir().unwrap();
    small_run(&server, tmp.path()).await;
    let history = tmp.path().join("out/history.bin");
    let history = history.display().to_string();
    let check = |extra: &[&str]| check_command(&server, &[&["--history", &history], extra].concat());
    let clean = check(&[]);
    assert_eq!(clean.status.code(), Some(0), "{}", String::from_utf8_lossy(&clean.stderr));
    let (id, key, _) = completed_job(&server).await;
    let mut conn = support::client(&server).await.connection().clone();
    let _: () = conn.del(&key).await.unwrap();
    let out = check(&["--queue", "bench"]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("I7") && stdout.contains(&id), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_check_command_checks_a_subset_of_the_runs_queues_and_refuses_unknown_ones() {
    let server = support::server();
    let tmp = tempfile::tempdir().unwrap();
    let two = SMALL.replace("jobs = 200\n", "jobs = 200\nqueues = 2\n");
    std::fs::write(tmp.path().join("two.toml"), two).unwrap();
    let a = args(&tmp.path().join("two.toml"), &tmp.path().join("out"), server.url());
    let result = run(a, std::future::pending()).await.unwrap();
    assert_eq!(result.outcome, CommandOutcome::Success, "{:?}", result.failures);
    let history = tmp.path().join("out/history.bin").display().to_string();
    let check = |extra: &[&str]| check_command(&server, extra);
    // One of the two queues with the whole run's history: the other queue's jobs are not lost.
    let subset = check(&["--queue", "bench-1", "--history", &history]);
    let stdout = String::from_utf8_lossy(&subset.stdout);
    assert_eq!(subset.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&subset.stderr));
    assert!(stdout.contains("bench-1") && !stdout.contains("bench-0"), "{stdout}");
    let foreign = check(&["--queue", "nosuch", "--history", &history]);
    assert_eq!(foreign.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&foreign.stderr).contains("bench-0, bench-1"));
    // Without a history, a queue with no keys at all is a usage error, not a clean check.
    let typo = check(&["--queue", "bench-O"]);
    assert_eq!(typo.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&typo.stderr).contains("nothing to check"));
}

/// A token handed out again to another worker (what a failover that rolls back a claim does):
/// the I5 finding names both holders, the first holder's complete accepted after the reissue
/// is stale (I6), and the second holder's "already completed" answer is named (I6): both
/// workers believe they finished the job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reissued_token_names_both_holders() {
    let server = support::server();
    let tmp = tempfile::tempdir().unwrap();
    let mut history = small_run(&server, tmp.path()).await;
    let (id, _, token) = completed_job(&server).await;
    let number = job_number(&emq_bench::keyspace::JobId::parse(id.as_bytes()).unwrap());
    let token = token as u32;
    let claim = *history
        .events
        .iter()
        .rfind(|e| e.job == number && e.kind == Kind::Claim && e.token == token)
        .expect("the job's last claim");
    let holder = claim.worker.expect("claims name their worker");
    let second = holder + 1000;
    // Each claim call presents a holder of its own; the reissue's is another.
    let first_holder = claim.holder.expect("claims record their holder").get();
    let second_holder = first_holder + 1000;
    // The first holder's accepted complete moves after the reissue; the second holder's
    // same-token complete is answered "already completed".
    for e in history.events.iter_mut().filter(|e| e.job == number && e.kind == Kind::Complete) {
        e.sent_us = claim.done_us + 1_000;
        e.done_us = claim.done_us + 1_100;
    }
    history.events.push(Event {
        worker: Some(second),
        holder: std::num::NonZeroU64::new(second_holder),
        sent_us: claim.done_us + 400,
        done_us: claim.done_us + 500,
        ..claim
    });
    history.events.push(Event {
        kind: Kind::Complete,
        outcome: Seen::Alt,
        worker: Some(second),
        holder: None,
        sent_us: claim.done_us + 2_000,
        done_us: claim.done_us + 2_100,
        ..claim
    });
    history.events.sort_by_key(|e| (e.job, e.sent_us, e.done_us));
    let violations = check_now(&server, &history).await;
    let on = |invariant: Invariant, needle: &str| {
        violations
            .iter()
            .any(|v| v.invariant == invariant && v.job.as_deref() == Some(id.as_str()) && v.found.contains(needle))
    };
    let twice = format!("by worker {holder}, ");
    assert!(on(Invariant::I5, &twice) && on(Invariant::I5, &format!("by worker {second}")), "{violations:#?}");
    let holders = "handed out 2 times to 2 holders: at ";
    assert!(on(Invariant::I5, holders), "{violations:#?}");
    for h in [first_holder, second_holder] {
        assert!(on(Invariant::I5, &format!("holder {h:016x}")), "{violations:#?}");
    }
    assert!(on(Invariant::I6, "was handed out again"), "{violations:#?}");
    assert!(on(Invariant::I6, "both workers believe they finished the job"), "{violations:#?}");
    let i5 = violations.iter().find(|v| v.invariant == Invariant::I5).unwrap();
    assert_eq!(i5.at_us, Some(claim.done_us), "the first hand-out is the evidence's time");
}
