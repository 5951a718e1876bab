//! When a producer sends: closed loop (as fast as replies come back) or open loop (a fixed
//! arrival process, each request with its own *intended* send time).
//!
//! A load shape (`[[stages]]`, a piecewise-linear rate λ(t)) is a time change of a unit-rate
//! process: arrivals are drawn in *operational time* s (Poisson: exponential gaps of mean 1;
//! uniform: gaps of exactly 1 after the producer's phase), one producer's gap spanning `count`
//! jobs of the whole shape, and each s maps to the real time t = Λ⁻¹(s), where Λ(t) = ∫₀ᵗ λ
//! is linear within a constant stage and quadratic within a ramp ([`Stages::time_of`]).
//!
//! Open-loop latency is measured from the intended time, not the actual send, so a stalled
//! server cannot hide its stall by slowing the producer down (coordinated omission; Gil Tene,
//! "How NOT to measure latency", and wrk2's constant-throughput mode).

mod shaped;

pub use crate::scenario::Arrival;
use crate::scenario::Stages;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Exp};
pub use shaped::Shaped;
use std::time::{Duration, Instant};

/// One producer's schedule of intended send times.
pub enum Schedule {
    /// Closed loop: no intended times; each request is sent when a pipeline slot frees up.
    Closed,
    /// Open loop at `rate` jobs/s for this producer.
    Open {
        /// The schedule's start.
        start: Instant,
        /// The next intended send time, seconds after `start`. Kept as a sum of exact gaps, not
        /// of `Duration`s: each gap rounded to whole nanoseconds would drift (0.1% at 3 million
        /// jobs/s), and a gap under half a nanosecond would round to zero, so the schedule
        /// never advanced and the producer ran as a closed loop.
        next_s: f64,
        /// Mean gap between sends, seconds.
        mean_gap_s: f64,
        /// Gap law.
        arrival: Arrival,
        /// Draws the Poisson gaps.
        rng: SmallRng,
    },
    /// Open loop following a load shape: this producer's part of it.
    Shaped(Box<Shaped>),
}

impl Schedule {
    /// An open-loop schedule of `rate_per_sec` (> 0) jobs/s starting at `start`, its first
    /// uniform send `phase` (0..1) of a gap after it: producer i of N takes i/N, so N uniform
    /// producers interleave instead of firing together (in phase, their bursts queue at the
    /// server, and the service time rises well above that of Poisson arrivals at the same
    /// rate). Poisson arrivals are random already and start at `start`.
    pub fn open(rate_per_sec: f64, arrival: Arrival, start: Instant, seed: u64, phase: f64) -> Schedule {
        let rng = SmallRng::seed_from_u64(seed);
        let mean_gap_s = 1.0 / rate_per_sec;
        let next_s = match arrival {
            Arrival::Uniform => phase.clamp(0.0, 1.0) * mean_gap_s,
            Arrival::Poisson => 0.0,
        };
        Schedule::Open { start, next_s, mean_gap_s, arrival, rng }
    }

    /// A producer's share of `open` split over this process's `count` producers: `rate /
    /// count` each, uniform ones de-phased by `index / total` of a gap, where `(index, total)`
    /// is the producer's `slot` in the fleet's numbering ([`Plan::producer_slot`]; `(p, count)`
    /// in a process of its own). A shard's rate is its producers' part of the fleet's, so every
    /// producer of a fleet keeps the schedule it has in one process. The one place that split
    /// is made, so the load thread and its tests cannot disagree on it.
    ///
    /// [`Plan::producer_slot`]: crate::scenario::Plan::producer_slot
    ///
    /// With a load shape (`open.stages`), the producer takes `1 / count` of every stage's rate,
    /// and its phase is the same fraction of its first gap in operational time.
    pub fn for_producer(
        open: &crate::scenario::OpenLoop,
        count: u32,
        slot: (usize, u32),
        start: Instant,
        seed: u64,
    ) -> Schedule {
        let (index, total) = (slot.0 as f64, f64::from(slot.1.max(1)));
        match &open.stages {
            None => {
                Schedule::open(open.rate_per_sec / f64::from(count.max(1)), open.arrival, start, seed, index / total)
            }
            Some(stages) => Schedule::shaped(stages.clone(), count, open.arrival, start, seed, index / total),
        }
    }

    /// A schedule following `stages` from `start`: see [`Shaped::new`].
    pub fn shaped(stages: Stages, count: u32, arrival: Arrival, start: Instant, seed: u64, phase: f64) -> Schedule {
        Schedule::Shaped(Box::new(Shaped::new(stages, count, arrival, start, seed, phase)))
    }

    /// The intended send time the next [`Schedule::next_intended`] returns, without advancing
    /// (`None` in closed loop).
    pub fn peek(&self) -> Option<Instant> {
        match self {
            Schedule::Closed => None,
            Schedule::Open { start, next_s, .. } => Some(*start + Duration::from_secs_f64(*next_s)),
            Schedule::Shaped(shaped) => Some(shaped.at()),
        }
    }

    /// How many intended send times, from the next one on, fall at or before `end` (0 in
    /// closed loop), without drawing them: exact for uniform arrivals, the expectation (rate ×
    /// span) for Poisson ones, so counting a backlog of millions costs nothing.
    /// With a load shape the span is counted in operational time, Λ(end) − Λ(next), in gaps.
    pub fn due_until(&self, end: Instant) -> u64 {
        if let Schedule::Shaped(shaped) = self {
            return shaped.due_until(end);
        }
        let Schedule::Open { start, next_s, mean_gap_s, arrival, .. } = self else { return 0 };
        let span_s = end.saturating_duration_since(*start).as_secs_f64() - *next_s;
        if span_s < 0.0 {
            return 0;
        }
        match arrival {
            Arrival::Uniform => (span_s / *mean_gap_s).floor() as u64 + 1,
            Arrival::Poisson => (span_s / *mean_gap_s).round() as u64,
        }
    }

    /// The intended send time of the next request (`None` in closed loop), and advances.
    /// The closed loop's answer is inlined into every draw; the open loop's is computed out
    /// of line (a call on every closed-loop enqueue would cost more than its answer, `None`).
    #[inline(always)]
    pub fn next_intended(&mut self) -> Option<Instant> {
        match self {
            Schedule::Closed => None,
            open => open.next_open(),
        }
    }

    /// [`next_intended`](Self::next_intended) of an open-loop schedule.
    #[inline(never)]
    fn next_open(&mut self) -> Option<Instant> {
        match self {
            Schedule::Closed => None,
            Schedule::Open { start, next_s, mean_gap_s, arrival, rng } => {
                let now = *start + Duration::from_secs_f64(*next_s);
                *next_s += match arrival {
                    Arrival::Uniform => *mean_gap_s,
                    Arrival::Poisson => Exp::new(1.0 / *mean_gap_s).expect("positive rate").sample(rng),
                };
                Some(now)
            }
            Schedule::Shaped(shaped) => Some(shaped.next()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_loop_schedules_hit_their_rate() {
        let start = Instant::now();
        for arrival in [Arrival::Uniform, Arrival::Poisson] {
            let mut schedule = Schedule::open(1000.0, arrival, start, 42, 0.0);
            let mut last = start;
            for _ in 0..10_000 {
                last = schedule.next_intended().unwrap();
            }
            let span = (last - start).as_secs_f64();
            assert!((span - 10.0).abs() < 0.3, "{arrival:?}: 10k sends at 1000/s took {span}s");
        }
        assert!(Schedule::Closed.next_intended().is_none());
    }

    /// Uniform producers are spread over the gap: no two of N share an intended time.
    #[test]
    fn uniform_producers_are_dephased() {
        let start = Instant::now();
        let n = 32;
        let open = crate::scenario::OpenLoop { rate_per_sec: 8_000.0, arrival: Arrival::Uniform, stages: None };
        let mut all: Vec<Instant> = (0..n)
            .flat_map(|i| {
                let mut s = Schedule::for_producer(&open, n as u32, (i, n as u32), start, i as u64);
                (0..100).map(move |_| s.next_intended().unwrap()).collect::<Vec<_>>()
            })
            .collect();
        all.sort();
        let closest = all.windows(2).map(|w| w[1] - w[0]).min().unwrap();
        // 32 × 250/s = 8 000/s: 125 µs apart, give or take float rounding.
        assert!(closest >= Duration::from_micros(124), "two sends only {closest:?} apart");
    }

    /// A fleet's shards, each with its part of the producers and the rate, intend exactly the
    /// sends one process of all the producers intends.
    #[test]
    fn shards_intend_one_process_schedule() {
        let start = Instant::now();
        let text = "name = \"t\"\nseed = 1\nduration = \"2s\"\n[producers]\ncount = 7\nrate = 7000.0\n\
                    arrival = \"uniform\"\n[consumers]\ncount = 7\n";
        let whole = crate::scenario::parse(text, std::path::Path::new("t.toml")).unwrap();
        let sends = |plan: &crate::scenario::Plan| -> Vec<Duration> {
            let open = plan.producers.open_loop.as_ref().unwrap();
            (0..plan.producers.count as usize)
                .flat_map(|p| {
                    let mut s = Schedule::for_producer(open, plan.producers.count, plan.producer_slot(p), start, 9);
                    (0..50).map(move |_| s.next_intended().unwrap() - start).collect::<Vec<_>>()
                })
                .collect()
        };
        let mut one = sends(&whole);
        let mut fleet: Vec<Duration> =
            (0..3).flat_map(|i| sends(&whole.clone().for_shard(i, 3, "g").unwrap())).collect();
        one.sort();
        fleet.sort();
        assert_eq!(fleet.len(), one.len());
        for (a, b) in fleet.iter().zip(&one) {
            assert!(a.abs_diff(*b) <= Duration::from_nanos(1), "{a:?} != {b:?}");
        }
    }

    /// Gaps of a third of a microsecond (3 million jobs/s) and of a fraction of a nanosecond
    /// both keep the rate: rounding each gap to whole nanoseconds ran 0.1% fast at the first,
    /// and never advanced at the second (a closed loop).
    #[test]
    fn fast_schedules_keep_their_rate() {
        let start = Instant::now();
        for (rate, sends) in [(3e6, 3_000_000u32), (4e9, 4_000_000)] {
            let mut schedule = Schedule::open(rate, Arrival::Uniform, start, 1, 0.0);
            let mut last = start;
            for _ in 0..=sends {
                last = schedule.next_intended().unwrap();
            }
            let span = (last - start).as_secs_f64();
            let want = f64::from(sends) / rate;
            assert!((span - want).abs() / want < 1e-4, "{sends} sends at {rate}/s took {span}s, not {want}s");
        }
    }
}
