//! The scripts a run can call, by name: EchoMQ's ten (docs/protocol.md "The scripts") and the
//! ten of BullMQ's that its mapping drives (docs/bullmq-mapping.md); which of them a run loads is
//! its [`Protocol`]'s. Also the outcome codes a call can end in.

/// A queue protocol: whose scripts a run loads and calls, through which keyspace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Protocol {
    /// EchoMQ v1.1 (docs/protocol.md), the scripts in `lua/`.
    #[default]
    #[serde(rename = "echomq-v1")]
    EchoMqV1,
    /// BullMQ's own scripts, as its 2.26.0 Python client ships them (`scripts/setup` installs
    /// them into `.tools/bullmq/current/commands/`), driven as its clients call them.
    #[serde(rename = "bullmq")]
    BullMq,
}

impl Protocol {
    /// The name scenario files and summary.json use: `echomq-v1`, `bullmq`.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::EchoMqV1 => "echomq-v1",
            Protocol::BullMq => "bullmq",
        }
    }

    /// The protocol with this name.
    pub fn from_name(name: &str) -> Option<Protocol> {
        [Protocol::EchoMqV1, Protocol::BullMq].into_iter().find(|p| p.name() == name)
    }

    /// The scripts the protocol loads, in [`Script::index`] order.
    pub fn scripts(self) -> &'static [Script] {
        match self {
            Protocol::EchoMqV1 => &Script::ALL[..Script::ECHOMQ],
            Protocol::BullMq => &Script::ALL[Script::ECHOMQ..],
        }
    }

    /// The script directory when none is given, relative to the working directory.
    pub fn default_dir(self) -> &'static str {
        match self {
            Protocol::EchoMqV1 => "lua",
            Protocol::BullMq => ".tools/bullmq/current/commands",
        }
    }
}

/// One script a run can call: EchoMQ's file is `lua/<name>.lua`, BullMQ's
/// `<name>-<numkeys>.lua` ([`file_name`](Script::file_name)).
///
/// `index()` is dense (0..20) so per-script tables are plain arrays, not maps: no hashing on the
/// hot path. EchoMQ's ten come first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Script {
    /// `enqueue`: a new pending job.
    Enqueue,
    /// `enqueue_delayed`: a new job due after a delay.
    EnqueueDelayed,
    /// `claim`: pop pending jobs and lease them.
    Claim,
    /// `complete`: finish an active job (fenced).
    Complete,
    /// `fail`: fail an attempt, retry or give up (fenced).
    Fail,
    /// `extend`: renew a lease (fenced).
    Extend,
    /// `progress`: store a progress note (fenced).
    Progress,
    /// `reap`: return expired leases to pending.
    Reap,
    /// `promote`: move due delayed jobs to pending.
    Promote,
    /// `clean` (EchoMQ v1.2): remove finished jobs past an age (retention).
    Clean,
    /// BullMQ `addStandardJob`: a new waiting job (no delay, no priority).
    AddStandardJob,
    /// BullMQ `addDelayedJob`: a new job due after its delay.
    AddDelayedJob,
    /// BullMQ `addPrioritizedJob`: a new job with a priority.
    AddPrioritizedJob,
    /// BullMQ `moveToActive`: take the next job and lock it (also promotes due delayed jobs).
    MoveToActive,
    /// BullMQ `moveToFinished`: complete, or fail for good, a locked job.
    MoveToFinished,
    /// BullMQ `retryJob`: a failed attempt back to wait.
    RetryJob,
    /// BullMQ `moveToDelayed`: a failed attempt back after its backoff.
    MoveToDelayed,
    /// BullMQ `extendLock`: renew a job's lock.
    ExtendLock,
    /// BullMQ `updateProgress`: store a progress value (not fenced in BullMQ).
    UpdateProgress,
    /// BullMQ `moveStalledJobsToWait`: the stalled-jobs check.
    MoveStalledJobsToWait,
}

impl Script {
    /// Every script, in `index()` order.
    pub const ALL: [Script; 20] = [
        Script::Enqueue,
        Script::EnqueueDelayed,
        Script::Claim,
        Script::Complete,
        Script::Fail,
        Script::Extend,
        Script::Progress,
        Script::Reap,
        Script::Promote,
        Script::Clean,
        Script::AddStandardJob,
        Script::AddDelayedJob,
        Script::AddPrioritizedJob,
        Script::MoveToActive,
        Script::MoveToFinished,
        Script::RetryJob,
        Script::MoveToDelayed,
        Script::ExtendLock,
        Script::UpdateProgress,
        Script::MoveStalledJobsToWait,
    ];

    /// Number of scripts (the length of per-script arrays).
    pub const COUNT: usize = 20;

    /// How many of [`ALL`](Self::ALL) are EchoMQ's (the first ones).
    const ECHOMQ: usize = 10;

    /// The script's name as results and scenario files print it (BullMQ's without the
    /// `-<numkeys>` suffix of its file).
    pub fn name(self) -> &'static str {
        match self {
            Script::Enqueue => "enqueue",
            Script::EnqueueDelayed => "enqueue_delayed",
            Script::Claim => "claim",
            Script::Complete => "complete",
            Script::Fail => "fail",
            Script::Extend => "extend",
            Script::Progress => "progress",
            Script::Reap => "reap",
            Script::Promote => "promote",
            Script::Clean => "clean",
            Script::AddStandardJob => "addStandardJob",
            Script::AddDelayedJob => "addDelayedJob",
            Script::AddPrioritizedJob => "addPrioritizedJob",
            Script::MoveToActive => "moveToActive",
            Script::MoveToFinished => "moveToFinished",
            Script::RetryJob => "retryJob",
            Script::MoveToDelayed => "moveToDelayed",
            Script::ExtendLock => "extendLock",
            Script::UpdateProgress => "updateProgress",
            Script::MoveStalledJobsToWait => "moveStalledJobsToWait",
        }
    }

    /// The number of KEYS the script takes: part of BullMQ's file names (docs/protocol.md gives
    /// EchoMQ's per script; their calls pass it themselves).
    pub fn numkeys(self) -> Option<usize> {
        Some(match self {
            Script::AddStandardJob => 9,
            Script::AddDelayedJob => 6,
            Script::AddPrioritizedJob => 9,
            Script::MoveToActive => 11,
            Script::MoveToFinished => 14,
            Script::RetryJob => 11,
            Script::MoveToDelayed => 12,
            Script::ExtendLock => 2,
            Script::UpdateProgress => 3,
            Script::MoveStalledJobsToWait => 9,
            _ => return None,
        })
    }

    /// The file that holds the script in its directory: `enqueue.lua`, `moveToActive-11.lua`.
    pub fn file_name(self) -> String {
        match self.numkeys() {
            Some(n) => format!("{}-{n}.lua", self.name()),
            None => format!("{}.lua", self.name()),
        }
    }

    /// Dense index in `0..Script::COUNT`.
    pub fn index(self) -> usize {
        self as usize
    }

    /// True for a script a protocol's directory may lack: EchoMQ v1.2's `clean`, which v1.1's
    /// scripts (a baseline a user compares against) do not have. A run that needs it refuses
    /// such a directory when its plan is resolved.
    pub fn is_optional(self) -> bool {
        matches!(self, Script::Clean)
    }

    /// True for the scripts producers send (EchoMQ's `enqueue`, `enqueue_delayed`; BullMQ's
    /// `add*Job`): their ops/s are rated over the load phase, not load + drain.
    pub fn is_enqueue(self) -> bool {
        matches!(
            self,
            Script::Enqueue
                | Script::EnqueueDelayed
                | Script::AddStandardJob
                | Script::AddDelayedJob
                | Script::AddPrioritizedJob
        )
    }

    /// True for a script that may change the queue's state, which is every script of both
    /// protocols: even a claim or a reap that finds nothing runs as a write. With
    /// `[target] wait` such a call is acknowledged only after `WAIT`; a read-only script
    /// (none yet) would answer false and go without one.
    pub fn changes_state(self) -> bool {
        true
    }

    /// The script with this name, if any.
    pub fn from_name(name: &str) -> Option<Script> {
        Script::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// Why a call did not succeed, as counted per script (never as throughput).
///
/// The five `EMQ*` codes are the protocol's error replies (docs/protocol.md "Errors"). `Timeout`
/// and `Connection` are *unknown* outcomes: the script may or may not have run (Jepsen's `:info`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorCode {
    /// `EMQKIND`: the id is not `JOB`-namespaced.
    Kind,
    /// `EMQARG`: an argument is missing or malformed.
    Arg,
    /// `EMQNOJOB`: the row does not exist.
    NoJob,
    /// `EMQSTATE`: the job is not in the state the verb needs.
    State,
    /// `EMQFENCE`: the token is not the current `attempts` (a stale worker).
    Fence,
    /// Any other server error reply (e.g. a Lua runtime error, OOM, NOSCRIPT after the retry).
    Server,
    /// A reply whose shape the protocol does not allow.
    Reply,
    /// No reply within the request timeout: outcome unknown.
    Timeout,
    /// The connection failed before a reply arrived: outcome unknown.
    Connection,
    // The server refusals a fault causes, kept apart from `Server` so a run under faults says
    // which (appended: the history stores codes by index).
    /// `OOM`: the server is over `maxmemory` with `noeviction`; the script did not run.
    Oom,
    /// `LOADING`: the server is loading its data after a restart.
    Loading,
    /// `READONLY`: the node is a replica (a failover under way).
    ReadOnly,
    /// `BUSY`: another script runs past `busy-reply-threshold`.
    Busy,
    /// `NOSCRIPT` that survived the registry's reload and retry (a script flush mid-pipeline).
    NoScript,
    // BullMQ's refusals (docs/bullmq-mapping.md section 4): integer replies, not error replies,
    // mapped by `bullmq::codes` (appended: the history stores codes by index).
    /// BullMQ `-2` (`JobLockNotExist`): the job has no lock (expired, or released by an
    /// earlier finish): a stale worker whose lease ran out.
    LockMissing,
    /// BullMQ `-6` (`JobLockMismatch`): another claim's token holds the lock (a stale worker).
    LockMismatch,
    /// BullMQ `-3` (`JobNotInState`): the job is not in `active` (moveToFinished, retryJob,
    /// moveToDelayed); the lock was already checked and released by then.
    NotInState,
    /// BullMQ `-1` (`JobNotExist`): the job's hash does not exist.
    Missing,
    /// BullMQ extendLock's `0`: the lock is not held by this token (expired, released or
    /// another claim's), so it was not extended. BullMQ has no name for it.
    NotExtended,
    /// BullMQ `-4` (`JobPendingDependencies`): completing a flow parent with pending children.
    PendingDependencies,
    /// BullMQ `-5` (`ParentJobNotExist`): an add named a parent that does not exist.
    ParentMissing,
    /// BullMQ `-7` (`ParentJobCannotBeReplaced`): a duplicate id already has another live parent.
    ParentNotReplaceable,
    /// BullMQ `-9` (`JobHasFailedChildren`): completing a flow parent with failed children.
    FailedChildren,
    // The durability mode's own outcome (appended: the history stores codes by index).
    /// `wait_short`: the call ran on the primary, but the `WAIT` sent after it (`[target] wait`)
    /// reported fewer replicas than asked within its timeout, or failed: outcome unknown (a
    /// failover may lose it).
    WaitShort,
}

impl ErrorCode {
    /// Every code, in `index()` order.
    pub const ALL: [ErrorCode; 24] = [
        ErrorCode::Kind,
        ErrorCode::Arg,
        ErrorCode::NoJob,
        ErrorCode::State,
        ErrorCode::Fence,
        ErrorCode::Server,
        ErrorCode::Reply,
        ErrorCode::Timeout,
        ErrorCode::Connection,
        ErrorCode::Oom,
        ErrorCode::Loading,
        ErrorCode::ReadOnly,
        ErrorCode::Busy,
        ErrorCode::NoScript,
        ErrorCode::LockMissing,
        ErrorCode::LockMismatch,
        ErrorCode::NotInState,
        ErrorCode::Missing,
        ErrorCode::NotExtended,
        ErrorCode::PendingDependencies,
        ErrorCode::ParentMissing,
        ErrorCode::ParentNotReplaceable,
        ErrorCode::FailedChildren,
        ErrorCode::WaitShort,
    ];

    /// Number of codes (the length of per-code arrays).
    pub const COUNT: usize = 24;

    /// The code as reports print it: the wire code for EchoMQ's errors, BullMQ's `ErrorCode` name
    /// (its `error_code.py`) for BullMQ's refusals, a lowercase word otherwise.
    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::Kind => "EMQKIND",
            ErrorCode::Arg => "EMQARG",
            ErrorCode::NoJob => "EMQNOJOB",
            ErrorCode::State => "EMQSTATE",
            ErrorCode::Fence => "EMQFENCE",
            ErrorCode::Server => "server",
            ErrorCode::Reply => "reply",
            ErrorCode::Timeout => "timeout",
            ErrorCode::Connection => "connection",
            ErrorCode::Oom => "OOM",
            ErrorCode::Loading => "LOADING",
            ErrorCode::ReadOnly => "READONLY",
            ErrorCode::Busy => "BUSY",
            ErrorCode::NoScript => "NOSCRIPT",
            ErrorCode::LockMissing => "JobLockNotExist",
            ErrorCode::LockMismatch => "JobLockMismatch",
            ErrorCode::NotInState => "JobNotInState",
            ErrorCode::Missing => "JobNotExist",
            ErrorCode::NotExtended => "LockNotExtended",
            ErrorCode::PendingDependencies => "JobPendingDependencies",
            ErrorCode::ParentMissing => "ParentJobNotExist",
            ErrorCode::ParentNotReplaceable => "ParentJobCannotBeReplaced",
            ErrorCode::FailedChildren => "JobHasFailedChildren",
            ErrorCode::WaitShort => "wait_short",
        }
    }

    /// Dense index in `0..ErrorCode::COUNT`.
    pub fn index(self) -> usize {
        self as usize
    }

    /// The code with this [`name`](ErrorCode::name), if any (summary.json keys its counts so).
    pub fn from_name(name: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| c.name() == name)
    }

    /// True when the outcome of the call is unknown (the script may have run): no reply in
    /// time, a lost connection, or a call its `WAIT` did not acknowledge.
    pub fn is_unknown_outcome(self) -> bool {
        matches!(self, ErrorCode::Timeout | ErrorCode::Connection | ErrorCode::WaitShort)
    }

    /// True when the refusal says the caller's claim is no longer the job's current one (a
    /// stale worker, a zombie): EchoMQ's `EMQFENCE`/`EMQSTATE`, BullMQ's lock missing or
    /// mismatched, and an extendLock that found another's (or no) lock. BullMQ's `-3`
    /// (not in active) is not stale: it comes after the lock check passed with the current
    /// token, and the script has already deleted the lock (docs/bullmq-mapping.md 3.3).
    pub fn is_stale(self) -> bool {
        matches!(
            self,
            ErrorCode::Fence
                | ErrorCode::State
                | ErrorCode::LockMissing
                | ErrorCode::LockMismatch
                | ErrorCode::NotExtended
        )
    }

    /// True for BullMQ's refusals (integer replies mapped by `bullmq::codes`).
    pub fn is_bullmq(self) -> bool {
        (ErrorCode::LockMissing.index()..=ErrorCode::FailedChildren.index()).contains(&self.index())
    }

    /// True for what a fault (a lost connection, a full memory, a restart, a failover, a
    /// busy or flushed server) causes, not the protocol or a script's own bug: the errors an
    /// injected fault may explain (`faults::record`).
    pub fn is_fault_caused(self) -> bool {
        self.is_unknown_outcome()
            || matches!(
                self,
                ErrorCode::Oom | ErrorCode::Loading | ErrorCode::ReadOnly | ErrorCode::Busy | ErrorCode::NoScript
            )
    }
}
