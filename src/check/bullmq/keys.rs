//! BullMQ 2.26.0's keys of one queue as the checker sees them (docs/bullmq-mapping.md section 1):
//! which keys under `bull:{q}:` are BullMQ's own, and which are strays.

use crate::check::state::Location;
use crate::keyspace::{JobId, QueueName, JOB_ID_LEN};

/// The key prefix of queue `queue`, `bull:{q}:`: BullMQ's default prefix `bull` and the official
/// client's queue name `{q}`, whose braces make every key of the queue one cluster slot (the
/// same slot as EchoMQ's `emq:{q}:`).
pub fn prefix(queue: &QueueName) -> String {
    format!("bull:{{{}}}:", queue.as_str())
}

/// What a key under `bull:{q}:` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BullKey {
    /// One of the seven locations (`wait`, `paused`, `active`, `prioritized`, `delayed`,
    /// `completed`, `failed`).
    Location(Location),
    /// `stalled`, the stall candidates (a SET).
    Stalled,
    /// A queue-level key BullMQ writes (meta, id, events, marker, pc, ...): not a stray.
    Own,
    /// `bull:{q}:<id>`, a job hash with a well-formed id.
    Job(JobId),
    /// `bull:{q}:<id>:lock`, the claim's lock.
    Lock(JobId),
    /// Another per-job key BullMQ deletes with the job (`:logs`, `:dependencies`, ...).
    JobPart(JobId),
    /// Anything else, an ill-formed id's hash included.
    Stray,
}

/// Queue-level suffixes BullMQ 2.26.0 writes: `queue_keys.py` `getKeys`, the DEL list of
/// `obliterate-2.lua`, the metrics keys of `moveToFinished-14.lua` (the locations and `stalled`
/// are classified apart).
const OWN: [&str; 15] = [
    "",
    "waiting-children",
    "repeat",
    "limiter",
    "id",
    "stalled-check",
    "meta",
    "pc",
    "events",
    "marker",
    "delay",
    "metrics:completed",
    "metrics:completed:data",
    "metrics:failed",
    "metrics:failed:data",
];

/// Queue-level key families: deduplication (`de:<id>`, `dn:<id>`), schedulers (`repeat:<id>`).
const OWN_FAMILIES: [&str; 3] = ["de:", "dn:", "repeat:"];

/// Per-job suffixes besides `lock` that BullMQ removes with the job (`removeJobKeys` in
/// `moveToFinished-14.lua`).
const JOB_PARTS: [&str; 5] = ["logs", "dependencies", "processed", "failed", "unsuccessful"];

/// Classifies `key` (raw bytes, as SCAN returned it) among the keys of the queue with key
/// prefix `prefix` (from [`prefix`]).
pub fn classify(prefix: &str, key: &[u8]) -> BullKey {
    let Some(rest) = key.strip_prefix(prefix.as_bytes()) else { return BullKey::Stray };
    if let Some(loc) = Location::BULLMQ.into_iter().find(|loc| loc.name().as_bytes() == rest) {
        return BullKey::Location(loc);
    }
    if rest == b"stalled" {
        return BullKey::Stalled;
    }
    if OWN.iter().any(|own| own.as_bytes() == rest) || OWN_FAMILIES.iter().any(|f| rest.starts_with(f.as_bytes())) {
        return BullKey::Own;
    }
    let Some(id) = rest.get(..JOB_ID_LEN).and_then(|id| JobId::parse(id).ok()) else { return BullKey::Stray };
    match &rest[JOB_ID_LEN..] {
        b"" => BullKey::Job(id),
        b":lock" => BullKey::Lock(id),
        [b':', part @ ..] if JOB_PARTS.iter().any(|p| p.as_bytes() == part) => BullKey::JobPart(id),
        _ => BullKey::Stray,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::JobIdGen;

    #[test]
    fn keys_are_classified_by_bullmqs_layout() {
        let prefix = prefix(&QueueName::new("q").unwrap());
        assert_eq!(prefix, "bull:{q}:");
        let id = JobIdGen::new(1).next_id();
        let key = |rest: &str| format!("bull:{{q}}:{rest}").into_bytes();
        assert_eq!(classify(&prefix, &key(id.as_str())), BullKey::Job(id));
        assert_eq!(classify(&prefix, &key(&format!("{id}:lock"))), BullKey::Lock(id));
        assert_eq!(classify(&prefix, &key(&format!("{id}:logs"))), BullKey::JobPart(id));
        assert_eq!(classify(&prefix, &key("wait")), BullKey::Location(Location::Wait));
        assert_eq!(classify(&prefix, &key("prioritized")), BullKey::Location(Location::Prioritized));
        assert_eq!(classify(&prefix, &key("stalled")), BullKey::Stalled);
        for own in ["meta", "id", "events", "marker", "pc", "stalled-check", "de:x", "metrics:failed:data"] {
            assert_eq!(classify(&prefix, &key(own)), BullKey::Own, "{own}");
        }
        let strays = ["junk", "smoke-1", &format!("{id}:lok"), &format!("{id}x"), "JOBnope", "wait2", "pending"];
        for stray in strays {
            assert_eq!(classify(&prefix, &key(stray)), BullKey::Stray, "{stray}");
        }
        assert_eq!(classify(&prefix, format!("bull:{{r}}:{id}").as_bytes()), BullKey::Stray);
    }
}
