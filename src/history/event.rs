//! One history event: what the harness saw happen to one job in one call (Jepsen's history,
//! reduced to what the invariants of docs/protocol.md need).

use crate::lua::ErrorCode;
use std::num::NonZeroU64;

/// Which call an event records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Kind {
    /// `enqueue`/`enqueue_delayed` of a fresh id; `token` holds the payload's CRC-32.
    Enqueue = 0,
    /// A deliberate re-enqueue of an id already used; `token` holds the resent payload's CRC-32.
    EnqueueDup = 1,
    /// One job handed out by `claim` (`token` = the fencing token), or, with job
    /// [`UNKNOWN_JOB`], a claim call whose outcome is unknown.
    Claim = 2,
    /// `complete` with `token`.
    Complete = 3,
    /// `fail` with `token`.
    Fail = 4,
    /// `extend` with `token`.
    Extend = 5,
    /// `progress` with `token`.
    Progress = 6,
    /// The job's row removed by `clean` (retention): `token` is the finished set it was
    /// removed from (0 completed, 1 failed). With job [`UNKNOWN_JOB`], a `clean` call whose
    /// outcome is unknown (it may have removed jobs nobody saw): `token` is then
    /// `queue << 1 | set`.
    Retire = 7,
}

impl Kind {
    /// Decodes the 3-bit kind.
    pub fn from_bits(bits: u8) -> Option<Kind> {
        Some(match bits {
            0 => Kind::Enqueue,
            1 => Kind::EnqueueDup,
            2 => Kind::Claim,
            3 => Kind::Complete,
            4 => Kind::Fail,
            5 => Kind::Extend,
            6 => Kind::Progress,
            7 => Kind::Retire,
            _ => return None,
        })
    }

    /// The script name of the call.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Enqueue => "enqueue",
            Kind::EnqueueDup => "enqueue (duplicate id)",
            Kind::Claim => "claim",
            Kind::Complete => "complete",
            Kind::Fail => "fail",
            Kind::Extend => "extend",
            Kind::Progress => "progress",
            Kind::Retire => "clean (retired)",
        }
    }
}

/// The job number of a claim call (or a `clean` call) whose outcome is unknown: it may have
/// handed out (or removed) jobs nobody saw.
pub const UNKNOWN_JOB: u32 = u32::MAX;

/// How the call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The primary success: enqueued (1), handed out intact, completed (1), `retry`, accepted (1).
    Ok,
    /// The secondary success: duplicate (0), handed out with a changed payload, already
    /// completed (0), `failed`.
    Alt,
    /// An error reply with this code: the call did not happen.
    Refused(ErrorCode),
    /// Timeout or lost connection: the call may or may not have happened (Jepsen's `:info`).
    Unknown,
}

impl Outcome {
    /// The 5-bit code: 0 Ok, 1 Alt, 2 + code index for refusals, 31 Unknown.
    pub fn bits(self) -> u8 {
        match self {
            Outcome::Ok => 0,
            Outcome::Alt => 1,
            Outcome::Refused(code) => 2 + code.index() as u8,
            Outcome::Unknown => 31,
        }
    }

    /// Decodes [`bits`](Self::bits).
    pub fn from_bits(bits: u8) -> Option<Outcome> {
        match bits {
            0 => Some(Outcome::Ok),
            1 => Some(Outcome::Alt),
            31 => Some(Outcome::Unknown),
            b => ErrorCode::ALL.get(usize::from(b).checked_sub(2)?).map(|c| Outcome::Refused(*c)),
        }
    }

    /// The outcome of a call that ended in `code`: unknown for timeouts and lost
    /// connections, refused otherwise.
    pub fn of_error(code: ErrorCode) -> Outcome {
        if code.is_unknown_outcome() {
            Outcome::Unknown
        } else {
            Outcome::Refused(code)
        }
    }

    /// True when the call took effect (Ok or Alt).
    pub fn accepted(self) -> bool {
        matches!(self, Outcome::Ok | Outcome::Alt)
    }
}

/// One decoded event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// The run-wide job number (the id's low 32 bits), or [`UNKNOWN_JOB`].
    pub job: u32,
    /// The call.
    pub kind: Kind,
    /// How it ended.
    pub outcome: Outcome,
    /// The fencing token (claims and fenced calls) or the payload CRC-32 (enqueues).
    pub token: u32,
    /// The queue index (enqueues; 0 otherwise).
    pub queue: u16,
    /// The enqueued id's time part, ms since the Unix epoch (enqueues; 0 otherwise): with the
    /// run tag and the job number it rebuilds the id of a job nothing on the server names.
    pub id_ms: u64,
    /// When the request was sent, µs since the run start.
    pub sent_us: u64,
    /// When its reply was read (or the call gave up), µs since the run start.
    pub done_us: u64,
    /// The consumer lane that made the call (claims and fenced calls; run-wide within one
    /// process, `consumer × pipeline + lane`), so the check tells two holders of one token
    /// apart; `None` for enqueues and in histories written before it was recorded.
    pub worker: Option<u32>,
    /// The holder a claim presented ([`crate::queue::Holder::value`]), unique per claim call
    /// across a fleet: two claims of one token with two holders are two claims, not one
    /// claim's reply read twice. The client presents one on every claim, whichever script
    /// version answers (never 0, so the option costs no room). `None` for other calls, a claim of unknown outcome (its holder is not
    /// kept), and in histories written before it was recorded.
    pub holder: Option<NonZeroU64>,
    /// The fleet shard that made the call, in a `shared` fleet's merged history
    /// ([`super::HistoryHeader::stream_shards`]); `None` in one process's.
    pub shard: Option<u16>,
}

impl Event {
    /// ` (shard N)` when the event carries its shard, else nothing: what a violation adds to
    /// an event it names.
    pub fn origin(&self) -> String {
        self.shard.map(|s| format!(" (shard {s})")).unwrap_or_default()
    }

    /// ` by worker W (shard N)`, ` by worker W`, or [`origin`](Self::origin) when the event
    /// carries no worker, then `, holder H` (its 16 hex digits, as the row's `holder` field
    /// says) when it carries one: what a violation adds to name who made a call.
    pub fn maker(&self) -> String {
        let who = match (self.worker, self.shard) {
            (Some(w), Some(s)) => format!(" by worker {w} (shard {s})"),
            (Some(w), None) => format!(" by worker {w}"),
            (None, _) => self.origin(),
        };
        match self.holder {
            Some(h) => format!("{who}, holder {h:016x}"),
            None => who,
        }
    }

    /// True when `other` is known to come from another worker (both carry theirs and they
    /// differ, or they come from different shards).
    pub fn other_worker(&self, other: &Event) -> bool {
        self.shard != other.shard || matches!((self.worker, other.worker), (Some(a), Some(b)) if a != b)
    }
}

#[cfg(test)]
impl Event {
    /// A checker test's event: job `job`'s `kind` call sent at `sent_us` and answered 10 µs
    /// later, in queue 0, by `worker` (none for enqueues and retirements); an enqueue carries
    /// an id time part, so the check names the job by its id.
    pub(crate) fn for_tests(job: u32, kind: Kind, outcome: Outcome, token: u32, sent_us: u64, worker: u32) -> Event {
        Event {
            job,
            kind,
            outcome,
            token,
            queue: 0,
            id_ms: if kind == Kind::Enqueue { 1_700_000_000_000 } else { 0 },
            sent_us,
            done_us: sent_us + 10,
            worker: (!matches!(kind, Kind::Enqueue | Kind::Retire)).then_some(worker),
            holder: None,
            shard: None,
        }
    }
}
