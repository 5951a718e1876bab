//! Safety beside speed: when the runs of both sides injected faults (`[[faults]]`) and checked
//! their effects (`summary.json`'s `faults.injected[].effects`), each effect is counted per side
//! over every repetition, given as a rate per injected fault with its exact interval, and the two
//! rates are tested with the exact conditional test of [`crate::stats::poisson_rates_test`] at
//! each effect's share of the comparison's α (α over the four effects). "NEW has fewer fencing failures per fault" is said only when the test is
//! significant; otherwise "no difference shown", which is not "no difference": a handful of
//! faults cannot tell a rare failure from none.

use crate::faults::FaultEffects;
use crate::report::run_summary::RunSummary;
use crate::stats::{poisson_rate_interval, poisson_rates_test, Interval};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One effect a fault can have on the queue, as `faults.injected[].effects` counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SafetyEffect {
    /// Acknowledged enqueues whose job is gone (I7).
    LostEnqueues,
    /// Tokens handed out to two holders or more (I5): a claim the fault rolled back.
    ReissuedTokens,
    /// Fencing failures (I6): two terminal outcomes, a stale call accepted.
    FencingFailures,
    /// Calls whose outcome is unknown (timeout, lost connection, WAIT short).
    UnknownOutcomes,
}

impl SafetyEffect {
    /// Every effect, in the order the outputs list them.
    pub const ALL: [SafetyEffect; 4] = [
        SafetyEffect::FencingFailures,
        SafetyEffect::ReissuedTokens,
        SafetyEffect::LostEnqueues,
        SafetyEffect::UnknownOutcomes,
    ];

    /// The effect in words, plural: `fencing failures`.
    pub fn words(self) -> &'static str {
        match self {
            SafetyEffect::LostEnqueues => "lost acknowledged enqueues",
            SafetyEffect::ReissuedTokens => "reissued tokens",
            SafetyEffect::FencingFailures => "fencing failures",
            SafetyEffect::UnknownOutcomes => "unknown outcomes",
        }
    }

    fn of(self, effects: &FaultEffects) -> u64 {
        match self {
            SafetyEffect::LostEnqueues => effects.lost_enqueues,
            SafetyEffect::ReissuedTokens => effects.reissued_tokens,
            SafetyEffect::FencingFailures => effects.fencing_violations,
            SafetyEffect::UnknownOutcomes => effects.unknown_outcomes,
        }
    }
}

/// What the injected faults of one side's repetitions did, summed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FaultTally {
    /// Faults injected and applied whose effects the run's check attributed.
    pub faults: u64,
    /// Those faults by kind (`kill-primary`, `cluster-failover`, ...).
    pub by_kind: BTreeMap<String, u64>,
    /// Each effect's count over those faults, in [`SafetyEffect::ALL`] order.
    pub counts: [u64; 4],
}

impl FaultTally {
    /// The faults of one run's summary: the injected spans that were applied and carry effects
    /// (a run whose check did not run attributes none, and counts no fault).
    pub fn of_summary(summary: &RunSummary) -> FaultTally {
        let mut tally = FaultTally::default();
        for span in summary.faults.injected.iter().filter(|s| s.applied) {
            let Some(effects) = &span.effects else { continue };
            tally.faults += 1;
            *tally.by_kind.entry(span.kind.name().to_string()).or_default() += 1;
            for (i, effect) in SafetyEffect::ALL.iter().enumerate() {
                tally.counts[i] += effect.of(effects);
            }
        }
        tally
    }

    /// Adds `other`'s faults and counts to these.
    pub fn add(&mut self, other: &FaultTally) {
        self.faults += other.faults;
        for (kind, n) in &other.by_kind {
            *self.by_kind.entry(kind.clone()).or_default() += n;
        }
        for (mine, theirs) in self.counts.iter_mut().zip(other.counts) {
            *mine += theirs;
        }
    }

    /// `3 × kill-primary, 3 × cluster-failover`.
    pub fn kinds(&self) -> String {
        self.by_kind.iter().map(|(k, n)| format!("{n} × {k}")).collect::<Vec<_>>().join(", ")
    }
}

/// One side's count of an effect, as a rate per injected fault.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EffectRate {
    /// Events over every fault of the side.
    pub count: u64,
    /// `count / faults`.
    pub per_fault: f64,
    /// The exact interval of the rate per fault, at the comparison's confidence.
    pub ci: Interval,
}

impl EffectRate {
    /// `10 = 2.00 (0.96–3.68)`: the count, the rate per fault and its interval.
    pub fn describe(&self) -> String {
        format!("{} = {:.2} ({:.2}–{:.2})", self.count, self.per_fault, self.ci.lo, self.ci.hi)
    }
}

/// What NEW's faults did beside BASE's, for one effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SafetyVerdict {
    /// NEW's rate is significantly lower.
    Fewer,
    /// NEW's rate is significantly higher: a safety regression.
    More,
    /// The counts cannot tell the rates apart at the effect's share of α.
    NoDifferenceShown,
}

/// One effect compared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EffectComparison {
    /// Which effect.
    pub effect: SafetyEffect,
    /// BASE's rate.
    pub base: EffectRate,
    /// NEW's rate.
    pub new: EffectRate,
    /// The two-sided exact p-value that the rates differ.
    pub p: f64,
    /// The verdict at the effect's share of α.
    pub verdict: SafetyVerdict,
    /// The verdict in a sentence: `NEW has fewer fencing failures per fault (p 0.0020 < 0.0025
    /// (α 0.01 over 4 effects))`.
    pub sentence: String,
}

/// The safety comparison: each side's faults, and each effect compared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SafetyComparison {
    /// BASE's faults over its repetitions.
    pub base: FaultTally,
    /// NEW's faults over its repetitions.
    pub new: FaultTally,
    /// One entry per effect, in [`SafetyEffect::ALL`] order.
    pub effects: Vec<EffectComparison>,
}

impl SafetyComparison {
    /// True when NEW had any effect significantly more often than BASE.
    pub fn regressed(&self) -> bool {
        self.effects.iter().any(|e| e.verdict == SafetyVerdict::More)
    }
}

/// Compares the effects of BASE's faults with NEW's: `None` when either side injected no fault
/// whose effects were checked (nothing to compare). `alpha` is the significance level of the
/// whole table: each of the [`SafetyEffect::ALL`] effects is tested at its share of it
/// (Bonferroni), so four effects compared on identical scripts name a difference with at most
/// `alpha`'s chance, not four times it. `confidence` is the intervals' level.
pub fn compare_safety(base: &FaultTally, new: &FaultTally, alpha: f64, confidence: f64) -> Option<SafetyComparison> {
    if base.faults == 0 || new.faults == 0 {
        return None;
    }
    let rate = |tally: &FaultTally, i: usize| -> Option<EffectRate> {
        let count = tally.counts[i];
        let faults = tally.faults as f64;
        Some(EffectRate {
            count,
            per_fault: count as f64 / faults,
            ci: poisson_rate_interval(count, faults, confidence)?,
        })
    };
    let mut effects = Vec::new();
    let each = alpha / SafetyEffect::ALL.len() as f64;
    let share = format!("{each} (α {alpha} over {} effects)", SafetyEffect::ALL.len());
    for (i, &effect) in SafetyEffect::ALL.iter().enumerate() {
        let (b, n) = (rate(base, i)?, rate(new, i)?);
        let p = poisson_rates_test(b.count, base.faults as f64, n.count, new.faults as f64)?;
        let verdict = match (p < each, n.per_fault < b.per_fault) {
            (true, true) => SafetyVerdict::Fewer,
            (true, false) => SafetyVerdict::More,
            (false, _) => SafetyVerdict::NoDifferenceShown,
        };
        let words = effect.words();
        let sentence = match verdict {
            SafetyVerdict::Fewer => format!("NEW has fewer {words} per fault (p {p:.4} < {share})"),
            SafetyVerdict::More => format!("NEW has more {words} per fault (p {p:.4} < {share})"),
            SafetyVerdict::NoDifferenceShown => format!("no difference shown in {words} (p {p:.4} ≥ {share})"),
        };
        effects.push(EffectComparison { effect, base: b, new: n, p, verdict, sentence });
    }
    Some(SafetyComparison { base: base.clone(), new: new.clone(), effects })
}

/// The safety table as Markdown rows (`| effect | BASE per fault | NEW per fault | p | verdict |`)
/// under a line naming each side's faults; the text table uses the same lines.
pub fn format_safety(s: &SafetyComparison, confidence: f64) -> String {
    let pct = confidence * 100.0;
    let mut out = format!(
        "Safety under faults: BASE {} fault(s) ({}), NEW {} fault(s) ({}); per fault with the exact {pct:.0}% interval\n\n",
        s.base.faults,
        s.base.kinds(),
        s.new.faults,
        s.new.kinds()
    );
    out.push_str("| effect | BASE per fault | NEW per fault | p | verdict |\n| --- | --- | --- | --- | --- |\n");
    for e in &s.effects {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            e.effect.words(),
            e.base.describe(),
            e.new.describe(),
            super::fmt::p(Some(e.p)),
            e.sentence
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally(faults: u64, counts: [u64; 4]) -> FaultTally {
        FaultTally { faults, by_kind: [("kill-primary".to_string(), faults)].into(), counts }
    }

    #[test]
    fn fewer_only_when_the_counts_say_so() {
        // Fencing failures: 10 over 5 faults against 0 over 5: p = 2^-9.
        let s = compare_safety(&tally(5, [10, 3, 20, 40]), &tally(5, [0, 3, 18, 41]), 0.01, 0.95).unwrap();
        let fencing = &s.effects[0];
        assert_eq!(fencing.effect, SafetyEffect::FencingFailures);
        assert_eq!(fencing.verdict, SafetyVerdict::Fewer, "{}", fencing.sentence);
        assert!((fencing.p - 0.001953125).abs() < 1e-9);
        assert_eq!((fencing.base.per_fault, fencing.new.per_fault), (2.0, 0.0));
        assert!(fencing.new.ci.lo == 0.0 && fencing.new.ci.hi > 0.7, "{:?}", fencing.new.ci);
        // The same reissues, nearly the same losses: no difference shown.
        assert!(s.effects[1..].iter().all(|e| e.verdict == SafetyVerdict::NoDifferenceShown));
        assert!(!s.regressed());
        // Three against none is not enough at α = 0.01 (p = 0.25).
        let s = compare_safety(&tally(5, [3, 0, 0, 0]), &tally(5, [0, 0, 0, 0]), 0.01, 0.95).unwrap();
        assert_eq!(s.effects[0].verdict, SafetyVerdict::NoDifferenceShown, "{}", s.effects[0].sentence);
        // 31 unknown outcomes over 10 faults against 13 (measured here on two script sets):
        // p ≈ 0.0096 is under α but not under its share for one of four effects.
        let s = compare_safety(&tally(10, [14, 6, 165, 31]), &tally(10, [12, 5, 171, 13]), 0.01, 0.95).unwrap();
        let unknown = &s.effects[3];
        assert!(unknown.p > 0.0025 && unknown.p < 0.01, "{}", unknown.p);
        assert_eq!(unknown.verdict, SafetyVerdict::NoDifferenceShown, "{}", unknown.sentence);
        assert!(unknown.sentence.ends_with("≥ 0.0025 (α 0.01 over 4 effects))"), "{}", unknown.sentence);
    }

    #[test]
    fn identical_sides_show_no_difference_and_more_is_a_regression() {
        let same = compare_safety(&tally(6, [4, 2, 30, 9]), &tally(6, [4, 2, 30, 9]), 0.01, 0.95).unwrap();
        assert!(same.effects.iter().all(|e| e.verdict == SafetyVerdict::NoDifferenceShown && e.p > 0.99));
        let worse = compare_safety(&tally(5, [0, 0, 0, 0]), &tally(5, [12, 0, 0, 0]), 0.01, 0.95).unwrap();
        assert_eq!(worse.effects[0].verdict, SafetyVerdict::More);
        assert!(worse.regressed());
        assert!(compare_safety(&tally(0, [0; 4]), &tally(5, [1; 4]), 0.01, 0.95).is_none(), "no fault on BASE");
    }

    #[test]
    fn the_table_names_each_sides_faults_and_each_verdict() {
        let s = compare_safety(&tally(5, [10, 3, 20, 40]), &tally(5, [0, 3, 18, 41]), 0.01, 0.95).unwrap();
        let text = format_safety(&s, 0.95);
        assert!(text.contains("BASE 5 fault(s) (5 × kill-primary)"), "{text}");
        assert!(text.contains("| fencing failures | 10 = 2.00 ("), "{text}");
        assert!(text.contains("NEW has fewer fencing failures per fault"), "{text}");
        assert!(text.contains("no difference shown in reissued tokens"), "{text}");
    }
}
