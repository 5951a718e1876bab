//! The harness's own host as the bottleneck: `emq-bench` pinned with `taskset` to one CPU that
//! two busy loops also hold. Its load threads then wait for that CPU most of the time, so the
//! run must say it was client-bound (summary.json `client`, the table, report.html), and a
//! capacity search under the same starvation must count none of its probes against the
//! deployment and name no rate.

mod support;

use std::path::Path;
use std::process::{Child, Command};

/// Two busy loops pinned to CPU 0, killed (by their own ids) when dropped.
struct BusyLoops(Vec<Child>);

impl BusyLoops {
    fn start() -> BusyLoops {
        BusyLoops(
            (0..2)
                .map(|_| {
                    Command::new("taskset")
                        .args(["-c", "0", "sh", "-c", "while :; do :; done"])
                        .spawn()
                        .expect("taskset (util-linux)")
                })
                .collect(),
        )
    }
}

impl Drop for BusyLoops {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn scenario(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("starved.toml");
    std::fs::write(
        &path,
        "name = \"starved\"\nseed = 5\nduration = \"8s\"\nwarmup = \"1s\"\ndrain = \"5s\"\nqueues = \"starved\"\n\
         [producers]\ncount = 2\nconnections = 1\npipeline = 8\nrate = 400.0\n\
         [consumers]\ncount = 2\nconnections = 1\npipeline = 2\nbatch = 8\n",
    )
    .unwrap();
    path
}

/// `emq-bench ARGS` on CPU 0 only; (exit code, stdout, stderr).
fn pinned(args: &[&std::ffi::OsStr]) -> (Option<i32>, String, String) {
    let out = Command::new("taskset")
        .args(["-c", "0"])
        .arg(env!("CARGO_BIN_EXE_emq-bench"))
        .args(args)
        .env_remove("EMQ_EXPORT_BMF")
        .env_remove("EMQ_EXPORT_GAB")
        .env_remove("EMQ_METRICS_ADDR")
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_starved_client_is_client_bound_and_capacity_names_no_rate_from_it() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = scenario(tmp.path());
    let lua = support::lua_dir();
    let _busy = BusyLoops::start();

    let run_dir = tmp.path().join("run");
    let (code, stdout, stderr) = pinned(&[
        "run".as_ref(),
        scenario.as_os_str(),
        "--lua-dir".as_ref(),
        lua.as_os_str(),
        "--out".as_ref(),
        run_dir.as_os_str(),
    ]);
    assert!(code.is_some(), "{stderr}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("summary.json")).unwrap()).unwrap();
    let client = &summary["client"];
    assert_eq!(client["client_bound"], true, "{client}\n{stdout}");
    assert_eq!(client["cores"], 1, "taskset leaves one CPU: {client}");
    assert!(!client["reasons"].as_array().unwrap().is_empty(), "{client}");
    assert!(stdout.contains("CLIENT-BOUND: "), "{stdout}");
    let html = std::fs::read_to_string(run_dir.join("report.html")).unwrap();
    assert!(html.contains("CLIENT-BOUND: "), "report.html says it");

    let cap_dir = tmp.path().join("cap");
    let (code, stdout, stderr) = pinned(&[
        "capacity".as_ref(),
        scenario.as_os_str(),
        "--slo".as_ref(),
        "claim.p99 < 1ms".as_ref(),
        "--lua-dir".as_ref(),
        lua.as_os_str(),
        "--out".as_ref(),
        cap_dir.as_os_str(),
        "--probe".as_ref(),
        "8s".as_ref(),
        "--budget".as_ref(),
        "40s".as_ref(),
    ]);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(cap_dir.join("capacity.json")).unwrap()).unwrap();
    let probes = report["probes"].as_array().unwrap();
    assert!(!probes.is_empty(), "{stderr}");
    for p in probes {
        assert_eq!(p["client_bound"], true, "{}\n{stdout}", p["folder"]);
        assert_ne!(p["outcome"], "not_sustained", "{}\n{stdout}", p["folder"]);
    }
    assert_eq!(report["sustainable_rate"], serde_json::Value::Null, "{stdout}");
    if probes.iter().all(|p| p["outcome"] == "client_bound") {
        assert_eq!(report["ended"], "client_bound", "{stdout}");
        assert_eq!(code, Some(3), "{stdout}\n{stderr}");
        assert!(stdout.contains("CLIENT-BOUND"), "{stdout}");
    }
}
