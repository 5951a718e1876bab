//! The gates every run is held to without any `[thresholds]` (a run whose calls all
//! fail must never say "pass"): a script with calls but no successful one; nothing enqueued by
//! a scenario with producers; nothing finished by a scenario with consumers; errors beyond 1%
//! of a script's calls. EMQFENCE and EMQSTATE refusals of the fenced verbs do not count toward
//! the 1%: they are the protocol refusing stale holders, which stalls, zombies and expired
//! leases provoke on purpose (the checker's I6 judges them). Neither do the failures an
//! injected fault explains (timeouts, lost connections, OOM, LOADING, READONLY, ... in the
//! seconds of a `[[faults]]` entry: `faults::record`): the checker judges what they did to
//! the jobs. Faults from outside are held to the rule (set `errors.rate` to allow them). A scenario's own
//! `errors.rate` threshold replaces the 1% rule for the scripts it covers.

use super::ScriptSummary;
use crate::lua::ErrorCode;
use std::collections::BTreeMap;

/// The share of a script's calls that may fail (other than the provoked refusals).
pub const MAX_ERROR_SHARE: f64 = 0.01;

/// The fenced verbs (EchoMQ's and BullMQ's), whose stale refusals ([`ErrorCode::is_stale`]:
/// EMQFENCE/EMQSTATE, BullMQ's lock missing or mismatched) a scenario provokes with zombies.
const FENCED: [&str; 8] =
    ["complete", "fail", "extend", "progress", "moveToFinished", "retryJob", "moveToDelayed", "extendLock"];

/// What the run was meant to do, for the gates.
#[derive(Debug, Clone, Copy, Default)]
pub struct Intent {
    /// The scenario has producers.
    pub producers: bool,
    /// The scenario has consumers.
    pub consumers: bool,
}

/// How one default gate came out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateOutcome {
    /// The gate holds.
    Passed,
    /// The gate is broken: the line the verdict prints after `FAIL`.
    Failed(String),
    /// The gate does not apply to this run, and why (e.g. a threshold sets the error rate).
    Skipped(String),
}

/// One default gate of one run: its name (e.g. `claim: errors within 1%`, `something was
/// enqueued`) and how it came out, as `junit.xml` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateResult {
    /// What the gate asks, per script where it is a script's.
    pub name: String,
    /// Passed, failed with its line, or skipped with why.
    pub outcome: GateOutcome,
}

impl GateResult {
    fn new(name: String, outcome: GateOutcome) -> GateResult {
        GateResult { name, outcome }
    }
}

/// One line per broken gate (empty when the run passes them). `jobs` are summary.json's job
/// counters; `rate_gated(script)` is true when a threshold sets that script's error rate;
/// `explained(script)` is how many of its failed calls a fault explains.
pub fn failures(
    scripts: &[ScriptSummary],
    jobs: &BTreeMap<String, u64>,
    intent: Intent,
    rate_gated: impl Fn(&str) -> bool,
    explained: impl Fn(&str) -> u64,
) -> Vec<String> {
    evaluate(scripts, jobs, intent, rate_gated, explained)
        .into_iter()
        .filter_map(|gate| match gate.outcome {
            GateOutcome::Failed(line) => Some(line),
            _ => None,
        })
        .collect()
}

/// Every default gate of the run, passed, failed or skipped, in the order [`failures`] gives
/// the broken ones: per called script "some call succeeds" and "errors within 1%", then
/// "something was enqueued" and "something was completed or failed". Arguments as
/// [`failures`].
pub fn evaluate(
    scripts: &[ScriptSummary],
    jobs: &BTreeMap<String, u64>,
    intent: Intent,
    rate_gated: impl Fn(&str) -> bool,
    explained: impl Fn(&str) -> u64,
) -> Vec<GateResult> {
    let mut out = Vec::new();
    for s in scripts.iter().filter(|s| s.calls > 0) {
        let succeeds = format!("{}: some call succeeds", s.script);
        // A fenced verb's refusals of stale workers are the fencing working, not errors: the
        // gate's name says it leaves them out.
        let apart = if FENCED.contains(&s.script.as_str()) { " (stale workers' refusals apart)" } else { "" };
        let share = format!("{}: errors within {}%{apart}", s.script, MAX_ERROR_SHARE * 100.0);
        if s.ok == 0 {
            let line = format!("{}: {} calls and none succeeded ({})", s.script, s.calls, by_code(s));
            out.push(GateResult::new(succeeds, GateOutcome::Failed(line)));
            out.push(GateResult::new(share, GateOutcome::Skipped("no call succeeded".into())));
            continue;
        }
        out.push(GateResult::new(succeeds, GateOutcome::Passed));
        if rate_gated(&s.script) {
            let why = "an errors.rate threshold replaces it".to_string();
            out.push(GateResult::new(share, GateOutcome::Skipped(why)));
            continue;
        }
        let provoked: u64 = if FENCED.contains(&s.script.as_str()) {
            ErrorCode::ALL.iter().filter(|c| c.is_stale()).filter_map(|c| s.errors.get(c.name())).sum()
        } else {
            0
        };
        let faulted = explained(&s.script).min(s.error_total() - provoked);
        let other = s.error_total() - provoked - faulted;
        let outcome = if other as f64 > MAX_ERROR_SHARE * s.calls as f64 {
            let besides = if faulted > 0 { format!(", besides {faulted} during faults") } else { String::new() };
            GateOutcome::Failed(format!(
                "{}: {other} of {} calls failed ({}{besides}), more than {}% (set {}.errors.rate in [thresholds] to allow it)",
                s.script,
                s.calls,
                by_code(s),
                MAX_ERROR_SHARE * 100.0,
                s.script
            ))
        } else {
            GateOutcome::Passed
        };
        out.push(GateResult::new(share, outcome));
    }
    let count = |name: &str| jobs.get(name).copied().unwrap_or(0);
    let enqueued = match (intent.producers, count("enqueued")) {
        (false, _) => GateOutcome::Skipped("the scenario has no producers".into()),
        (true, 0) => GateOutcome::Failed("nothing was enqueued".into()),
        (true, _) => GateOutcome::Passed,
    };
    out.push(GateResult::new("something was enqueued".into(), enqueued));
    let finished = count("completed") + count("failed") + count("failed_by_stall");
    let finished = match (intent.consumers, count("enqueued"), finished) {
        (false, _, _) => GateOutcome::Skipped("the scenario has no consumers".into()),
        (true, 0, _) => GateOutcome::Skipped("nothing was enqueued".into()),
        (true, _, 0) => {
            GateOutcome::Failed("nothing was completed or failed, although the scenario has consumers".into())
        }
        (true, _, _) => GateOutcome::Passed,
    };
    out.push(GateResult::new("something was completed or failed".into(), finished));
    out
}

fn by_code(s: &ScriptSummary) -> String {
    let codes: Vec<String> = s.errors.iter().map(|(code, n)| format!("{code} {n}")).collect();
    if codes.is_empty() {
        "no error reply".to_string()
    } else {
        codes.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(name: &str, calls: u64, ok: u64, errors: &[(&str, u64)]) -> ScriptSummary {
        ScriptSummary::with_counts(name, calls, ok, errors)
    }

    fn jobs(enqueued: u64, completed: u64) -> BTreeMap<String, u64> {
        [("enqueued".to_string(), enqueued), ("completed".to_string(), completed)].into()
    }

    const BOTH: Intent = Intent { producers: true, consumers: true };

    #[test]
    fn a_run_whose_calls_all_fail_is_a_failure() {
        let found = failures(&[script("enqueue", 50, 0, &[("server", 50)])], &jobs(0, 0), BOTH, |_| false, |_| 0);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].contains("enqueue: 50 calls and none succeeded (server 50)"), "{found:?}");
        assert_eq!(found[1], "nothing was enqueued");
        let found = failures(&[script("enqueue", 50, 50, &[])], &jobs(50, 0), BOTH, |_| false, |_| 0);
        assert_eq!(found, vec!["nothing was completed or failed, although the scenario has consumers"]);
        let enqueue_only = Intent { producers: true, consumers: false };
        assert!(failures(&[script("enqueue", 50, 50, &[])], &jobs(50, 0), enqueue_only, |_| false, |_| 0).is_empty());
    }

    #[test]
    fn provoked_refusals_are_allowed_and_other_errors_only_up_to_one_percent() {
        let fenced = script("complete", 1000, 900, &[("EMQFENCE", 60), ("EMQSTATE", 30), ("timeout", 10)]);
        assert!(failures(&[fenced], &jobs(900, 900), BOTH, |_| false, |_| 0).is_empty(), "10 of 1000 is 1%: allowed");
        let over = script("complete", 1000, 889, &[("EMQFENCE", 100), ("timeout", 11)]);
        let found = failures(std::slice::from_ref(&over), &jobs(900, 889), BOTH, |_| false, |_| 0);
        assert_eq!(found.len(), 1);
        assert!(found[0].starts_with("complete: 11 of 1000 calls failed (EMQFENCE 100, timeout 11)"), "{found:?}");
        assert!(
            failures(&[over], &jobs(900, 889), BOTH, |s| s == "complete", |_| 0).is_empty(),
            "a threshold replaces the rule"
        );
        let faulted = script("enqueue", 1000, 900, &[("timeout", 60), ("connection", 40)]);
        let found = failures(std::slice::from_ref(&faulted), &jobs(900, 900), BOTH, |_| false, |_| 85);
        assert!(
            found[0].contains("15 of 1000 calls failed (connection 40, timeout 60, besides 85 during faults)"),
            "{found:?}"
        );
        assert!(failures(&[faulted], &jobs(900, 900), BOTH, |_| false, |_| 100).is_empty(), "all during faults");
        let claim = script("claim", 1000, 980, &[("EMQSTATE", 20)]);
        assert_eq!(failures(&[claim], &jobs(900, 900), BOTH, |_| false, |_| 0).len(), 1, "claim is no fenced verb");
    }

    #[test]
    fn every_gate_is_listed_with_its_outcome() {
        let all_failed = script("enqueue", 50, 0, &[("server", 50)]);
        let gates = evaluate(&[all_failed, script("claim", 10, 10, &[])], &jobs(0, 0), BOTH, |s| s == "claim", |_| 0);
        let names: Vec<&str> = gates.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "enqueue: some call succeeds",
                "enqueue: errors within 1%",
                "claim: some call succeeds",
                "claim: errors within 1%",
                "something was enqueued",
                "something was completed or failed"
            ]
        );
        assert!(matches!(&gates[0].outcome, GateOutcome::Failed(line) if line.contains("none succeeded")));
        assert!(matches!(&gates[1].outcome, GateOutcome::Skipped(_)));
        assert_eq!(gates[2].outcome, GateOutcome::Passed);
        assert!(matches!(&gates[3].outcome, GateOutcome::Skipped(why) if why.contains("errors.rate")));
        assert_eq!(gates[4].outcome, GateOutcome::Failed("nothing was enqueued".into()));
        assert!(matches!(&gates[5].outcome, GateOutcome::Skipped(_)), "nothing to finish");
    }
}
