//! Capacity: the highest open-loop rate a deployment sustains while every latency objective
//! holds **and** the run is steady (Gil Tene's sustainable throughput).
//!
//! - [`slo`]: an objective (`claim.p99 < 5ms`) and its decision on a probe, a test on the
//!   percentile's 95 % interval from the histogram's order statistics.
//! - [`search`]: double, then bisect, longer probes near the answer, the boundary re-checked.
//! - This file: one probe's record and classification, and `capacity.json`'s model.
//!
//! Each probe is a whole run (its own results folder, check and verdict); the search reads
//! only its summary.

pub mod search;
pub mod slo;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub use search::{NextProbe, ProbeOutcome, Search, Step};
pub use slo::{Slo, SloDecision, SloReading};

use crate::metrics::RunMetrics;
use crate::report::run_summary::RunSummary;
use crate::report::steady::{SteadyCheck, SteadyState};

/// The share of a probe's intended sends that may go unsent for it to count as sustained.
pub const MAX_UNSENT: f64 = 0.01;
use crate::report::Percentiles;

/// `capacity.json`'s layout version.
pub const CAPACITY_SCHEMA_VERSION: u32 = 1;
/// The results file.
pub const CAPACITY_FILE: &str = "capacity.json";

/// One probe: a run at one offered rate, and what the search read of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeRecord {
    /// 1-based, in the order run.
    pub index: usize,
    /// The rate offered (the producers' open-loop rate), jobs/s.
    pub rate: f64,
    /// The search's step.
    pub step: Step,
    /// Its results folder, relative to the capacity folder.
    pub folder: String,
    /// The load phase's measured length, s.
    pub measured_secs: f64,
    /// Sends made per second over the load phase.
    pub achieved_per_sec: f64,
    /// Jobs finished per second over the measured load phase (the system's rate).
    pub completed_per_sec: f64,
    /// `true`/`false`, or `null` when too short to tell: the search's reading of the probe's
    /// summary.json `steady`, which differs from it where only trends that do not bind
    /// ([`trends_not_binding`](Self::trends_not_binding)) failed.
    pub steady: Option<bool>,
    /// The steadiness checks that failed and bind, one line each.
    pub not_steady: Vec<String>,
    /// The per-second p99 trends of scripts no objective names, one line each: reported, never
    /// binding (a script the user set no objective on makes a probe unsteady only through the
    /// backlog and throughput, where the deployment falls behind).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trends_not_binding: Vec<String>,
    /// Each objective's reading.
    pub slos: Vec<SloReading>,
    /// The run's own verdict.
    pub passed: bool,
    /// Its failures, one line each.
    pub failures: Vec<String>,
    /// Invariant violations the run's check found (a correctness finding, whatever the rate).
    pub violations: u64,
    /// Latency from the intended send per script called, µs, each percentile with its interval.
    pub latency_us: BTreeMap<String, Percentiles>,
    /// True when the harness's own host was the bottleneck (summary.json `client`): such a
    /// probe, unless sustained, is `client_bound`, never counted as not sustained.
    #[serde(default)]
    pub client_bound: bool,
    /// `sustained`, `not_sustained`, `client_bound`, or `null`: undecided (the next probe is
    /// longer).
    pub outcome: Option<ProbeOutcome>,
    /// Why it was not sustained or undecided, one line each.
    pub reasons: Vec<String>,
}

impl ProbeRecord {
    /// Reads a probe's `summary` against `slos`: not sustained when its verdict failed, an
    /// objective was violated or it was not steady; undecided when an objective's interval
    /// straddles its limit or the run was too short to judge steadiness; else sustained.
    pub fn of(
        index: usize,
        probe: NextProbe,
        folder: String,
        summary: &RunSummary,
        run: &RunMetrics,
        slos: &[Slo],
    ) -> ProbeRecord {
        let slo_readings: Vec<SloReading> = slos.iter().map(|s| s.read(run)).collect();
        let (steady, not_steady, trends_not_binding) = binding_steadiness(summary.steady.as_ref(), slos);
        let failures = summary.verdict.as_ref().map(crate::verdict::Verdict::lines).unwrap_or_default();
        let passed = summary.passed() == Some(true);
        let mut reasons = Vec::new();
        for r in &slo_readings {
            match r.decision {
                SloDecision::Holds => {}
                SloDecision::Violated => reasons.push(format!("violated {}", r.describe())),
                SloDecision::Undecided => reasons.push(format!("undecided {}", r.describe())),
            }
        }
        // Inside a capacity search the rate must be held closer than a run's 95 % gate: the
        // answer is an offered rate, and a probe that left more of it unsent did not carry it.
        let unsent =
            summary.producers.as_ref().filter(|p| p.intended > 0).map(|p| p.never_sent as f64 / p.intended as f64);
        let short = unsent.is_some_and(|u| u > MAX_UNSENT);
        if short {
            reasons.push(format!(
                "the rate was not carried: {:.1} % of the intended sends never sent (at most {:.0} % may be)",
                unsent.unwrap_or(0.0) * 100.0,
                MAX_UNSENT * 100.0
            ));
        }
        reasons.extend(not_steady.iter().map(|l| format!("not steady: {l}")));
        reasons.extend(trends_not_binding.iter().map(|l| format!("{NOT_BINDING}{l}")));
        if steady.is_none() {
            reasons.push("steadiness: too short to tell".to_string());
        }
        reasons.extend(failures.iter().map(|l| format!("verdict: {l}")));
        let violated = slo_readings.iter().any(|r| r.decision == SloDecision::Violated);
        let undecided = slo_readings.iter().any(|r| r.decision == SloDecision::Undecided) || steady.is_none();
        // An undecided objective whose share over the limit already exceeds the allowed one is
        // not run longer: a longer probe could at best leave it undecided or confirm it, never
        // make the rate sustained on this evidence, and the budget is better spent nearer.
        let leaning = slo_readings
            .iter()
            .any(|r| r.decision == SloDecision::Undecided && r.over_limit.unwrap_or(1.0) >= r.allowed);
        if leaning {
            reasons.push("an undecided objective is over its allowed share: counted as not sustained".to_string());
        }
        let mut outcome = if !passed || violated || short || leaning || steady == Some(false) {
            Some(ProbeOutcome::NotSustained)
        } else if undecided {
            None
        } else {
            Some(ProbeOutcome::Sustained)
        };
        // A client that had no CPU to spare measured its own scheduling: what it did not
        // sustain says nothing of the deployment. A correctness finding still counts.
        let client = summary.client.as_ref().filter(|c| c.client_bound);
        if let Some(c) = client {
            reasons.push(format!("client-bound: {}", c.reasons.join("; ")));
            let violations = summary.check.as_ref().is_some_and(|c| c.violations_total > 0);
            if outcome != Some(ProbeOutcome::Sustained) && !violations {
                reasons.push("not counted against the deployment: the harness's host was the bottleneck".into());
                outcome = Some(ProbeOutcome::ClientBound);
            }
        }
        let window =
            summary.scripts.iter().find(|s| s.window == "load").map_or(summary.measured_secs, |s| s.window_secs);
        ProbeRecord {
            index,
            rate: probe.rate,
            step: probe.step,
            folder,
            measured_secs: window,
            achieved_per_sec: summary.producers.as_ref().map_or(0.0, |p| p.achieved_per_sec),
            completed_per_sec: summary.system.as_ref().map_or(0.0, |s| s.completed_per_sec),
            steady,
            not_steady,
            trends_not_binding,
            slos: slo_readings,
            passed,
            failures,
            violations: summary.check.as_ref().map_or(0, |c| c.violations_total as u64),
            latency_us: summary.scripts.iter().filter(|s| s.ok > 0).map(|s| (s.script.clone(), s.latency_us)).collect(),
            client_bound: client.is_some(),
            outcome,
            reasons,
        }
    }
}

/// How a probe's reasons start a trend that does not bind: capacity.json's `binding` leaves
/// such lines out.
pub const NOT_BINDING: &str = "trend reported, not binding (no objective): ";

/// A probe's steadiness as the search reads it: the run's own judgment, except that a failed
/// `p99 <script>` check of a script no objective names does not bind. Returns the steadiness,
/// the binding failures and the non-binding trends, one line each.
fn binding_steadiness(state: Option<&SteadyState>, slos: &[Slo]) -> (Option<bool>, Vec<String>, Vec<String>) {
    let Some(state) = state else { return (None, Vec::new(), Vec::new()) };
    let informs =
        |c: &SteadyCheck| c.name.strip_prefix("p99 ").is_some_and(|script| !slos.iter().any(|s| s.script == script));
    let line = |c: &SteadyCheck| format!("{}: {}", c.name, c.detail);
    let (informing, binding): (Vec<&SteadyCheck>, Vec<&SteadyCheck>) =
        state.checks.iter().filter(|c| !c.steady).partition(|c| informs(c));
    let (binding, informing): (Vec<String>, Vec<String>) =
        (binding.into_iter().map(line).collect(), informing.into_iter().map(line).collect());
    let steady = match state.steady {
        Some(false) if binding.is_empty() => Some(true),
        s => s,
    };
    (steady, binding, informing)
}

impl ProbeRecord {
    /// The outcome as the table prints it: `sustained`, `NOT sustained`, `CLIENT-BOUND`,
    /// `undecided`.
    pub fn outcome_word(&self) -> &'static str {
        match self.outcome {
            Some(ProbeOutcome::Sustained) => "sustained",
            Some(ProbeOutcome::NotSustained) => "NOT sustained",
            Some(ProbeOutcome::ClientBound) => "CLIENT-BOUND",
            None => "undecided",
        }
    }
}

/// What decides a probe for a workload with or without consumers (capacity.json `criteria`).
pub fn criteria(consumers: bool) -> Vec<String> {
    let steady = crate::report::steady::criteria(true, consumers, false);
    ["objectives", "rate_carried"]
        .into_iter()
        .map(String::from)
        .chain(steady.into_iter().map(|c| format!("steady.{c}")))
        .chain(std::iter::once("verdict".to_string()))
        .collect()
}

/// A range of rates, jobs/s.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RateInterval {
    /// The highest rate sustained (below `hi`); `null`: none was.
    pub lo: Option<f64>,
    /// The lowest rate not sustained; `null`: every rate probed was.
    pub hi: Option<f64>,
}

/// How the search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchEnd {
    /// The bracket narrowed to the tolerance and its low end passed the re-check.
    Found,
    /// No rate down to the floor was sustained.
    NoRate,
    /// The ceiling was sustained: the answer is above what the search may offer.
    Ceiling,
    /// The budget ran out first: the interval is what is known.
    Budget,
    /// A stop signal ended it.
    Stopped,
    /// A probe could not run (`error` says why): the interval is what is known.
    ProbeFailed,
    /// The lowest rate not sustained was client-bound (the harness's host was the bottleneck):
    /// the interval's low end is what the deployment sustained, its high end is the client's.
    ClientBound,
}

/// `capacity.json`: the answer, how sure it is, and every probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapacityReport {
    /// [`CAPACITY_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `emq-bench <version>`.
    pub tool: String,
    /// The scenario's name.
    pub scenario: String,
    /// The target, password masked.
    pub target: String,
    /// The queue protocol.
    pub protocol: String,
    /// The objectives, as written.
    pub slos: Vec<String>,
    /// What the scenario runs: `producers and consumers` or `producers only`.
    #[serde(default)]
    pub workload: String,
    /// What decided each probe, for this workload: `objectives`, `rate_carried` (at most
    /// [`MAX_UNSENT`] of the intended sends unsent), `steady.<check>` for each steadiness
    /// criterion the workload admits ([`crate::report::steady::criteria`]; `steady.p99` binds
    /// only on the scripts an objective names) and `verdict`. A client-bound probe is never
    /// counted against the deployment either way.
    #[serde(default)]
    pub criteria: Vec<String>,
    /// The highest offered rate sustained (R*), jobs (enqueue calls) per second: the bracket's
    /// low end, once the search ended `found` (re-checked) or `ceiling`; `null` otherwise (the
    /// interval then says what is known).
    pub sustainable_rate: Option<f64>,
    /// Where the true boundary lies: between the highest rate sustained and the lowest not.
    pub interval: RateInterval,
    /// The bracket's width the search aimed for, a share of its low end.
    pub tolerance: f64,
    /// How the search ended.
    pub ended: SearchEnd,
    /// What stopped the lowest rate not sustained: its reasons (the binding objective and
    /// script, a steadiness check, or the verdict).
    pub binding: Vec<String>,
    /// The base probe's measured length, s (near the answer 2×, the re-check 3×).
    pub probe_secs: f64,
    /// The search's budget and its use, s.
    pub budget_secs: f64,
    /// See `budget_secs`.
    pub elapsed_secs: f64,
    /// Why a probe could not run, when one could not (`ended` is then `probe_failed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Every probe, in order.
    pub probes: Vec<ProbeRecord>,
}

impl CapacityReport {
    /// The terminal's table: one row per probe, then the answer.
    pub fn table(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:>3}  {:>10}  {:>10}  {:>10}  {:>8}  {:>6}  {:>6}  {:<13}  objectives",
            "#", "offered/s", "achieved/s", "finished/s", "step", "steady", "client", "outcome"
        );
        for p in &self.probes {
            let outcome = p.outcome_word();
            let steady = match p.steady {
                Some(true) => "yes",
                Some(false) => "NO",
                None => "?",
            };
            let step = p.step.name();
            let slos: Vec<String> = p
                .slos
                .iter()
                .map(|r| {
                    let word = match r.decision {
                        SloDecision::Holds => "ok",
                        SloDecision::Violated => "MISSED",
                        SloDecision::Undecided => "undecided",
                    };
                    format!("{} {} {word}", r.slo, r.figures())
                })
                .collect();
            let _ = writeln!(
                out,
                "{:>3}  {:>10.0}  {:>10.0}  {:>10.0}  {:>8}  {:>6}  {:>6}  {:<13}  {}",
                p.index,
                p.rate,
                p.achieved_per_sec,
                p.completed_per_sec,
                step,
                steady,
                if p.client_bound { "BOUND" } else { "ok" },
                outcome,
                slos.join("; ")
            );
        }
        out.push_str(&self.answer());
        out.push('\n');
        out
    }

    /// The answer in one line: `sustainable rate: 3 610 jobs/s (between 3 610 and 3 780: the
    /// boundary, within 5 %; re-checked)`, or what is known when the search did not finish.
    pub fn answer(&self) -> String {
        let r = |x: f64| format!("{x:.0}");
        let bracket = match (self.interval.lo, self.interval.hi) {
            (Some(lo), Some(hi)) => format!("the boundary lies between {} and {} jobs/s", r(lo), r(hi)),
            (Some(lo), None) => format!("at least {} jobs/s: no rate probed failed", r(lo)),
            (None, Some(hi)) => format!("below {} jobs/s: no rate probed was sustained", r(hi)),
            (None, None) => "no probe decided".to_string(),
        };
        let how = match self.ended {
            SearchEnd::Found => format!("within {:.0} %, the low end re-checked", self.tolerance * 100.0),
            SearchEnd::NoRate => "nothing sustained down to the floor".to_string(),
            SearchEnd::Ceiling => "the ceiling was sustained".to_string(),
            SearchEnd::Budget => match (self.interval.lo, self.interval.hi) {
                (Some(lo), Some(hi)) if hi - lo <= self.tolerance * lo => {
                    "INCONCLUSIVE: the bracket is within the tolerance, but its re-check did not fit the budget"
                        .to_string()
                }
                _ => "INCONCLUSIVE: the budget ran out before the tolerance was reached".to_string(),
            },
            SearchEnd::Stopped => "INCONCLUSIVE: stopped".to_string(),
            SearchEnd::ProbeFailed => {
                format!("INCONCLUSIVE: a probe could not run: {}", self.error.as_deref().unwrap_or("unknown"))
            }
            SearchEnd::ClientBound => format!(
                "INCONCLUSIVE, CLIENT-BOUND: the harness's own host was the bottleneck at {} jobs/s, so no deployment \
                 rate is named from it (give the harness CPU to spare: a quieter host, more --threads)",
                self.interval.hi.map_or("every rate probed".to_string(), r)
            ),
        };
        let rate = self.sustainable_rate.map_or("not established".to_string(), |x| format!("{} jobs/s", r(x)));
        let mut line = format!("sustainable rate: {rate} ({bracket}; {how})");
        if !self.binding.is_empty() {
            line.push_str(&format!("\nbinding at the lowest rate not sustained: {}", self.binding.join("; ")));
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(name: &str, steady: bool) -> SteadyCheck {
        SteadyCheck { name: name.into(), steady, trend: None, detail: "per-second p99 rises +40.0 %".into() }
    }

    #[test]
    fn a_trend_binds_only_on_a_script_an_objective_names_or_where_the_deployment_falls_behind() {
        let slos = [Slo::parse("enqueue.p99 < 20ms").unwrap()];
        let state =
            |checks: Vec<SteadyCheck>| SteadyState { steady: Some(false), seconds: 24, checks, ..Default::default() };
        // claim has no objective: its rising p99 is reported and the probe is steady.
        let (steady, binding, informing) =
            binding_steadiness(Some(&state(vec![check("rate", true), check("p99 claim", false)])), &slos);
        assert_eq!((steady, binding.len(), informing.len()), (Some(true), 0, 1));
        assert!(informing[0].starts_with("p99 claim: "), "{informing:?}");
        // enqueue's own trend binds, and so does the backlog whatever the objectives.
        for failed in ["p99 enqueue", "backlog"] {
            let (steady, binding, informing) =
                binding_steadiness(Some(&state(vec![check(failed, false), check("p99 claim", false)])), &slos);
            assert_eq!((steady, binding.len(), informing.len()), (Some(false), 1, 1), "{failed}");
        }
        // Too short to tell stays undecided; a steady run stays steady.
        let short = SteadyState { steady: None, ..Default::default() };
        assert_eq!(binding_steadiness(Some(&short), &slos).0, None);
        assert_eq!(binding_steadiness(None, &slos).0, None);
    }
}
