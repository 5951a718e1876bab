//! Job id minting: `JOB` + lowercase ULID, monotonic per generator (docs/protocol.md, "The keyspace").
//!
//! The ULID's 80 random bits are laid out as a 48-bit *run tag* (drawn from the run's seed)
//! and a 32-bit *job number* (unique within the run). The id stays a valid, time-ordered
//! ULID, and the harness can map any id it finds on the server back to its history record by
//! number, and tell ids of its own run (same tag) from foreign ones.

use super::JobId;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::time::{SystemTime, UNIX_EPOCH};

/// Mints job ids that are strictly increasing in byte order for one generator: the time part
/// never goes back (the last millisecond is kept if the clock does), and within one
/// millisecond the job numbers a generator is given must increase (they do: each producer
/// takes them in blocks of 16 from one run-wide counter, and draws each block in order).
#[derive(Debug, Clone)]
pub struct JobIdGen {
    tag: u64,
    last_ms: u64,
    next_number: u32,
    /// The last id minted and its ULID: the next one of the same ms re-encodes only its last
    /// digits in place ([`JobId::set_ulid_after`]), not all 26.
    last: Option<(u128, JobId)>,
}

/// The run tag of `seed`: 48 bits, the same for every generator of one run.
pub fn run_tag(seed: u64) -> u64 {
    SmallRng::seed_from_u64(seed ^ 0x454d_5142_454e_4348).random::<u64>() & ((1 << 48) - 1)
}

/// The job number inside an id minted by this harness (the low 32 bits of the ULID).
pub fn job_number(id: &JobId) -> u32 {
    id.ulid().0 as u32
}

/// The run tag inside an id (bits 32..80 of the ULID).
pub fn job_tag(id: &JobId) -> u64 {
    ((id.ulid().0 >> 32) as u64) & ((1 << 48) - 1)
}

/// The id of job `number` of the run with tag `run_tag`, stamped `unix_ms`: what
/// [`JobIdGen::mint_at`] made, rebuilt from its parts (the checker names a job whose row and
/// set members are all gone by it, from the stamp the history kept).
pub fn job_id(run_tag: u64, number: u32, unix_ms: u64) -> JobId {
    JobId::from_ulid(ulid::Ulid(job_ulid(run_tag, number, unix_ms)))
}

/// The ULID of [`job_id`] as a number (what [`JobId::ulid`] decodes), without encoding it.
pub fn job_ulid(run_tag: u64, number: u32, unix_ms: u64) -> u128 {
    let random = (u128::from(run_tag) << 32) | u128::from(number);
    ulid::Ulid::from_parts(unix_ms, random).0
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn unix_ms_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

impl JobIdGen {
    /// A generator for the run with seed `seed`; [`next_id`](Self::next_id) numbers from 0.
    pub fn new(seed: u64) -> JobIdGen {
        JobIdGen { tag: run_tag(seed), last_ms: 0, next_number: 0, last: None }
    }

    /// The id of job `number` (unique in the run), stamped with the current time.
    pub fn mint(&mut self, number: u32) -> JobId {
        self.mint_at(number, unix_ms_now())
    }

    /// The id of job `number`, stamped `unix_ms` (ms since the Unix epoch) or the last stamp
    /// if that is later. For callers that know the time without reading the clock again.
    pub fn mint_at(&mut self, number: u32, unix_ms: u64) -> JobId {
        *self.mint_ref(number, unix_ms)
    }

    /// [`mint_at`](Self::mint_at), lending the id from the generator instead of copying it.
    #[inline]
    pub fn mint_ref(&mut self, number: u32, unix_ms: u64) -> &JobId {
        self.last_ms = self.last_ms.max(unix_ms);
        let ulid = job_ulid(self.tag, number, self.last_ms);
        let (prev_ulid, id) = self.last.get_or_insert_with(|| (ulid, JobId::from_ulid(ulid::Ulid(ulid))));
        if *prev_ulid != ulid {
            id.set_ulid_after(ulid, *prev_ulid);
            *prev_ulid = ulid;
        }
        id
    }

    /// The stamp an id minted now at `unix_ms` (ms since the Unix epoch) gets: `unix_ms`, or
    /// the last stamp if that is later, so ids stay time-ordered when the clock steps back.
    /// [`mint_at`](Self::mint_at) at the returned stamp mints that id.
    pub fn stamp(&mut self, unix_ms: u64) -> u64 {
        self.last_ms = self.last_ms.max(unix_ms);
        self.last_ms
    }

    /// The id [`mint_at`](Self::mint_at) gave job `number` stamped `unix_ms`, minted again
    /// without touching the generator: a re-sent or redone id (all 26 digits encoded).
    pub fn id_of(&self, number: u32, unix_ms: u64) -> JobId {
        JobId::from_ulid(ulid::Ulid(self.ulid_of(number, unix_ms)))
    }

    /// The ULID of [`id_of`](Self::id_of)`(number, unix_ms)`, without encoding it.
    pub fn ulid_of(&self, number: u32, unix_ms: u64) -> u128 {
        job_ulid(self.tag, number, unix_ms)
    }

    /// The next id, numbering this generator's jobs 0, 1, 2, ... (a stand-alone generator).
    pub fn next_id(&mut self) -> JobId {
        let number = self.next_number;
        self.next_number = self.next_number.wrapping_add(1);
        self.mint(number)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_made_from_the_last_one_equal_ids_made_whole() {
        let mut ids = JobIdGen::new(11);
        // Numbers that carry into the tag's digits, a ms that changes, and a clock that goes back.
        let steps =
            [(0u32, 5u64), (1, 5), (31, 5), (32, 5), (u32::MAX - 1, 5), (u32::MAX, 5), (7, 6), (8, 4), (1 << 20, 6)];
        for (number, ms) in steps {
            let id = ids.mint_at(number, 1_700_000_000_000 + ms);
            assert_eq!(id, job_id(ids.tag, number, ids.last_ms), "job {number} at +{ms} ms");
            assert_eq!(id.ulid().0, ids.ulid_of(number, ids.last_ms));
            // Minted again from its parts, it is the same id; a second mint changes nothing.
            assert_eq!(ids.id_of(number, ids.last_ms), id);
            assert_eq!(*ids.mint_ref(number, ids.last_ms), id);
        }
    }

    #[test]
    fn a_stamp_fixed_first_mints_the_same_id_and_never_goes_back() {
        let mut ids = JobIdGen::new(7);
        let mut whole = JobIdGen::new(7);
        let t = 1_700_000_000_000u64;
        // A clock that goes back (5 at 1 ms) keeps the last stamp.
        for (number, ms, stamped) in [(0u32, t, t), (u32::MAX, t + 1, t + 1), (5, 1, t + 1), (6, t + 2, t + 2)] {
            let stamp = ids.stamp(ms);
            assert_eq!(stamp, stamped, "job {number}");
            assert_eq!(*ids.mint_ref(number, stamp), whole.mint_at(number, ms), "job {number}");
            assert_eq!(ids.ulid_of(number, stamp), whole.mint_at(number, ms).ulid().0);
        }
    }

    #[test]
    fn ids_are_monotonic_well_formed_and_carry_tag_and_number() {
        let mut ids = JobIdGen::new(7);
        let mut last = ids.next_id();
        for n in 1..10_000u32 {
            let next = ids.next_id();
            assert!(next > last, "{next} not after {last}");
            assert!(JobId::parse(next.as_bytes()).is_ok());
            assert_eq!(job_number(&next), n);
            assert_eq!(job_tag(&next), run_tag(7));
            last = next;
        }
        assert_ne!(run_tag(7), run_tag(8));
    }
}
