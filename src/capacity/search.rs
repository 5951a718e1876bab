//! The search for the highest sustained rate: double until a probe fails, then bisect between
//! the highest rate that passed and the lowest that failed, with longer probes near the answer,
//! and re-check the boundary with the longest probe before naming it.
//!
//! Pure: it is told each probe's outcome and says which rate to probe next, so its behaviour is
//! tested against a server of known capacity without one.

use serde::{Deserialize, Serialize};

/// A probe's outcome as the search reads it (an undecided probe is lengthened by the caller,
/// and counted as failed when the longest probe cannot decide: a rate not shown sustainable is
/// not reported as sustainable).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeOutcome {
    /// Every objective held and the run was steady.
    Sustained,
    /// An objective was violated, the run was not steady, or its verdict failed.
    NotSustained,
    /// Not sustained while the harness's own host was the bottleneck (`report::client`): the
    /// search goes no higher, and names no deployment rate from it.
    ClientBound,
}

/// Which step of the search a probe belongs to (capacity.json `probes[].step`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// Doubling (or halving) until the answer is bracketed.
    Bracket,
    /// Bisecting the bracket.
    Bisect,
    /// The boundary's re-check with the longest probe.
    Recheck,
}

impl Step {
    /// The step's name as capacity.json spells it.
    pub fn name(self) -> &'static str {
        match self {
            Step::Bracket => "bracket",
            Step::Bisect => "bisect",
            Step::Recheck => "recheck",
        }
    }
}

/// The next probe: its rate and how many base probe lengths it lasts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NextProbe {
    /// Jobs per second to offer.
    pub rate: f64,
    /// Its length in base probe lengths (1 when bracketing, 2 near the answer, 3 to re-check).
    pub length: u32,
    /// The step it serves.
    pub step: Step,
}

/// The bracket narrower than this share of its low end gets longer probes.
const NEAR: f64 = 0.25;

/// The search's state: every rate probed and its outcome.
#[derive(Debug, Clone)]
pub struct Search {
    tolerance: f64,
    floor: f64,
    ceiling: f64,
    start: f64,
    sustained: Vec<f64>,
    not_sustained: Vec<f64>,
    client_bound: Vec<f64>,
    /// The low end whose re-check passed, once it has.
    confirmed: Option<f64>,
}

impl Search {
    /// A search from `start` jobs/s, done when the bracket is within `tolerance` of its low end
    /// (0.05: 5 %), never below `floor` or above `ceiling` jobs/s.
    pub fn new(start: f64, tolerance: f64, floor: f64, ceiling: f64) -> Search {
        Search {
            tolerance,
            floor,
            ceiling,
            start: start.clamp(floor, ceiling),
            sustained: Vec::new(),
            not_sustained: Vec::new(),
            client_bound: Vec::new(),
            confirmed: None,
        }
    }

    /// Records a probe at `rate`. A re-check that passes confirms the low end.
    pub fn record(&mut self, probe: NextProbe, outcome: ProbeOutcome) {
        match outcome {
            ProbeOutcome::Sustained => {
                self.sustained.push(probe.rate);
                if probe.step == Step::Recheck {
                    self.confirmed = Some(probe.rate);
                }
            }
            ProbeOutcome::NotSustained => self.not_sustained.push(probe.rate),
            ProbeOutcome::ClientBound => self.client_bound.push(probe.rate),
        }
    }

    /// The lowest rate that was not sustained, by the deployment or because the client was
    /// bound: the search offers no more than a rate its client could not carry.
    pub fn hi(&self) -> Option<f64> {
        self.not_sustained.iter().chain(&self.client_bound).copied().reduce(f64::min)
    }

    /// True when [`Search::hi`] is a rate the client was bound at (and the deployment did not
    /// fail at it or below): the bracket's top is the harness's, not the deployment's.
    pub fn client_bound(&self) -> bool {
        let deployment = self.not_sustained.iter().copied().reduce(f64::min);
        match (self.client_bound.iter().copied().reduce(f64::min), deployment) {
            (Some(c), Some(d)) => c < d,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }

    /// The highest rate sustained below [`Search::hi`] (a pass above a lower failure is noise,
    /// and the failure wins).
    pub fn lo(&self) -> Option<f64> {
        let hi = self.hi().unwrap_or(f64::INFINITY);
        self.sustained.iter().copied().filter(|r| *r < hi).reduce(f64::max)
    }

    /// True when the bracket is within the tolerance.
    pub fn narrow(&self) -> bool {
        matches!((self.lo(), self.hi()), (Some(lo), Some(hi)) if (hi - lo) <= self.tolerance * lo)
    }

    /// The next probe, or `None` when the search is done: the bracket within the tolerance and
    /// its low end re-checked, every rate down to the floor failed, or the ceiling sustained.
    pub fn next(&self) -> Option<NextProbe> {
        let probe = |rate: f64, length, step| Some(NextProbe { rate, length, step });
        match (self.lo(), self.hi()) {
            (None, None) => probe(self.start, 1, Step::Bracket),
            (Some(lo), None) => {
                if lo >= self.ceiling {
                    return None;
                }
                probe((lo * 2.0).min(self.ceiling), 1, Step::Bracket)
            }
            (None, Some(hi)) => {
                let half = hi / 2.0;
                if hi <= self.floor {
                    return None;
                }
                probe(half.max(self.floor), 1, Step::Bracket)
            }
            (Some(lo), Some(hi)) => {
                if self.narrow() {
                    // A bracket topped by the client's limit is the harness's: no re-check
                    // would make its low end the deployment's answer.
                    if self.confirmed == Some(lo) || self.client_bound() {
                        return None;
                    }
                    return probe(lo, 3, Step::Recheck);
                }
                let length = if hi - lo <= NEAR * lo { 2 } else { 1 };
                probe((lo + hi) / 2.0, length, Step::Bisect)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deployment that sustains every rate up to `capacity`.
    fn run(capacity: f64, start: f64) -> (Search, Vec<NextProbe>) {
        let mut s = Search::new(start, 0.05, 10.0, 1e7);
        let mut probes = Vec::new();
        while let Some(p) = s.next() {
            probes.push(p);
            s.record(p, if p.rate <= capacity { ProbeOutcome::Sustained } else { ProbeOutcome::NotSustained });
            assert!(probes.len() < 60, "the search does not end");
        }
        (s, probes)
    }

    #[test]
    fn brackets_by_doubling_then_bisects_to_the_tolerance_and_rechecks() {
        let (s, probes) = run(3_700.0, 1_000.0);
        let (lo, hi) = (s.lo().unwrap(), s.hi().unwrap());
        assert!(lo <= 3_700.0 && hi > 3_700.0 && hi - lo <= 0.05 * lo, "{lo} {hi}");
        assert_eq!(probes.iter().take(3).map(|p| p.rate).collect::<Vec<_>>(), [1_000.0, 2_000.0, 4_000.0]);
        assert!(probes.iter().take(3).all(|p| p.step == Step::Bracket && p.length == 1));
        let last = probes.last().unwrap();
        assert_eq!((last.rate, last.step, last.length), (lo, Step::Recheck, 3));
        // Near the answer the probes are longer.
        assert!(probes.iter().any(|p| p.step == Step::Bisect && p.length == 2));
    }

    #[test]
    fn a_first_probe_above_capacity_halves_down() {
        let (s, probes) = run(300.0, 1_000.0);
        assert_eq!(probes[1].rate, 500.0);
        assert_eq!(probes[2].rate, 250.0);
        assert!(s.lo().unwrap() <= 300.0 && s.hi().unwrap() > 300.0);
    }

    #[test]
    fn nothing_sustained_down_to_the_floor_ends_without_a_rate() {
        let (s, probes) = run(1.0, 100.0);
        assert_eq!(s.lo(), None);
        assert_eq!(probes.last().unwrap().rate, 10.0);
    }

    #[test]
    fn the_ceiling_sustained_ends_without_a_failure() {
        let mut s = Search::new(1_000.0, 0.05, 10.0, 4_000.0);
        while let Some(p) = s.next() {
            s.record(p, ProbeOutcome::Sustained);
        }
        assert_eq!((s.lo(), s.hi()), (Some(4_000.0), None));
    }

    #[test]
    fn a_failed_recheck_moves_the_answer_down() {
        let mut s = Search::new(1_000.0, 0.05, 10.0, 1e7);
        let mut rechecks = 0;
        while let Some(p) = s.next() {
            // Above 3 000 nothing holds; the first re-check fails as well (a noisy probe).
            let ok = p.rate <= 3_000.0 && !(p.step == Step::Recheck && rechecks == 0);
            if p.step == Step::Recheck {
                rechecks += 1;
            }
            s.record(p, if ok { ProbeOutcome::Sustained } else { ProbeOutcome::NotSustained });
        }
        assert_eq!(rechecks, 2);
        assert!(s.lo().unwrap() < s.hi().unwrap() && s.hi().unwrap() <= 3_000.0);
    }

    #[test]
    fn a_client_bound_probe_caps_the_search_and_is_named() {
        // The deployment would sustain 8 000/s, but the client cannot offer more than 3 000/s.
        let mut s = Search::new(1_000.0, 0.05, 10.0, 1e7);
        while let Some(p) = s.next() {
            let outcome = if p.rate > 3_000.0 { ProbeOutcome::ClientBound } else { ProbeOutcome::Sustained };
            assert_ne!(p.step, Step::Recheck, "a client-bound bracket is not re-checked");
            s.record(p, outcome);
        }
        assert!(s.client_bound() && s.narrow());
        assert!(s.lo().unwrap() <= 3_000.0 && s.hi().unwrap() > 3_000.0);
        // Client-bound at every rate: down to the floor, and named.
        let mut s = Search::new(100.0, 0.05, 10.0, 1e7);
        while let Some(p) = s.next() {
            s.record(p, ProbeOutcome::ClientBound);
        }
        assert_eq!((s.lo(), s.hi(), s.client_bound()), (None, Some(10.0), true));
        // A deployment failure below the client's limit is the deployment's.
        let mut s = Search::new(1_000.0, 0.05, 10.0, 1e7);
        let at = |rate| NextProbe { rate, length: 1, step: Step::Bisect };
        s.record(at(4_000.0), ProbeOutcome::ClientBound);
        s.record(at(2_000.0), ProbeOutcome::NotSustained);
        assert!(!s.client_bound());
        assert_eq!(s.hi(), Some(2_000.0));
    }

    #[test]
    fn a_pass_above_a_lower_failure_does_not_count() {
        let mut s = Search::new(1_000.0, 0.05, 10.0, 1e7);
        let at = |rate| NextProbe { rate, length: 1, step: Step::Bisect };
        s.record(at(1_000.0), ProbeOutcome::Sustained);
        s.record(at(2_000.0), ProbeOutcome::NotSustained);
        s.record(at(3_000.0), ProbeOutcome::Sustained);
        assert_eq!((s.lo(), s.hi()), (Some(1_000.0), Some(2_000.0)));
    }
}
