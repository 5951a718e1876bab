//! `partition` on an embedded 3-primary × 1-replica cluster (node timeout 2 s) under the fencing
//! soak: the primary of the first queue cut off from every other node for 5 s from about 4 s.
//! With the harness on the minority side the primary acknowledges writes its replica never
//! sees, and the checker names them lost; with WAIT for one replica none is acknowledged.
//!
//! iptables rules may only go into a network namespace of the run's own, so each run is the
//! binary re-executed under `unshare --net`; where that cannot work (not root, no `unshare` or
//! `iptables`), the test says so on stderr and returns. The runs start nine processes each:
//! they take turns ([`SERIAL`]).

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Instant;

/// One partitioned run at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// The fencing soak as shipped, on an embedded 3×1 cluster, for 14 s, with `target` appended
/// to its `[target]` and a 5 s partition at 4 s on `side`.
///
/// With a `wait` in `target` the producers may fall short of their rate: while a shard has no
/// replica in sync (the partition, then the old primary's full sync after the heal) each of
/// its calls holds a producer's window for the WAIT's timeout, and the other queues' sends
/// queue behind it. What the run is about is the check, not the rate.
fn soak(dir: &Path, side: &str, target: &str) -> PathBuf {
    let shipped = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/fencing-soak.toml");
    let mut soak: toml::Table = std::fs::read_to_string(shipped).unwrap().parse().unwrap();
    let target = format!("cluster = {{ primaries = 3, replicas = 1, node_timeout = \"2s\" }}\n{target}");
    soak.insert("target".into(), target.parse::<toml::Table>().unwrap().into());
    soak.insert("duration".into(), "14s".into());
    if target.contains("wait") {
        let producers = soak.get_mut("producers").and_then(toml::Value::as_table_mut).expect("[producers]");
        producers.insert("allow_shortfall".into(), true.into());
    }
    let fault = format!("[[faults]]\nkind = \"partition\"\nat = \"4s\"\nduration = \"5s\"\nside = \"{side}\"\n");
    let path = dir.join("partition.toml");
    std::fs::write(&path, format!("{}\n{fault}", toml::to_string(&soak).unwrap())).unwrap();
    path
}

/// Why a partition cannot run here, if it cannot: it needs root, `unshare --net` and iptables.
fn cannot_partition() -> Option<String> {
    // SAFETY: geteuid(2) cannot fail and touches no memory.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    if !["/usr/sbin/iptables", "/sbin/iptables"].iter().any(|p| Path::new(p).exists()) {
        return Some("no iptables (apt-get install iptables, or scripts/setup as root)".into());
    }
    match Command::new("unshare").args(["--net", "true"]).output() {
        Ok(out) if out.status.success() => None,
        Ok(out) => Some(format!("unshare --net failed: {}", String::from_utf8_lossy(&out.stderr).trim())),
        Err(err) => Some(format!("no unshare: {err}")),
    }
}

/// A run's exit code, stderr and summary.json.
struct Ran {
    code: Option<i32>,
    stderr: String,
    summary: serde_json::Value,
}

/// `emq-bench run` of `scenario` into `dir/out`, in a network namespace of its own when
/// `unshare` (with its loopback up), one run at a time.
fn run(dir: &Path, scenario: &Path, unshare: bool) -> Ran {
    let _turn = SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let out = dir.join("out");
    let bin = env!("CARGO_BIN_EXE_emq-bench");
    let lua = support::lua_dir();
    let args = ["run", "--quiet", "--out", out.to_str().unwrap(), "--lua-dir", lua.to_str().unwrap()];
    let mut command = match unshare {
        true => {
            let mut c = Command::new("unshare");
            c.args(["--net", "sh", "-c", "ip link set lo up && exec \"$0\" \"$@\"", bin]);
            c
        }
        false => Command::new(bin),
    };
    let began = Instant::now();
    let ran = command.args(args).arg(scenario).output().unwrap();
    let stderr = String::from_utf8_lossy(&ran.stderr).into_owned();
    eprintln!("{stderr}\nthe run took {:.1} s", began.elapsed().as_secs_f64());
    let summary = std::fs::read_to_string(out.join("summary.json"))
        .map(|text| serde_json::from_str(&text).unwrap())
        .unwrap_or(serde_json::Value::Null);
    Ran { code: ran.status.code(), stderr, summary }
}

/// The one injected span (a partition).
fn span(ran: &Ran) -> &serde_json::Value {
    let injected = ran.summary["faults"]["injected"].as_array().unwrap_or_else(|| panic!("no spans: {}", ran.stderr));
    assert_eq!(injected.len(), 1, "{injected:?}");
    assert_eq!(injected[0]["kind"], "partition", "{injected:?}");
    &injected[0]
}

/// An effects count of `span` (0 when absent).
fn effect(span: &serde_json::Value, name: &str) -> u64 {
    span["effects"][name].as_u64().unwrap_or(0)
}

#[test]
fn a_primary_partitioned_with_the_harness_acknowledges_writes_the_majority_then_loses() {
    if let Some(why) = cannot_partition() {
        eprintln!("skipped: a partition cannot run here ({why})");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ran = run(tmp.path(), &soak(tmp.path(), "minority", ""), true);
    let partition = span(&ran);
    let detail = partition["detail"].as_str().unwrap();
    assert_eq!(partition["applied"], true, "{partition}");
    assert!(
        detail.starts_with("partition of 127.0.0.") && detail.contains("the harness on the minority side"),
        "{detail}"
    );
    assert!(detail.contains(" promoted, seen at ") && detail.contains("; healed at "), "{detail}");
    assert!(detail.contains(" a replica of 127.0.0."), "the old primary rejoins as a replica: {detail}");
    let by = &ran.summary["check"]["by_invariant"];
    eprintln!("partition, minority side: {by}; effects {}", partition["effects"]);
    let lost: u64 = ["I5", "I6", "I7"].iter().map(|i| by[i].as_u64().unwrap_or(0)).sum();
    assert!(lost > 0, "no loss seen: {by}");
    assert!(ran.summary["check"]["violations_total"].as_u64().unwrap() > 0);
    // The losses are the partition's: its window holds them.
    let attributed = effect(partition, "lost_enqueues") + effect(partition, "reissued_tokens");
    assert!(attributed > 0, "{partition}");
    assert_eq!(ran.code, Some(1), "{}", ran.stderr);
}

#[test]
fn with_wait_for_a_replica_the_partitioned_primary_acknowledges_nothing_that_is_lost() {
    if let Some(why) = cannot_partition() {
        eprintln!("skipped: a partition cannot run here ({why})");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let wait = "wait = { replicas = 1, timeout = \"100ms\" }";
    let ran = run(tmp.path(), &soak(tmp.path(), "minority", wait), true);
    let partition = span(&ran);
    assert_eq!(partition["applied"], true, "{partition}");
    eprintln!("partition, minority side, WAIT 1: {}; effects {}", ran.summary["check"]["by_invariant"], {
        &partition["effects"]
    });
    assert_eq!(ran.summary["check"]["violations_total"], 0, "{}", ran.summary["check"]["by_invariant"]);
    // What the cut-off primary took in was never acknowledged: unknown outcomes, not losses.
    assert!(effect(partition, "unknown_outcomes") > 0, "{partition}");
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
}

#[test]
fn a_partition_outside_a_network_namespace_of_its_own_is_refused_before_anything_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let ran = run(tmp.path(), &soak(tmp.path(), "majority", ""), false);
    assert_eq!(ran.code, Some(2), "{}", ran.stderr);
    assert!(ran.stderr.contains("faults[0].kind: partition "), "{}", ran.stderr);
    if cannot_partition().is_none() {
        assert!(ran.stderr.contains("a network namespace of its own: run under `unshare --net`"), "{}", ran.stderr);
    }
    assert!(ran.summary.is_null(), "nothing ran, nothing was written");
}
