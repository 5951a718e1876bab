//! What CI reads beside the exit code, from real runs on the embedded server: junit.xml
//! (parsed by a real XML parser, counts against its cases), summary.md, the Bencher (BMF) and
//! github-action-benchmark (GAB) exports read into structs that mirror those tools' documented
//! schemas, for run, compare and cost; and the completions and man page.

mod support;

use emq_bench::cmd::run::run;
use emq_bench::cmd::CommandOutcome;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

/// Bencher Metric Format: benchmark → measure → metric (bencher.dev/docs/reference/bencher-metric-format).
type Bmf = BTreeMap<String, BTreeMap<String, BmfMetric>>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BmfMetric {
    value: f64,
    lower_value: Option<f64>,
    upper_value: Option<f64>,
}

/// github-action-benchmark's custom tool entry (`customSmallerIsBetter`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // every field is read by serde: an unknown or mistyped one fails the parse
struct GabEntry {
    name: String,
    unit: String,
    value: f64,
    range: Option<String>,
    extra: Option<String>,
}

fn emq_bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_emq-bench"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run emq-bench")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every metric finite with lower ≤ value ≤ upper; returns the document.
fn assert_bmf(path: &Path) -> Bmf {
    let bmf: Bmf = serde_json::from_str(&read(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(!bmf.is_empty(), "{}: no benchmark", path.display());
    for (bench, measures) in &bmf {
        for (measure, m) in measures {
            assert!(m.value.is_finite(), "{bench} {measure}: {m:?}");
            assert!(m.lower_value.is_none_or(|lo| lo.is_finite() && lo <= m.value), "{bench} {measure}: {m:?}");
            assert!(m.upper_value.is_none_or(|hi| hi.is_finite() && hi >= m.value), "{bench} {measure}: {m:?}");
        }
    }
    bmf
}

/// Every entry finite, names unique; returns the entries.
fn assert_gab(path: &Path) -> Vec<GabEntry> {
    let gab: Vec<GabEntry> = serde_json::from_str(&read(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(!gab.is_empty(), "{}: no entry", path.display());
    let mut names: Vec<&str> = gab.iter().map(|e| e.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), gab.len(), "names repeat");
    assert!(gab.iter().all(|e| e.value.is_finite() && !e.unit.is_empty()), "{gab:?}");
    gab
}

/// One parsed case: (suite, classname, name, outcome element or `passed`, its message).
type Case = (String, String, String, String, String);

/// Parses junit.xml, checks the `<testsuites>`/`<testsuite>` counts against the cases, and
/// returns every case.
fn junit_cases(path: &Path) -> Vec<Case> {
    let text = read(path);
    let doc = roxmltree::Document::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    let count = |node: roxmltree::Node, attr: &str| -> usize {
        node.attribute(attr).unwrap_or_else(|| panic!("no {attr}")).parse().unwrap()
    };
    let mut cases = Vec::new();
    let mut totals = [0usize; 4];
    for suite in root.children().filter(|n| n.is_element()) {
        assert_eq!(suite.tag_name().name(), "testsuite");
        assert!(suite.attribute("time").is_some_and(|t| t.parse::<f64>().is_ok()));
        let mut seen = [0usize; 4];
        for case in suite.children().filter(|n| n.is_element()) {
            assert_eq!(case.tag_name().name(), "testcase");
            assert!(case.attribute("classname").is_some() && case.attribute("time").is_some());
            let outcome = case.children().find(|n| n.is_element());
            let (kind, message) = match outcome {
                None => ("passed".to_string(), String::new()),
                Some(o) => (o.tag_name().name().to_string(), o.attribute("message").unwrap_or_default().to_string()),
            };
            if matches!(kind.as_str(), "failure" | "error") {
                assert!(outcome.unwrap().attribute("type").is_some(), "{kind} without a type");
            }
            seen[0] += 1;
            match kind.as_str() {
                "failure" => seen[1] += 1,
                "error" => seen[2] += 1,
                "skipped" => seen[3] += 1,
                "passed" => {}
                other => panic!("unexpected <{other}>"),
            }
            let name = case.attribute("name").unwrap().to_string();
            let class = case.attribute("classname").unwrap().to_string();
            cases.push((suite.attribute("name").unwrap().to_string(), class, name, kind, message));
        }
        for (i, attr) in ["tests", "failures", "errors", "skipped"].iter().enumerate() {
            assert_eq!(count(suite, attr), seen[i], "suite {:?} {attr}", suite.attribute("name"));
            totals[i] += seen[i];
        }
    }
    for (i, attr) in ["tests", "failures", "errors", "skipped"].iter().enumerate() {
        assert_eq!(count(root, attr), totals[i], "testsuites {attr}");
    }
    cases
}

fn case<'a>(cases: &'a [Case], suite: &str, name: &str) -> &'a Case {
    cases.iter().find(|c| c.0 == suite && c.2 == name).unwrap_or_else(|| panic!("no {suite}/{name} in {cases:#?}"))
}

/// A run whose enqueue stores a payload other than the one sent (I4, seen by the consumers and
/// the check) and whose `claim.p50 < 1us` cannot hold: junit.xml says both with a <failure>,
/// the threshold that holds passes, the gate it replaces is skipped; summary.md leads with the
/// verdict; the exports parse. Then compare and cost on the same kind of folder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_run_says_why_in_junit_and_summary_md_and_its_exports_parse() {
    let tmp = tempfile::tempdir().unwrap();
    let lua = support::lua_copy(tmp.path(), "lua-corrupt", "enqueue", |source| {
        let store = "'payload', ARGV[2])";
        assert!(source.contains(store), "enqueue.lua stores the payload differently; update this test");
        source.replace(store, "'payload', ARGV[2] .. 'x')")
    });
    let scenario = tmp.path().join("ci.toml");
    std::fs::write(
        &scenario,
        "name = \"ci\"\nseed = 3\njobs = 200\ndrain = \"10s\"\n\
         [producers]\ncount = 1\nrate = 400.0\n[consumers]\ncount = 1\n\
         [thresholds]\n\"claim.p50\" = \"< 1us\"\n\"enqueue.errors.rate\" = \"< 0.5\"\n",
    )
    .unwrap();
    let out = tmp.path().join("out");
    let (bmf_file, gab_file) = (tmp.path().join("bmf.json"), tmp.path().join("gab.json"));
    let mut args = support::run_args(&scenario, &out);
    args.lua_dir = Some(lua);
    args.export.export_bmf = Some(bmf_file.clone());
    args.export.export_gab = Some(gab_file.clone());
    let result = run(args, std::future::pending()).await.unwrap();
    assert_eq!(result.outcome, CommandOutcome::Failed, "{:?}", result.failures);

    let cases = junit_cases(&out.join("junit.xml"));
    let i4 = case(&cases, "invariants", "I4 payload-intact");
    assert_eq!(i4.3, "failure", "{i4:?}");
    assert_eq!(case(&cases, "invariants", "I1 row-unique").3, "passed");
    assert_eq!(cases.iter().filter(|c| c.0 == "invariants").count(), 8, "one case per invariant");
    let p50 = case(&cases, "thresholds", "claim.p50 < 1us");
    assert!(p50.3 == "failure" && p50.4.starts_with("threshold claim.p50 < 1us failed"), "{p50:?}");
    assert_eq!(case(&cases, "thresholds", "enqueue.errors.rate < 0.5").3, "passed");
    assert_eq!(case(&cases, "gates", "enqueue: errors within 1%").3, "skipped", "the threshold replaces it");
    assert_eq!(case(&cases, "gates", "claim: errors within 1%").3, "passed");
    assert_eq!(case(&cases, "gates", "something was enqueued").3, "passed");
    assert!(cases.iter().all(|c| c.1.starts_with("emq-bench.ci.")), "{cases:?}");

    let md = read(&out.join("summary.md"));
    assert!(md.starts_with("## emq-bench run `ci`: **FAIL** (exit 1)"), "{md}");
    assert!(md.contains("- FAIL threshold claim.p50 < 1us failed"), "{md}");
    for section in ["### Scripts", "### Invariants", "### Thresholds", "### Default gates", "### Faults"] {
        assert!(md.contains(section), "no {section} in {md}");
    }
    assert!(md.contains("| I4 payload-intact | ") && !md.contains("| I4 payload-intact | 0 |"), "{md}");

    let bmf = assert_bmf(&bmf_file);
    let claim = &bmf["ci::claim"];
    assert!(claim["throughput"].value > 0.0, "{claim:?}");
    let p50 = &claim["latency-p50"];
    assert!(p50.lower_value.is_some() && p50.upper_value.is_some(), "200 claims bound a median: {p50:?}");
    let gab = assert_gab(&gab_file);
    assert!(gab.iter().any(|e| e.name == "ci claim p99" && e.unit == "ms"), "{gab:?}");
    assert!(gab.iter().any(|e| e.name == "ci enqueue time per op (1/throughput)" && e.unit == "µs/op"), "{gab:?}");

    // compare the folder with itself: one run a side is inconclusive, an <error> per metric.
    let cmp = tmp.path().join("cmp");
    let dir = out.to_str().unwrap();
    let (cmp_bmf, cmp_gab) = (tmp.path().join("cmp-bmf.json"), tmp.path().join("cmp-gab.json"));
    let done = emq_bench(&[
        "compare",
        dir,
        dir,
        "--out",
        cmp.to_str().unwrap(),
        "--export-bmf",
        cmp_bmf.to_str().unwrap(),
        "--export-gab",
        cmp_gab.to_str().unwrap(),
    ]);
    assert_eq!(done.status.code(), Some(3), "{}", String::from_utf8_lossy(&done.stderr));
    let cases = junit_cases(&cmp.join("junit.xml"));
    assert!(!cases.is_empty() && cases.iter().all(|c| c.3 == "error" && c.4.contains("inconclusive")), "{cases:?}");
    // Named as run's exports are, so Bencher and github-action-benchmark track one series.
    let cmp_bmf = assert_bmf(&cmp_bmf);
    assert!(
        cmp_bmf["ci::claim"].contains_key("latency-p50") && cmp_bmf["ci::claim"].contains_key("throughput"),
        "{cmp_bmf:?}"
    );
    assert!(cmp_bmf.keys().all(|k| k.starts_with("ci::")), "{:?}", cmp_bmf.keys());
    let cmp_gab = assert_gab(&cmp_gab);
    for name in ["ci claim p50", "ci enqueue time per op (1/throughput)"] {
        assert!(gab.iter().any(|e| e.name == name), "run's GAB: no {name}");
        assert!(cmp_gab.iter().any(|e| e.name == name), "compare's GAB: no {name}: {cmp_gab:?}");
    }

    // An export into a folder that does not exist is refused before any work (exit 2).
    let done = emq_bench(&["compare", dir, dir, "--export-bmf", "/nonexistent-dir/bmf.json"]);
    assert_eq!(done.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&done.stderr).contains("--export-bmf /nonexistent-dir/bmf.json"));
}

/// `--repeat`: the series' folder has one junit.xml with every repetition's suites, and the
/// exports are the merged figures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_run_has_one_junit_xml_of_every_repetition() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("rep.toml");
    std::fs::write(&scenario, "name = \"rep\"\nseed = 5\njobs = 60\n[producers]\ncount = 1\n[consumers]\ncount = 1\n")
        .unwrap();
    let out = tmp.path().join("out");
    let mut args = support::run_args(&scenario, &out);
    args.repeat = 2;
    args.export.export_bmf = Some(tmp.path().join("bmf.json"));
    let result = run(args, std::future::pending()).await.unwrap();
    assert_eq!(result.outcome, CommandOutcome::Success, "{:?}", result.failures);
    let cases = junit_cases(&out.join("junit.xml"));
    for rep in ["rep-001", "rep-002"] {
        assert_eq!(case(&cases, &format!("{rep} invariants"), "I7 no-loss").3, "passed");
        assert!(out.join(rep).join("junit.xml").is_file() && out.join(rep).join("summary.md").is_file());
    }
    assert!(cases.iter().all(|c| c.3 == "passed"), "{cases:?}");
    assert!(assert_bmf(&tmp.path().join("bmf.json")).contains_key("rep::enqueue"));
}

#[test]
fn cost_writes_junit_and_both_exports() {
    let tmp = tempfile::tempdir().unwrap();
    let (out, bmf_file, gab_file) = (tmp.path().join("cost"), tmp.path().join("bmf.json"), tmp.path().join("gab.json"));
    let done = emq_bench(&[
        "cost",
        "--calls",
        "200",
        "--repeat",
        "1",
        "--out",
        out.to_str().unwrap(),
        "--export-bmf",
        bmf_file.to_str().unwrap(),
        "--export-gab",
        gab_file.to_str().unwrap(),
    ]);
    assert_eq!(done.status.code(), Some(0), "{}", String::from_utf8_lossy(&done.stderr));
    let cases = junit_cases(&out.join("junit.xml"));
    assert!(cases.iter().any(|c| c.1 == "emq-bench.cost.claim" && c.3 == "passed"), "{cases:?}");
    let bmf = assert_bmf(&bmf_file);
    assert!(bmf["enqueue"].contains_key("server-us-per-call"), "{bmf:?}");
    assert!(assert_gab(&gab_file).iter().any(|e| e.name == "enqueue server µs/call"));
}

#[test]
fn completions_and_the_man_page_are_generated() {
    let subcommands = ["run", "check", "compare", "ab", "cost", "completions", "man"];
    for shell in ["bash", "zsh", "fish"] {
        let done = emq_bench(&["completions", shell]);
        assert_eq!(done.status.code(), Some(0));
        let script = String::from_utf8(done.stdout).unwrap();
        for sub in subcommands {
            assert!(script.contains(sub), "{shell}: no {sub}");
        }
        if shell == "bash" {
            let tmp = tempfile::tempdir().unwrap();
            let file = tmp.path().join("emq-bench.bash");
            std::fs::write(&file, &script).unwrap();
            let checked = Command::new("bash").arg("-n").arg(&file).output().expect("bash");
            assert!(checked.status.success(), "bash -n: {}", String::from_utf8_lossy(&checked.stderr));
        }
    }
    assert_eq!(emq_bench(&["completions", "tcsh"]).status.code(), Some(2), "an unknown shell is a usage error");
    let done = emq_bench(&["man"]);
    assert_eq!(done.status.code(), Some(0));
    let page = String::from_utf8(done.stdout).unwrap();
    // clap_mangen defines the quote string first (`.ie`/`.el`), then the title.
    let first = page.lines().find(|l| !l.starts_with(".ie") && !l.starts_with(".el")).unwrap();
    assert!(first.starts_with(".TH emq-bench 1"), "{first}");
    assert!(
        page.contains("completions") && page.contains(".SH \"EXIT STATUS\""),
        "the page lists the commands and the exit codes"
    );
}

#[test]
fn every_subcommand_help_gives_examples_and_exit_codes() {
    for sub in ["run", "check", "compare", "ab", "cost", "server", "report", "capacity", "merge", "completions", "man"]
    {
        let done = emq_bench(&[sub, "--help"]);
        let help = String::from_utf8(done.stdout).unwrap();
        assert!(help.contains("Examples:") && help.contains("Exit codes:"), "{sub} --help:\n{help}");
    }
    let ab = String::from_utf8(emq_bench(&["ab", "--help"]).stdout).unwrap();
    assert!(ab.contains("--lua-dir <A> --lua-dir <B>"), "{ab}");
    let check = String::from_utf8(emq_bench(&["check", "--help"]).stdout).unwrap();
    assert!(check.contains("How a run names its queues") && check.contains("bench-0"), "{check}");
}
