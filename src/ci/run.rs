//! A run's CI files: `junit.xml` (one testcase per invariant, threshold and default gate, and
//! one for the verdict's other findings) and the exports `--export-bmf` / `--export-gab` write
//! from its per-script summaries.

use super::bmf::{self, Bmf};
use super::gab::{self, Entry};
use super::junit::{Case, CaseOutcome, Reason, Report, Suite, JUNIT_FILE};
use crate::check::Invariant;
use crate::report::gates::GateOutcome;
use crate::report::writer::Writer;
use crate::report::{ms3, JudgedRun, PercentileBound, ReportError, RunResults, ScriptSummary};
use crate::verdict::FindingKind;
use std::fmt::Write as _;
use std::path::Path;

/// Violations quoted in an invariant's `<failure>` text; the rest are in invariants.json.
const QUOTED_VIOLATIONS: usize = 10;

/// The findings the invariant, threshold and gate cases already carry; any other finding
/// fails the `verdict` case.
const CARRIED: [FindingKind; 5] = [
    FindingKind::Violations,
    FindingKind::PayloadCorrupt,
    FindingKind::DuplicateAccepted,
    FindingKind::Threshold,
    FindingKind::DefaultGate,
];

/// `junit.xml` of a run's folder.
pub struct JunitXml;

/// The writers of the files that carry a run's verdict for CI (`junit.xml`, `summary.md`):
/// what is written again when the verdict is amended after the folder was written.
pub fn verdict_writers<'a>() -> [&'a dyn Writer<RunResults<'a>>; 2] {
    [&JunitXml, &super::summary_md::SummaryMd]
}

/// The files a fleet's merged folder has of a run's (`invariants.json`, `junit.xml`,
/// `summary.md`), written by the run's own writers from the merge's judgment.
pub fn judged_writers<'a>() -> [&'a dyn Writer<JudgedRun<'a>>; 3] {
    [&crate::report::InvariantsJson, &JunitXml, &super::summary_md::SummaryMd]
}

impl Writer<RunResults<'_>> for JunitXml {
    fn file(&self) -> &'static str {
        JUNIT_FILE
    }
    fn write(&self, path: &Path, run: &RunResults) -> Result<(), ReportError> {
        junit(&run.judged()).write(path)
    }
}

impl Writer<JudgedRun<'_>> for JunitXml {
    fn file(&self) -> &'static str {
        JUNIT_FILE
    }
    fn write(&self, path: &Path, run: &JudgedRun) -> Result<(), ReportError> {
        junit(run).write(path)
    }
}

/// The JUnit document of a finished run (or a fleet's merge): suites `invariants` (I1–I8),
/// `thresholds`, `gates` and `verdict`, each case's class `emq-bench.<scenario>.<suite>`.
pub fn junit(run: &JudgedRun) -> Report {
    let summary = run.summary;
    let class = |suite: &str| format!("emq-bench.{}.{suite}", summary.name);
    let findings: Vec<_> = summary.verdict.iter().flat_map(|v| &v.findings).collect();
    let finding = |kind: FindingKind| findings.iter().find(|f| f.kind == kind).map(|f| f.message.clone());

    let invariants = class("invariants");
    let cases = Invariant::ALL
        .iter()
        .map(|&inv| {
            let name = format!("{} {}", inv.id(), inv.name());
            // The consumers see I4 and the producers I8 as the run goes, check or no check.
            let seen_live = match inv {
                Invariant::I4 => finding(FindingKind::PayloadCorrupt),
                Invariant::I8 => finding(FindingKind::DuplicateAccepted),
                _ => None,
            };
            let broken = run.invariants.map_or(0, |report| report.by_invariant.get(inv.id()).copied().unwrap_or(0));
            let outcome = match (run.invariants, seen_live) {
                // The verdict left them to the fault thresholds (its violations finding is absent).
                (Some(_), None) if broken > 0 && finding(FindingKind::Violations).is_none() => {
                    CaseOutcome::Skipped(format!(
                    "{broken} violations, all in injected faults' windows: judged by the fault.<effect> thresholds \
                     (the thresholds suite)"
                ))
                }
                (Some(report), _) if broken > 0 => {
                    let broken: Vec<_> = report.violations.iter().filter(|v| v.invariant == inv).collect();
                    let mut text = String::new();
                    for v in broken.iter().take(QUOTED_VIOLATIONS) {
                        let job = v.job.as_deref().unwrap_or("-");
                        let _ =
                            writeln!(text, "queue {} job {job}: expected {}, found {}", v.queue, v.expected, v.found);
                    }
                    if broken.len() > QUOTED_VIOLATIONS {
                        let _ = writeln!(text, "… and {} more in invariants.json", broken.len() - QUOTED_VIOLATIONS);
                    }
                    let message = format!("{name}: {} violations", broken.len());
                    CaseOutcome::Failure(Reason::new("violation", message, text))
                }
                (_, Some(line)) => CaseOutcome::Failure(Reason::new("violation", line, "")),
                (Some(_), None) => CaseOutcome::Passed,
                (None, None) => CaseOutcome::Skipped(match finding(FindingKind::CheckNotRun) {
                    Some(line) => line,
                    None => {
                        "the invariant check did not run (--no-check; `emq-bench check --history` can run it)".into()
                    }
                }),
            };
            Case::new(&invariants, name, outcome)
        })
        .collect();
    let mut suites = vec![Suite { name: "invariants".into(), cases }];

    let thresholds = class("thresholds");
    let cases = summary
        .thresholds
        .iter()
        .map(|t| {
            let outcome = match t.passed {
                true => CaseOutcome::Passed,
                false => CaseOutcome::Failure(Reason::new("threshold", t.describe(), "")),
            };
            Case::new(&thresholds, format!("{} {}", t.key, t.condition), outcome)
        })
        .collect();
    suites.push(Suite { name: "thresholds".into(), cases });

    let gates = class("gates");
    let cases = run
        .gates
        .iter()
        .map(|g| {
            let outcome = match &g.outcome {
                GateOutcome::Passed => CaseOutcome::Passed,
                GateOutcome::Failed(line) => CaseOutcome::Failure(Reason::new("gate", line.clone(), "")),
                GateOutcome::Skipped(why) => CaseOutcome::Skipped(why.clone()),
            };
            Case::new(&gates, g.name.clone(), outcome)
        })
        .collect();
    suites.push(Suite { name: "gates".into(), cases });

    let others: Vec<&str> =
        findings.iter().filter(|f| !CARRIED.contains(&f.kind)).map(|f| f.message.as_str()).collect();
    let outcome = match others.first() {
        None => CaseOutcome::Passed,
        Some(first) => CaseOutcome::Failure(Reason::new("verdict", *first, others.join("\n"))),
    };
    let name = "no other finding (interrupted, drain, faults, rate, keys, files)";
    suites.push(Suite { name: "verdict".into(), cases: vec![Case::new(&class("verdict"), name, outcome)] });
    Report { name: format!("emq-bench run {}", summary.name), time_s: summary.measured_secs, suites }
}

/// A percentile and its interval, µs.
fn percentiles(s: &ScriptSummary) -> [(&'static str, u64, PercentileBound); 3] {
    let (l, i) = (&s.latency_us, &s.latency_us.intervals);
    [("p50", l.p50, i.p50), ("p99", l.p99, i.p99), ("p99.9", l.p999, i.p999)]
}

/// The BMF document of a run's scripts: benchmark `<scenario>::<script>`, measures
/// `throughput` (ops/s) and `latency-p50`/`-p99`/`-p99-9` (ns, the 95 % interval as bounds).
/// Scripts without an ok call are left out (they have no latency).
pub fn bmf(name: &str, scripts: &[ScriptSummary]) -> Bmf {
    let mut out = Bmf::new();
    for s in scripts.iter().filter(|s| s.ok > 0) {
        let measures = out.entry(format!("{name}::{}", s.script)).or_default();
        if let Some(m) = bmf::Metric::new(s.ops_per_sec, None, None) {
            measures.insert("throughput".into(), m);
        }
        let ns = |us: u64| us as f64 * 1e3;
        for (p, value, bound) in percentiles(s) {
            if let Some(m) = bmf::Metric::new(ns(value), bound.lo_us.map(ns), bound.hi_us.map(ns)) {
                measures.insert(bmf::latency_slug(p), m);
            }
        }
    }
    out
}

/// The github-action-benchmark entries of a run's scripts: `<scenario> <script> p50` (ms,
/// the interval in `range` and `extra`), ..., and `<scenario> <script> time per op
/// (1/throughput)` (µs/op). Scripts without an ok call are left out.
pub fn gab(name: &str, scripts: &[ScriptSummary]) -> Vec<Entry> {
    let mut out = Vec::new();
    for s in scripts.iter().filter(|s| s.ok > 0) {
        let ms = |us: u64| us as f64 / 1e3;
        for (p, value, bound) in percentiles(s) {
            let interval = bound.lo_us.zip(bound.hi_us).map(|(lo, hi)| (ms(lo), ms(hi)));
            let extra = format!(
                "95% interval [{}, {}] ms over {} samples",
                bound.lo_us.map_or("-".into(), ms3),
                bound.hi_us.map_or("-".into(), ms3),
                s.latency_us.intervals.samples
            );
            out.extend(Entry::new(format!("{name} {} {p}", s.script), "ms", ms(value), interval, extra));
        }
        if let Some(us) = gab::us_per_op(s.ops_per_sec) {
            let extra = format!("{:.1} ops/s over the {} window", s.ops_per_sec, s.window);
            out.extend(Entry::new(format!("{name} {} time per op (1/throughput)", s.script), "µs/op", us, None, extra));
        }
    }
    out
}

/// The export files a command was asked for (`--export-bmf`, `--export-gab`).
#[derive(Debug, Clone, Default)]
pub struct Exports<'a> {
    /// Where the BMF document goes.
    pub bmf: Option<&'a Path>,
    /// Where the github-action-benchmark entries go.
    pub gab: Option<&'a Path>,
}

impl Exports<'_> {
    /// Writes the documents asked for, each atomically; every file is attempted. Returns one
    /// line per file not written (`cannot write <file>: <why>`).
    pub fn write(&self, bmf: impl FnOnce() -> Bmf, gab: impl FnOnce() -> Vec<Entry>) -> Vec<String> {
        let mut errors = Vec::new();
        if let Some(path) = self.bmf {
            errors.extend(bmf::write(path, &bmf()).err().map(|e| e.to_string()));
        }
        if let Some(path) = self.gab {
            errors.extend(gab::write(path, &gab()).err().map(|e| e.to_string()));
        }
        errors
    }
}
