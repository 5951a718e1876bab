//! `cost`'s sequential gate with two directories: after every round of ABBA blocks each script
//! still undecided is judged on all its pairs so far ([`compare_sequential`], a confidence
//! sequence, so looking after every round does not inflate the error), and a script whose
//! verdict is decided keeps it; the rounds go on until every script is decided or the budget
//! is spent.

use super::pairs_of;
use crate::compare::sequential::{compare_sequential, pairs_needed};
use crate::compare::verdict::{MetricComparison, MetricVerdict};
use crate::compare::{CompareOptions, Measure, Metric};
use crate::cost::ScriptCost;
use crate::lua::Script;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// When a script's sequential verdict was reached, or where it stood when the gate stopped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stop {
    /// Rounds measured when the verdict was reached (undecided: all the rounds run).
    pub rounds: u32,
    /// The script's blocks by then, both arms (two per pair).
    pub blocks: u64,
    /// Seconds from the start of `cost` (server start and warm-up included) to the verdict
    /// (undecided: to the gate's end).
    pub seconds: f64,
    /// Undecided only: roughly how many more blocks (both arms) its interval would need to
    /// decide ([`pairs_needed`]); `None` when decided, or when its change sits on the band's
    /// edge (no number is likely enough).
    pub more_blocks: Option<u64>,
    /// True when the verdict is decided (not inconclusive).
    pub decided: bool,
}

/// Each measured script's latest comparison and when it stopped.
pub(super) struct Gate {
    options: CompareOptions,
    /// Per script, its comparison at its last look and that look's [`Stop`].
    scripts: Vec<(Script, MetricComparison, Stop)>,
}

impl Gate {
    /// A gate judging by `options` (its confidence is the sequence's 1 − α, its noise band the
    /// bands').
    pub(super) fn new(options: CompareOptions) -> Gate {
        Gate { options, scripts: Vec::new() }
    }

    /// The look after round `round` (1-based), `elapsed` since the start, on every block so
    /// far (`blocks`: (round, cost) in the order they ran): judges each script not yet decided.
    /// True when every script measured is decided.
    pub(super) fn look(&mut self, round: u32, blocks: &[(u32, ScriptCost)], elapsed: Duration) -> bool {
        for &script in Script::ALL.iter().filter(|s| blocks.iter().any(|(_, c)| c.script == **s)) {
            let at = self.scripts.iter().position(|(s, _, _)| *s == script);
            if at.is_some_and(|i| self.scripts[i].2.decided) {
                continue;
            }
            let pairs = pairs_of(blocks, script);
            let c = compare_sequential(Metric::script(script.name(), Measure::ServerUs), &pairs, round, &self.options);
            let decided = c.verdict != MetricVerdict::Inconclusive;
            let more_blocks = (!decided)
                .then(|| pairs_needed(&c, pairs.len()).map(|needed| 2 * (needed - pairs.len()) as u64))
                .flatten();
            let stop = Stop {
                rounds: round,
                blocks: 2 * pairs.len() as u64,
                seconds: elapsed.as_secs_f64(),
                more_blocks,
                decided,
            };
            match at {
                Some(i) => self.scripts[i] = (script, c, stop),
                None => self.scripts.push((script, c, stop)),
            }
        }
        self.scripts.iter().all(|(_, _, stop)| stop.decided)
    }

    /// The scripts still undecided, by name.
    pub(super) fn undecided(&self) -> Vec<&'static str> {
        self.scripts.iter().filter(|(_, _, stop)| !stop.decided).map(|(s, _, _)| s.name()).collect()
    }

    /// `script`'s comparison and stop, if it was measured.
    pub(super) fn of(&self, script: Script) -> Option<(MetricComparison, Stop)> {
        self.scripts.iter().find(|(s, _, _)| *s == script).map(|(_, c, stop)| (c.clone(), stop.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks of one round: `pairs` ABBA pairs of `script`, NEW `ratio` times BASE.
    fn round(r: u32, script: Script, pairs: usize, ratio: f64) -> Vec<(u32, ScriptCost)> {
        let block = |arm: usize, i: usize| {
            let wobble = 1.0 + (i % 7) as f64 * 0.002;
            let us = if arm == 0 { 10.0 * wobble } else { 10.0 * ratio * wobble };
            (r, ScriptCost { script, arm, calls: 100, us_per_call: us, cpu_us_per_call: us })
        };
        (0..pairs)
            .flat_map(|i| if i % 2 == 0 { [block(0, i), block(1, i)] } else { [block(1, i), block(0, i)] })
            .collect()
    }

    #[test]
    fn a_decided_script_keeps_its_verdict_and_when_it_was_reached() {
        let mut gate = Gate::new(CompareOptions::default());
        let mut blocks = round(1, Script::Complete, 20, 1.0);
        blocks.extend(round(1, Script::Fail, 4, 1.2));
        // Round 1: complete decides (no change); fail's 4 pairs are too few for any look.
        assert!(!gate.look(1, &blocks, Duration::from_secs(5)));
        assert_eq!(gate.undecided(), ["fail"]);
        let (c, stop) = gate.of(Script::Complete).unwrap();
        assert_eq!(c.verdict, MetricVerdict::NoChange);
        assert_eq!((stop.rounds, stop.blocks, stop.seconds, stop.decided), (1, 40, 5.0, true));
        // Round 2: fail decides (regressed); complete's verdict and stop stay those of round 1,
        // even if its later blocks would say otherwise.
        blocks.extend(round(2, Script::Complete, 20, 1.5));
        blocks.extend(round(2, Script::Fail, 16, 1.2));
        assert!(gate.look(2, &blocks, Duration::from_secs(9)));
        assert_eq!(gate.of(Script::Complete).unwrap().1.rounds, 1);
        let (c, stop) = gate.of(Script::Fail).unwrap();
        assert_eq!(c.verdict, MetricVerdict::Regressed);
        assert_eq!((stop.rounds, stop.blocks, stop.more_blocks), (2, 40, None));
        assert!(gate.of(Script::Claim).is_none());
    }
}
