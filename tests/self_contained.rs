//! The binary on its own, as a pod or `cargo install` has it: no checkout around it. EchoMQ's
//! scripts and the shipped scenarios are built in, every run flag can come from an `EMQ_*`
//! variable, and without a terminal the progress is a timestamped line in the log.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The tests of this file take turns: `cargo install` below builds the binary into the target
/// folder again (a build of the same sources without the tests' dev-dependencies), which
/// replaces the file the others copy and run.
fn turn() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The binary copied into an empty folder (nothing of the repository beside it).
fn lone_binary(dir: &Path) -> PathBuf {
    let bin = dir.join("emq-bench");
    std::fs::copy(env!("CARGO_BIN_EXE_emq-bench"), &bin).unwrap();
    bin
}

/// The valkey-server the tests use: scripts/setup's, else the one the harness would find.
fn server_binary() -> PathBuf {
    let setup = Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/bin/valkey-server");
    if setup.exists() {
        return setup;
    }
    emq_bench::server::find_server_binary(None).expect("a valkey-server (run scripts/setup)")
}

/// Runs the lone binary in `cwd` with `args` and the variables `env` (and the server binary).
fn run_lone(bin: &Path, cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(bin);
    cmd.args(args).current_dir(cwd).env("EMQ_VALKEY_SERVER", server_binary());
    for (name, value) in env {
        cmd.env(name, value);
    }
    cmd.output().expect("run emq-bench")
}

fn summary(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap()
}

#[test]
fn a_lone_binary_runs_a_shipped_scenario_by_name_with_its_built_in_scripts() {
    let _turn = turn();
    let tmp = tempfile::tempdir().unwrap();
    let bin = lone_binary(tmp.path());
    let cwd = tmp.path().join("empty");
    std::fs::create_dir(&cwd).unwrap();
    let out = run_lone(&bin, &cwd, &["run", "smoke", "--quiet", "--duration", "2s", "--out", "res"], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let summary = summary(&cwd.join("res"));
    assert_eq!(summary["target"]["lua_dir"], "built-in");
    assert_eq!(summary["name"], "smoke");
    // The built-in scripts are lua/'s, byte for byte: the same SHA-1s the server loaded.
    let registry =
        emq_bench::resp::ScriptRegistry::from_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("lua")).unwrap();
    for script in registry.scripts() {
        assert_eq!(summary["target"]["script_sha1"][script.name()], registry.sha(script), "{}", script.name());
    }
    assert!(std::fs::read_to_string(cwd.join("res/scenario.toml")).unwrap().contains("name = \"smoke\""));
}

/// `cargo install --path . --root TMP`, as a user installs it: the installed binary runs a
/// shipped scenario from an empty folder. The install reuses this build's target folder (its
/// dependencies are built: only the crate itself compiles again) and needs no network.
#[test]
fn an_installed_binary_runs_a_shipped_scenario_from_an_empty_folder() {
    let _turn = turn();
    let tmp = tempfile::tempdir().unwrap();
    let built = Path::new(env!("CARGO_BIN_EXE_emq-bench"));
    // target/<profile>/emq-bench: the target folder is two levels up.
    let target = built.parent().and_then(Path::parent).expect("the binary sits in target/<profile>/");
    let install = Command::new(env!("CARGO"))
        .args(["install", "--debug", "--locked", "--offline", "--quiet", "--path", env!("CARGO_MANIFEST_DIR")])
        .arg("--root")
        .arg(tmp.path().join("root"))
        .env("CARGO_TARGET_DIR", target)
        .output()
        .expect("run cargo install");
    assert!(install.status.success(), "cargo install: {}", String::from_utf8_lossy(&install.stderr));
    let bin = tmp.path().join("root/bin/emq-bench");
    let cwd = tmp.path().join("empty");
    std::fs::create_dir(&cwd).unwrap();
    let out = run_lone(&bin, &cwd, &["run", "smoke", "--quiet", "--duration", "1s", "--out", "res"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(summary(&cwd.join("res"))["target"]["lua_dir"], "built-in");
}

#[test]
fn a_name_that_is_neither_a_file_nor_a_shipped_scenario_lists_the_shipped_ones() {
    let _turn = turn();
    let tmp = tempfile::tempdir().unwrap();
    let bin = lone_binary(tmp.path());
    let out = run_lone(&bin, tmp.path(), &["run", "smok", "--quiet"], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("smok: cannot read the scenario file") && err.contains("shipped scenario: "), "{err}");
    assert!(err.contains("fencing-soak") && err.contains("smoke"), "{err}");
}

#[test]
fn bullmq_scripts_are_never_built_in_and_their_absence_names_the_fix() {
    let _turn = turn();
    let tmp = tempfile::tempdir().unwrap();
    let bin = lone_binary(tmp.path());
    let out = run_lone(&bin, tmp.path(), &["run", "bullmq-smoke", "--quiet"], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("scripts/setup") && err.contains("--lua-dir"), "{err}");
}

#[test]
fn run_flags_come_from_emq_variables_and_a_log_gets_a_progress_line_every_interval() {
    let _turn = turn();
    let tmp = tempfile::tempdir().unwrap();
    let bin = lone_binary(tmp.path());
    let vars = [
        ("EMQ_SCENARIO", "smoke"),
        ("EMQ_DURATION", "3s"),
        ("EMQ_SEED", "77"),
        ("EMQ_OUT", "from-env"),
        ("EMQ_PROGRESS_EVERY", "1s"),
        ("EMQ_NO_CHECK", "true"),
    ];
    // stderr is a pipe, not a terminal: the progress goes to the log as lines.
    let out = run_lone(&bin, tmp.path(), &["run"], &vars);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let summary = summary(&tmp.path().join("from-env"));
    assert_eq!(summary["seed"], 77);
    assert!(summary["check"].is_null(), "EMQ_NO_CHECK=true skips the check");
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("emq-bench: 20") && l.contains("s | ")).collect();
    assert!(lines.len() >= 2, "a progress line about every second of a 3 s run:\n{err}");
    // `emq-bench: 2026-12-06T01:02:03Z    1s | enqueue ...`
    let stamp = lines[0].split_whitespace().nth(1).unwrap();
    assert!(humantime::parse_rfc3339(stamp).is_ok(), "{stamp}");
}
