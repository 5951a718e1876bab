//! No false success (issue 10, item 1): a run whose calls all fail exits 1 saying which script,
//! its latency columns show a dash instead of 0.000, and a read-only replica is refused up
//! front instead of running a benchmark of refusals.

mod support;

use emq_bench::cmd::run::run;
use emq_bench::cmd::CommandOutcome;
use emq_bench::server::{EmbeddedServer, ServerOptions};
use std::path::PathBuf;
use std::time::Duration;

fn smoke() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/smoke.toml")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_enqueues_all_fail_is_a_failure_naming_the_script() {
    let tmp = tempfile::tempdir().unwrap();
    let gate = "if string.sub(ARGV[1] or '', 1, 3) ~= 'JOB' then";
    let lua = support::lua_copy(tmp.path(), "lua-broken", "enqueue", |source| {
        assert!(source.contains(gate), "enqueue.lua changed; update this test");
        source.replacen(gate, "do return redis.error_reply('ERR broken on purpose') end\nif false then", 1)
    });
    let mut a = support::run_args(&smoke(), &tmp.path().join("out"));
    a.lua_dir = Some(lua);
    a.duration = Some(Duration::from_secs(1));
    let result = run(a, std::future::pending()).await.unwrap();
    assert_eq!(result.outcome, CommandOutcome::Failed);
    support::assert_verdict_in_summary(&result);
    let said = result.failures.join("\n");
    assert!(said.contains("enqueue:") && said.contains("none succeeded"), "{said}");
    // (smoke's delayed jobs still go through enqueue_delayed, so jobs were enqueued.)
    let row = result.table.lines().find(|l| l.starts_with("enqueue ")).unwrap();
    assert!(row.contains('–') && !row.contains("0.000"), "{row}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_replica_is_refused_before_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    let primary = support::server();
    let replica_of = format!("127.0.0.1 {}", primary.port());
    let options = ServerOptions { config: vec![("replicaof".into(), replica_of)], ..ServerOptions::default() };
    let replica = EmbeddedServer::start(&options).unwrap();
    let mut a = support::run_args(&smoke(), &tmp.path().join("out"));
    a.url = Some(replica.url());
    let err = run(a, std::future::pending()).await.err().expect("refused");
    assert_eq!(err.exit_code(), 2, "{err}");
    assert!(err.to_string().contains("READONLY"), "{err}");
}
