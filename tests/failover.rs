//! Following a failover: an embedded 3-primary × 1-replica cluster (node timeout 2 s) under
//! the fencing soak, and a SIGKILL of the primary that serves the first queue. The run follows
//! the cluster to the promoted replica, its check runs at the end, and the calls of the first
//! queue succeed on the new primary. Whatever the check finds is what the failover did (lost
//! acknowledged writes are the expected finding); the same run without the kill checks clean.

mod support;

use emq_bench::cmd::run::run;
use emq_bench::server::Role;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::cluster::Cluster;

/// The fencing soak, as shipped (three queues: one per primary).
fn soak() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/fencing-soak.toml")
}

/// EVALSHA calls `node` has served (INFO commandstats).
async fn evalsha_calls(node: &emq_bench::server::EmbeddedServer) -> u64 {
    let Ok(client) = redis::Client::open(node.url()) else { return 0 };
    let Ok(mut conn) = client.get_multiplexed_async_connection().await else { return 0 };
    let info: String = redis::cmd("INFO").arg("commandstats").query_async(&mut conn).await.unwrap_or_default();
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The enqueue calls that succeeded in each second of the run (intervals.csv).
fn enqueue_ok_per_second(dir: &Path) -> Vec<u64> {
    let mut rows = csv::Reader::from_path(dir.join("intervals.csv")).unwrap();
    let headers = rows.headers().unwrap().clone();
    let column = |name: &str| headers.iter().position(|h| h == name).unwrap();
    let (script, ok) = (column("script"), column("ok"));
    rows.records().map(|r| r.unwrap()).filter(|r| &r[script] == "enqueue").map(|r| r[ok].parse().unwrap()).collect()
}

/// The soak for `secs` on a fresh 3×1 cluster, its URL that of the primary serving the first
/// queue; `kill_after` SIGKILLs that primary. Returns the result, the out dir, and (with a
/// kill) the seconds from the kill until the promoted replica served its first script call.
async fn soak_on_cluster(
    secs: u64,
    kill_after: Option<Duration>,
) -> (emq_bench::cmd::session::RepResult, tempfile::TempDir, Option<f64>) {
    let tmp = tempfile::tempdir().unwrap();
    let cluster = Cluster::replicated(3, 1, Duration::from_secs(2)).await;
    // The queues are spread over the primaries in address order: the first queue lands on the
    // primary with the lowest port.
    let primaries: Vec<usize> = (0..3).collect();
    let victim = *primaries.iter().min_by_key(|&&i| cluster.node(i).port()).unwrap();
    let replica = (0..cluster.ids.len())
        .find(|&i| cluster.inner.nodes()[i].role == Role::Replica { of: victim })
        .expect("a replica of the victim");
    let mut a = support::run_args(&soak(), tmp.path());
    a.url = Some(cluster.node(victim).url());
    a.duration = Some(Duration::from_secs(secs));
    let killer = async {
        let after = kill_after?;
        tokio::time::sleep(after).await;
        let pid = cluster.node(victim).pid() as libc::pid_t;
        // SAFETY: kill(2) on a child process of this test; no memory is touched.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        let killed = Instant::now();
        let before = evalsha_calls(cluster.node(replica)).await;
        while killed.elapsed() < Duration::from_secs(20) {
            if evalsha_calls(cluster.node(replica)).await > before {
                return Some(killed.elapsed().as_secs_f64());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    };
    let (result, recovered) = tokio::join!(run(a, std::future::pending()), killer);
    (result.unwrap(), tmp, recovered)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_primary_is_followed_to_its_promoted_replica_and_the_check_runs() {
    let (result, tmp, recovered) = soak_on_cluster(14, Some(Duration::from_secs(4))).await;
    let summary = &result.summary;
    eprintln!("{}", result.table);
    let recovered = recovered.expect("the promoted replica never served a script call");
    eprintln!("the first queue's calls succeed again {recovered:.2} s after the kill");
    let check = summary.check.as_ref().unwrap_or_else(|| panic!("no check ran: {:?}", result.failures));
    eprintln!("the check after the failover: {} violation(s): {check:?}", check.violations_total);
    // The kill shows as refusals waited out (the dead node unreachable, CLUSTERDOWN), as
    // redirects to the promoted replica, or as reconnects.
    let seen: u64 = ["redirects", "reconnects", "refused_waited", "cluster_down_waited"]
        .iter()
        .map(|counter| summary.jobs[*counter])
        .sum();
    assert!(seen > 0, "no fault was seen: {:?}", summary.jobs);
    // The whole seconds only: a last row covers the sliver of a second between the run's
    // length and the last reply read, which may hold no enqueue at all.
    let per_second = enqueue_ok_per_second(tmp.path());
    let whole = &per_second[..per_second.len().min(summary.measured_secs.floor() as usize)];
    let last = &whole[whole.len().saturating_sub(3)..];
    assert!(last.len() == 3 && last.iter().all(|&n| n > 0), "enqueues stopped succeeding: {per_second:?}");
    assert!(summary.jobs["enqueued"] > 1000, "{:?}", summary.jobs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_soak_on_the_replicated_cluster_without_a_kill_checks_clean() {
    let (result, _tmp, _) = soak_on_cluster(6, None).await;
    let check = result.summary.check.as_ref().expect("a check ran");
    assert_eq!(check.violations_total, 0, "{check:?}\n{}", result.table);
    assert_eq!(result.outcome, emq_bench::cmd::CommandOutcome::Success, "{:?}\n{}", result.failures, result.table);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scenario_with_target_cluster_starts_its_own_replicated_cluster_and_checks_clean() {
    let tmp = tempfile::tempdir().unwrap();
    let mut soak: toml::Table = std::fs::read_to_string(soak()).unwrap().parse().unwrap();
    let cluster: toml::Table = "cluster = { primaries = 3, replicas = 1, node_timeout = \"2s\" }".parse().unwrap();
    soak.insert("target".into(), cluster.into());
    let path = tmp.path().join("cluster-soak.toml");
    std::fs::write(&path, toml::to_string(&soak).unwrap()).unwrap();
    let mut a = support::run_args(&path, tmp.path());
    a.duration = Some(Duration::from_secs(3));
    let result = run(a, std::future::pending()).await.unwrap();
    assert_eq!(result.outcome, emq_bench::cmd::CommandOutcome::Success, "{:?}\n{}", result.failures, result.table);
    let topology = &result.summary.target.topology;
    assert_eq!(topology.kind, emq_bench::net::topology::Kind::Cluster);
    assert_eq!(topology.nodes.len(), 3, "three primaries: {topology:?}");
    assert!(result.summary.target.embedded);
    assert_eq!(result.summary.check.as_ref().expect("a check ran").violations_total, 0);
}

/// `scenarios/failover.toml` as a CI job would gate on it: its `[thresholds]` bound what each
/// fault may do. A bound tightened below what the kill lost (a lag of 300 ms with replication
/// asynchronous loses acknowledged enqueues) fails the run, naming the effect, the fault and
/// its queue as the run names it; the fault line under the table names that queue too. With
/// the shipped bounds its violations pass: none is outside what a fault threshold judges.
#[test]
fn a_fault_threshold_tightened_below_what_the_kill_lost_fails_naming_the_effect_and_the_queue() {
    let tmp = tempfile::tempdir().unwrap();
    let shipped = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/failover.toml");
    let mut scenario: toml::Table = std::fs::read_to_string(&shipped).unwrap().parse().unwrap();
    let thresholds = scenario["thresholds"].as_table_mut().expect("failover.toml bounds its faults");
    assert!(thresholds.contains_key("fault.lost_enqueues"), "{thresholds:?}");
    thresholds.insert("fault.lost_enqueues".into(), "== 0".into());
    let path = tmp.path().join("failover-tight.toml");
    std::fs::write(&path, toml::to_string(&scenario).unwrap()).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_emq-bench"))
        .arg("run")
        .arg(&path)
        .arg("--out")
        .arg(tmp.path().join("results"))
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    let dir = tmp.path().join("results");
    let summary = emq_bench::report::run_summary::RunSummary::read(&dir.join("summary.json")).unwrap();
    let kill = summary.faults.injected.iter().find(|f| f.kind.name() == "kill-primary").expect("the kill");
    let queue = kill.queue.as_deref().expect("the kill names its queue");
    assert!(queue.ends_with(" (queue 1 of 3)"), "{queue}");
    let name = queue.split(' ').next().unwrap();
    let queues: Vec<&String> = summary.target.topology.nodes.iter().flat_map(|n| &n.queues).collect();
    assert!(queues.iter().any(|q| *q == name), "{name} is one of the run's queues {queues:?}");
    assert!(stdout.contains("fault injected: kill-primary "), "{stdout}");
    assert!(stdout.contains(&format!("on queue {queue}")), "{stdout}");
    let lost = kill.effects.as_ref().expect("the check attributed the kill's effects").lost_enqueues;
    assert!(lost > 0, "the kill lost no acknowledged enqueue: {stdout}");
    let line = format!("FAIL threshold fault.lost_enqueues == 0 failed: {lost} (kill-primary at ");
    assert!(stderr.contains(&line), "{stderr}");
    let result = summary.thresholds.iter().find(|t| t.key == "fault.lost_enqueues").unwrap();
    assert!(!result.passed && result.fault.as_deref().is_some_and(|f| f.starts_with("kill-primary at")));
    // With the shipped bounds the same violations pass: every one is a fault's (in its window,
    // or found again with no time of its own in the end state of a job whose finding of the
    // same effect is in it), every other fault threshold held, and what the kill lost is within
    // the shipped `<= 80`. (Other findings a loaded box may cause, a rate not held or a drain
    // not finished, are not this test's.)
    let findings = &summary.verdict.as_ref().expect("a verdict").findings;
    let invariants = std::fs::read_to_string(dir.join("invariants.json")).unwrap_or_default();
    let outside = findings.iter().filter(|f| f.kind == emq_bench::verdict::FindingKind::Violations);
    assert_eq!(outside.count(), 0, "{findings:?}\n{invariants}");
    let faults = summary.thresholds.iter().filter(|t| t.key.starts_with("fault.") && t.key != "fault.lost_enqueues");
    assert!(faults.clone().all(|t| t.passed), "{stdout}");
    assert!(lost <= 80, "the kill lost {lost} acknowledged enqueues, over the shipped bound: {stdout}");
}

/// A repetition starts on the whole cluster: a primary killed by the repetition before is
/// started again and rejoins as a replica of the node promoted in its place, so the next
/// repetition's kill finds a primary with its replicas (one left without a replica is never
/// failed over, and its slots stay down). Nothing to restore is a no-op.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_node_is_started_again_as_a_replica_before_the_next_repetition() {
    let mut cluster = Cluster::replicated(3, 1, Duration::from_secs(1)).await;
    assert_eq!(cluster.inner.restore().unwrap(), 0, "nothing was killed");
    cluster.inner.nodes_mut()[0].server.kill();
    // Its replica (node 3: the replicas follow the primaries, in primary order) takes over
    // within about the node timeout.
    assert_eq!(cluster.inner.nodes()[3].role, Role::Replica { of: 0 });
    let mut replica = support::cluster::conn(cluster.node(3)).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let info: String = redis::cmd("INFO").arg("replication").query_async(&mut replica).await.unwrap();
        if info.contains("role:master") {
            break;
        }
        assert!(Instant::now() < deadline, "node 0's replica was never promoted: {info}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(cluster.inner.restore().unwrap(), 1);
    let mut conn = support::cluster::conn(cluster.node(0)).await;
    let replication: String = redis::cmd("INFO").arg("replication").query_async(&mut conn).await.unwrap();
    assert!(replication.contains("role:slave") && replication.contains("master_link_status:up"), "{replication}");
    let info: String = redis::cmd("CLUSTER").arg("INFO").query_async(&mut conn).await.unwrap();
    assert!(info.contains("cluster_state:ok"), "{info}");
}
