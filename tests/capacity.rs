//! `emq-bench capacity` against a server of known capacity: an `enqueue.lua` that spends a
//! fixed 0.5 ms of server CPU per call makes the embedded valkey-server a single queue that can
//! serve at most 2 000 enqueues a second. The search must land below that bound and near it,
//! a run at 0.85 × its bracket's low end must meet the objective, and one above both 1.25 × its
//! high end and the server's bound must miss it.

mod support;

use emq_bench::capacity::{ProbeOutcome, SearchEnd};
use emq_bench::cli::capacity::CapacityArgs;
use emq_bench::cmd::CommandOutcome;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The heavy tests take turns: their figures are rates a busy box would shift.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Server CPU per enqueue, ms.
const ENQUEUE_MS: f64 = 0.5;

fn never() -> std::future::Pending<()> {
    std::future::pending()
}

/// A copy of `lua/` whose `enqueue.lua` busy-waits ENQUEUE_MS of server CPU first.
fn slow_enqueue_lua(dir: &Path) -> PathBuf {
    // os.clock (CPU time) advances while busy; TIME is frozen for the length of a script.
    let busy = format!("local c0 = os.clock()\nwhile os.clock() - c0 < {} do end\n", ENQUEUE_MS / 1000.0);
    support::lua_copy(dir, "lua-busy", "enqueue", |source| busy + &source)
}

fn scenario(dir: &Path) -> PathBuf {
    let path = dir.join("known.toml");
    // 64 producer lanes carry 2 000/s at tens of ms each (Little's law); the consumers are
    // cheap beside the 0.5 ms enqueue. Retention keeps the keyspace the same size from probe
    // to probe and second to second: without it the server's cost per call grows with the
    // finished jobs it holds, a trend of the run's length rather than of its rate.
    std::fs::write(
        &path,
        "name = \"known\"\nseed = 11\nduration = \"10s\"\nwarmup = \"1s\"\ndrain = \"5s\"\nqueues = \"known\"\n\
         [producers]\ncount = 4\nconnections = 2\npipeline = 16\nrate = 100.0\n\
         [consumers]\ncount = 2\nconnections = 1\npipeline = 4\nbatch = 16\npoll = \"5ms\"\n\
         [maintenance]\nclean = \"500ms\"\nretain = \"1s\"\n",
    )
    .unwrap();
    path
}

fn capacity_args(scenario: &Path, lua: &Path, out: &Path, slo: &str) -> CapacityArgs {
    let mut run = support::run_args(scenario, out);
    run.lua_dir = Some(lua.to_path_buf());
    CapacityArgs {
        slos: vec![slo.to_string()],
        budget: Duration::from_secs(200),
        probe: Duration::from_secs(8),
        start_rate: Some(400.0),
        tolerance: 0.15,
        run,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_search_finds_a_known_capacity_and_its_neighbours_agree() {
    let _turn = TURN.lock().await;
    let tmp = tempfile::tempdir().unwrap();
    let lua = slow_enqueue_lua(tmp.path());
    let scenario = scenario(tmp.path());
    let slo = "enqueue.p99 < 20ms";
    let out = tmp.path().join("cap");
    let result = emq_bench::cmd::capacity::capacity(capacity_args(&scenario, &lua, &out, slo), never()).await.unwrap();
    let report = &result.report;
    let table = &result.table;
    eprintln!("{table}");
    // A box so loaded that the harness waited for a CPU measured itself: the search says so,
    // names no rate, and there is no boundary to check.
    if report.ended == SearchEnd::ClientBound {
        assert_eq!((result.outcome, report.sustainable_rate), (CommandOutcome::Inconclusive, None), "{table}");
        assert!(report.probes.iter().any(|p| p.client_bound), "{table}");
        eprintln!("the harness's host was the bottleneck: nothing to check against the known capacity");
        return;
    }
    // A loaded box moves the boundary between probes; the search may then spend its budget
    // before the re-check: its bracket is still what it knows, and is checked below.
    assert!(matches!(report.ended, SearchEnd::Found | SearchEnd::Budget), "{table}");
    if report.ended == SearchEnd::Found {
        assert_eq!(result.outcome, CommandOutcome::Success, "{table}");
        assert_eq!(report.sustainable_rate, report.interval.lo, "{table}");
        let last = report.probes.last().unwrap();
        assert_eq!((Some(last.rate), last.outcome), (report.interval.lo, Some(ProbeOutcome::Sustained)), "{table}");
    } else {
        assert_eq!((result.outcome, report.sustainable_rate), (CommandOutcome::Inconclusive, None), "{table}");
    }
    let (lo, hi) = (report.interval.lo.expect("a rate sustained"), report.interval.hi.expect("a rate not sustained"));
    let bound = 1000.0 / ENQUEUE_MS;
    // The server cannot serve more than 1 / 0.5 ms; the objective is crossed below it (an
    // M/D/1 queue's p99 reaches 40 service times at about 0.9 of it), never far below.
    assert!(lo < bound && lo >= bound * 0.3, "sustained {lo} against a bound of {bound}/s\n{table}");
    assert!(!report.binding.is_empty(), "{table}");
    for file in ["capacity.json", "capacity.html"] {
        assert!(out.join(file).exists(), "{file}");
    }
    let html = support::assert_offline_page(&out.join("capacity.html"));
    assert!(html.contains("<svg"), "the curve is drawn");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("capacity.json")).unwrap()).unwrap();
    assert_eq!(json["interval"]["lo"].as_f64(), Some(lo));
    for p in &report.probes {
        assert!(out.join(&p.folder).join("summary.json").exists(), "{}", p.folder);
    }

    // Separate runs beside the answer: 0.85 × the low end meets the objective (its p99's whole
    // interval under the limit); a rate above 1.25 × the high end and the server's bound misses
    // it or is not steady. The high one is at least the bound because on this 2-core box, shared
    // by the server, the harness and other tests, one noisy probe can put the search's high end
    // far below the server's limit (a clean-clone suite's search saw enqueue's p99 at 36 ms at
    // 1 200 jobs/s, a run beside it 10 ms at 1 250): a rate a quarter above it may then hold, and
    // only a rate the server cannot serve misses with certainty. The low one's
    // steadiness is not asserted: on this 2-core box the server and the harness share, a 13 s
    // window's per-second p99 trend is noise there (two clean-clone suite runs found claim's or
    // enqueue's p99 rising 50-60 % at 765 and 1 190 jobs/s, with p99 at a third of the limit).
    // Their 12 s warmup outlasts the server's settling: a fresh keyspace's per-second p99 climbs
    // by about a third over its first ten seconds at this load.
    let limit_us = 20_000;
    for (rate, meets) in [(lo * 0.85, true), ((hi * 1.25).max(bound * 1.1), false)] {
        let mut args = support::run_args(&scenario, &tmp.path().join(format!("at-{rate:.0}")));
        args.lua_dir = Some(lua.clone());
        args.rate = Some(rate);
        // The duration is set with the warmup: each setting is checked as it is written, and
        // the scenario's own 10 s is no longer than 12 s of warmup.
        let set = |text: &str| emq_bench::scenario::settings::Setting::parse(text).unwrap();
        args.set = vec![set("duration=25s"), set("warmup=12s")];
        let run = emq_bench::cmd::run::run(args, never()).await.unwrap();
        let enqueue = run.summary.scripts.iter().find(|s| s.script == "enqueue").expect("enqueue row");
        let p99 = &enqueue.latency_us.intervals.p99;
        let steady = run.summary.steady.as_ref().and_then(|s| s.steady);
        let within = p99.hi_us.is_some_and(|hi| hi < limit_us);
        let held = if meets { within } else { within && steady == Some(true) };
        assert_eq!(held, meets, "{rate:.0}/s: p99 {p99:?}, steady {steady:?}\n{}", run.table);
    }
}

#[tokio::test]
async fn the_search_refuses_what_it_sets_itself_and_bad_objectives() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = scenario(tmp.path());
    let lua = support::lua_dir();
    let out = tmp.path().join("refused");
    let refused = |edit: fn(&mut CapacityArgs)| {
        let mut args = capacity_args(&scenario, &lua, &out, "claim.p99 < 5ms");
        edit(&mut args);
        args
    };
    for (args, says) in [
        (refused(|a| a.run.rate = Some(10.0)), "--rate: the search sets the rate"),
        (refused(|a| a.run.duration = Some(Duration::from_secs(9))), "--duration"),
        (refused(|a| a.run.repeat = 2), "--repeat"),
        (refused(|a| a.slos = vec!["claim.p99 > 5ms".into()]), "the operator must be < or <="),
        (refused(|a| a.start_rate = Some(0.5)), "--start-rate 0.5"),
    ] {
        let err = emq_bench::cmd::capacity::capacity(args, never()).await.err().expect("refused");
        assert_eq!(err.exit_code(), 2, "{err}");
        assert!(err.to_string().contains(says), "{err}");
    }
    assert!(!out.exists(), "a refused search leaves no folder");
}

/// A CI job's `EMQ_EXPORT_BMF` and `EMQ_METRICS_ADDR` (meant for its runs) do not stop a search: it is left out and
/// said so; the same file given as a flag is refused. (`--budget 1s` then ends both before any
/// server is touched: shorter than one probe.)
#[test]
fn an_export_set_in_the_environment_is_left_out_and_the_flag_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = scenario(tmp.path());
    let capacity = |env: bool| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_emq-bench"));
        cmd.arg("capacity").arg(&scenario).args(["--slo", "claim.p99 < 5ms", "--budget", "1s"]);
        cmd.env_remove("EMQ_EXPORT_BMF").env_remove("EMQ_EXPORT_GAB").env_remove("EMQ_METRICS_ADDR");
        if env {
            // A host name: compared as clap reads it, not as text.
            cmd.env("EMQ_EXPORT_BMF", tmp.path().join("bmf.json")).env("EMQ_METRICS_ADDR", "localhost:9464");
        } else {
            cmd.arg("--export-bmf").arg(tmp.path().join("bmf.json"));
        }
        let out = cmd.output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, stderr) = capacity(true);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("$EMQ_EXPORT_BMF is set; a search does not use it"), "{stderr}");
    assert!(stderr.contains("$EMQ_METRICS_ADDR is set; a search does not use it"), "{stderr}");
    assert!(stderr.contains("--budget 1s: shorter than one probe"), "{stderr}");
    let (code, stderr) = capacity(false);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("capacity: --export-bmf/--export-gab"), "{stderr}");
    assert!(!tmp.path().join("bmf.json").exists());
}

/// A producers-only scenario (`[consumers] count = 0`): nobody drains the backlog, so the
/// steadiness check leaves the backlog and throughput out and the rate held and each p99's
/// trend decide. The search must sustain some rate against the 0.5 ms enqueue, say which
/// criteria applied, and plot against the enqueues sent per second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producers_only_search_finds_a_rate_on_the_enqueues_alone() {
    let _turn = TURN.lock().await;
    let tmp = tempfile::tempdir().unwrap();
    let lua = slow_enqueue_lua(tmp.path());
    let scenario = tmp.path().join("producers.toml");
    std::fs::write(
        &scenario,
        "name = \"producers\"\nseed = 12\nduration = \"10s\"\nwarmup = \"1s\"\ndrain = \"5s\"\nqueues = \"producers\"\n\
         [producers]\ncount = 4\nconnections = 2\npipeline = 16\nrate = 100.0\n[consumers]\ncount = 0\n",
    )
    .unwrap();
    let out = tmp.path().join("cap");
    let mut args = capacity_args(&scenario, &lua, &out, "enqueue.p99 < 20ms");
    args.budget = Duration::from_secs(75);
    args.tolerance = 0.3;
    let result = emq_bench::cmd::capacity::capacity(args, never()).await.unwrap();
    let (report, table) = (&result.report, &result.table);
    eprintln!("{table}");
    assert_eq!(report.workload, "producers only");
    assert_eq!(report.criteria, ["objectives", "rate_carried", "steady.rate", "steady.p99", "verdict"]);
    // 400/s is a fifth of what the server serves: sustained, unless the box starved the client
    // (then said so, and no rate named from it).
    let first = &report.probes[0];
    assert!(first.passed, "{table}");
    if first.client_bound {
        assert_ne!(first.outcome, Some(ProbeOutcome::NotSustained), "{table}");
    } else {
        assert!(report.interval.lo.is_some(), "a rate sustained\n{table}");
    }
    for p in &report.probes {
        assert_eq!(p.completed_per_sec, 0.0, "nobody finishes a job\n{table}");
        assert!(p.not_steady.iter().all(|l| !l.starts_with("backlog") && !l.starts_with("throughput")), "{table}");
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join(&p.folder).join("summary.json")).unwrap()).unwrap();
        assert_eq!(summary["steady"]["criteria"], serde_json::json!(["rate", "p99"]), "{}", p.folder);
        assert!(summary["client"]["cores"].as_u64().unwrap() >= 1, "{}", p.folder);
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("capacity.json")).unwrap()).unwrap();
    assert_eq!(json["workload"], "producers only");
    let html = support::assert_offline_page(&out.join("capacity.html"));
    assert!(html.contains("against enqueues sent per second"), "the chart's x axis is the enqueue rate");
}
