//! The binary's contract: exit codes (0 ok, 1 run failure, 2 usage or input) and error messages
//! that name the file, the field and what was expected.

mod support;

use std::path::Path;
use std::process::{Command, Output};

fn emq_bench(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_emq-bench")).args(args).current_dir(cwd).output().expect("run emq-bench")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_malformed_scenario_exits_2_naming_file_line_and_field() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("bad.toml"),
        "name = \"x\"\nseed = 1\nduration = \"3s\"\n[consumers]\nstall = 1.5\n",
    )
    .unwrap();
    let out = emq_bench(&["run", "bad.toml"], tmp.path());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("bad.toml:5") && err.contains("consumers.stall"), "{err}");
}

#[test]
fn an_unknown_field_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("typo.toml"), "name = \"x\"\nseed = 1\njobs = 5\n[producers]\npipelin = 4\n")
        .unwrap();
    let out = emq_bench(&["run", "typo.toml"], tmp.path());
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("typo.toml") && err.contains("pipelin"), "{err}");
}

#[test]
fn a_missing_scenario_and_bad_flags_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let out = emq_bench(&["run", "nope.toml"], tmp.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("nope.toml") && stderr(&out).contains("No such file"), "{}", stderr(&out));
    let out = emq_bench(&["run", "x.toml", "--duration", "soon"], tmp.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--duration"), "{}", stderr(&out));
}

#[test]
fn bad_targets_exit_2_before_any_connection_and_never_show_the_password() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (args, text) in [
        (&["--url", "redis://h:6379/x"][..], "database number"),
        (&["--url", "rediss://:hunter2@127.0.0.1:1/", "--cert", "c.pem"], "--cert and --key go together"),
        (&["--url", "redis://127.0.0.1:1/", "--cacert", "/nonexistent/ca.pem"], "/nonexistent/ca.pem"),
        (&["--user", "bench"], "need --url"),
        // Nothing listens on port 1: the refusal names the target, its password masked.
        (&["--url", "redis://u:hunter2@127.0.0.1:1/"], "redis://u:***@127.0.0.1:1/0"),
    ] {
        let out = emq_bench(&[&["run", "scenarios/smoke.toml", "--quiet"][..], args].concat(), root);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(text), "{args:?}: {}", stderr(&out));
        assert!(!stderr(&out).contains("hunter2"), "{args:?}: the password leaked: {}", stderr(&out));
    }
}

#[test]
fn a_missing_script_directory_exits_2_naming_the_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = emq_bench(&["run", "scenarios/smoke.toml", "--lua-dir", "/nonexistent", "--quiet"], root);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("/nonexistent/enqueue.lua"), "{}", stderr(&out));
}

#[test]
fn run_prints_the_table_and_json_on_request() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("out");
    let out = emq_bench(
        &[
            "run",
            "scenarios/throughput.toml",
            "--duration",
            "1500ms",
            "--quiet",
            "--json",
            "--out",
            dir.to_str().unwrap(),
        ],
        root,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is summary.json");
    assert_eq!(summary["name"], "throughput");
    assert!(dir.join("summary.json").is_file());
}

#[test]
fn a_reader_that_closes_stdout_early_does_not_crash_the_run() {
    // `emq-bench run ... --json | head -1`: the write fails with EPIPE; the exit code must still
    // be the run's (0 here), never a panic's 101.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("out");
    let mut child = Command::new(env!("CARGO_BIN_EXE_emq-bench"))
        .args(["run", "scenarios/smoke.toml", "--duration", "1s", "--quiet", "--json", "--out"])
        .arg(&dir)
        .current_dir(root)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(dir.join("summary.json").is_file());
}

#[test]
fn an_unreachable_target_is_named_with_its_password_masked() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = emq_bench(&["run", "scenarios/smoke.toml", "--url", "redis://:secret@127.0.0.1:1/", "--quiet"], root);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("redis://:***@127.0.0.1:1/") && !err.contains("secret"), "{err}");
}

/// SIGTERM (what `timeout`, systemd, Docker and Kubernetes send) and SIGHUP end a run like
/// Ctrl-C: exit 1, a complete summary.json marked interrupted, and the run's keys deleted.
#[test]
fn sigterm_and_sighup_stop_a_run_like_ctrl_c() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for signal in [libc::SIGTERM, libc::SIGHUP] {
        let tmp = tempfile::tempdir().unwrap();
        let server = emq_bench::server::EmbeddedServer::start(&Default::default()).unwrap();
        let out = tmp.path().join("out");
        let child = Command::new(env!("CARGO_BIN_EXE_emq-bench"))
            .args(["run", "scenarios/smoke.toml", "--quiet", "--duration", "60s", "--url", &server.url(), "--out"])
            .arg(&out)
            .current_dir(root)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Signalled once the run is under way (the summary's start is in it either way).
        std::thread::sleep(std::time::Duration::from_secs(3));
        // SAFETY: kill(2) on our own child's pid has no memory-safety preconditions.
        unsafe { libc::kill(child.id() as libc::pid_t, signal) };
        let finished = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&finished.stderr);
        assert_eq!(finished.status.code(), Some(1), "signal {signal}: {err}");
        support::assert_fail_lines_match_summary(&err, &out);
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
        assert_eq!(summary["interrupted"], true, "signal {signal}");
        assert!(summary["measured_secs"].as_f64().unwrap() < 30.0);
        let mut conn = redis::Client::open(server.url()).unwrap().get_connection().unwrap();
        let left: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).unwrap();
        assert!(left.is_empty(), "signal {signal}: keys left: {left:?}");
    }
}

/// A script that does not compile, or an empty one, is a usage error naming the file, found
/// before the clock starts (issue 10 item 10).
#[test]
fn a_script_that_does_not_compile_or_is_empty_exits_2_naming_the_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().unwrap();
    let lua = tmp.path().join("lua");
    std::fs::create_dir(&lua).unwrap();
    for entry in std::fs::read_dir(root.join("lua")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, lua.join(path.file_name().unwrap())).unwrap();
    }
    let claim = lua.join("claim.lua");
    for (body, text) in [("this is not lua(", "Error compiling script"), ("  \n", "is empty")] {
        std::fs::write(&claim, body).unwrap();
        let out = emq_bench(&["run", "scenarios/smoke.toml", "--quiet", "--lua-dir", lua.to_str().unwrap()], root);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains(claim.to_str().unwrap()) && stderr(&out).contains(text), "{}", stderr(&out));
    }
}

/// `--out` into a folder that holds an earlier run's results is refused before any server is
/// started, so a new run never sits beside a stale invariants.json (issue 10 item 7).
#[test]
fn out_into_an_earlier_runs_folder_is_refused() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("invariants.json"), "{}").unwrap();
    let out = emq_bench(&["run", "scenarios/smoke.toml", "--quiet", "--out", tmp.path().to_str().unwrap()], root);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("already holds an earlier run's results (invariants.json)"), "{}", stderr(&out));
    let file = tmp.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let out = emq_bench(&["run", "scenarios/smoke.toml", "--quiet", "--out", file.join("sub").to_str().unwrap()], root);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("cannot be created"), "{}", stderr(&out));
}

/// Issue 10 item 9: a `--timeout` or `--give-up` that cannot work, or a `--duration` past the
/// bound, is a usage error before anything starts (exit 2), with the bound and its reason.
#[test]
fn timeouts_and_lengths_that_cannot_work_are_refused() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (args, text) in [
        (
            ["--timeout", "0s"],
            "invalid value '0s' for '--timeout <TIMEOUT>': expected at least 10ms: below it calls time out",
        ),
        (["--timeout", "1ms"], "'--timeout <TIMEOUT>': expected at least 10ms"),
        (["--timeout", "2h"], "'--timeout <TIMEOUT>': expected at most 1h"),
        (["--give-up", "0s"], "'--give-up <GIVE_UP>': expected at least 1s"),
        (["--give-up", "2days"], "'--give-up <GIVE_UP>': expected at most 1day"),
        (["--duration", "0s"], "'--duration <DURATION>': expected a run length > 0"),
        (["--duration", "8days"], "'--duration <DURATION>': expected at most 7days"),
    ] {
        let out = emq_bench(&[&["run", "scenarios/smoke.toml", "--quiet"][..], &args].concat(), root);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(text), "{args:?}: {}", stderr(&out));
    }
}

/// A short but workable `--timeout`, and an open-loop rate the producers' lanes cannot carry,
/// are run, with one warning each on stderr at the start.
#[test]
fn unwise_timeouts_and_rates_warn_once_and_run() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("fast.toml");
    std::fs::write(
        &scenario,
        // allow_shortfall: the run is told the rate will not hold (it fails otherwise, issue 11).
        "name = \"fast\"\nseed = 1\njobs = 2000\n[producers]\nrate = 1e6\nallow_shortfall = true\n[consumers]\nbatch = 50\n",
    )
    .unwrap();
    let out = emq_bench(
        &[
            "run",
            scenario.to_str().unwrap(),
            "--quiet",
            "--timeout",
            "99ms",
            "--out",
            tmp.path().join("out").to_str().unwrap(),
            "--lua-dir",
            root.join("lua").to_str().unwrap(),
        ],
        root,
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(err.matches("emq-bench: warning: --timeout 99ms is short").count(), 1, "{err}");
    let rate = "fast.toml: producers.rate = 1000000 jobs/s needs at least 50 requests in flight";
    assert_eq!(err.matches(rate).count(), 1, "{err}");
    assert!(err.contains("but producers.count × producers.pipeline = 1: sends will fall behind"), "{err}");
}

/// Issue 10 item 9: a rate no client can pace is refused, not run as a closed loop.
#[test]
fn a_rate_beyond_pacing_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("r.toml"), "name = \"r\"\nseed = 1\njobs = 5\n[producers]\nrate = 1e12\n").unwrap();
    let out = emq_bench(&["run", "r.toml"], tmp.path());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("r.toml:5: producers.rate = 1000000000000, expected a rate of at most 10000000 jobs/s"),
        "{}",
        stderr(&out)
    );
}

/// Issue 10 item 10: a port that is not a Redis/Valkey server (an HTTP server, or one that
/// closes at once) is named so at session open, with what it replied (exit 2).
#[test]
fn a_port_that_does_not_speak_resp_is_named_not_a_server() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (reply, answer) in [
        (&b"HTTP/1.1 400 Bad Request\r\n\r\n"[..], r#"it replied "HTTP/1.1 400 Bad Request\r\n\r\n""#),
        (b"", "it closed the connection without a reply (if the port speaks TLS, use rediss:// or --tls)"),
    ] {
        let port = support::not_redis(reply);
        let url = format!("redis://127.0.0.1:{port}");
        let out = emq_bench(&["run", "scenarios/smoke.toml", "--quiet", "--url", &url], root);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        let want = format!("emq-bench: target: not a Redis/Valkey server at 127.0.0.1:{port}: {answer}\n");
        assert_eq!(stderr(&out), want);
    }
}

/// Issue 10 item 10: `check --history` on a file cut short names the file, says it is
/// truncated, where it ends and which section (and event) it cut; exit 2, before any
/// connection (nothing listens on port 1).
#[test]
fn a_truncated_history_names_the_section_it_cut() {
    use emq_bench::history::{file, HistoryBuf, HistoryHeader, Kind, Outcome};
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("history.bin");
    let start = std::time::Instant::now();
    let mut buf = HistoryBuf::new(start);
    for job in 1..=100 {
        buf.push(job, Kind::Progress, Outcome::Ok, 1, None, start, 0);
    }
    let header = HistoryHeader {
        seed: 1,
        run_tag: 2,
        queues: vec!["bench".into()],
        drained: true,
        issued: 100,
        max_attempts: 3,
        must_finish: true,
        protocol: Default::default(),
        stream_shards: Vec::new(),
        event_version: emq_bench::history::EVENT_VERSION,
        complete: true,
        retain_ms: None,
        keep: Default::default(),
    };
    file::save(&path, &header, &buf.take()).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let (n, cut) = (bytes.len(), path.with_file_name("cut.bin"));
    for (len, want) in [
        (n - 1, format!("ends at byte {}, expected stream 1 of 1: 600 bytes from byte {} (599 there; the file ends inside its event 100, after 99 whole events)", n - 1, n - 600)),
        (20, format!("ends at byte 20, expected the header: {} bytes of JSON from byte 12 (8 there)", n - 600 - 8 - 4 - 12)),
    ] {
        std::fs::write(&cut, &bytes[..len]).unwrap();
        let out = emq_bench(&["check", "--url", "redis://127.0.0.1:1", "--history", cut.to_str().unwrap()], tmp.path());
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        let err = stderr(&out);
        assert!(err.starts_with(&format!("emq-bench: {}: truncated: the file ", cut.display())) && err.contains(&want), "{err}\nwant: {want}");
        assert!(!err.contains("failed to fill whole buffer"), "{err}");
    }
}

/// `--set KEY=VALUE` and `--rate R` change the scenario the run reads, checked as the file's
/// own keys are; the results folder's scenario.toml is the one that ran, the settings named.
#[test]
fn set_and_rate_override_any_scenario_key_checked_as_the_file_is() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("out");
    let args = ["run", "smoke", "--duration", "1s", "--quiet", "--json", "--out", dir.to_str().unwrap()];
    let overrides = ["--set", "consumers.count=3", "--set", "consumers.work=1ms", "--rate", "150"];
    let out = emq_bench(&[&args[..], &overrides[..]].concat(), tmp.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is summary.json");
    assert_eq!(summary["scenario"]["consumers"]["count"], 3, "{}", summary["scenario"]);
    assert_eq!(summary["scenario"]["producers"]["rate"], 150.0, "{}", summary["scenario"]);
    let copy = std::fs::read_to_string(dir.join("scenario.toml")).unwrap();
    assert!(copy.starts_with("# smoke with --set consumers.count=3 --set consumers.work=\"1ms\""), "{copy}");
    assert!(copy.contains("rate = 150.0"), "{copy}");

    // Checked as the file is: a type, a bound, an unknown key; a value is no table.
    for (set, expected) in [
        ("consumers.count=lots", "consumers.count"),
        ("consumers.stall=1.5", "consumers.stall"),
        ("producers.pipelin=4", "pipelin"),
        ("producers.count.x=1", "producers.count holds a value of type integer"),
        ("producers", "expected KEY=VALUE"),
    ] {
        let out = emq_bench(&["run", "smoke", "--set", set], tmp.path());
        assert_eq!(out.status.code(), Some(2), "--set {set}: {}", stderr(&out));
        assert!(stderr(&out).contains(expected), "--set {set}: {}", stderr(&out));
    }
    let out = emq_bench(&["run", "smoke", "--rate=-5"], tmp.path());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("producers.rate"), "{}", stderr(&out));
}
