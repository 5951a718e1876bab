//! The lock token a claim hands to moveToActive (docs/bullmq-mapping.md section 5).

use std::fmt;

/// A BullMQ lock token: 16 lowercase hex digits of a u64, kept inline.
///
/// BullMQ takes any string but `"0"` (which takes no lock at claim and skips every lock check
/// at finish, `prepareJobForProcessing` / `removeLock`); sixteen digits are never `"0"`. The
/// official client uses `"<worker uuid hex>:<n>"`; ours is just as unique per claim, and
/// fixed-size so it is written from the stack with no allocation.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LockToken([u8; 16]);

impl LockToken {
    /// The token of `n`: its 16 hex digits, most significant first.
    pub fn from_u64(n: u64) -> LockToken {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut digits = [0u8; 16];
        for (i, digit) in digits.iter_mut().enumerate() {
            *digit = HEX[((n >> (60 - 4 * i)) & 0xf) as usize];
        }
        LockToken(digits)
    }

    /// The token's 16 ASCII bytes, as sent and as stored in `<id>:lock`.
    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// The token as text.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).expect("hex digits are ASCII")
    }
}

impl fmt::Debug for LockToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LockToken({})", self.as_str())
    }
}

impl fmt::Display for LockToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Mints one thread's lock tokens: the thread's index in the top 16 bits, a counter below, so
/// two threads (or two claims of one thread) never share a token within 2^48 claims.
#[derive(Debug, Clone)]
pub struct LockTokens {
    next: u64,
}

impl LockTokens {
    /// The minter of load thread `thread`; its first token is `thread << 48 | 1`.
    pub fn new(thread: u16) -> LockTokens {
        LockTokens { next: (u64::from(thread) << 48) | 1 }
    }

    /// The next token (the counter wraps within the thread's range after 2^48 claims).
    pub fn mint(&mut self) -> LockToken {
        let token = LockToken::from_u64(self.next);
        let thread = self.next & !((1 << 48) - 1);
        self.next = thread | ((self.next + 1) & ((1 << 48) - 1)).max(1);
        token
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_sixteen_hex_digits_unique_per_thread() {
        assert_eq!(LockToken::from_u64(0xa1).as_str(), "00000000000000a1");
        assert_eq!(LockToken::from_u64(u64::MAX).as_str(), "ffffffffffffffff");
        let mut a = LockTokens::new(0);
        let mut b = LockTokens::new(3);
        assert_eq!(a.mint().as_str(), "0000000000000001");
        assert_eq!(a.mint().as_str(), "0000000000000002");
        assert_eq!(b.mint().as_str(), "0003000000000001");
        let mut wrap = LockTokens { next: (7 << 48) | ((1 << 48) - 1) };
        assert_eq!(wrap.mint().as_str(), "0007ffffffffffff");
        assert_eq!(wrap.mint().as_str(), "0007000000000001", "wraps within the thread, never 0");
    }
}
