//! A fleet of shards on one loopback server, as `scripts/fleet` and a Kubernetes Indexed Job
//! run it: separate processes, each with its `JOB_COMPLETION_INDEX`, meeting at the barrier on
//! the target, each writing `shard-NNN/`, the last one merging them.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use emq_bench::report::hlog::read_log;
use emq_bench::report::run_summary::RunSummary;

/// Starts shard `index` of `shards` of `group` on `url` (the fencing soak, 3 s), writing under
/// `out`.
fn shard(url: &str, index: u32, shards: u32, group: &str, out: &Path, extra: &[&str]) -> Child {
    shard_of("fencing-soak", url, index, shards, group, out, extra)
}

/// [`shard`] of `scenario` (a shipped name or a file).
fn shard_of(scenario: &str, url: &str, index: u32, shards: u32, group: &str, out: &Path, extra: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_emq-bench"))
        .args(["run", scenario, "--quiet", "--duration", "3s", "--url", url])
        .args(["--shards", &shards.to_string(), "--group", group, "--out"])
        .arg(out)
        .args(extra)
        .env("JOB_COMPLETION_INDEX", index.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start emq-bench")
}

/// Waits (up to 60 s) until shard `index` of `group` has arrived at the barrier on `url`: a
/// loaded machine may take seconds to start a process, and the tests below need one shard
/// waiting before the next arrives.
fn wait_arrived(url: &str, group: &str, index: u32) {
    let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
    let key = format!("emq-fleet:{{{group}}}:arrived");
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < until {
        let there: bool = redis::cmd("HEXISTS").arg(&key).arg(index).query(&mut conn).unwrap();
        if there {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("shard {index} of {group} never arrived at the barrier");
}

/// Three shards of `group` on `url` with `extra` flags, writing under `out`, run to their end
/// off the test's runtime (the cluster's nodes live on it); their outputs by index.
async fn fleet_of_three(url: String, group: &'static str, out: &Path, extra: &[&'static str]) -> Vec<Output> {
    let (out, extra) = (out.to_path_buf(), extra.to_vec());
    tokio::task::spawn_blocking(move || {
        let children: Vec<Child> = (0..3).map(|i| shard(&url, i, 3, group, &out, &extra)).collect();
        children.into_iter().map(|c| c.wait_with_output().unwrap()).collect()
    })
    .await
    .unwrap()
}

/// `emq-bench merge DIR --out OUT`.
fn merge(dir: &Path, out: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_emq-bench")).arg("merge").arg(dir).arg("--out").arg(out).output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Three shards, the third started 3 s after the others: the barrier waits for it, all start
/// within a few ms of one `t0`, and the last to finish merges. The merged counters are the
/// shards' sums, each merged histogram is the histogram of every shard's values together, and
/// the fleet's check finds no violation.
#[test]
fn a_fleet_of_three_starts_together_and_merges_exactly() {
    let server = support::server();
    let tmp = tempfile::tempdir().unwrap();
    let mut children = vec![
        shard(&server.url(), 0, 3, "together", tmp.path(), &[]),
        shard(&server.url(), 1, 3, "together", tmp.path(), &[]),
    ];
    std::thread::sleep(std::time::Duration::from_secs(3));
    children.push(shard(&server.url(), 2, 3, "together", tmp.path(), &[]));
    let outputs: Vec<Output> = children.into_iter().map(|c| c.wait_with_output().unwrap()).collect();
    for (i, out) in outputs.iter().enumerate() {
        assert_eq!(out.status.code(), Some(0), "shard {i}: {}", stderr(out));
    }
    let shards: Vec<RunSummary> =
        (0..3).map(|i| RunSummary::read(&tmp.path().join(format!("shard-{i:03}/summary.json"))).unwrap()).collect();
    let t0 = shards[0].shard.as_ref().unwrap().t0_unix_ms;
    for (i, s) in shards.iter().enumerate() {
        let record = s.shard.as_ref().expect("a shard's record");
        assert_eq!((record.index, record.shards, record.t0_unix_ms), (i as u32, 3, t0), "one t0 for all");
        // The margin (2 s) covers the connections; a loaded box may still start a shard late,
        // but never by a margin's worth.
        assert!(record.start_offset_ms.abs() < 1_000.0, "shard {i} started {} ms off t0", record.start_offset_ms);
        assert!(s.target.topology.nodes[0].queues.iter().all(|q| q.starts_with(&format!("s{i}."))), "own queues");
    }
    assert!(shards[0].shard.as_ref().unwrap().waited_s >= 2.0, "shard 0 waited for the late shard 2");
    let merged_dir = tmp.path().join("merged");
    let merged = RunSummary::read(&merged_dir.join("summary.json")).expect("the last shard merged the fleet");
    let fleet = merged.fleet.as_ref().unwrap();
    assert_eq!((fleet.shards, fleet.merged.len(), fleet.missing.len()), (3, 3, 0));
    assert!(fleet.start_spread_ms < 1_000.0, "{}", fleet.start_spread_ms);
    assert_eq!(merged.passed(), Some(true), "{:?}", merged.verdict);
    for (name, total) in &merged.jobs {
        let sum: u64 = shards.iter().map(|s| s.jobs.get(name).copied().unwrap_or(0)).sum();
        assert_eq!(*total, sum, "jobs.{name}");
    }
    for script in &merged.scripts {
        let calls: u64 =
            shards.iter().flat_map(|s| &s.scripts).filter(|s| s.script == script.script).map(|s| s.calls).sum();
        assert_eq!(script.calls, calls, "{} calls", script.script);
    }
    let check = merged.check.as_ref().unwrap();
    assert_eq!(check.violations_total, 0);
    assert_eq!(check.checked_jobs as u64, merged.jobs["enqueued"]);
    // One histogram fed every shard's recorded values equals the merged one, tag by tag.
    let merged_log = read_log(&merged_dir.join("totals.hlog")).unwrap();
    let logs: Vec<_> =
        (0..3).map(|i| read_log(&tmp.path().join(format!("shard-{i:03}/totals.hlog"))).unwrap()).collect();
    assert!(!merged_log.is_empty());
    for entry in &merged_log {
        let mut fed = emq_bench::metrics::growable(emq_bench::metrics::new_histogram());
        for log in &logs {
            for e in log.iter().filter(|e| e.tag == entry.tag) {
                for v in e.histogram.iter_recorded() {
                    fed.record_n(v.value_iterated_to(), v.count_at_value()).unwrap();
                }
            }
        }
        assert_eq!(fed.len(), entry.histogram.len(), "{}", entry.tag);
        for q in [0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(fed.value_at_quantile(q), entry.histogram.value_at_quantile(q), "{} at {q}", entry.tag);
        }
    }
    assert!(std::fs::read_to_string(merged_dir.join("shards.csv")).unwrap().lines().count() == 4);
    // The fleet's report draws its per-second series (the shards' seconds added).
    support::assert_offline_page(&merged_dir.join("report.html"));
    let seconds = std::fs::read_to_string(merged_dir.join("intervals.csv")).unwrap();
    let enqueued_at_1: u64 = seconds
        .lines()
        .filter(|l| l.starts_with("1,enqueue,"))
        .map(|l| l.split(',').nth(2).unwrap().parse::<u64>().unwrap())
        .sum();
    let shards_at_1: u64 = (0..3)
        .flat_map(|i| {
            std::fs::read_to_string(tmp.path().join(format!("shard-{i:03}/intervals.csv")))
                .unwrap()
                .lines()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .filter(|l| l.starts_with("1,enqueue,"))
        .map(|l| l.split(',').nth(2).unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(enqueued_at_1, shards_at_1, "second 1's enqueues are the shards' together");
    // A shard that ran without the check cannot hide another shard's violations: the check is
    // summed over the shards that ran one, and the shard without one is said.
    let edited = tmp.path().join("edited");
    for i in 0..3 {
        let (from, to) = (tmp.path().join(format!("shard-{i:03}")), edited.join(format!("shard-{i:03}")));
        std::fs::create_dir_all(&to).unwrap();
        for name in ["summary.json", "totals.hlog", "scenario.toml", "shard.done"] {
            std::fs::copy(from.join(name), to.join(name)).unwrap();
        }
    }
    let edit = |i: u32, change: &dyn Fn(&mut serde_json::Value)| {
        let path = edited.join(format!("shard-{i:03}/summary.json"));
        let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        change(&mut v);
        std::fs::write(&path, v.to_string()).unwrap();
    };
    edit(0, &|v| v["check"] = serde_json::Value::Null);
    edit(1, &|v| v["check"]["violations_total"] = 3.into());
    let out = merge(&edited, &edited.join("m"));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("FAIL shard 0: ran without the invariant check"), "{}", stderr(&out));
    assert!(stderr(&out).contains("FAIL 3 invariant violations"), "{}", stderr(&out));
    // Shards of two fleets (another t0) are not one fleet: refused.
    edit(2, &|v| v["shard"]["t0_unix_ms"] = 1.into());
    let out = merge(&edited, &edited.join("m2"));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("not one fleet's shards"), "{}", stderr(&out));
    // A shard's folder gone: merging what is left is a partial fleet, which fails.
    std::fs::remove_file(tmp.path().join("shard-001/summary.json")).unwrap();
    let out = merge(tmp.path(), &tmp.path().join("partial"));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("FAIL fleet together incomplete: shard(s) 1 of 3 missing"), "{}", stderr(&out));
    support::assert_fail_lines_match_summary(&stderr(&out), &tmp.path().join("partial"));
}

/// A fleet of three on a 3-primary cluster: each shard's three queues spread over the
/// primaries (their names chosen with the shard's prefix), the shards merged, no violation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_on_a_3_primary_cluster_spreads_every_shard_over_the_primaries() {
    let cluster = support::cluster::Cluster::start(3).await;
    let tmp = tempfile::tempdir().unwrap();
    let outputs = fleet_of_three(cluster.url(), "cluster", tmp.path(), &[]).await;
    for (i, out) in outputs.iter().enumerate() {
        assert_eq!(out.status.code(), Some(0), "shard {i}: {}", stderr(out));
        let summary = RunSummary::read(&tmp.path().join(format!("shard-{i:03}/summary.json"))).unwrap();
        for node in &summary.target.topology.nodes {
            assert_eq!(node.queues.len(), 1, "shard {i}: one queue per primary: {:?}", summary.target.topology);
            assert!(node.queues[0].starts_with(&format!("s{i}.bench-")), "{:?}", node.queues);
        }
    }
    let merged = RunSummary::read(&tmp.path().join("merged/summary.json")).expect("merged");
    assert_eq!(merged.passed(), Some(true), "{:?}", merged.verdict);
    assert_eq!(merged.check.as_ref().unwrap().violations_total, 0);
    let queues: usize = merged.target.topology.nodes.iter().map(|n| n.queues.len()).sum();
    assert_eq!(queues, 9, "the merged topology lists every shard's queues: {:?}", merged.target.topology);
}

/// Two of three shards started: both give up at the barrier's timeout with exit 2, naming
/// the one that never came, and write no results folder.
#[test]
fn a_shard_that_never_arrives_fails_the_fleet_with_exit_2_naming_it() {
    let server = support::server();
    let tmp = tempfile::tempdir().unwrap();
    let extra = ["--barrier-timeout", "3s"];
    let first = shard(&server.url(), 0, 3, "alone", tmp.path(), &extra);
    wait_arrived(&server.url(), "alone", 0);
    let children = [first, shard(&server.url(), 1, 3, "alone", tmp.path(), &extra)];
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        // Shard 0 gives up first: then shard 1 waits for shards 0 and 2.
        let said = stderr(&out);
        assert!(
            said.contains("fleet alone: shard(s) 2 of 3 did not arrive")
                || said.contains("fleet alone: shard(s) 0, 2 of 3 did not arrive"),
            "{said}"
        );
    }
    assert!(!tmp.path().join("shard-000/summary.json").exists());
}

/// A shard whose configuration differs (another seed) is refused at the barrier (exit 2).
#[test]
fn a_shard_of_another_configuration_is_refused() {
    let server = support::server();
    let tmp = tempfile::tempdir().unwrap();
    let first = shard(&server.url(), 0, 2, "mixed", tmp.path(), &["--barrier-timeout", "3s"]);
    wait_arrived(&server.url(), "mixed", 0);
    let other = shard(&server.url(), 1, 2, "mixed", &tmp.path().join("b"), &["--seed", "5", "--barrier-timeout", "3s"]);
    let out = other.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("fleet mixed: shard 0 runs another configuration"), "{}", stderr(&out));
    let out = first.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2), "the first waits for shard 1 in vain: {}", stderr(&out));
    assert!(stderr(&out).contains("shard(s) 1 of 2 did not arrive"), "{}", stderr(&out));
}

/// A shard killed while it waits at the barrier stops counting: the shard that arrives after
/// it does not start alone, it times out naming the dead one.
#[test]
fn a_shard_killed_at_the_barrier_no_longer_counts() {
    let server = support::server();
    let tmp = tempfile::tempdir().unwrap();
    let mut first = shard(&server.url(), 0, 2, "killed", tmp.path(), &[]);
    wait_arrived(&server.url(), "killed", 0);
    first.kill().unwrap();
    first.wait().unwrap();
    // Longer than the 2 s an arrival stays fresh without its shard.
    std::thread::sleep(std::time::Duration::from_millis(2_500));
    let out =
        shard(&server.url(), 1, 2, "killed", tmp.path(), &["--barrier-timeout", "3s"]).wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("fleet killed: shard(s) 0 of 2 did not arrive"), "{}", stderr(&out));
    assert!(!tmp.path().join("shard-001/summary.json").exists(), "shard 1 ran alone");
}

/// A split that leaves a shard without producers (each shard owns its queues) is refused
/// before anything starts, as is a fleet without a URL.
#[test]
fn a_split_that_cannot_work_is_refused_before_anything_starts() {
    let out = Command::new(env!("CARGO_BIN_EXE_emq-bench"))
        .args(["run", "fencing-soak", "--url", "redis://127.0.0.1:1", "--shards", "4", "--shard", "3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--shards = 4, expected at most producers.count = 3 shards"), "{}", stderr(&out));
    let out = Command::new(env!("CARGO_BIN_EXE_emq-bench"))
        .args(["run", "fencing-soak", "--shards", "2", "--shard", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("a fleet needs --url"), "{}", stderr(&out));
}

/// A shard killed outright mid-run (a lost node) leaves only the summary.json it rewrites while
/// it runs: the others end on their own and do not merge, and the merge by hand names it
/// missing and fails the fleet (exit 1), rather than refusing its folder as no shard's.
#[test]
fn a_shard_killed_mid_run_is_missing_at_the_merge() {
    let server = support::server();
    let tmp = tempfile::tempdir().unwrap();
    // Longer than `shard`'s 3 s: time to see shard 1 running and kill it before it ends.
    let start = |i: u32| {
        Command::new(env!("CARGO_BIN_EXE_emq-bench"))
            .args(["run", "fencing-soak", "--quiet", "--duration", "8s", "--url", &server.url()])
            .args(["--shards", "3", "--group", "lost", "--out"])
            .arg(tmp.path())
            .env("JOB_COMPLETION_INDEX", i.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut children: Vec<Child> = (0..3).map(start).collect();
    let running = tmp.path().join("shard-001/summary.json");
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !running.is_file() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(running.is_file(), "shard 1 never wrote its running summary");
    children[1].kill().unwrap();
    let outputs: Vec<Output> = children.into_iter().map(|c| c.wait_with_output().unwrap()).collect();
    for i in [0, 2] {
        assert_eq!(outputs[i].status.code(), Some(0), "shard {i}: {}", stderr(&outputs[i]));
    }
    assert!(!tmp.path().join("merged").exists(), "no shard merges without shard 1");
    let out = merge(tmp.path(), &tmp.path().join("merged"));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("shard(s) 1 of 3 missing"), "{}", stderr(&out));
}

/// A merged folder holds what a run's folder holds for CI and a reader: junit.xml, summary.md
/// and invariants.json beside summary.json (with the time in queue), and a report.html and
/// summary.md that say they cover a fleet, naming every shard with its own verdict.
fn assert_complete_fleet_folder(dir: &Path, shards: usize) {
    let summary = RunSummary::read(&dir.join("summary.json")).unwrap();
    assert!(summary.time_in_queue_us.is_some_and(|q| q.p50 > 0), "{:?}", summary.time_in_queue_us);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("invariants.json")).unwrap()).unwrap();
    let check = summary.check.as_ref().unwrap();
    assert_eq!(report["checked_jobs"].as_u64(), Some(check.checked_jobs as u64), "{report}");
    let junit = std::fs::read_to_string(dir.join("junit.xml")).unwrap();
    assert!(junit.contains("I7 ") && junit.contains("name=\"verdict\""), "{junit}");
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(md.contains("**PASS** (exit 0)") && md.contains(&format!("{shards} of {shards} shards merged")), "{md}");
    let html = support::assert_offline_page(&dir.join("report.html"));
    assert!(html.contains("<h2>Fleet ") && html.contains(&format!("{shards} of {shards} shards merged")), "{html}");
    assert_eq!(html.matches("<span class=\"pass\">pass</span></td>").count(), shards, "every shard's verdict");
}

/// Shards whose `--out` are separate folders (a pod's volume each): no shard merges on its
/// own, and `merge` finds the shards' `shard-NNN/` inside folders of any name, given one by
/// one or by their parent. A folder without a shard's summary says which file it looked for
/// and what it found.
#[test]
fn merge_finds_shards_in_folders_of_any_name() {
    let server = support::server();
    let tmp = tempfile::tempdir().unwrap();
    let pods = tmp.path().join("pods");
    let children: Vec<Child> =
        (0..3).map(|i| shard(&server.url(), i, 3, "pods", &pods.join(format!("pod{i}")), &[])).collect();
    for (i, out) in children.into_iter().map(|c| c.wait_with_output().unwrap()).enumerate() {
        assert_eq!(out.status.code(), Some(0), "shard {i}: {}", stderr(&out));
        assert!(pods.join(format!("pod{i}/shard-{i:03}/summary.json")).is_file());
    }
    assert!(!pods.join("pod0/merged").exists(), "no shard has the others' folders to merge");
    let merge_all = |dirs: &[PathBuf], out: &Path| -> Output {
        Command::new(env!("CARGO_BIN_EXE_emq-bench")).arg("merge").args(dirs).arg("--out").arg(out).output().unwrap()
    };
    let pod_dirs: Vec<PathBuf> = (0..3).map(|i| pods.join(format!("pod{i}"))).collect();
    let out = merge_all(&pod_dirs, &tmp.path().join("m-pods"));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_complete_fleet_folder(&tmp.path().join("m-pods"), 3);
    // The same folders named `shard-I`, one by one, then by their parent.
    let renamed = tmp.path().join("volumes");
    std::fs::rename(&pods, &renamed).unwrap();
    let mut dirs = Vec::new();
    for i in 0..3 {
        let to = renamed.join(format!("shard-{i}"));
        std::fs::rename(renamed.join(format!("pod{i}")), &to).unwrap();
        dirs.push(to);
    }
    let out = merge_all(&dirs, &tmp.path().join("m-named"));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = merge_all(std::slice::from_ref(&renamed), &tmp.path().join("m-parent"));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_complete_fleet_folder(&tmp.path().join("m-parent"), 3);
    // A folder with no shard in it: the file looked for, and what is there.
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(empty.join("notes")).unwrap();
    let out = merge_all(std::slice::from_ref(&empty), &tmp.path().join("m-empty"));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let looked = format!(
        "{}: no summary.json there nor in any folder below it (it holds notes/)",
        empty.join("summary.json").display()
    );
    assert!(stderr(&out).contains(&looked), "{}", stderr(&out));
    // A shard whose summary says it is still running: said, not taken for a finished one.
    for i in 0..3 {
        let dir = renamed.join(format!("shard-{i}/shard-{i:03}"));
        std::fs::remove_file(dir.join("shard.done")).unwrap();
        let path = dir.join("summary.json");
        let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        v["running"] = true.into();
        std::fs::write(&path, v.to_string()).unwrap();
    }
    let out = merge_all(std::slice::from_ref(&renamed), &tmp.path().join("m-running"));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("summary.json: marked running (the shard is still running"), "{}", stderr(&out));
}

/// `shared` queues on the 3-primary cluster: shard 0 runs every producer, shards 1 and 2 the
/// consumers, all on the same three queues. No shard checks on its own; the last one's merge
/// joins the three histories (each event keeps its shard), checks once with zero violations,
/// deletes the keys and releases the fleet's lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_fleet_produces_on_one_shard_consumes_on_two_and_is_checked_once_at_the_merge() {
    let cluster = support::cluster::Cluster::start(3).await;
    let tmp = tempfile::tempdir().unwrap();
    let roles = ["--queue-mode", "shared", "--roles", "p,c,c"];
    let outputs = fleet_of_three(cluster.url(), "shared", tmp.path(), &roles).await;
    let mut queues = Vec::new();
    for (i, out) in outputs.iter().enumerate() {
        assert_eq!(out.status.code(), Some(0), "shard {i}: {}", stderr(out));
        let summary = RunSummary::read(&tmp.path().join(format!("shard-{i:03}/summary.json"))).unwrap();
        let record = summary.shard.as_ref().unwrap();
        assert_eq!(record.queues, "shared");
        let (producers, consumers) = (record.producers[1], record.consumers[1]);
        assert_eq!((producers, consumers), if i == 0 { (3, 0) } else { (0, 2) }, "shard {i}");
        assert!(summary.check.is_none(), "shard {i} checked on its own: {:?}", summary.check);
        assert_eq!(
            summary.keys.as_ref().unwrap().to_string(),
            "kept: for the fleet's check at the merge (shared queues)"
        );
        let names: Vec<String> = summary.target.topology.nodes.iter().flat_map(|n| n.queues.clone()).collect();
        assert!(names.iter().all(|q| q.starts_with("bench-")), "no shard prefix: {names:?}");
        queues.push(names);
    }
    assert!(queues.windows(2).all(|w| w[0] == w[1]), "every shard drives the same queues: {queues:?}");
    let merged = RunSummary::read(&tmp.path().join("merged/summary.json")).expect("merged");
    assert_eq!(merged.passed(), Some(true), "{:?}", merged.verdict);
    let check = merged.check.as_ref().expect("the merge checked");
    assert!(check.with_history && check.violations_total == 0, "{check:?}");
    let enqueued = merged.jobs["enqueued"];
    let finished = merged.jobs["completed"] + merged.jobs["failed"] + merged.jobs["failed_by_stall"];
    assert!(enqueued > 100 && finished == enqueued, "every job finished: {:?}", merged.jobs);
    assert!(merged.drained, "the consumers drained every job the other shard produced");
    assert_eq!(merged.keys.as_ref().unwrap().to_string(), "deleted");
    assert_complete_fleet_folder(&tmp.path().join("merged"), 3);
    // The fleet's history says which shard made each call.
    let (header, streams) = emq_bench::history::file::load(&tmp.path().join("merged/history.bin")).unwrap();
    let history = emq_bench::history::History::merge(header, &streams).unwrap();
    use emq_bench::history::Kind;
    let by = |kind: Kind| -> std::collections::BTreeSet<u16> {
        history.events.iter().filter(|e| e.kind == kind).filter_map(|e| e.shard).collect()
    };
    assert_eq!(by(Kind::Enqueue), [0].into());
    assert_eq!(by(Kind::Claim), [1, 2].into());
    // Nothing of the run is left on the server: no queue key, no lock.
    for node in cluster.servers() {
        let mut conn = support::cluster::conn(node).await;
        let left: Vec<String> = redis::cmd("KEYS").arg("*bench-*").query_async(&mut conn).await.unwrap();
        assert!(left.is_empty(), "{left:?}");
    }
}

/// A `complete.lua` without its fence on one consumer shard of a `shared` fleet (a rolling
/// upgrade gone wrong, `--mixed-scripts`): the fleet's check catches I6, naming the shards
/// whose calls broke it. A merge of a `shared` fleet without the server cannot check it.
#[test]
fn a_fenceless_complete_on_one_shard_of_a_shared_fleet_is_caught_by_the_fleets_check() {
    let server = support::server();
    let tmp = tempfile::tempdir().unwrap();
    let scenario = support::held_zombie_soak(tmp.path());
    let broken = support::fenceless_lua(tmp.path(), "lua-broken");
    let (url, out) = (server.url(), tmp.path().join("fleet"));
    let scenario = scenario.to_str().unwrap();
    let common = ["--queue-mode", "shared", "--roles", "p,c,c", "--mixed-scripts"];
    let lua = ["--lua-dir", broken.to_str().unwrap()];
    let children: Vec<Child> = (0..3)
        .map(|i| {
            let extra: Vec<&str> = common.iter().chain(if i == 2 { &lua[..] } else { &[] }).copied().collect();
            shard_of(scenario, &url, i, 3, "upgrade", &out, &extra)
        })
        .collect();
    // Each shard judges no invariant of its own (0); the one that merged exits with the
    // fleet's verdict (1), so a Job or CI reading exit codes sees the violation.
    let outputs: Vec<Output> = children.into_iter().map(|c| c.wait_with_output().unwrap()).collect();
    let codes: Vec<Option<i32>> = outputs.iter().map(|o| o.status.code()).collect();
    let merger: Vec<&Output> = outputs.iter().filter(|o| o.status.code() == Some(1)).collect();
    assert_eq!(merger.len(), 1, "one shard merged and failed, the others passed: {codes:?}");
    assert_eq!(codes.iter().filter(|c| **c == Some(0)).count(), 2, "{codes:?}");
    assert!(stderr(merger[0]).contains("FAIL fleet: "), "{}", stderr(merger[0]));
    let merged = RunSummary::read(&out.join("merged/summary.json")).expect("merged");
    assert_eq!(merged.passed(), Some(false));
    let check = merged.check.as_ref().expect("the merge checked");
    assert!(check.by_invariant.get("I6").copied().unwrap_or(0) >= 1, "{check:?}");
    let text = std::fs::read_to_string(out.join("merged/invariants.json")).unwrap();
    assert!(text.contains("\"I6\"") && text.contains("(shard 2)"), "{text}");
    // A stale completion on shard 2 accepted after shard 1's claim took the job over: one
    // finding names both machines' calls (about a third of the I6 findings here, 15 of 46).
    let report: serde_json::Value = serde_json::from_str(&text).unwrap();
    let found = |v: &serde_json::Value| v["found"].as_str().unwrap_or_default().to_owned();
    let across: Vec<String> = report["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(found)
        .filter(|f| f.contains("(shard 1)") && f.contains("(shard 2)"))
        .collect();
    assert!(!across.is_empty(), "no finding names both shards' calls: {text}");
    let verdict = merged.verdict.as_ref().unwrap();
    assert!(verdict.findings.iter().any(|f| f.kind == emq_bench::verdict::FindingKind::Violations), "{verdict:?}");

    let again = merge(&out, &tmp.path().join("offline"));
    assert_eq!(again.status.code(), Some(1), "{}", stderr(&again));
    assert!(
        stderr(&again).contains("its check runs at the merge") && stderr(&again).contains("--url"),
        "{}",
        stderr(&again)
    );
}

/// `--roles` needs `shared` queues, and one role per shard.
#[test]
fn roles_need_shared_queues_and_one_role_per_shard() {
    let run = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_emq-bench"))
            .args(["run", "fencing-soak", "--url", "redis://127.0.0.1:1", "--shards", "3", "--shard", "0"])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = run(&["--roles", "p,c,c"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("need --queue-mode shared"), "{}", stderr(&out));
    let out = run(&["--queue-mode", "shared", "--roles", "p,c"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("one role (p, c or pc) per shard: 3 of them"), "{}", stderr(&out));
    let out = run(&["--queue-mode", "shared", "--roles", "p,p,p"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("at least one shard that runs consumers"), "{}", stderr(&out));
    let out = run(&["--queue-mode", "shared", "--roles", "p,x,c"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("expected p, c or pc"), "{}", stderr(&out));
}

/// A `shared` fleet's shards hold one lease per queue under the fleet's id: the first shard
/// creates it, the others join it; a shard that joined never deletes it (its refusal at the
/// start must not free the queues of a fleet already running), and another run stays out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joined_lease_is_held_but_never_deleted_by_the_shard_that_joined() {
    use emq_bench::plane::{lock::fleet_run_id, Plane, RunLock};
    let server = support::server();
    let plane = Plane::open(&support::connector(&server.url()), Default::default()).await.unwrap();
    let queues = vec![support::keys("shared-lease")];
    let id = fleet_run_id("g");
    let first = RunLock::join_or_acquire(&plane, &queues, &id).await.unwrap();
    assert!(first.created_all());
    assert!(RunLock::acquire(&plane, &queues, &id).await.is_err(), "only a fleet's shard joins a lease");
    let joined = RunLock::join_or_acquire(&plane, &queues, &id).await.unwrap();
    assert!(!joined.created_all(), "the second shard joins the first one's lease");
    joined.release().await;
    let mut conn = support::cluster::conn(&server).await;
    let holder: Option<String> = redis::cmd("GET").arg(&queues[0].lock).query_async(&mut conn).await.unwrap();
    assert_eq!(holder.as_deref(), Some(id.as_str()), "a joined lease outlives the shard that joined it");
    let other = RunLock::acquire(&plane, &queues, "another run").await;
    assert!(other.is_err(), "another run is refused while the fleet holds the queues");
    first.release().await;
    let holder: Option<String> = redis::cmd("GET").arg(&queues[0].lock).query_async(&mut conn).await.unwrap();
    assert_eq!(holder, None, "the shard that created the lease deletes it");
}
