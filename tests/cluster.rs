//! Valkey Cluster, on loopback: a 3-primary cluster of real valkey-server processes. The
//! fencing soak runs with queues on every primary and zero violations; a queue's slot migrated
//! to another primary mid-run is followed (MOVED/ASK/TRYAGAIN counted as redirects, never as
//! errors) and the run still checks clean.

mod support;

use emq_bench::cmd::run::run;
use emq_bench::cmd::CommandOutcome;
use std::path::{Path, PathBuf};
use std::time::Duration;
use support::cluster::Cluster;

/// The fencing soak with `queues` queues, as a file in `dir`.
fn soak(dir: &Path, queues: i64) -> PathBuf {
    let shipped = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/fencing-soak.toml");
    let mut soak: toml::Table = std::fs::read_to_string(shipped).unwrap().parse().unwrap();
    soak.insert("queues".into(), queues.into());
    let path = dir.join("cluster-soak.toml");
    std::fs::write(&path, toml::to_string(&soak).unwrap()).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fencing_soak_runs_on_a_3_primary_cluster_with_queues_on_every_primary() {
    let tmp = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(3).await;
    let mut a = support::run_args(&soak(tmp.path(), 3), tmp.path());
    a.url = Some(cluster.url());
    a.duration = Some(Duration::from_secs(4));
    let result = run(a, std::future::pending()).await.unwrap();
    assert_eq!(result.outcome, CommandOutcome::Success, "{:?}\n{}", result.failures, result.table);
    let topology = &result.summary.target.topology;
    assert_eq!(topology.kind, emq_bench::net::topology::Kind::Cluster);
    assert_eq!(topology.nodes.len(), 3, "{topology:?}");
    for node in &topology.nodes {
        assert_eq!(node.queues.len(), 1, "one queue on each primary: {topology:?}");
        assert!(node.info_before.is_some() && node.info_after.is_some(), "INFO per node: {node:?}");
        let evalsha = node.info_after.as_ref().unwrap().commandstats.get("evalsha").map_or(0, |s| s.calls);
        assert!(evalsha > 100, "{} served {evalsha} EVALSHA", node.address);
    }
    assert!(result.table.contains("cluster of 3 node(s)"), "{}", result.table);
    let check = result.summary.check.as_ref().expect("a check ran");
    assert_eq!(check.violations_total, 0, "{check:?}");
    assert!(result.summary.jobs["enqueued"] > 500, "{:?}", result.summary.jobs);
    assert_eq!(result.summary.jobs["redirects"], 0, "no slot moved, so nothing was redirected");
    // The server sampled on every node, one row per node per second of the run.
    let mut rows = csv::Reader::from_path(tmp.path().join("server.csv")).unwrap();
    let nodes: Vec<String> = rows.records().map(|r| r.unwrap()[1].to_string()).collect();
    let seconds = (result.summary.measured_secs).round() as usize;
    for node in &topology.nodes {
        let n = nodes.iter().filter(|a| **a == node.address).count();
        assert!(n.abs_diff(seconds) <= 1, "{} has {n} rows in a {seconds} s run", node.address);
    }
    support::assert_offline_page(&tmp.path().join("report.html"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_migrated_mid_run_is_followed_and_the_run_checks_clean() {
    let tmp = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(3).await;
    let mut a = support::run_args(&soak(tmp.path(), 3), tmp.path());
    a.url = Some(cluster.url());
    a.duration = Some(Duration::from_secs(5));
    let migrator = async {
        tokio::time::sleep(Duration::from_millis(2000)).await;
        // The queue on node 0: its run lock names it; its slot goes to node 1.
        let mut conn = support::cluster::conn(cluster.node(0)).await;
        let (_, locks): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(0)
            .arg("MATCH")
            .arg("emq-lock:*")
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut conn)
            .await
            .unwrap();
        let lock = locks.first().expect("a queue on node 0").clone();
        let slot: u16 = redis::cmd("CLUSTER").arg("KEYSLOT").arg(&lock).query_async(&mut conn).await.unwrap();
        assert_eq!(cluster.owner(slot).await, 0);
        let moved = cluster.migrate_slot(slot, 0, 1).await;
        assert_eq!(cluster.owner(slot).await, 1);
        moved
    };
    let (result, moved) = tokio::join!(run(a, std::future::pending()), migrator);
    let result = result.unwrap();
    assert!(moved > 10, "only {moved} keys moved");
    assert_eq!(result.outcome, CommandOutcome::Success, "{:?}\n{}", result.failures, result.table);
    let jobs = &result.summary.jobs;
    assert!(jobs["redirects"] > 0, "the migration was not seen: {jobs:?}");
    let errors: u64 = result.summary.scripts.iter().map(|s| s.errors.get("server").copied().unwrap_or(0)).sum();
    assert_eq!(errors, 0, "redirects were counted as errors: {:?}", result.summary.scripts);
    let check = result.summary.check.as_ref().expect("a check ran");
    assert_eq!(check.violations_total, 0, "{check:?}");
    assert!(result.summary.drained);
}
