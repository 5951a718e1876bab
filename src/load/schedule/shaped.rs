//! One producer's schedule of a load shape: arrivals of a unit-rate process in operational
//! time, mapped to real time through the shape's Λ⁻¹ (see the parent module).

use super::Arrival;
#[cfg(doc)]
use super::Schedule;
use crate::scenario::Stages;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::Exp1;
use std::time::{Duration, Instant};

/// Where a shaped schedule puts a send that is never due (a shape whose last stage has rate 0
/// intends nothing after it): twice the longest run, so no load phase reaches it.
const NEVER: Duration = Duration::from_secs(2 * 7 * 24 * 3600);

/// A schedule whose rate follows [`Stages`]; boxed in [`Schedule`], so the constant-rate
/// variant stays as small as it is.
pub struct Shaped {
    /// The schedule's start: the load phase's t = 0.
    start: Instant,
    /// The next intended send time, s after `start` (`f64::INFINITY`: never).
    next_s: f64,
    /// The next send's operational time: the shape's jobs intended by `next_s`, Λ(next_s).
    op: f64,
    /// Operational time per gap of this producer: the producers sharing the shape (each
    /// gets 1/`step` of every stage's rate).
    step: f64,
    /// Gap law.
    arrival: Arrival,
    /// Draws the Poisson gaps.
    rng: SmallRng,
    /// The whole process's shape (shared by its producers).
    stages: Stages,
    /// The stage `next_s` falls in: only moves forward.
    cursor: usize,
}

impl Shaped {
    /// A schedule following `stages` from `start`, its producer one of `count` sharing them
    /// (so its rate is 1/`count` of theirs), the first uniform send `phase` (0..1) of one of its
    /// gaps in operational time after the shape's start, a Poisson one at the start (as
    /// [`Schedule::open`]).
    pub fn new(stages: Stages, count: u32, arrival: Arrival, start: Instant, seed: u64, phase: f64) -> Shaped {
        let step = f64::from(count.max(1));
        let op = match arrival {
            Arrival::Uniform => phase.clamp(0.0, 1.0) * step,
            Arrival::Poisson => 0.0,
        };
        let mut cursor = 0;
        let next_s = stages.time_of(op, &mut cursor);
        let rng = SmallRng::seed_from_u64(seed);
        Shaped { start, next_s, op, step, arrival, rng, stages, cursor }
    }

    /// The next intended send time, and advances.
    pub(super) fn next(&mut self) -> Instant {
        let now = self.at();
        self.advance();
        now
    }

    /// [`Schedule::due_until`] of this schedule: the span counted in operational time,
    /// Λ(end) − Λ(next), in gaps.
    pub(super) fn due_until(&self, end: Instant) -> u64 {
        let t = end.saturating_duration_since(self.start).as_secs_f64();
        // Also false for a send that is never due (INFINITY).
        if t < self.next_s {
            return 0;
        }
        // The next send is due, so at least one: the float difference may fall just short.
        let gaps = ((self.stages.jobs_until(t) - self.op) / self.step).max(0.0);
        match self.arrival {
            Arrival::Uniform => gaps.floor() as u64 + 1,
            Arrival::Poisson => (gaps.round() as u64).max(1),
        }
    }

    /// `start + next_s`, or [`NEVER`] after it.
    pub(super) fn at(&self) -> Instant {
        let s = if self.next_s.is_finite() { Duration::from_secs_f64(self.next_s) } else { NEVER };
        self.start + s.min(NEVER)
    }

    /// Moves to the next send: one gap further in operational time, mapped back to real time.
    fn advance(&mut self) {
        let gap = match self.arrival {
            Arrival::Uniform => 1.0,
            Arrival::Poisson => self.rng.sample::<f64, _>(Exp1),
        };
        self.op += gap * self.step;
        self.next_s = self.stages.time_of(self.op, &mut self.cursor);
    }
}

#[cfg(test)]
mod tests {
    use super::super::Schedule;
    use super::*;

    fn stage(secs: f64, rate_from: f64, rate_to: f64) -> crate::scenario::StagePlan {
        crate::scenario::StagePlan { duration: Duration::from_secs_f64(secs), rate_from, rate_to }
    }

    /// 1 s at 300/s, a 2 s ramp to 1500/s, 1 s at 1500/s: 300, 600, 1200 and 1500 jobs in its
    /// four seconds.
    fn three_stages(arrival: Arrival) -> crate::scenario::OpenLoop {
        let stages = Stages::new(&[stage(1.0, 300.0, 300.0), stage(2.0, 300.0, 1500.0), stage(1.0, 1500.0, 1500.0)]);
        crate::scenario::OpenLoop { rate_per_sec: stages.mean_rate(), arrival, stages: Some(stages) }
    }

    /// Every intended send of `producers` producers sharing `open` in the first `secs` seconds,
    /// in s after the start, through the production split.
    fn sends(open: &crate::scenario::OpenLoop, producers: u32, secs: f64, start: Instant) -> Vec<f64> {
        let mut all = Vec::new();
        for p in 0..producers {
            let mut s = Schedule::for_producer(open, producers, (p as usize, producers), start, 7 + u64::from(p));
            loop {
                let t = (s.next_intended().unwrap() - start).as_secs_f64();
                if t >= secs {
                    break;
                }
                all.push(t);
            }
        }
        all
    }

    fn per_second(times: &[f64], seconds: usize) -> Vec<usize> {
        let mut counts = vec![0; seconds];
        for &t in times {
            counts[t as usize] += 1;
        }
        counts
    }

    #[test]
    fn uniform_sends_follow_the_stages_exactly() {
        let start = Instant::now();
        let counts = per_second(&sends(&three_stages(Arrival::Uniform), 4, 4.0, start), 4);
        // Each of the 4 producers' sends may fall either side of a second's edge.
        for (k, (got, want)) in counts.iter().zip([300, 600, 1200, 1500]).enumerate() {
            assert!(got.abs_diff(want) <= 4, "second {k}: {got} sends, the stages intend {want}");
        }
    }

    #[test]
    fn poisson_sends_follow_the_stages_within_their_noise() {
        let start = Instant::now();
        let counts = per_second(&sends(&three_stages(Arrival::Poisson), 3, 4.0, start), 4);
        for (k, (got, want)) in counts.iter().zip([300.0, 600.0, 1200.0, 1500.0]).enumerate() {
            // Five standard deviations of a Poisson count (sqrt of its mean).
            let err = (*got as f64 - want).abs();
            assert!(err <= 5.0 * f64::sqrt(want), "second {k}: {got} sends, the stages intend {want}");
        }
        // Within the ramp the rate rises: its second half has more than its first.
        let times = sends(&three_stages(Arrival::Poisson), 3, 4.0, start);
        let (a, b) = (times.iter().filter(|t| (1.0..2.0).contains(*t)).count(), per_second(&times, 4)[2]);
        assert!(b > a, "the ramp's second second ({b}) is busier than its first ({a})");
    }

    /// A shape of one constant stage intends the constant schedule's sends.
    #[test]
    fn one_constant_stage_is_the_constant_schedule() {
        let start = Instant::now();
        for arrival in [Arrival::Uniform, Arrival::Poisson] {
            let stages = Stages::new(&[stage(10.0, 2000.0, 2000.0)]);
            let shaped = crate::scenario::OpenLoop { rate_per_sec: 2000.0, arrival, stages: Some(stages) };
            let constant = crate::scenario::OpenLoop { stages: None, ..shaped.clone() };
            let (a, b) = (sends(&shaped, 3, 2.0, start), sends(&constant, 3, 2.0, start));
            assert_eq!(a.len(), b.len(), "{arrival:?}");
            if arrival == Arrival::Uniform {
                for (x, y) in a.iter().zip(&b) {
                    assert!((x - y).abs() < 1e-9, "{arrival:?}: {x} != {y}");
                }
            }
        }
    }

    /// The sends due by an instant and not drawn are counted from the shape, exactly for
    /// uniform arrivals; after a last stage of rate 0 nothing is ever due.
    #[test]
    fn a_shaped_backlog_is_counted_in_closed_form() {
        let start = Instant::now();
        let open = three_stages(Arrival::Uniform);
        let mut s = Schedule::for_producer(&open, 1, (0, 1), start, 1);
        for _ in 0..500 {
            s.next_intended();
        }
        let end = start + Duration::from_millis(2500);
        let due = s.due_until(end);
        let mut drawn = 0;
        while s.next_intended().unwrap() <= end {
            drawn += 1;
        }
        assert_eq!(due, drawn, "sends due by 2.5 s after the 500th");
        let stops = Stages::new(&[stage(1.0, 100.0, 100.0), stage(1.0, 0.0, 0.0)]);
        let open = crate::scenario::OpenLoop { rate_per_sec: 50.0, arrival: Arrival::Uniform, stages: Some(stops) };
        let mut s = Schedule::for_producer(&open, 1, (0, 1), start, 1);
        for _ in 0..100 {
            assert!(s.next_intended().unwrap() < start + Duration::from_secs(1));
        }
        assert!(s.peek().unwrap() > start + Duration::from_secs(7 * 24 * 3600), "never due in any run");
        assert_eq!(s.due_until(start + Duration::from_secs(100)), 0);
    }
}
