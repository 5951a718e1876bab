//! Job id minting: `JOB` + lowercase ULID, monotonic per generator (PROTOCOL.md "Keyspace").

use super::keyspace::JobId;
use rand::rngs::SmallRng;
use rand::SeedableRng;

/// Mints job ids that are strictly increasing in byte order for one generator, also within
/// one millisecond (the ULID spec's monotonic mode), so pending ties order by mint order.
///
/// Each load task owns one; ids of different tasks are unique through their random part.
pub struct JobIdGen {
    generator: ulid::Generator,
    rng: SmallRng,
}

impl JobIdGen {
    /// A generator whose random bits come from `seed` (the time part is the wall clock).
    pub fn new(seed: u64) -> JobIdGen {
        JobIdGen { generator: ulid::Generator::new(), rng: SmallRng::seed_from_u64(seed) }
    }

    /// The next id, greater than every id this generator made before.
    ///
    /// The monotonic mode can overflow only after 2^80 ids in one millisecond; the generator
    /// then waits for the clock's next millisecond instead of failing.
    pub fn next_id(&mut self) -> JobId {
        loop {
            match self.generator.generate_with_source(&mut self.rng) {
                Ok(ulid) => return JobId::from_ulid(ulid),
                Err(_) => std::thread::yield_now(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_monotonic_and_well_formed() {
        let mut ids = JobIdGen::new(7);
        let mut last = ids.next_id();
        for _ in 0..10_000 {
            let next = ids.next_id();
            assert!(next > last, "{next} not after {last}");
            assert!(JobId::parse(next.as_bytes()).is_ok());
            last = next;
        }
    }
}
