//! One queue's BullMQ keys (docs/bullmq-mapping.md section 1), built once per queue.

use crate::keyspace::{JobId, QueueName};

/// Every key of one BullMQ queue that the ten driven scripts take, as `bull:{Q}:<suffix>`.
///
/// The queue's BullMQ name is `{Q}` (the emq-bench queue name in braces): the braces are a
/// cluster hash tag, so every key of the queue, the job keys the scripts build themselves from
/// the prefix included, shares one slot; and BullMQ's official client given the queue name
/// `{Q}` uses exactly these keys (`queue_keys.py`: `<prefix>:<name>:<suffix>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BullKeys {
    /// The emq-bench queue name (without braces).
    pub queue: QueueName,
    /// `{Q}`: the queue's name as BullMQ's clients are given it (`Queue("{Q}")`).
    pub bull_name: String,
    /// `bull:{Q}:`, the key prefix ARGV of the scripts and the prefix of every job key.
    pub prefix: String,
    /// `wait` (LIST).
    pub wait: String,
    /// `paused` (LIST).
    pub paused: String,
    /// `active` (LIST).
    pub active: String,
    /// `prioritized` (ZSET).
    pub prioritized: String,
    /// `pc` (STRING, the priority counter).
    pub pc: String,
    /// `delayed` (ZSET, score `due_ms × 0x1000 + n`).
    pub delayed: String,
    /// `completed` (ZSET, score = finish time, client ms).
    pub completed: String,
    /// `failed` (ZSET, score = finish time, client ms).
    pub failed: String,
    /// `stalled` (SET, stall candidates).
    pub stalled: String,
    /// `stalled-check` (STRING, the stalled check's guard).
    pub stalled_check: String,
    /// `limiter` (STRING, the rate limiter: unused, but a KEYS entry).
    pub limiter: String,
    /// `marker` (ZSET, the workers' wake-up).
    pub marker: String,
    /// `id` (STRING, the job-id counter).
    pub id: String,
    /// `meta` (HASH, queue settings).
    pub meta: String,
    /// `events` (STREAM).
    pub events: String,
    /// `repeat` (job schedulers: unused, but a KEYS entry of the stalled check).
    pub repeat: String,
    /// `metrics:completed` (moveToFinished's KEYS 13 for a completion).
    pub metrics_completed: String,
    /// `metrics:failed` (moveToFinished's KEYS 13 for a final failure).
    pub metrics_failed: String,
}

impl BullKeys {
    /// Builds the keys of queue `queue` (the only allocation: once per queue per run).
    pub fn new(queue: QueueName) -> BullKeys {
        let bull_name = format!("{{{}}}", queue.as_str());
        let prefix = format!("bull:{bull_name}:");
        let key = |suffix: &str| format!("{prefix}{suffix}");
        BullKeys {
            wait: key("wait"),
            paused: key("paused"),
            active: key("active"),
            prioritized: key("prioritized"),
            pc: key("pc"),
            delayed: key("delayed"),
            completed: key("completed"),
            failed: key("failed"),
            stalled: key("stalled"),
            stalled_check: key("stalled-check"),
            limiter: key("limiter"),
            marker: key("marker"),
            id: key("id"),
            meta: key("meta"),
            events: key("events"),
            repeat: key("repeat"),
            metrics_completed: key("metrics:completed"),
            metrics_failed: key("metrics:failed"),
            bull_name,
            prefix,
            queue,
        }
    }

    /// The job key `bull:{Q}:<id>` in its two pieces, for a command to frame as one argument
    /// ([`Request::arg_concat`](crate::resp::Request::arg_concat)) without a `String`.
    pub fn job_key_parts<'a>(&'a self, id: &'a JobId) -> [&'a [u8]; 2] {
        [self.prefix.as_bytes(), id.as_bytes()]
    }

    /// The lock key `bull:{Q}:<id>:lock` in its three pieces (as [`job_key_parts`](Self::job_key_parts)).
    pub fn lock_key_parts<'a>(&'a self, id: &'a JobId) -> [&'a [u8]; 3] {
        [self.prefix.as_bytes(), id.as_bytes(), b":lock"]
    }

    /// The job key as a `String` (tests and the control plane; the verbs use the parts).
    pub fn job_key(&self, id: &JobId) -> String {
        format!("{}{}", self.prefix, id.as_str())
    }

    /// The lock key as a `String` (tests and the control plane; the verbs use the parts).
    pub fn lock_key(&self, id: &JobId) -> String {
        format!("{}{}:lock", self.prefix, id.as_str())
    }

    /// `bull:{Q}:*`: the SCAN pattern of every key BullMQ writes for the queue (section 7).
    pub fn scan_pattern(&self) -> String {
        format!("{}*", self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_bullmqs_with_the_queue_name_as_hash_tag() {
        let keys = BullKeys::new(QueueName::new("orders").unwrap());
        let id = JobId::parse(b"JOB01arz3ndektsv4rrffq69g5fav").unwrap();
        assert_eq!(keys.bull_name, "{orders}");
        assert_eq!(keys.prefix, "bull:{orders}:");
        assert_eq!(keys.wait, "bull:{orders}:wait");
        assert_eq!(keys.stalled_check, "bull:{orders}:stalled-check");
        assert_eq!(keys.metrics_failed, "bull:{orders}:metrics:failed");
        assert_eq!(keys.job_key(&id), "bull:{orders}:JOB01arz3ndektsv4rrffq69g5fav");
        assert_eq!(keys.job_key_parts(&id).concat(), keys.job_key(&id).as_bytes());
        assert_eq!(keys.lock_key_parts(&id).concat(), keys.lock_key(&id).as_bytes());
        assert_eq!(keys.scan_pattern(), "bull:{orders}:*");
    }
}
