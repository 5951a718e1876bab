//! Errors that tell a new user what to do: each runs the binary as a user would and checks that
//! the message names the fix (the flag, variable, URL or name to use), with exit code 2.

mod support;

use emq_bench::server::{EmbeddedServer, ServerOptions};
use std::process::{Command, Output};

/// `emq-bench ARGS` from the project's root, with `env` set and no password in the
/// environment unless `env` gives one.
fn emq_bench<S: AsRef<std::ffi::OsStr>>(args: &[S], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_emq-bench"));
    cmd.args(args).current_dir(env!("CARGO_MANIFEST_DIR")).env_remove("EMQ_PASSWORD");
    for (name, value) in env {
        cmd.env(name, value);
    }
    cmd.output().expect("run emq-bench")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_target_that_wants_a_password_names_where_one_comes_from_and_never_shows_it() {
    let server = EmbeddedServer::start(&ServerOptions {
        config: vec![("requirepass".into(), "s3cret-pw".into())],
        ..Default::default()
    })
    .expect("start valkey-server (run scripts/setup)");
    let url = server.url();
    let tmp = tempfile::tempdir().unwrap();
    let run = |name: &str, extra: &[&str]| {
        let out = tmp.path().join(name);
        let mut args = vec!["run", "smoke", "--url", &url, "--duration", "1s", "--quiet", "--out"];
        args.push(out.to_str().unwrap());
        args.extend(extra);
        args.into_iter().map(str::to_owned).collect::<Vec<_>>()
    };

    let none = emq_bench(&run("none", &[]), &[]);
    assert_eq!(none.status.code(), Some(2), "{}", stderr(&none));
    assert!(stderr(&none).contains("NOAUTH"), "{}", stderr(&none));
    assert!(stderr(&none).contains("set $EMQ_PASSWORD (or give --pass"), "{}", stderr(&none));

    for (how, env, extra) in [
        ("$EMQ_PASSWORD", vec![("EMQ_PASSWORD", "hunter2-wrong")], vec![]),
        ("--pass", vec![], vec!["--pass", "hunter2-wrong"]),
        ("--user", vec![("EMQ_PASSWORD", "s3cret-pw")], vec!["--user", "nobody"]),
    ] {
        let out = emq_bench(&run(how, &extra), &env);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{how}: {err}");
        assert!(err.contains("refused the user and password given: check --user and the password"), "{how}: {err}");
        assert!(!err.contains("hunter2") && !err.contains("s3cret"), "{how}: a password leaked: {err}");
    }
}

#[test]
fn a_url_without_its_scheme_is_offered_with_one() {
    for (url, says) in [
        ("127.0.0.1:7601", "did you mean redis://127.0.0.1:7601? (rediss://127.0.0.1:7601 for TLS)"),
        ("localhost:7601", "did you mean redis://localhost:7601?"),
        ("u:hunter2@127.0.0.1:7601", "did you mean redis://u:***@127.0.0.1:7601?"),
    ] {
        let out = emq_bench(&["run", "smoke", "--url", url, "--quiet"], &[]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{url}: {err}");
        assert!(err.contains(says), "{url}: {err}");
        assert!(!err.contains("hunter2"), "{url}: the password leaked: {err}");
    }
}

#[test]
fn a_scenario_path_that_does_not_exist_offers_the_shipped_names_close_to_it() {
    let out = emq_bench(&["run", "scenarios/soak.toml", "--quiet"], &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("scenarios/soak.toml: cannot read the scenario file"), "{err}");
    assert!(
        err.contains(
            "did you mean the shipped fencing-soak or bullmq-fencing-soak? shipped scenarios run by their name: \
             `emq-bench run fencing-soak`"
        ),
        "{err}"
    );
    // Nothing close: every shipped name.
    let out = emq_bench(&["run", "scenarios/latency.toml", "--quiet"], &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("shipped scenarios run by their name: bullmq-fencing-soak, "), "{err}");
    assert!(err.contains("smoke, throughput"), "{err}");
    // A bare name lists them all, and the close ones.
    let out = emq_bench(&["run", "soak", "--quiet"], &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("nor is it a shipped scenario: bullmq-fencing-soak, "), "{err}");
    assert!(err.contains("; did you mean fencing-soak or bullmq-fencing-soak?"), "{err}");
}

#[test]
fn a_misspelt_objective_names_the_scripts_and_any_percentile_is_accepted() {
    let out = emq_bench(&["capacity", "smoke", "--slo", "claimm.p99 < 5ms"], &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("\"claimm\" is not a script name; did you mean claim?"), "{err}");
    assert!(err.contains("EchoMQ's scripts: enqueue, enqueue_delayed, claim, complete, fail,"), "{err}");
    assert!(err.contains("BullMQ's: addStandardJob,"), "{err}");
    let out = emq_bench(&["capacity", "smoke", "--slo", "claim.p100 < 5ms"], &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("expected a percentile, `p` and a number above 0 and below 100"), "{err}");

    // p95 end to end: one probe (the budget fits one), its reading taken from the merged
    // histogram, between the probe's own p90 and p99.
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("p95.toml");
    std::fs::write(
        &scenario,
        "name = \"p95\"\nseed = 3\nduration = \"10s\"\nwarmup = \"0s\"\ndrain = \"2s\"\nqueues = \"p95\"\n\
         [producers]\ncount = 2\nrate = 300.0\n[consumers]\ncount = 2\n",
    )
    .unwrap();
    let dir = tmp.path().join("cap");
    let args = ["capacity", scenario.to_str().unwrap(), "--slo", "enqueue.p95 < 1s", "--budget", "14s", "--out"];
    let out = emq_bench(&[&args[..], &[dir.to_str().unwrap()]].concat(), &[]);
    let err = stderr(&out);
    assert!(matches!(out.status.code(), Some(0 | 3)), "{err}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("capacity.json")).unwrap()).unwrap();
    let probe = &report["probes"][0];
    let reading = &probe["slos"][0];
    assert_eq!(reading["slo"], "enqueue.p95 < 1s", "{report}");
    assert!((reading["allowed"].as_f64().unwrap() - 0.05).abs() < 1e-9, "{report}");
    let (p95, latency) = (reading["value_us"].as_u64().unwrap(), &probe["latency_us"]["enqueue"]);
    let (p90, p99) = (latency["p90"].as_u64().unwrap(), latency["p99"].as_u64().unwrap());
    assert!(p90 <= p95 && p95 <= p99, "p90 {p90} p95 {p95} p99 {p99}");
    assert!(reading["hi_us"].as_u64().is_some_and(|hi| hi >= p95), "{report}");
}

#[test]
fn an_objective_on_a_script_the_scenario_never_calls_is_refused_before_anything_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cap");
    let started = std::time::Instant::now();
    let out = emq_bench(&["capacity", "throughput", "--slo", "fail.p99 < 5ms", "--out", dir.to_str().unwrap()], &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--slo \"fail.p99 < 5ms\": throughput: the scenario never calls fail"), "{err}");
    assert!(err.contains("(its load calls enqueue, claim, complete, reap, promote)"), "{err}");
    assert!(!err.contains("probe"), "no probe ran: {err}");
    assert!(!dir.exists(), "a refused search leaves no folder");
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "refused at once");
}

#[test]
fn without_a_terminal_the_first_progress_line_comes_as_the_load_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let started = std::time::Instant::now();
    // stderr is a pipe: the progress goes to the log as lines, every 10 s by default.
    let out = emq_bench(&["run", "smoke", "--duration", "3s", "--no-check", "--out", dir.to_str().unwrap()], &[]);
    let wall = started.elapsed().as_secs();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("emq-bench: 20") && l.contains("s | ")).collect();
    assert!(!lines.is_empty(), "no progress line in a 3 s run:\n{err}");
    // `emq-bench: 2026-12-06T01:02:03Z    0s | ... jobs pending ...`: in the load's first second.
    let elapsed = lines[0].split_whitespace().nth(2).unwrap();
    assert!(matches!(elapsed, "0s" | "1s"), "the first line came at {elapsed}:\n{err}");
    assert!(lines.len() as u64 <= 1 + wall / 10, "then one every 10 s, not more:\n{err}");
}
