//! Whole-file tests: the shipped scenarios load, defaults resolve, and every kind
//! of mistake is refused with the file, the field and (where possible) the line.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::SeedableRng;

use super::*;

const BASE: &str = "name = \"t\"\nseed = 1\nduration = \"1s\"\n";

fn ok(extra: &str) -> Plan {
    let text = format!("{BASE}{extra}");
    parse(&text, Path::new("scenarios/x.toml")).unwrap_or_else(|e| panic!("{e}\n---\n{text}"))
}

/// Parses `text` (not prefixed by `BASE`), expects a refusal whose message
/// names the file and contains every needle; returns the error.
fn refused_raw(text: &str, needles: &[&str]) -> ScenarioError {
    let e = parse(text, Path::new("scenarios/x.toml")).expect_err(text);
    let msg = e.to_string();
    assert!(msg.starts_with("scenarios/x.toml"), "no file in: {msg}");
    for n in needles {
        assert!(msg.contains(n), "{n:?} missing from: {msg}");
    }
    e
}

fn refused(extra: &str, needles: &[&str]) -> ScenarioError {
    refused_raw(&format!("{BASE}{extra}"), needles)
}

#[test]
fn every_shipped_scenario_loads() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let plan = load(&path).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(Some(plan.name.as_str()), path.file_stem().and_then(|s| s.to_str()));
            n += 1;
        }
    }
    assert!(n >= 5, "only {n} scenarios in {}", dir.display());
}

#[test]
fn a_minimal_file_gets_the_defaults() {
    let p = ok("");
    assert_eq!(p.stop, Stop::Duration(Duration::from_secs(1)));
    assert_eq!((p.warmup, p.drain), (Duration::ZERO, Duration::from_secs(30)));
    assert_eq!(p.queues, ["bench"]);
    assert_eq!(p.target, TargetPlan::Embedded { options: Default::default(), cluster: None });
    let mut rng = SmallRng::seed_from_u64(0);
    assert_eq!(p.producers.payload.sample(&mut rng), 256);
    assert!(p.producers.open_loop.is_none());
    assert_eq!(p.producers.max_attempts, 3);
    assert_eq!(p.consumers.lease, Duration::from_secs(5));
    assert_eq!(p.consumers.zombie_delay, Duration::from_secs(10));
    assert!(p.consumers.work.is_zero() && p.consumers.extend_every.is_none());
    assert_eq!(p.consumers.backoff, Backoff::None);
    assert_eq!(p.maintenance.reap, Duration::from_millis(100));
    assert_eq!((p.maintenance.clean, p.maintenance.retain), (None, Duration::from_secs(30)));
}

#[test]
fn retention_is_off_unless_asked_and_bounded() {
    let p = ok("[maintenance]\nclean = \"1s\"\nretain = \"5s\"\n");
    assert_eq!((p.maintenance.clean, p.maintenance.retain), (Some(Duration::from_secs(1)), Duration::from_secs(5)));
    assert_eq!(ok("[maintenance]\nclean = \"1s\"\nretain = \"0s\"\n").maintenance.retain, Duration::ZERO);
    refused("[maintenance]\nclean = \"0s\"", &["maintenance.clean", "an interval > 0"]);
    refused("[maintenance]\nclean = \"2h\"", &["maintenance.clean", "at most 1h"]);
    refused("[maintenance]\nretain = \"8days\"", &["maintenance.retain", "at most 7days"]);
    refused("protocol = \"bullmq\"\n[maintenance]\nclean = \"1s\"", &["maintenance.clean", "removeOnComplete"]);
}

#[test]
fn values_resolve_to_working_units() {
    let p = ok(
        "queues = 3\n[target]\nurl = \"redis://u:pw@h:6379/2\"\n\
        [producers]\ncount = 4\nconnections = 2\nrate = 500\narrival = \"uniform\"\npayload = \"1KiB\"\n\
        [consumers]\nlease = \"300ms\"\nextend = true\nbackoff = { exponential = { base = \"10ms\", max = \"1s\" } }\n",
    );
    assert_eq!(p.queues, ["bench-0", "bench-1", "bench-2"]);
    assert_eq!(p.target, TargetPlan::Url("redis://u:pw@h:6379/2".into()));
    assert_eq!(p.scenario.target.redacted().url.as_deref(), Some("redis://u:***@h:6379/2"));
    let ol = p.producers.open_loop.clone().unwrap();
    assert_eq!((ol.rate_per_sec, ol.arrival), (500.0, Arrival::Uniform));
    assert_eq!(p.producers.payload.max_bytes(), 1024);
    assert_eq!(p.consumers.extend_every, Some(Duration::from_millis(150)));
    assert_eq!(p.consumers.backoff.delay(2), Duration::from_millis(20));
}

#[test]
fn jobs_mode_and_overrides() {
    let text = "name = \"t\"\nseed = 1\njobs = 1000\nwarmup = \"1s\"\n";
    let p = parse(text, Path::new("x.toml")).unwrap();
    assert_eq!(p.stop, Stop::Jobs(1000));
    let p = p.with_overrides(Some(Duration::from_secs(5)), Some(9)).unwrap();
    assert_eq!((p.stop, p.seed, p.scenario.seed), (Stop::Duration(Duration::from_secs(5)), 9, 9));
    assert_eq!(p.scenario.jobs, None);
    let e = p.with_overrides(Some(Duration::from_millis(500)), None).unwrap_err();
    assert!(e.to_string().contains("--duration"), "{e}");
}

#[test]
fn the_raw_scenario_round_trips() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/smoke.toml");
    let plan = load(&path).unwrap();
    let text = toml::to_string(&plan.scenario).unwrap();
    let again = parse(&text, &path).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(again.scenario, plan.scenario);
}

#[test]
fn load_reads_files_and_reports_io_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.toml");
    std::fs::write(&path, BASE).unwrap();
    assert_eq!(load(&path).unwrap().name, "t");
    let e = load(&dir.path().join("missing.toml")).unwrap_err();
    assert!(matches!(e, ScenarioError::Read { .. }) && e.to_string().contains("missing.toml"));
}

#[test]
fn unknown_fields_are_refused_at_every_depth() {
    refused("colour = 1", &["unknown field `colour`", "line 4"]);
    refused("[producers]\ncont = 1", &["unknown field `cont`", "line 5"]);
    refused("[target]\nhost = \"x\"", &["unknown field `host`"]);
    refused("[maintenance]\nlimmit = 1", &["unknown field `limmit`"]);
    refused("[consumers]\nbackoff = { exponential = { base = \"1ms\", max = \"2ms\", jitter = 1 } }", &["jitter"]);
    refused("[producers]\npayload = { lognormal = { median = 64, p90 = 128 } }", &["p90"]);
    refused("[sinks]\nx = 1", &["unknown field `sinks`"]);
}

#[test]
fn wrong_types_are_refused_with_the_line() {
    refused_raw("name = \"t\"\nseed = \"one\"\nduration = \"1s\"", &["line 2", "seed"]);
    refused("[producers]\ncount = \"4\"", &["line 5", "an integer count"]);
    refused("[consumers]\nextend = 3", &["true, false, or a renewal interval"]);
    refused("[producers]\npriorities = [1, -2]", &["line 5"]);
    refused("[producers]\nmax_attempts = -1", &[":5: producers.max_attempts = -1, expected an integer in 1..=10000"]);
}

#[test]
fn bad_unit_strings_are_refused_with_the_line() {
    refused("warmup = \"5 parsecs\"", &["line 4", "invalid duration \"5 parsecs\""]);
    refused("[consumers]\nlease = 5", &["line 5", "a duration string with a unit"]);
    refused("[producers]\npayload = \"4 potatoes\"", &["line 5", "invalid size \"4 potatoes\""]);
    refused("[producers]\npayload = { uniform = [\"1KiB\", \"lots\"] }", &["line 5", "invalid size"]);
}

#[test]
fn rule_violations_name_field_found_expected_and_line() {
    let e = refused("[consumers]\nfail = 1.5", &["scenarios/x.toml:5: consumers.fail = 1.5, expected a fraction"]);
    assert_eq!((e.field(), e.line()), (Some("consumers.fail"), Some(5)));
    refused("[producers]\nduplicate = -0.1", &["producers.duplicate = -0.1"]);
    refused(
        "[consumers]\nfail = 0.6\nstall = 0.5",
        &["scenarios/x.toml:6: consumers.stall + consumers.fail = 1.1, expected at most 1"],
    );
    refused("jobs = 5", &[":4: duration + jobs = both set, expected exactly one"]);
    refused_raw("name = \"t\"\nseed = 1", &["duration + jobs = neither set"]);
    refused("[producers]\nrate = 0.0", &[":5: producers.rate = 0"]);
    refused("[producers]\nrate = -5", &["producers.rate = -5"]);
    refused("[producers]\narrival = \"poisson\"", &[":5: producers.arrival", "only together with rate"]);
    refused("queues = \"a b\"", &[":4: queues = \"a b\"", "[A-Za-z0-9_.-]"]);
    refused("queues = \"\"", &["queues = \"\""]);
    refused(&format!("queues = \"{}\"", "q".repeat(65)), &["queues"]);
    refused("queues = 0", &["queues = 0"]);
    refused(
        "[producers]\npayload = { lognormal = { median = \"1KiB\", p99 = 64 } }",
        &[":5: producers.payload.lognormal = median 1024 bytes, p99 64 bytes"],
    );
    refused("[producers]\npriority = 0.5", &[":5: producers.priorities = []"]);
    refused("[producers]\npipeline = 0", &[":5: producers.pipeline = 0, expected an integer in 1..=10000"]);
    refused("[consumers]\npipeline = 0", &["consumers.pipeline = 0"]);
    refused("[producers]\ncount = 2\nconnections = 3", &[":6: producers.connections = 3"]);
    refused("[producers]\npayload = 8", &["producers.payload.fixed = 8 bytes", "between 20 bytes"]);
    refused("[consumers]\nbatch = 1001", &["consumers.batch = 1001"]);
    refused("[consumers]\nlease = \"0s\"", &["consumers.lease"]);
    refused("[consumers]\nlease = \"100ms\"\nextend = \"100ms\"", &[":6: consumers.extend"]);
    refused("[consumers]\nwork = { uniform = [\"5ms\", \"1ms\"] }", &["consumers.work.uniform"]);
    refused("[consumers]\nbackoff = { exponential = { base = \"1s\", max = \"1ms\" } }", &["0 < base <= max"]);
    refused("[maintenance]\nreap = \"0s\"", &["maintenance.reap"]);
    refused("warmup = \"2s\"", &["duration = \"1s\", expected a duration longer than warmup"]);
    refused("[target]\nurl = \"http://h\"", &["target.url"]);
    refused("[target]\nurl = \"redis://:pw@h/x\"", &["target.url", "database number"]);
    refused("[target]\ncacert = \"ca.pem\"", &["user and TLS keys only with a url"]);
    refused("[target]\nurl = \"redis://h\"\nserver = { io-threads = \"2\" }", &["target.server"]);
    refused_raw("name = \"a/b\"\nseed = 1\njobs = 1", &[":1: name"]);
}

/// Every count and size has an upper bound, stated in the message with the
/// file, line and field; values that overflow a u32, are negative or are floats get the same
/// message, not the TOML reader's "expected u32".
#[test]
fn counts_have_upper_bounds_named_in_the_message() {
    let tasks = "expected an integer in 0..=100000 (tasks)";
    refused("[producers]\ncount = 4294967295", &[&format!(":5: producers.count = 4294967295, {tasks}")]);
    refused("[producers]\ncount = 4294967296", &[&format!(":5: producers.count = 4294967296, {tasks}")]);
    refused("[producers]\ncount = -1", &[&format!(":5: producers.count = -1, {tasks}")]);
    refused("[consumers]\ncount = 1e8", &[&format!(":5: consumers.count = 100000000.0, {tasks}")]);
    refused("[consumers]\ncount = 100000000", &[&format!(":5: consumers.count = 100000000, {tasks}")]);
    let pipeline = "expected an integer in 1..=10000 (requests in flight per task)";
    refused("[producers]\npipeline = 1000000", &[&format!(":5: producers.pipeline = 1000000, {pipeline}")]);
    refused("[producers]\npipeline = 2e7", &[&format!(":5: producers.pipeline = 20000000.0, {pipeline}")]);
    refused("[consumers]\npipeline = 10001", &[&format!(":5: consumers.pipeline = 10001, {pipeline}")]);
    refused(
        "[producers]\ncount = 10000\nconnections = 5000",
        &[":6: producers.connections = 5000, expected 1..=4096 (at least 1, at most producers.count and at most 4096)"],
    );
    refused("[consumers]\ncount = 8\nconnections = 9", &[":6: consumers.connections = 9, expected 1..=8"]);
    refused_raw(
        "name = \"t\"\nseed = 1\njobs = 0",
        &[":3: jobs = 0, expected an integer in 1..=10000000 (jobs to enqueue)"],
    );
    refused_raw(
        "name = \"t\"\nseed = 1\njobs = 10000001",
        &[":3: jobs = 10000001, expected an integer in 1..=10000000"],
    );
    refused_raw("name = \"t\"\nseed = 1\njobs = 1e6", &[":3: jobs = 1000000.0, expected an integer in 1..=10000000"]);
    refused("[consumers]\nbatch = 0", &[":5: consumers.batch = 0, expected an integer in 1..=1000 (jobs per claim)"]);
    refused("[consumers]\nprogress = 1001", &[":5: consumers.progress = 1001, expected an integer in 0..=1000"]);
    refused(
        "[producers]\nmax_attempts = 4294967295",
        &[":5: producers.max_attempts = 4294967295, expected an integer in 1..=10000"],
    );
    refused(
        "[maintenance]\nlimit = 100001",
        &[":5: maintenance.limit = 100001, expected an integer in 1..=100000 (ids per call)"],
    );
    let many = (0..1001).map(|i| i.to_string()).collect::<Vec<_>>().join(", ");
    refused(
        &format!("[producers]\npriorities = [{many}]"),
        &[":5: producers.priorities = 1001 entries, expected at most 1000"],
    );
    let pairs = (0..1001).map(|i| format!("[{}, 1]", 20 + i)).collect::<Vec<_>>().join(", ");
    refused(
        &format!("[producers]\npayload = {{ weighted = [{pairs}] }}"),
        &[":5: producers.payload.weighted = 1001 pairs, expected at most 1000 [VALUE, WEIGHT] pairs"],
    );
    refused(
        "[producers]\npayload = \"65MiB\"",
        &[":5: producers.payload.fixed = 68157440 bytes, expected between 20 bytes and 67108864 bytes"],
    );
}

/// A role's requests in flight (count × pipeline) and its payload bytes in flight have bounds
/// of their own, with messages that spell the product.
#[test]
fn in_flight_products_are_bounded() {
    refused(
        "[producers]\ncount = 1000\npipeline = 1000",
        &[":6: producers.count × producers.pipeline = 1000 × 1000 = 1000000, expected at most 250000 requests in flight per role"],
    );
    refused(
        "[consumers]\ncount = 100000\npipeline = 3",
        &[":6: consumers.count × consumers.pipeline = 100000 × 3 = 300000, expected at most 250000"],
    );
    refused(
        "[producers]\ncount = 64\npipeline = 16\npayload = \"64MiB\"",
        &[":7: producers.count × producers.pipeline × largest payload = 64 × 16 × 64.0 MiB = 64.0 GiB, \
           expected at most 1.0 GiB of payload in flight per role"],
    );
    refused(
        "[producers]\npayload = { uniform = [20, \"1MiB\"] }\n[consumers]\ncount = 4\npipeline = 4\nbatch = 1000",
        &[":9: consumers.count × consumers.pipeline × consumers.batch × largest payload = 4 × 4 × 1000 × 1.0 MiB = 15.6 GiB"],
    );
    // The largest of each still resolves.
    let p = ok("[producers]\ncount = 100000\nconnections = 4096\n[consumers]\ncount = 250\npipeline = 1000\n");
    assert_eq!((p.producers.count, p.producers.connections), (100_000, 4096));
    assert_eq!(p.consumers.count * p.consumers.pipeline, 250_000);
    let p = ok("[producers]\ncount = 16\npayload = \"64MiB\"\n[consumers]\nbatch = 16\n");
    assert_eq!(p.producers.payload.max_bytes(), 64 << 20);
}

/// Durations are bounded too: a run length past a week, or a lease, poll or interval past an
/// hour, is refused (a `duration = "500000000000y"` would overflow an `Instant`).
#[test]
fn durations_have_upper_bounds() {
    refused_raw(
        "name = \"t\"\nseed = 1\nduration = \"500000000000y\"",
        &[":3: duration = \"500000000000y\", expected a duration of at most 7days"],
    );
    refused("drain = \"8days\"", &[":4: drain = \"8days\", expected a duration of at most 7days"]);
    refused_raw(
        "name = \"t\"\nseed = 1\njobs = 5\nwarmup = \"8days\"",
        &[":4: warmup = \"8days\", expected a duration of at most 7days"],
    );
    refused(
        "[consumers]\nlease = \"500000000000y\"",
        &[":5: consumers.lease = \"500000000000y\", expected a lease of at least 1ms and at most 1h"],
    );
    refused("[consumers]\npoll = \"2h\"", &[":5: consumers.poll = \"2h\", expected a duration of at most 1h"]);
    refused("[consumers]\nzombie_delay = \"2h\"", &[":5: consumers.zombie_delay"]);
    refused("[consumers]\nbackoff = { fixed = \"2h\" }", &[":5: consumers.backoff.fixed"]);
    refused(
        "[consumers]\nbackoff = { exponential = { base = \"1s\", max = \"2h\" } }",
        &["consumers.backoff.exponential.max"],
    );
    refused(
        "[maintenance]\npromote = \"2h\"",
        &[":5: maintenance.promote = \"2h\", expected an interval > 0 and at most 1h"],
    );
}

/// A rate faster than anything can send is refused, not run as a closed loop.
#[test]
fn rates_beyond_pacing_are_refused() {
    refused(
        "[producers]\nrate = 1e12",
        &[":5: producers.rate = 1000000000000, expected a rate of at most 10000000 jobs/s (the schedule's gap would be under 0.1 µs"],
    );
    assert_eq!(ok("[producers]\nrate = 1e7").producers.open_loop.as_ref().unwrap().rate_per_sec, 1e7);
}

const STAGED: &str = "name = \"t\"\nseed = 1\n[producers]\narrival = \"uniform\"\n\
    [[stages]]\nduration = \"5s\"\nrate = 1000\n\
    [[stages]]\nduration = \"10s\"\nrate = 5000\nramp = true\n\
    [[stages]]\nduration = \"5s\"\nrate = 5000\n";

#[test]
fn stages_resolve_to_a_rate_shape_and_the_run_length() {
    let p = parse(STAGED, Path::new("x.toml")).unwrap();
    assert_eq!(p.stop, Stop::Duration(Duration::from_secs(20)));
    let open = p.producers.open_loop.clone().unwrap();
    let stages = open.stages.clone().unwrap();
    let rates: Vec<(f64, f64)> = stages.plans().map(|s| (s.rate_from, s.rate_to)).collect();
    assert_eq!(rates, [(1000.0, 1000.0), (1000.0, 5000.0), (5000.0, 5000.0)]);
    // 5 000 + 30 000 + 25 000 jobs over 20 s.
    assert_eq!((open.rate_per_sec, open.arrival, open.peak_rate()), (3000.0, Arrival::Uniform, 5000.0));
    let first_ramps_from_zero = format!("{BASE_STAGES}[[stages]]\nduration = \"2s\"\nrate = 100\nramp = true\n");
    let p = parse(&first_ramps_from_zero, Path::new("x.toml")).unwrap();
    let first = p.producers.open_loop.unwrap().stages.unwrap().plans().next().unwrap();
    assert_eq!((first.rate_from, first.rate_to), (0.0, 100.0));
    // The raw scenario writes its stages back as they were read.
    let again = parse(&toml::to_string(&parse(STAGED, Path::new("x.toml")).unwrap().scenario).unwrap(), Path::new("x"));
    assert_eq!(again.unwrap().producers.open_loop.unwrap().stages, Some(stages));
}

const BASE_STAGES: &str = "name = \"t\"\nseed = 1\n";

#[test]
fn stage_mistakes_name_the_stage_and_the_rule() {
    let two = |second: &str| format!("{BASE_STAGES}[[stages]]\nduration = \"1s\"\nrate = 10\n[[stages]]\n{second}\n");
    let e = refused_raw(&two("duration = \"1s\"\nrate = -5"), &["stages[1].rate = -5", "from 0 to 10000000"]);
    assert_eq!(e.line(), Some(8), "the line of the second stage's rate");
    refused_raw(&two("duration = \"1s\"\nrate = 2e7"), &["stages[1].rate", "from 0 to 10000000"]);
    refused_raw(&two("duration = \"0s\"\nrate = 5"), &["stages[1].duration = \"0s\"", "longer than 0"]);
    refused_raw(&two("duration = \"7d\"\nrate = 5"), &["stages[1].duration", "at most 7days together"]);
    refused_raw(&two("duration = \"1s\"\nrate = 5\nramp = 1"), &["ramp"]);
    refused_raw(&two("duration = \"1s\"\nrates = 5"), &["unknown field `rates`"]);
    let stage = "[[stages]]\nduration = \"1s\"\nrate = 10\n";
    refused_raw(
        &format!("{BASE_STAGES}duration = \"5s\"\n{stage}"),
        &["duration = \"5s\"", "no duration with [[stages]]"],
    );
    refused_raw(&format!("{BASE_STAGES}jobs = 5\n{stage}"), &["jobs = 5", "no jobs with [[stages]]"]);
    refused_raw(
        &format!("{BASE_STAGES}[producers]\nrate = 5.0\n{stage}"),
        &["producers.rate = 5", "no producers.rate"],
    );
    refused_raw(&format!("{BASE_STAGES}[producers]\ncount = 0\n{stage}"), &["producers.count = 0", "[[stages]]"]);
    refused_raw(&format!("{BASE_STAGES}warmup = \"1s\"\n{stage}"), &["stages = 1s in all", "longer than warmup"]);
    refused_raw(&format!("{BASE_STAGES}[[stages]]\nduration = \"1s\"\nrate = 0\n"), &["stages", "at least one job"]);
    let many = stage.repeat(bounds::MAX_STAGES + 1);
    refused_raw(&format!("{BASE_STAGES}{many}"), &["stages = 1001 stages", "at most 1000 [[stages]]"]);
}

#[test]
fn a_duration_override_cuts_the_stages_or_holds_the_last_rate() {
    let p = parse(STAGED, Path::new("x.toml")).unwrap();
    let cut = p.clone().with_overrides(Some(Duration::from_secs(10)), None).unwrap();
    assert_eq!(cut.stop, Stop::Duration(Duration::from_secs(10)));
    let open = cut.producers.open_loop.as_ref().unwrap();
    // 5 s at 1 000/s, then half the ramp: 5 000 + 5 s × 2 000/s on average.
    assert_eq!(open.rate_per_sec, 1500.0);
    assert_eq!(cut.scenario.stages.len(), 2);
    assert_eq!((cut.scenario.stages[1].rate, cut.scenario.stages[1].ramp), (3000.0, true));
    assert!(cut.scenario.duration.is_none(), "the written scenario keeps stages without a duration");
    let again = parse(&toml::to_string(&cut.scenario).unwrap(), Path::new("x")).unwrap();
    assert_eq!(again.producers.open_loop, cut.producers.open_loop, "the results' scenario.toml repeats the run");
    let held = p.with_overrides(Some(Duration::from_secs(30)), None).unwrap();
    assert_eq!(held.producers.open_loop.unwrap().rate_per_sec, (60_000.0 + 50_000.0) / 30.0);
}

#[test]
fn an_embedded_cluster_resolves_with_its_node_timeout_and_is_refused_out_of_bounds_or_with_a_url() {
    let p = ok("[target]\ncluster = { primaries = 3, replicas = 1 }\n");
    let shape = crate::scenario::ClusterShape { primaries: 3, replicas: 1, node_timeout: Duration::from_secs(2) };
    assert_eq!(p.target, TargetPlan::Embedded { options: Default::default(), cluster: Some(shape) });
    let p = ok("[target]\ncluster = { primaries = 1, node_timeout = \"500ms\" }\n");
    let TargetPlan::Embedded { cluster: Some(shape), .. } = p.target else { panic!("{:?}", p.target) };
    assert_eq!((shape.replicas, shape.node_timeout), (0, Duration::from_millis(500)));
    refused("[target]\ncluster = { primaries = 17 }\n", &["target.cluster.primaries", "1..=16"]);
    refused("[target]\ncluster = { primaries = 3, replicas = 5 }\n", &["target.cluster.replicas", "0..=4"]);
    refused("[target]\nurl = \"redis://127.0.0.1:7000\"\ncluster = { primaries = 3 }\n", &["target.cluster"]);
    refused("[target]\ncluster = { primaries = 3, replica = 1 }\n", &["replica"]);
}
