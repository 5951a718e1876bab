//! The nemesis on a replicated cluster: `kill-primary` and `cluster-failover` on an embedded
//! 3-primary × 1-replica cluster (node timeout 2 s) under the fencing soak. Each fault is shown
//! where loss is expected (a lag cuts the replicas off first, so the primary alone holds what
//! it acknowledges) and where it is not (a default-mode CLUSTER FAILOVER hands over every
//! write), so the checker is proven to see it. The refusals are exit 2 naming the field.
//!
//! The runs start nine processes each and share a 2-core box with the rest of the suite: they
//! take turns ([`SERIAL`]), so none starves another's failover of CPU.

mod support;

use emq_bench::cmd::run::{run, RepResult};
use emq_bench::cmd::CommandOutcome;
use emq_bench::faults::FaultSpan;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// One cluster run at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The fencing soak as shipped (three queues, one per primary; 400 jobs/s), on an embedded
/// 3×1 cluster, for `secs`, with `faults` appended.
fn soak(dir: &Path, secs: u64, faults: &str, wait: &str) -> PathBuf {
    let shipped = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/fencing-soak.toml");
    let mut soak: toml::Table = std::fs::read_to_string(shipped).unwrap().parse().unwrap();
    let target = format!("cluster = {{ primaries = 3, replicas = 1, node_timeout = \"2s\" }}\n{wait}");
    let target: toml::Table = target.parse().unwrap();
    soak.insert("target".into(), target.into());
    soak.insert("duration".into(), format!("{secs}s").into());
    let text = format!("{}\n{faults}", toml::to_string(&soak).unwrap());
    let path = dir.join("cluster-soak.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs `faults` on the soak for 14 s (the fault at about 4 s), one run at a time.
async fn soak_with(faults: &str) -> (RepResult, tempfile::TempDir) {
    soak_waiting(faults, "").await
}

/// [`soak_with`] with `wait` (a `[target]` line: `wait = { ... }`, or empty).
async fn soak_waiting(faults: &str, wait: &str) -> (RepResult, tempfile::TempDir) {
    let _turn = SERIAL.lock().await;
    let tmp = tempfile::tempdir().unwrap();
    let path = soak(tmp.path(), 14, faults, wait);
    let began = Instant::now();
    let result = run(support::run_args(&path, &tmp.path().join("out")), std::future::pending()).await.unwrap();
    eprintln!("{}\nthe run took {:.1} s", result.table, began.elapsed().as_secs_f64());
    (result, tmp)
}

/// The one injected span of `kind`.
fn span<'a>(result: &'a RepResult, kind: &str) -> &'a FaultSpan {
    let injected = &result.summary.faults.injected;
    let mut of_kind = injected.iter().filter(|s| s.kind.name() == kind);
    let span = of_kind.next().unwrap_or_else(|| panic!("no {kind} span: {injected:?}"));
    assert!(of_kind.next().is_none(), "one {kind} span: {injected:?}");
    span
}

/// The violations invariants.json lists per invariant (`I7`, ...).
fn by_invariant(result: &RepResult) -> std::collections::BTreeMap<String, u64> {
    let check = result.summary.check.as_ref().unwrap_or_else(|| panic!("no check ran: {:?}", result.failures));
    check.by_invariant.iter().map(|(k, v)| (k.clone(), *v as u64)).collect()
}

/// Sums the violations of the invariants whose names start with one of `prefixes`.
fn among(found: &std::collections::BTreeMap<String, u64>, prefixes: &[&str]) -> u64 {
    found.iter().filter(|(k, _)| prefixes.iter().any(|p| k.starts_with(p))).map(|(_, v)| v).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_default_cluster_failover_hands_over_every_write_and_checks_clean() {
    let (result, _tmp) = soak_with("[[faults]]\nkind = \"cluster-failover\"\nat = \"4s\"\n").await;
    let failover = span(&result, "cluster-failover");
    assert!(failover.applied, "{failover:?}");
    assert!(failover.detail.starts_with("CLUSTER FAILOVER to 127.0.0.1:"), "{failover:?}");
    assert!(failover.detail.contains(" promoted, seen at "), "{failover:?}");
    let check = result.summary.check.as_ref().expect("a check ran");
    assert_eq!(check.violations_total, 0, "{:?}", by_invariant(&result));
    assert_eq!(result.outcome, CommandOutcome::Success, "{:?}", result.failures);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_killed_after_a_replication_lag_loses_what_it_alone_acknowledged() {
    let faults = "[[faults]]\nkind = \"kill-primary\"\nat = \"4s\"\nlag = \"300ms\"\n";
    let (result, tmp) = soak_with(faults).await;
    let kill = span(&result, "kill-primary");
    assert!(kill.applied, "{kill:?}");
    assert!(kill.detail.contains("after a 300 ms replication cut (1 replica(s) frozen, 1 link(s) killed)"), "{kill:?}");
    let page = std::fs::read_to_string(tmp.path().join("out/report.html")).unwrap();
    assert!(page.contains("<h2>Faults and their effects</h2>"), "report.html has no failover table");
    assert!(kill.detail.contains(" promoted, seen at "), "{kill:?}");
    let found = by_invariant(&result);
    eprintln!("kill-primary with a 300 ms lag: {found:?}");
    assert!(among(&found, &["I5", "I6", "I7"]) > 0, "no loss seen: {found:?}");
    assert_eq!(result.outcome, CommandOutcome::Failed, "{:?}", result.failures);
    // The losses are the fault's: its window holds the evidence, and names the jobs.
    let effects = kill.effects.as_ref().unwrap_or_else(|| panic!("no effects attributed: {kill:?}"));
    let attributed = effects.lost_enqueues + effects.reissued_tokens + effects.fencing_violations;
    assert!(attributed > 0 && !effects.jobs.is_empty(), "{effects:?} of {found:?}");
    assert!(result.table.contains("  its effects: "), "{}", result.table);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_wait_for_a_replica_the_same_kill_loses_nothing_acknowledged() {
    // The killed node comes back as a replica, so the promoted shard has one to WAIT for.
    let faults =
        "[[faults]]\nkind = \"kill-primary\"\nat = \"4s\"\nlag = \"300ms\"\nrestart = true\nduration = \"3s\"\n";
    let (result, _tmp) = soak_waiting(faults, "wait = { replicas = 1, timeout = \"100ms\" }").await;
    let kill = span(&result, "kill-primary");
    assert!(kill.applied, "{kill:?}");
    assert!(
        result.table.contains("durability: each call acknowledged after WAIT 1 replica(s), 100 ms"),
        "{}",
        result.table
    );
    assert_eq!(result.summary.target.durability, "acknowledged after WAIT 1 replica(s), 100 ms");
    let found = by_invariant(&result);
    eprintln!("kill-primary with a 300 ms lag, WAIT 1: {found:?}");
    let check = result.summary.check.as_ref().expect("a check ran");
    assert_eq!(check.violations_total, 0, "{found:?}");
    // The calls the lag kept from the replica were not acknowledged: unknown, never lost.
    let effects = kill.effects.as_ref().unwrap_or_else(|| panic!("no effects attributed: {kill:?}"));
    assert!(effects.unknown_outcomes > 0, "{effects:?}");
    assert_eq!(result.outcome, CommandOutcome::Success, "{:?}", result.failures);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_after_a_replication_lag_loses_writes() {
    let faults = "[[faults]]\nkind = \"cluster-failover\"\nat = \"4s\"\nmode = \"takeover\"\nlag = \"300ms\"\n";
    let (result, _tmp) = soak_with(faults).await;
    let takeover = span(&result, "cluster-failover");
    assert!(takeover.applied, "{takeover:?}");
    assert!(takeover.detail.starts_with("CLUSTER FAILOVER TAKEOVER to "), "{takeover:?}");
    let found = by_invariant(&result);
    eprintln!("takeover with a 300 ms lag: {found:?}");
    assert!(among(&found, &["I5", "I6", "I7"]) > 0, "no loss seen: {found:?}");
    assert_eq!(result.outcome, CommandOutcome::Failed, "{:?}", result.failures);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_primary_restarted_rejoins_as_a_replica_and_the_run_is_checked() {
    let faults = "[[faults]]\nkind = \"kill-primary\"\nat = \"4s\"\nrestart = true\nduration = \"3s\"\n";
    let (result, _tmp) = soak_with(faults).await;
    let kill = span(&result, "kill-primary");
    assert!(kill.applied, "{kill:?}");
    // The killed node's address, and the promoted one it now replicates.
    let killed = kill.detail.strip_prefix("SIGKILL of ").and_then(|d| d.split(' ').next()).expect("the killed node");
    let promoted =
        kill.detail.split(" promoted, ").next().and_then(|d| d.rsplit(' ').next()).expect("the promoted node");
    assert_ne!(killed, promoted, "{kill:?}");
    assert!(kill.detail.contains(&format!("a replica of {promoted} ")), "{kill:?}");
    assert!(kill.to_s - kill.from_s >= 3.0, "the span lasts until the restart: {kill:?}");
    assert!(result.summary.check.is_some(), "no check ran: {:?}", result.failures);
    assert!(result.summary.verdict.is_some(), "no verdict");
}

/// A run of the binary with `scenario`; its exit code and stderr.
fn refused(scenario: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_emq-bench"))
        .args(["run", "--quiet"])
        .arg(scenario)
        .args(extra)
        .output()
        .unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn cluster_faults_out_of_place_are_refused_naming_the_field() {
    let tmp = tempfile::tempdir().unwrap();
    let cluster = "[target]\ncluster = { primaries = 3, replicas = 1 }\n";
    let cases = [
        ("", "kind = \"kill-primary\"\nat = \"1s\"\n", "faults[0].kind", "expected the embedded cluster"),
        (cluster, "kind = \"kill-primary\"\nat = \"1s\"\nqueue = \"jobs\"\n", "faults[0].queue", "bench-0, bench-1"),
        (
            "",
            "kind = \"pause\"\nat = \"1s\"\nduration = \"1s\"\nmode = \"force\"\n",
            "faults[0].mode",
            "\"write\" or \"all\"",
        ),
        (cluster, "kind = \"kill-primary\"\nat = \"1s\"\nrestart = true\n", "faults[0].duration", "stays down"),
    ];
    for (target, fault, field, expected) in cases {
        let path = tmp.path().join("refused.toml");
        let text = format!("name = \"refused\"\nseed = 1\nduration = \"3s\"\nqueues = 3\n{target}[[faults]]\n{fault}");
        std::fs::write(&path, &text).unwrap();
        let (code, stderr) = refused(&path, &[]);
        assert_eq!(code, Some(2), "{text}\n{stderr}");
        assert!(stderr.contains(field) && stderr.contains(expected), "{text}\n{stderr}");
    }
    // A lag freezes processes the harness started: --url names a cluster it did not.
    let path = tmp.path().join("lag.toml");
    let fault = "kind = \"cluster-failover\"\nat = \"1s\"\nmode = \"takeover\"\nlag = \"300ms\"\n";
    std::fs::write(&path, format!("name = \"lag\"\nseed = 1\nduration = \"3s\"\n{cluster}[[faults]]\n{fault}"))
        .unwrap();
    let (code, stderr) = refused(&path, &["--url", "redis://127.0.0.1:1/"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("faults[0].lag") && stderr.contains("--url names another target"), "{stderr}");
}

#[test]
fn a_wait_that_could_never_be_acknowledged_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: [(&str, &[&str], &str); 4] = [
        ("wait = { replicas = 1 }\n", &[], "the embedded server has no replica"),
        ("cluster = { primaries = 3, replicas = 1 }\nwait = { replicas = 2 }\n", &[], "1 replica(s) per primary"),
        ("cluster = { primaries = 3, replicas = 1 }\nwait = {}\n", &["--transport", "redis-rs"], "sends no WAIT"),
        ("wait = { timeout = \"0ms\" }\n", &[], "target.wait.timeout"),
    ];
    for (target, extra, expected) in cases {
        let path = tmp.path().join("wait.toml");
        let text = format!("name = \"wait\"\nseed = 1\nduration = \"3s\"\n[target]\n{target}");
        std::fs::write(&path, &text).unwrap();
        let (code, stderr) = refused(&path, extra);
        assert_eq!(code, Some(2), "{text}\n{stderr}");
        assert!(stderr.contains(expected), "{text}\n{stderr}");
    }
}
