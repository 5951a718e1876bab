//! When a producer sends: closed loop (as fast as replies come back) or open loop (a fixed
//! arrival process, each request with its own *intended* send time).
//!
//! Open-loop latency is measured from the intended time, not the actual send, so a stalled
//! server cannot hide its stall by slowing the producer down (coordinated omission; Gil Tene,
//! "How NOT to measure latency", and wrk2's constant-throughput mode).

pub use crate::scenario::Arrival;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Exp};
use std::time::{Duration, Instant};

/// One producer's schedule of intended send times.
pub enum Schedule {
    /// Closed loop: no intended times; each request is sent when a pipeline slot frees up.
    Closed,
    /// Open loop at `rate` jobs/s for this producer.
    Open {
        /// The next intended send time.
        next: Instant,
        /// Mean gap between sends, seconds.
        mean_gap_s: f64,
        /// Gap law.
        arrival: Arrival,
        /// Draws the Poisson gaps.
        rng: SmallRng,
    },
}

impl Schedule {
    /// An open-loop schedule of `rate_per_sec` (> 0) jobs/s starting at `start`.
    pub fn open(rate_per_sec: f64, arrival: Arrival, start: Instant, seed: u64) -> Schedule {
        Schedule::Open { next: start, mean_gap_s: 1.0 / rate_per_sec, arrival, rng: SmallRng::seed_from_u64(seed) }
    }

    /// The intended send time of the next request (`None` in closed loop), and advances.
    pub fn next_intended(&mut self) -> Option<Instant> {
        match self {
            Schedule::Closed => None,
            Schedule::Open { next, mean_gap_s, arrival, rng } => {
                let now = *next;
                let gap = match arrival {
                    Arrival::Uniform => *mean_gap_s,
                    Arrival::Poisson => Exp::new(1.0 / *mean_gap_s).expect("positive rate").sample(rng),
                };
                *next = now + Duration::from_secs_f64(gap);
                Some(now)
            }
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
            let mut schedule = Schedule::open(1000.0, arrival, start, 42);
            let mut last = start;
            for _ in 0..10_000 {
                last = schedule.next_intended().unwrap();
            }
            let span = (last - start).as_secs_f64();
            assert!((span - 10.0).abs() < 0.3, "{arrival:?}: 10k sends at 1000/s took {span}s");
        }
        assert!(Schedule::Closed.next_intended().is_none());
    }
}
