//! The gated keyspace builders (docs/protocol.md "The keyspace"): queue names and job ids are
//! checked host-side, so an ill-formed name or id is an error before anything reaches the wire.

use std::fmt;

/// Why a queue name or a job id was refused by the host-side gate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyspaceError {
    /// The queue name is not 1–64 bytes of `[A-Za-z0-9_.-]`.
    #[error("queue name {name:?} is refused: {reason} (docs/protocol.md: 1-64 bytes of [A-Za-z0-9_.-])")]
    QueueName {
        /// The refused name, verbatim.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The job id is not `JOB` + a 26-character lowercase Crockford-base32 ULID.
    #[error("job id {id:?} is refused: {reason} (docs/protocol.md: JOB + 26-char lowercase Crockford-base32 ULID)")]
    JobId {
        /// The refused id (lossy UTF-8).
        id: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// A checked queue name: 1–64 bytes of `[A-Za-z0-9_.-]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QueueName(String);

impl QueueName {
    /// Checks `name` against the protocol's queue-name rule.
    ///
    /// Errors: [`KeyspaceError::QueueName`] for an empty name, one over 64 bytes, or a byte
    /// outside `[A-Za-z0-9_.-]` (braces would break the `{q}` hash tag, `:` the key layout).
    pub fn new(name: &str) -> Result<QueueName, KeyspaceError> {
        let refuse = |reason| KeyspaceError::QueueName { name: name.to_string(), reason };
        if name.is_empty() {
            return Err(refuse("it is empty"));
        }
        if name.len() > 64 {
            return Err(refuse("it is longer than 64 bytes"));
        }
        if !name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')) {
            return Err(refuse("it has a byte outside [A-Za-z0-9_.-]"));
        }
        Ok(QueueName(name.to_string()))
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for QueueName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Length of a job id in bytes: `JOB` + 26 ULID characters.
pub const JOB_ID_LEN: usize = 29;

/// Crockford base32 in lowercase: the ULID alphabet without i, l, o, u.
const CROCKFORD_LOWER: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";
/// The trailing digits [`JobId::set_ulid_after`] encodes: 35 bits, a job number's 32 and
/// three of the run tag's.
const LOW_DIGITS: usize = 7;

/// Writes the 26 digits of `ulid` (5 bits each, most significant first) after `JOB` in `id`.
#[inline]
fn write_digits(id: &mut [u8; JOB_ID_LEN], ulid: u128) {
    for (i, digit) in id[3..].iter_mut().enumerate() {
        *digit = CROCKFORD_LOWER[((ulid >> (125 - 5 * i)) & 31) as usize];
    }
}

/// `CROCKFORD_LOWER` as a byte-indexed table of digit values (`NOT_CROCKFORD` elsewhere): the
/// checker parses millions of ids and every enqueue decodes one, and a table lookup per byte
/// beats a search of the alphabet.
const CROCKFORD_VALUE: [u8; 256] = {
    let mut table = [NOT_CROCKFORD; 256];
    let mut i = 0;
    while i < CROCKFORD_LOWER.len() {
        table[CROCKFORD_LOWER[i] as usize] = i as u8;
        i += 1;
    }
    table
};
const NOT_CROCKFORD: u8 = 0xff;

/// A checked job id: `JOB` + a 26-character lowercase Crockford-base32 ULID, 29 bytes inline.
///
/// `Copy` and allocation-free, so the hot path can pass ids around by value. Byte order of
/// two ids is their mint order (the ULID is time-ordered), which the pending set relies on.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId([u8; JOB_ID_LEN]);

impl JobId {
    /// Checks `bytes` against the protocol's job-id rule.
    ///
    /// Errors: [`KeyspaceError::JobId`] when the length is not 29, the `JOB` prefix is
    /// missing, a character is not lowercase Crockford base32, or the ULID overflows 128 bits
    /// (first character above `7`).
    pub fn parse(bytes: &[u8]) -> Result<JobId, KeyspaceError> {
        let refuse = |reason| KeyspaceError::JobId { id: String::from_utf8_lossy(bytes).into_owned(), reason };
        if bytes.len() != JOB_ID_LEN {
            return Err(refuse("it is not 29 bytes long"));
        }
        if &bytes[..3] != b"JOB" {
            return Err(refuse("it does not start with JOB"));
        }
        if bytes[3..].iter().any(|&b| CROCKFORD_VALUE[b as usize] == NOT_CROCKFORD) {
            return Err(refuse("the ULID part is not lowercase Crockford base32"));
        }
        if bytes[3] > b'7' {
            return Err(refuse("the ULID part overflows 128 bits"));
        }
        let mut id = [0u8; JOB_ID_LEN];
        id.copy_from_slice(bytes);
        Ok(JobId(id))
    }

    /// Builds an id from a ULID (always well-formed, so infallible): 26 base-32 digits of 5
    /// bits, most significant first (the ULID text encoding), in lowercase.
    pub fn from_ulid(ulid: ulid::Ulid) -> JobId {
        let mut id = [0u8; JOB_ID_LEN];
        id[..3].copy_from_slice(b"JOB");
        write_digits(&mut id, ulid.0);
        JobId(id)
    }

    /// Makes this id, the id of `prev_ulid`, the id of `ulid`, in place: when the two share all
    /// but their last [`LOW_DIGITS`] digits (the same ms and run tag: consecutive ids of one
    /// producer) only those of them that differ are encoded, else all. Equal to
    /// [`from_ulid`](Self::from_ulid); a producer's generator re-encodes its last id in place,
    /// with no copy of its 29 bytes per id.
    #[inline]
    pub fn set_ulid_after(&mut self, ulid: u128, prev_ulid: u128) {
        const LOW_BITS: u32 = 5 * LOW_DIGITS as u32;
        if ulid >> LOW_BITS != prev_ulid >> LOW_BITS {
            *self = JobId::from_ulid(ulid::Ulid(ulid));
            return;
        }
        // The low digits' 35 bits, in 64-bit arithmetic (shifts of a u128 cost twice), and
        // only the digits that differ from the previous id's: consecutive job numbers differ
        // in the last digit alone 31 times in 32 (encoding all seven would mostly rewrite
        // digits that stay the same).
        let low = ulid as u64;
        let changed = (64 - (low ^ prev_ulid as u64).leading_zeros() as usize).div_ceil(5);
        for k in LOW_DIGITS - changed..LOW_DIGITS {
            self.0[JOB_ID_LEN - LOW_DIGITS + k] = CROCKFORD_LOWER[((low >> (5 * (LOW_DIGITS - 1 - k))) & 31) as usize];
        }
    }

    /// The ULID inside the id.
    pub fn ulid(&self) -> ulid::Ulid {
        // The constructors checked the alphabet and the 128-bit range (first digit <= 7), so
        // the 26 digits of 5 bits fit: decoded straight from the bytes, no UTF-8 or re-check.
        let value = self.0[3..].iter().fold(0u128, |v, &b| (v << 5) | u128::from(CROCKFORD_VALUE[b as usize]));
        ulid::Ulid(value)
    }

    /// The id's 29 bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The id as text (always ASCII).
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).expect("job ids are ASCII")
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JobId({})", self.as_str())
    }
}

/// Every key of one queue, built once (docs/protocol.md "The keyspace"): all share the tag `{q}`.
///
/// The fields are EchoMQ's; a run of another protocol keeps them (the run lock, the slot and
/// the queue's name are the same) and asks [`scan_pattern`](Self::scan_pattern) and
/// [`depth_keys`](Self::depth_keys) for its own keyspace (BullMQ's `bull:{q}:*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueKeys {
    /// The queue's checked name.
    pub queue: QueueName,
    /// The protocol whose keyspace the run writes.
    pub protocol: crate::lua::Protocol,
    /// `emq:{q}:job:`, the prefix of every job row and the prefix ARGV of claim/reap/promote.
    pub job_prefix: String,
    /// `emq:{q}:pending` (ZSET, score = priority).
    pub pending: String,
    /// `emq:{q}:delayed` (ZSET, score = due time, server ms).
    pub delayed: String,
    /// `emq:{q}:active` (ZSET, score = lease deadline, server ms).
    pub active: String,
    /// `emq:{q}:completed` (ZSET, score = finish time, server ms).
    pub completed: String,
    /// `emq:{q}:failed` (ZSET, score = finish time, server ms).
    pub failed: String,
    /// `emq-lock:{q}` (STRING, the holder's run id, with a TTL): the harness's run lock. Same
    /// hash tag, so the same slot, but outside `emq:{q}:`, so it is no record key of the queue
    /// and the checker's I1 never sees it.
    pub lock: String,
}

impl QueueKeys {
    /// Builds the EchoMQ keys of queue `queue`.
    pub fn new(queue: QueueName) -> QueueKeys {
        QueueKeys::for_protocol(queue, crate::lua::Protocol::EchoMqV1)
    }

    /// Builds the keys of queue `queue` for a run of `protocol`.
    pub fn for_protocol(queue: QueueName, protocol: crate::lua::Protocol) -> QueueKeys {
        let base = format!("emq:{{{}}}:", queue.as_str());
        QueueKeys {
            protocol,
            job_prefix: format!("{base}job:"),
            pending: format!("{base}pending"),
            delayed: format!("{base}delayed"),
            active: format!("{base}active"),
            completed: format!("{base}completed"),
            failed: format!("{base}failed"),
            lock: format!("emq-lock:{{{}}}", queue.as_str()),
            queue,
        }
    }

    /// The row key `emq:{q}:job:<id>`; the id was checked when the [`JobId`] was made.
    pub fn job_key(&self, id: &JobId) -> String {
        let mut key = String::with_capacity(self.job_prefix.len() + JOB_ID_LEN);
        key.push_str(&self.job_prefix);
        key.push_str(id.as_str());
        key
    }

    /// The row key's two pieces, prefix and id, for a command to frame as one argument
    /// without building a `String` ([`Request::arg_concat`](crate::resp::Request::arg_concat)).
    pub fn job_key_parts<'a>(&'a self, id: &'a JobId) -> [&'a [u8]; 2] {
        [self.job_prefix.as_bytes(), id.as_bytes()]
    }

    /// The SCAN pattern that matches every key the protocol writes for this queue and no
    /// other: `emq:{q}:*` (EchoMQ), `bull:{q}:*` (BullMQ, its prefix `bull` and the queue
    /// named `{q}`, docs/bullmq-mapping.md).
    pub fn scan_pattern(&self) -> String {
        match self.protocol {
            crate::lua::Protocol::EchoMqV1 => format!("emq:{{{}}}:*", self.queue.as_str()),
            crate::lua::Protocol::BullMq => format!("bull:{{{}}}:*", self.queue.as_str()),
        }
    }

    /// The keys whose sizes give the queue's depths, with the depth each counts in and whether
    /// it is a list (else a sorted set): EchoMQ's five sets; BullMQ's `wait`, `paused` (lists)
    /// and `prioritized` (pending), `delayed`, `active` (a list), `completed`, `failed`.
    pub fn depth_keys(&self) -> Vec<(Depth, String, bool)> {
        match self.protocol {
            crate::lua::Protocol::EchoMqV1 => vec![
                (Depth::Pending, self.pending.clone(), false),
                (Depth::Delayed, self.delayed.clone(), false),
                (Depth::Active, self.active.clone(), false),
                (Depth::Completed, self.completed.clone(), false),
                (Depth::Failed, self.failed.clone(), false),
            ],
            crate::lua::Protocol::BullMq => {
                let key = |suffix: &str| format!("bull:{{{}}}:{suffix}", self.queue.as_str());
                vec![
                    (Depth::Pending, key("wait"), true),
                    (Depth::Pending, key("paused"), true),
                    (Depth::Pending, key("prioritized"), false),
                    (Depth::Delayed, key("delayed"), false),
                    (Depth::Active, key("active"), true),
                    (Depth::Completed, key("completed"), false),
                    (Depth::Failed, key("failed"), false),
                ]
            }
        }
    }

    /// The five location sets, in the order of the `state` values they hold.
    pub fn location_sets(&self) -> [(&'static str, &str); 5] {
        [
            ("pending", &self.pending),
            ("delayed", &self.delayed),
            ("active", &self.active),
            ("completed", &self.completed),
            ("failed", &self.failed),
        ]
    }
}

/// Where a job sits, as the run's depth counts go (the protocols name their places
/// differently: BullMQ's wait, paused and prioritized are all pending).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// Waiting to be claimed.
    Pending,
    /// Due later.
    Delayed,
    /// Claimed, under a lease or lock.
    Active,
    /// Completed.
    Completed,
    /// Failed for good.
    Failed,
}

/// Counts the members of each key given: `LLEN` where its ARGV is `l`, else `ZCARD` (0 for a
/// missing key): one consistent reading of a queue's places, in one script. Only the commands
/// the keys' types need, so an ACL user allowed ZCARD (EchoMQ) or ZCARD and LLEN (BullMQ) may
/// run it.
pub const DEPTH_SCRIPT: &str = "local n = {} for i, k in ipairs(KEYS) do \
    if ARGV[i] == 'l' then n[i] = redis.call('LLEN', k) else n[i] = redis.call('ZCARD', k) end \
    end return n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_names_follow_the_protocol_rule() {
        assert!(QueueName::new("bench-0").is_ok());
        assert!(QueueName::new("a.B_c-9").is_ok());
        assert!(QueueName::new(&"x".repeat(64)).is_ok());
        for bad in ["", "has space", "brace{", "colon:x", "ümlaut", &"x".repeat(65)] {
            assert!(matches!(QueueName::new(bad), Err(KeyspaceError::QueueName { .. })), "{bad:?} accepted");
        }
    }

    #[test]
    fn job_ids_follow_the_protocol_rule() {
        let good = "JOB01arz3ndektsv4rrffq69g5fav";
        assert_eq!(JobId::parse(good.as_bytes()).unwrap().as_str(), good);
        for bad in [
            "job01arz3ndektsv4rrffq69g5fav",  // prefix case
            "JOB01ARZ3NDEKTSV4RRFFQ69G5FAV",  // uppercase ULID
            "JOB01arz3ndektsv4rrffq69g5fa",   // short
            "JOB01arz3ndektsv4rrffq69g5favv", // long
            "JOB01arz3ndektsv4rrffq69g5fai",  // i is not Crockford
            "JOB81arz3ndektsv4rrffq69g5fav",  // overflows 128 bits
            "XYZ01arz3ndektsv4rrffq69g5fav",
        ] {
            assert!(matches!(JobId::parse(bad.as_bytes()), Err(KeyspaceError::JobId { .. })), "{bad:?} accepted");
        }
    }

    #[test]
    fn keys_share_the_queue_hash_tag() {
        let keys = QueueKeys::new(QueueName::new("orders").unwrap());
        let id = JobId::parse(b"JOB01arz3ndektsv4rrffq69g5fav").unwrap();
        assert_eq!(keys.job_key(&id), "emq:{orders}:job:JOB01arz3ndektsv4rrffq69g5fav");
        assert_eq!(keys.pending, "emq:{orders}:pending");
        assert_eq!(keys.job_prefix, "emq:{orders}:job:");
        assert_eq!(keys.scan_pattern(), "emq:{orders}:*");
    }

    #[test]
    fn ulid_round_trips_through_the_id() {
        let ulid = ulid::Ulid::from_parts(1_700_000_000_000, 42);
        let id = JobId::from_ulid(ulid);
        assert_eq!(id.ulid(), ulid);
        for value in [0, 1, u128::MAX, u128::MAX >> 1, 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210] {
            let ulid = ulid::Ulid(value);
            assert_eq!(JobId::from_ulid(ulid).as_str(), format!("JOB{}", ulid.to_string().to_lowercase()));
            assert_eq!(JobId::from_ulid(ulid).ulid(), ulid, "{value:#x}");
            assert_eq!(JobId::parse(JobId::from_ulid(ulid).as_bytes()).unwrap().ulid(), ulid);
        }
        assert!(JobId::parse(id.as_bytes()).is_ok());
    }
}
