//! The holder a worker chooses for each claim call and presents on every later call of that
//! claim: EchoMQ v1.2's `holder` (docs/protocol.md), BullMQ's lock token (docs/bullmq-mapping.md
//! section 5). One value per claim call across a fleet, so a fence that compares holders tells
//! two claims apart even when a failover hands the same fencing token out twice.

use std::fmt;

/// A claim's holder: 16 lowercase hex digits of a u64, kept inline.
///
/// EchoMQ v1.2 takes 1-64 bytes of `[A-Za-z0-9_.:-]`, which sixteen hex digits are. BullMQ
/// takes any string but `"0"` (which takes no lock at claim and skips every lock check at
/// finish, `prepareJobForProcessing` / `removeLock`); sixteen digits are never `"0"`. The
/// official BullMQ client uses `"<worker uuid hex>:<n>"`; ours is just as unique per claim,
/// and fixed-size so it is written from the stack with no allocation.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Holder([u8; 16]);

impl Holder {
    /// The holder of `n`: its 16 hex digits, most significant first.
    pub fn from_u64(n: u64) -> Holder {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut digits = [0u8; 16];
        for (i, digit) in digits.iter_mut().enumerate() {
            *digit = HEX[((n >> (60 - 4 * i)) & 0xf) as usize];
        }
        Holder(digits)
    }

    /// The holder's 16 ASCII bytes, as sent and as stored (EchoMQ's row field `holder`,
    /// BullMQ's `<id>:lock`).
    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// The number the holder's digits write ([`from_u64`](Self::from_u64) reversed): what the
    /// history records of a claim's holder.
    pub fn value(&self) -> u64 {
        self.0.iter().fold(0, |n, &d| (n << 4) | u64::from(if d <= b'9' { d - b'0' } else { d - b'a' + 10 }))
    }

    /// The holder as text.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).expect("hex digits are ASCII")
    }
}

impl fmt::Debug for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Holder({})", self.as_str())
    }
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Mints one thread's holders: the minter's index (its fleet shard and its load thread) in
/// the top 32 bits, a counter below, so two threads, two shards of a `shared` fleet, or two
/// claims of one thread never share a holder within 2^32 claims: a stale worker on one machine
/// never presents the holder of the worker that took its job over on another.
#[derive(Debug, Clone)]
pub struct HolderMint {
    next: u64,
}

/// Bits of the per-minter counter.
const COUNTER_BITS: u32 = 32;
const COUNTER_MASK: u64 = (1 << COUNTER_BITS) - 1;

impl HolderMint {
    /// The minter of load thread `thread` of fleet shard `shard` (0 outside a fleet); its first
    /// holder is `shard << 48 | thread << 32 | 1`.
    pub fn new(shard: u16, thread: u16) -> HolderMint {
        let minter = (u64::from(shard) << 16) | u64::from(thread);
        HolderMint { next: (minter << COUNTER_BITS) | 1 }
    }

    /// The next holder (the counter wraps within the minter's range after 2^32 claims).
    pub fn mint(&mut self) -> Holder {
        let holder = Holder::from_u64(self.next);
        let minter = self.next & !COUNTER_MASK;
        self.next = minter | ((self.next + 1) & COUNTER_MASK).max(1);
        holder
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holders_are_sixteen_hex_digits_unique_per_thread() {
        assert_eq!(Holder::from_u64(0xa1).as_str(), "00000000000000a1");
        assert_eq!(Holder::from_u64(u64::MAX).as_str(), "ffffffffffffffff");
        let mut a = HolderMint::new(0, 0);
        let mut b = HolderMint::new(0, 3);
        let mut c = HolderMint::new(2, 3);
        assert_eq!(a.mint().as_str(), "0000000000000001");
        assert_eq!(a.mint().as_str(), "0000000000000002");
        assert_eq!(b.mint().as_str(), "0000000300000001");
        assert_eq!(c.mint().as_str(), "0002000300000001", "another shard's thread 3 mints its own");
        let mut wrap = HolderMint { next: (7 << 32) | COUNTER_MASK };
        assert_eq!(wrap.mint().as_str(), "00000007ffffffff");
        assert_eq!(wrap.mint().as_str(), "0000000700000001", "wraps within the minter, never 0");
        for n in [0, 1, 0xa1, 0x0002_0003_0000_0001, u64::MAX] {
            assert_eq!(Holder::from_u64(n).value(), n);
        }
    }
}
