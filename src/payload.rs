//! Job payloads: random-looking bytes of the drawn size that carry the job's identity and a
//! checksum, so a claim can verify the bytes it got back (invariant I4, payload-intact).
//!
//! Layout (little-endian checksum):
//! `[0..16)` the job's ULID as a big-endian u128 · `[16..20)` CRC-32 of `[20..) ++ [0..16)` ·
//! `[20..)` filler copied from a per-thread random pool, from one of [`FILLER_STARTS`] offsets
//! taken from the ULID.
//!
//! Why the filler comes first in the checksum and starts at so few offsets: the filler of a
//! given start and length is always the same bytes, so its CRC is computed once and cached;
//! each job then feeds only its 16 identity bytes through the CRC. A length not seen last from
//! that start continues from the CRC of the stream's last whole 64 bytes (checkpoints made
//! once per start, as far as the lengths asked reach), so drawn sizes cost at most 63 bytes
//! more; the cached CRC is a hasher, cloned per payload. Checksumming every payload
//! in full would cost a pass over all its bytes on every enqueue.
//! Copying from a pool instead of drawing fresh random bytes keeps the hot path cheap.

use crate::keyspace::JobId;
use rand::{RngCore, SeedableRng};
use std::cell::RefCell;

/// Bytes of header: 16 of identity, 4 of checksum. The smallest payload the harness sends.
pub const HEADER_LEN: usize = 20;

/// Size of the random filler pool, bytes (64 KiB: a payload up to this size repeats nothing of
/// itself; filling a larger pool costs every load thread start-up time and page faults).
const POOL_LEN: usize = 1 << 16;

/// How many offsets a filler may start at.
pub const FILLER_STARTS: usize = 64;
/// Bytes between two filler starts: one cache line, so the starts lie within the pool's first
/// 4 KiB and the fillers of small payloads share a few dozen cache lines. Spread evenly over
/// the pool (1 KiB apart), the starts would fall into one of each 16 of the L1 cache's 64 sets
/// (addresses 4 KiB apart share a set), and the lines of 256-byte payloads into 4 of each 16:
/// ~256 lines through 16 sets of 8 ways, missing L1 on every payload.
const FILLER_STRIDE: usize = 64;
/// Bytes between two CRC checkpoints of a filler stream (the stride and the pool are multiples
/// of it, so a checkpoint's bytes never straddle the pool's end).
const CHECKPOINT: usize = 64;
const _: () = assert!(FILLER_STRIDE.is_multiple_of(CHECKPOINT) && POOL_LEN.is_multiple_of(CHECKPOINT));

/// A pool of random filler bytes; one per load thread (`!Sync`: its CRC caches are cells).
pub struct PayloadPool {
    pool: Vec<u8>,
    /// Per filler start: the filler length last checksummed from it and a CRC-32 hasher that
    /// has taken that filler in. Each payload continues a clone of it (a fresh hasher detects
    /// the CPU's features every time).
    filler_crc: [RefCell<(usize, crc32fast::Hasher)>; FILLER_STARTS],
    /// Per filler start, made as far as needed ([`PayloadPool::checkpoint`]): entry `k` is the
    /// CRC-32 of the first `(k + 1) × 64` bytes of the filler stream from it (at most the
    /// pool once round: 1 024 entries, 4 KiB).
    checkpoints: [RefCell<Vec<u32>>; FILLER_STARTS],
}

/// What a payload check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadCheck {
    /// Identity and checksum match.
    Intact,
    /// Shorter than the 20-byte header.
    TooShort,
    /// The header names another job.
    WrongId,
    /// The bytes were changed.
    BadChecksum,
}

impl PayloadPool {
    /// A pool of 64 KiB of bytes drawn from `seed`.
    pub fn new(seed: u64) -> PayloadPool {
        let mut pool = vec![0u8; POOL_LEN];
        rand::rngs::SmallRng::seed_from_u64(seed).fill_bytes(&mut pool);
        PayloadPool {
            pool,
            filler_crc: std::array::from_fn(|_| RefCell::new((usize::MAX, crc32fast::Hasher::new()))),
            checkpoints: std::array::from_fn(|_| RefCell::new(Vec::new())),
        }
    }

    /// Writes the payload of job `id` with `size` bytes (at least [`HEADER_LEN`]) into `out`,
    /// replacing its contents; `out`'s capacity is reused.
    pub fn build(&self, id: &JobId, size: usize, out: &mut Vec<u8>) {
        out.clear();
        self.append(id.ulid().0, size, out);
    }

    /// Appends the payload of the job whose id has the ULID `ulid`, with `size` bytes (at
    /// least [`HEADER_LEN`]: see [`length`](Self::length)) to `out`, where it is framed in
    /// place; returns its CRC-32 (the header's). The same bytes as [`build`](Self::build).
    pub fn append(&self, ulid: u128, size: usize, out: &mut Vec<u8>) -> u32 {
        let size = Self::length(size);
        let start = out.len();
        let identity = ulid.to_be_bytes();
        out.extend_from_slice(&identity);
        out.extend_from_slice(&[0; 4]);
        let first = (ulid as usize) % FILLER_STARTS;
        let mut offset = first * FILLER_STRIDE;
        while out.len() - start < size {
            let take = (size - (out.len() - start)).min(POOL_LEN - offset);
            out.extend_from_slice(&self.pool[offset..offset + take]);
            offset = 0;
        }
        let mut hasher = self.after_filler(first, &out[start + HEADER_LEN..]);
        hasher.update(&identity);
        let crc = hasher.finalize();
        out[start + 16..start + HEADER_LEN].copy_from_slice(&crc.to_le_bytes());
        crc
    }

    /// A CRC-32 hasher that has taken in `filler`, the stream from filler start `first`: a
    /// clone of the one cached for the length last asked of that start, else continued from
    /// the stream's last checkpoint within it.
    fn after_filler(&self, first: usize, filler: &[u8]) -> crc32fast::Hasher {
        let len = filler.len();
        {
            let cached = self.filler_crc[first].borrow();
            if cached.0 == len {
                return cached.1.clone();
            }
        }
        let whole = (len / CHECKPOINT).min(POOL_LEN / CHECKPOINT);
        let initial = match whole {
            0 => 0,
            k => self.checkpoint(first, k),
        };
        let mut hasher = crc32fast::Hasher::new_with_initial(initial);
        hasher.update(&filler[whole * CHECKPOINT..]);
        *self.filler_crc[first].borrow_mut() = (len, hasher.clone());
        hasher
    }

    /// The CRC-32 of the first `k × 64` bytes (`1 ..= 1024`: the pool once round) of the
    /// filler stream from start `first`. Checkpoints are made up to the one asked, at first
    /// use, and kept: a constant payload size costs a few per start, not the 64 KiB round.
    fn checkpoint(&self, first: usize, k: usize) -> u32 {
        let mut marks = self.checkpoints[first].borrow_mut();
        while marks.len() < k {
            let at = (first * FILLER_STRIDE + marks.len() * CHECKPOINT) % POOL_LEN;
            let mut hasher = crc32fast::Hasher::new_with_initial(marks.last().copied().unwrap_or(0));
            hasher.update(&self.pool[at..at + CHECKPOINT]);
            marks.push(hasher.finalize());
        }
        marks[k - 1]
    }

    /// The length of a payload drawn as `size` bytes: never below the header.
    pub fn length(size: usize) -> usize {
        size.max(HEADER_LEN)
    }
}

/// The CRC-32 of a payload: over its filler (`[20..)`), then its identity (`[0..16)`), so
/// everything but the checksum field itself.
pub fn checksum(payload: &[u8]) -> u32 {
    let (identity, filler) = parts(payload);
    crc_of(&[filler, identity])
}

/// A payload's identity bytes and its filler (empty up to the header's length).
fn parts(payload: &[u8]) -> (&[u8], &[u8]) {
    (&payload[..16.min(payload.len())], payload.get(HEADER_LEN..).unwrap_or_default())
}

/// The CRC-32 of `pieces` back to back.
fn crc_of(pieces: &[&[u8]]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    pieces.iter().for_each(|piece| hasher.update(piece));
    hasher.finalize()
}

/// The CRC-32 a payload carries in its header (bytes 16..20, little-endian); `None` when it
/// is shorter than the header. Compare it with [`checksum`] to see whether the bytes changed.
pub fn header_crc(payload: &[u8]) -> Option<u32> {
    payload.get(16..HEADER_LEN).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
}

/// Checks that `payload` is the intact payload of job `id`.
pub fn verify(id: &JobId, payload: &[u8]) -> PayloadCheck {
    if payload.len() < HEADER_LEN {
        return PayloadCheck::TooShort;
    }
    if payload[..16] != id.ulid().0.to_be_bytes() {
        return PayloadCheck::WrongId;
    }
    let crc = header_crc(payload);
    // Payloads written before 2026-12-02 checksummed the identity first; keys such a run kept
    // still check (a change would have to match either CRC: 2 in 2^32 instead of 1).
    if crc != Some(checksum(payload)) && crc != Some(checksum_identity_first(payload)) {
        return PayloadCheck::BadChecksum;
    }
    PayloadCheck::Intact
}

/// The checksum of the earlier layout: identity `[0..16)`, then filler `[20..)`.
fn checksum_identity_first(payload: &[u8]) -> u32 {
    let (identity, filler) = parts(payload);
    crc_of(&[identity, filler])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::JobIdGen;

    #[test]
    fn built_payloads_verify_and_any_change_is_caught() {
        let pool = PayloadPool::new(1);
        let mut ids = JobIdGen::new(1);
        let (id, other) = (ids.next_id(), ids.next_id());
        let mut buf = Vec::new();
        for size in [0, 20, 21, 100, 4096, POOL_LEN + 10] {
            pool.build(&id, size, &mut buf);
            assert_eq!(buf.len(), size.max(HEADER_LEN));
            assert_eq!(verify(&id, &buf), PayloadCheck::Intact);
            assert_eq!(verify(&other, &buf), PayloadCheck::WrongId);
            let last = buf.len() - 1;
            buf[last] ^= 1;
            assert_eq!(verify(&id, &buf), PayloadCheck::BadChecksum);
        }
        assert_eq!(verify(&id, &buf[..10]), PayloadCheck::TooShort);
    }

    #[test]
    fn the_cached_filler_checksum_equals_a_full_one() {
        let pool = PayloadPool::new(7);
        let mut ids = JobIdGen::new(3);
        let mut buf = Vec::new();
        // Enough jobs that fillers start at every offset, with lengths that change (the cache
        // keeps one length per start) and come back.
        let mut rng = rand::rngs::SmallRng::seed_from_u64(9);
        for round in 0..1500usize {
            let id = ids.next_id();
            // Repeated sizes (the cache), drawn ones (the checkpoints), and past the pool.
            let size = match round % 3 {
                0 => [256, 21, 256, 4096, 20, 64 + 20, 128 + 21][round % 7],
                1 => rand::Rng::random_range(&mut rng, 20..5000),
                _ => rand::Rng::random_range(&mut rng, POOL_LEN - 100..POOL_LEN + 5000),
            };
            pool.build(&id, size, &mut buf);
            let mut whole = buf[HEADER_LEN..].to_vec();
            whole.extend_from_slice(&buf[..16]);
            assert_eq!(header_crc(&buf), Some(crc32fast::hash(&whole)), "round {round}");
            assert_eq!(verify(&id, &buf), PayloadCheck::Intact);
        }
    }

    #[test]
    fn a_payload_of_the_earlier_checksum_order_still_verifies() {
        let pool = PayloadPool::new(5);
        let id = JobIdGen::new(2).next_id();
        let mut buf = Vec::new();
        pool.build(&id, 300, &mut buf);
        let old = checksum_identity_first(&buf);
        buf[16..HEADER_LEN].copy_from_slice(&old.to_le_bytes());
        assert_eq!(verify(&id, &buf), PayloadCheck::Intact);
        buf[HEADER_LEN] ^= 1;
        assert_eq!(verify(&id, &buf), PayloadCheck::BadChecksum);
    }
}
