//! `emq-bench capacity` against a server of known capacity: an `enqueue.lua` that spends a
//! fixed 2 ms of server CPU per call makes the embedded valkey-server a single queue that can
//! serve at most 500 enqueues a second. The search must land below that bound and near it, and
//! runs at 0.85 × and 1.25 × its answer must meet and miss the objective.

mod support;

use emq_bench::capacity::{ProbeOutcome, SearchEnd, Slo, SloDecision};
use emq_bench::cli::capacity::CapacityArgs;
use emq_bench::cmd::Outcome;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The heavy tests take turns: their figures are rates a busy box would shift.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Server CPU per enqueue, ms.
const ENQUEUE_MS: f64 = 2.0;

fn never() -> std::future::Pending<()> {
    std::future::pending()
}

/// A copy of `lua/` whose `enqueue.lua` busy-waits ENQUEUE_MS of server CPU first.
fn slow_enqueue_lua(dir: &Path) -> PathBuf {
    // os.clock (CPU time) advances while busy; TIME is frozen for the length of a script.
    let busy = format!("local c0 = os.clock()\nwhile os.clock() - c0 < {} do end\n", ENQUEUE_MS / 1000.0);
    support::lua_copy(dir, "lua-2ms", "enqueue", |source| busy + &source)
}

fn scenario(dir: &Path) -> PathBuf {
    let path = dir.join("known.toml");
    // 64 producer lanes carry ~500/s at tens of ms each (Little's law); the consumers are
    // cheap beside the 2 ms enqueue.
    std::fs::write(
        &path,
        "name = \"known\"\nseed = 11\nduration = \"10s\"\nwarmup = \"1s\"\ndrain = \"5s\"\nqueues = \"known\"\n\
         [producers]\ncount = 4\nconnections = 2\npipeline = 16\nrate = 100.0\n\
         [consumers]\ncount = 2\nconnections = 1\npipeline = 4\nbatch = 16\npoll = \"5ms\"\n",
    )
    .unwrap();
    path
}

fn capacity_args(scenario: &Path, lua: &Path, out: &Path, slo: &str) -> CapacityArgs {
    let mut run = support::run_args(scenario, out);
    run.lua_dir = Some(lua.to_path_buf());
    CapacityArgs {
        slos: vec![slo.to_string()],
        budget: Duration::from_secs(240),
        probe: Duration::from_secs(8),
        start_rate: Some(200.0),
        tolerance: 0.1,
        run,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_search_finds_a_known_capacity_and_its_neighbours_agree() {
    let _turn = TURN.lock().await;
    let tmp = tempfile::tempdir().unwrap();
    let lua = slow_enqueue_lua(tmp.path());
    let scenario = scenario(tmp.path());
    let slo = "enqueue.p99 < 50ms";
    let out = tmp.path().join("cap");
    let result = emq_bench::cmd::capacity::capacity(capacity_args(&scenario, &lua, &out, slo), never()).await.unwrap();
    let report = &result.report;
    let table = &result.table;
    assert_eq!(report.ended, SearchEnd::Found, "{table}");
    assert_eq!(result.outcome, Outcome::Success, "{table}");
    let r = report.sustainable_rate.expect("a rate");
    let bound = 1000.0 / ENQUEUE_MS;
    // The server cannot serve more than 1/2 ms; the objective is crossed near it (an M/D/1
    // queue's p99 reaches 50 ms at about 0.9 of it), never at half of it.
    assert!(r <= bound * 1.05 && r >= bound * 0.5, "R* = {r} against a bound of {bound}/s\n{table}");
    let (lo, hi) = (report.interval.lo.unwrap(), report.interval.hi.unwrap());
    assert!(hi - lo <= 0.1 * lo, "{table}");
    // The last probe re-checked the answer with the longest probe, and it held.
    let last = report.probes.last().unwrap();
    assert_eq!((last.rate, last.outcome), (r, Some(ProbeOutcome::Sustained)), "{table}");
    assert!(!report.binding.is_empty(), "{table}");
    for file in ["capacity.json", "capacity.html"] {
        assert!(out.join(file).exists(), "{file}");
    }
    let html = support::assert_offline_page(&out.join("capacity.html"));
    assert!(html.contains("sustained rate") && html.contains("<svg"), "the curve is drawn");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("capacity.json")).unwrap()).unwrap();
    assert_eq!(json["sustainable_rate"].as_f64(), Some(r));
    for p in &report.probes {
        assert!(out.join(&p.folder).join("summary.json").exists(), "{}", p.folder);
    }

    // Separate runs beside the answer: 0.85 × R* meets the objective (its whole interval under
    // the limit) and is steady; 1.25 × R* does not meet it or is not steady.
    let objective = Slo::parse(slo).unwrap();
    for (factor, meets) in [(0.85, true), (1.25, false)] {
        let mut args = support::run_args(&scenario, &tmp.path().join(format!("at-{factor}")));
        args.lua_dir = Some(lua.clone());
        args.rate = Some(r * factor);
        args.duration = Some(Duration::from_secs(17));
        let run = emq_bench::cmd::run::run(args, never()).await.unwrap();
        let reading = objective.read(&run.summary.scripts);
        let steady = run.summary.steady.as_ref().and_then(|s| s.steady);
        let held = reading.decision == SloDecision::Holds && steady == Some(true);
        assert_eq!(held, meets, "{factor} × R* = {:.0}/s: {reading:?}, steady {steady:?}\n{}", r * factor, run.table);
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
