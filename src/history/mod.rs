//! The run's history: every outcome the harness saw, per job (Jepsen-style), recorded on the
//! hot path into per-thread append-only buffers (no lock), merged after the run with rayon,
//! and saved as `history.bin` so the check can be re-run later.
//!
//! - [`event`]: what one event says (kind, outcome, token, times).
//! - [`buffer`]: the per-thread varint encoding and its decoder.
//! - [`file`]: the versioned `history.bin`.
//! - [`spool`]: `history.bin` written as the run records it.
//! - [`parts`]: `history.bin` read back in parts by job number, for a check whose memory
//!   does not grow with the jobs done.

pub mod buffer;
pub mod event;
pub mod file;
pub mod parts;
pub mod spool;

pub use buffer::{DecodeError, HistoryBuf, EVENT_VERSION};
pub use event::{Event, Kind, Outcome, UNKNOWN_JOB};
pub use parts::HistoryParts;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// What a history file says about its run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryHeader {
    /// The run's seed.
    pub seed: u64,
    /// The 48-bit run tag inside every job id of the run.
    pub run_tag: u64,
    /// The queues, by index as the events' `queue` field uses them.
    pub queues: Vec<String>,
    /// True when the run drained (then every accepted job must be completed or failed).
    pub drained: bool,
    /// Jobs issued (job numbers `0..issued` may appear).
    pub issued: u64,
    /// The run's `max_attempts` (0 when unknown): `fail` retries below it, fails at it.
    #[serde(default)]
    pub max_attempts: u32,
    /// True when the run meant to finish every job it enqueued (it had consumers and was not
    /// interrupted): then a job left pending, delayed or active is reported (I7, "stuck")
    /// even when the drain did not finish. False in older files.
    #[serde(default)]
    pub must_finish: bool,
    /// The queue protocol the run drove (EchoMQ in older files): which of its calls are
    /// fenced, and how its failures retry.
    #[serde(default)]
    pub protocol: crate::lua::Protocol,
    /// A `shared` fleet's merged history: the shard each stream was recorded on, by stream
    /// index (its events' [`Event::shard`]). Empty for one process's history.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stream_shards: Vec<u16>,
    /// The streams' event encoding ([`buffer::EVENT_VERSION`] when written by this build; 2 in
    /// older files, whose claims and fenced calls carry no worker).
    #[serde(default = "event_version_2")]
    pub event_version: u8,
    /// False when the run ended without writing its final header (killed outright): its
    /// events end where the file does (about a second before the kill), every call after them
    /// is an unknown outcome, and `issued` and `drained` are what the run's start knew
    /// (`issued` unbounded, not drained). True in files written whole.
    #[serde(default = "complete_file")]
    pub complete: bool,
    /// The run's retention (`[maintenance] retain`, ms) when it ran `clean`; `None` without
    /// retention and in older files. A `clean` call whose outcome is unknown may have removed
    /// only jobs finished at least this long before it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retain_ms: Option<u64>,
    /// Which events the file keeps: every one (older files), or with
    /// [`KeepHistory::Violations`] only those of the jobs the live check did not pass as
    /// finished and retired (a job with no enqueue event in such a file is one it passed,
    /// seen again by a late call).
    #[serde(default, skip_serializing_if = "KeepHistory::is_full")]
    pub keep: KeepHistory,
}

/// Which events a run's history keeps (`--keep-history`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum KeepHistory {
    /// Every event: the history grows with every job the run ran.
    #[default]
    Full,
    /// The events of the jobs the live check could not pass, and none of a job it passed once
    /// `clean` retired it: the history grows with findings and faults, not with jobs.
    Violations,
}

impl KeepHistory {
    /// True for [`KeepHistory::Full`].
    pub fn is_full(&self) -> bool {
        *self == KeepHistory::Full
    }
}

impl HistoryHeader {
    /// A finished one-queue run's header for tests: seed 1, tag 2, queue `q`, drained,
    /// `issued` jobs, 3 attempts.
    #[cfg(test)]
    pub(crate) fn for_tests(issued: u64) -> HistoryHeader {
        HistoryHeader {
            seed: 1,
            run_tag: 2,
            queues: vec!["q".into()],
            drained: true,
            issued,
            max_attempts: 3,
            must_finish: true,
            protocol: Default::default(),
            stream_shards: Vec::new(),
            event_version: EVENT_VERSION,
            complete: true,
            retain_ms: None,
            keep: KeepHistory::Full,
        }
    }
}

fn event_version_2() -> u8 {
    2
}

fn complete_file() -> bool {
    true
}

/// A merged history: every event of every thread, sorted by job, then send time.
#[derive(Debug, Clone)]
pub struct History {
    /// The run it came from.
    pub header: HistoryHeader,
    /// Events sorted by `(job, sent_us, done_us)`; unknown-outcome claims (job
    /// [`UNKNOWN_JOB`]) come last.
    pub events: Vec<Event>,
    /// Encoded size of the history, bytes (what the run held in memory and wrote to disk).
    pub encoded_bytes: u64,
}

impl History {
    /// Decodes and merges the per-thread `streams` (in parallel) into one sorted history.
    ///
    /// Errors: the first stream that does not decode.
    pub fn merge(header: HistoryHeader, streams: &[Vec<u8>]) -> Result<History, DecodeError> {
        let version = header.event_version;
        let decoded: Vec<Vec<Event>> =
            streams.par_iter().map(|s| buffer::decode_version(s, version)).collect::<Result<_, _>>()?;
        let mut events: Vec<Event> = Vec::with_capacity(decoded.iter().map(Vec::len).sum());
        for (index, stream) in decoded.into_iter().enumerate() {
            let shard = header.stream_shards.get(index).copied();
            events.extend(stream.into_iter().map(|e| Event { shard, ..e }));
        }
        events.par_sort_unstable_by_key(|e| (e.job, e.sent_us, e.done_us));
        let encoded_bytes = streams.iter().map(|s| s.len() as u64).sum();
        Ok(History { header, events, encoded_bytes })
    }

    /// Claim calls whose outcome is unknown: each may have handed out jobs nobody saw.
    pub fn unknown_claims(&self) -> usize {
        self.unknown_calls().filter(|e| e.kind == Kind::Claim).count()
    }

    /// The calls that name no job ([`UNKNOWN_JOB`]): claims and `clean` calls whose outcome is
    /// unknown, each of which may have handed out, or removed, jobs nobody saw.
    pub fn unknown_calls(&self) -> impl Iterator<Item = &Event> {
        let known = self.events.partition_point(|e| e.job != UNKNOWN_JOB);
        self.events[known..].iter()
    }

    /// Keeps only the jobs enqueued into one of the queues `keep` (indices into the header's
    /// queue list), for checking a subset of a run's queues; unknown-outcome claims stay
    /// (they may belong to any queue). The header's queue list is left as it is.
    pub fn keep_queues(&mut self, keep: &[u16]) {
        let dropped: std::collections::HashSet<u32> = self
            .per_job()
            .filter_map(|job| {
                let enqueue = job.iter().find(|e| matches!(e.kind, Kind::Enqueue))?;
                (!keep.contains(&enqueue.queue)).then_some(enqueue.job)
            })
            .collect();
        self.events.retain(|e| e.job == UNKNOWN_JOB || !dropped.contains(&e.job));
    }

    /// The events of each job, in order (the unknown-claim events excluded).
    pub fn per_job(&self) -> impl Iterator<Item = &[Event]> {
        let known = self.events.len() - self.unknown_calls().count();
        self.events[..known].chunk_by(|a, b| a.job == b.job)
    }
}
