//! Retention (`[maintenance] clean`): a run that removes its finished jobs as it goes still
//! checks clean, leaves few rows behind, and the check still catches a `clean` that loses jobs
//! or says it removed a row it kept. Every test runs the harness against a real server.

mod support;

use emq_bench::cli::RunArgs;
use emq_bench::cmd::run::run;
use emq_bench::cmd::CommandOutcome;
use std::path::Path;
use support::*;

/// Two consumers with failures that retry and end (both finished sets fill), zombies whose
/// late calls may meet a retired job, and duplicates (re-sent only while their job is kept).
/// `retain = "0s"` retires jobs as soon as `clean` sees them, during the load and the drain.
const RETAINED: &str = "name = \"retention\"\nseed = 11\njobs = 1500\ndrain = \"20s\"\n\
    [producers]\ncount = 1\npipeline = 8\nmax_attempts = 2\nduplicate = 0.02\n\
    [consumers]\ncount = 2\npipeline = 2\nfail = 0.2\nzombie = 0.05\nzombie_delay = \"5ms\"\nlease = \"200ms\"\n\
    [maintenance]\nclean = \"20ms\"\nretain = \"0s\"\nlimit = 100\n";

fn args(dir: &Path, scenario: &str, url: String, lua: Option<std::path::PathBuf>) -> RunArgs {
    std::fs::write(dir.join("s.toml"), scenario).unwrap();
    let base = run_args(&dir.join("s.toml"), &dir.join("out"));
    RunArgs { url: Some(url), keep: true, threads: 2, lua_dir: lua.or(base.lua_dir.clone()), ..base }
}

async fn job_rows(server: &emq_bench::server::EmbeddedServer) -> usize {
    let mut conn = client(server).await.connection().clone();
    let keys: Vec<String> = redis::AsyncCommands::keys(&mut conn, "emq:{*}:job:*").await.unwrap();
    keys.len()
}

#[tokio::test(flavor = "current_thread")]
async fn a_run_that_retires_its_finished_jobs_checks_clean_and_leaves_only_the_rest() {
    let server = server();
    let dir = tempfile::tempdir().unwrap();
    let result = run(args(dir.path(), RETAINED, server.url(), None), std::future::pending()).await.unwrap();
    assert_eq!(result.outcome, CommandOutcome::Success, "{:?}", result.failures);
    let jobs = &result.summary.jobs;
    let (enqueued, retired) = (jobs["enqueued"], jobs["retired"]);
    assert_eq!(enqueued, 1500, "{jobs:?}");
    assert!(retired > 0, "clean removed nothing: {jobs:?}");
    // Every job ended; each row left is one no `clean` call reached before the run stopped.
    assert_eq!(job_rows(&server).await as u64, enqueued - retired, "{jobs:?}");
    let clean = result.summary.scripts.iter().find(|s| s.script == "clean");
    assert!(clean.is_some_and(|s| s.ok > 0), "no clean latency row: {:?}", result.summary.scripts);
    let check = result.summary.check.as_ref().expect("a check");
    assert_eq!(check.violations_total, 0, "{check:?}");
}

#[tokio::test(flavor = "current_thread")]
async fn a_clean_that_deletes_rows_without_naming_them_is_caught_losing_jobs() {
    let server = server();
    let dir = tempfile::tempdir().unwrap();
    let lua = lua_copy(dir.path(), "silent-clean", "clean", |source| {
        let line = "    removed[#removed + 1] = id\n";
        assert!(source.contains(line), "clean.lua's reply line moved; update this test");
        source.replace(line, "")
    });
    let result = run(args(dir.path(), RETAINED, server.url(), Some(lua)), std::future::pending()).await.unwrap();
    assert_eq!(result.outcome, CommandOutcome::Failed, "a silent deletion passed: {:?}", result.summary.check);
    let found = &result.summary.check.as_ref().expect("a check").by_invariant;
    assert!(found.get("I7").is_some_and(|&n| n > 0), "no lost job named: {found:?}");
    assert_eq!(result.summary.jobs["retired"], 0);
}

#[tokio::test(flavor = "current_thread")]
async fn a_clean_that_names_rows_it_keeps_is_caught() {
    let server = server();
    let dir = tempfile::tempdir().unwrap();
    let lua = lua_copy(dir.path(), "keeping-clean", "clean", |source| {
        let line = "    redis.call('DEL', key)\n";
        assert!(source.contains(line), "clean.lua's DEL moved; update this test");
        source.replace(line, "")
    });
    let result = run(args(dir.path(), RETAINED, server.url(), Some(lua)), std::future::pending()).await.unwrap();
    assert_eq!(result.outcome, CommandOutcome::Failed, "a row kept after its retirement passed");
    let found = &result.summary.check.as_ref().expect("a check").by_invariant;
    assert!(found.get("I1").is_some_and(|&n| n > 0), "no row kept after its retirement named: {found:?}");
}

/// The distinct jobs `history.bin` (every segment) keeps events of, and those of them with an
/// enqueue and an accepted retirement.
fn kept_jobs(out: &Path) -> (usize, usize) {
    use emq_bench::history::{History, Kind};
    let (header, streams) = emq_bench::history::file::load(&out.join("history.bin")).unwrap();
    let history = History::merge(header, &streams).unwrap();
    let jobs: Vec<&[emq_bench::history::Event]> = history.per_job().collect();
    let retired = jobs
        .iter()
        .filter(|events| {
            events.iter().any(|e| e.kind == Kind::Enqueue)
                && events.iter().any(|e| e.kind == Kind::Retire && e.outcome.accepted())
        })
        .count();
    (jobs.len(), retired)
}

/// `--keep-history violations`: the run checks clean, and its history keeps no job the live
/// check passed once retired (every retired job of this run), only the others.
#[tokio::test(flavor = "current_thread")]
async fn keeping_only_violations_drops_every_retired_job_that_passed_and_still_checks_clean() {
    let server = server();
    let dir = tempfile::tempdir().unwrap();
    let args = RunArgs {
        keep_history: emq_bench::history::KeepHistory::Violations,
        ..args(dir.path(), RETAINED, server.url(), None)
    };
    let result = run(args, std::future::pending()).await.unwrap();
    assert_eq!(result.outcome, CommandOutcome::Success, "{:?}", result.failures);
    let jobs = &result.summary.jobs;
    let (enqueued, retired) = (jobs["enqueued"], jobs["retired"]);
    assert!(retired > 0, "clean removed nothing: {jobs:?}");
    let (kept, kept_retired) = kept_jobs(&dir.path().join("out"));
    assert_eq!(kept_retired, 0, "a retired job that passed was kept");
    assert!((kept as u64) < enqueued, "nothing was dropped: {kept} jobs kept of {enqueued}");
    assert_eq!(job_rows(&server).await as u64, enqueued - retired, "{jobs:?}");
    let check = result.summary.check.as_ref().expect("a check");
    assert_eq!(check.violations_total, 0, "{check:?}");
}

/// A `clean` that names rows it keeps passes the live check (the history alone looks right),
/// so its jobs' events are dropped; the rows left are still found at the end.
#[tokio::test(flavor = "current_thread")]
async fn keeping_only_violations_still_catches_a_clean_that_names_rows_it_keeps() {
    let server = server();
    let dir = tempfile::tempdir().unwrap();
    let lua =
        lua_copy(dir.path(), "keeping-clean", "clean", |source| source.replace("    redis.call('DEL', key)\n", ""));
    let args = RunArgs {
        keep_history: emq_bench::history::KeepHistory::Violations,
        ..args(dir.path(), RETAINED, server.url(), Some(lua))
    };
    let result = run(args, std::future::pending()).await.unwrap();
    assert_eq!(result.outcome, CommandOutcome::Failed, "a row kept after its retirement passed");
    let found = &result.summary.check.as_ref().expect("a check").by_invariant;
    assert!(found.get("I1").is_some_and(|&n| n > 0), "no row kept after its retirement named: {found:?}");
}

/// Without retention nothing is ever retired, so nothing could be dropped: refused before
/// anything starts.
#[tokio::test(flavor = "current_thread")]
async fn keeping_only_violations_without_retention_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = RETAINED.replace("clean = \"20ms\"\n", "");
    let args = RunArgs {
        keep_history: emq_bench::history::KeepHistory::Violations,
        ..args(dir.path(), &scenario, "redis://127.0.0.1:1".into(), None)
    };
    let Err(err) = run(args, std::future::pending()).await else {
        panic!("--keep-history violations ran without retention")
    };
    assert_eq!(err.exit_code(), 2, "{err}");
    assert!(err.to_string().contains("set [maintenance] clean"), "{err}");
}
