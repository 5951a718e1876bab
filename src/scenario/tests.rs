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
    assert_eq!(p.target, TargetPlan::Embedded { options: Default::default() });
    let mut rng = SmallRng::seed_from_u64(0);
    assert_eq!(p.producers.payload.sample(&mut rng), 256);
    assert!(p.producers.open_loop.is_none());
    assert_eq!(p.producers.max_attempts, 3);
    assert_eq!(p.consumers.lease, Duration::from_secs(5));
    assert_eq!(p.consumers.zombie_delay, Duration::from_secs(10));
    assert!(p.consumers.work.is_zero() && p.consumers.extend_every.is_none());
    assert_eq!(p.consumers.backoff, Backoff::None);
    assert_eq!(p.maintenance.reap, Duration::from_millis(100));
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
    let ol = p.producers.open_loop.unwrap();
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
    refused("[producers]\ncount = \"4\"", &["line 5", "u32"]);
    refused("[consumers]\nextend = 3", &["true, false, or a renewal interval"]);
    refused("[producers]\npriorities = [1, -2]", &["line 5"]);
    refused("[producers]\nmax_attempts = -1", &["line 5"]);
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
    refused("[producers]\npipeline = 0", &[":5: producers.pipeline = 0, expected at least 1"]);
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
