//! The nine EchoMQ v1 scripts by name (PROTOCOL.md "Scripts"), and the outcome codes a call can end in.

/// One EchoMQ v1 script; its file is `lua/<name>.lua`.
///
/// `index()` is dense (0..9) so per-script tables are plain arrays, not maps: no hashing on the hot path.
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
}

impl Script {
    /// Every script, in `index()` order.
    pub const ALL: [Script; 9] = [
        Script::Enqueue,
        Script::EnqueueDelayed,
        Script::Claim,
        Script::Complete,
        Script::Fail,
        Script::Extend,
        Script::Progress,
        Script::Reap,
        Script::Promote,
    ];

    /// Number of scripts (the length of per-script arrays).
    pub const COUNT: usize = 9;

    /// The script's name, which is also its file stem in the Lua directory.
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
        }
    }

    /// Dense index in `0..Script::COUNT`.
    pub fn index(self) -> usize {
        self as usize
    }

    /// The script with this name, if any.
    pub fn from_name(name: &str) -> Option<Script> {
        Script::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// Why a call did not succeed, as counted per script (never as throughput).
///
/// The five `EMQ*` codes are the protocol's error replies (PROTOCOL.md "Errors"). `Timeout` and
/// `Connection` are *unknown* outcomes: the script may or may not have run (Jepsen's `:info`).
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
}

impl ErrorCode {
    /// Every code, in `index()` order.
    pub const ALL: [ErrorCode; 14] = [
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
    ];

    /// Number of codes (the length of per-code arrays).
    pub const COUNT: usize = 14;

    /// The code as reports print it: the wire code for protocol errors, a lowercase word otherwise.
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
        }
    }

    /// Dense index in `0..ErrorCode::COUNT`.
    pub fn index(self) -> usize {
        self as usize
    }

    /// True when the outcome of the call is unknown (the script may have run).
    pub fn is_unknown_outcome(self) -> bool {
        matches!(self, ErrorCode::Timeout | ErrorCode::Connection)
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
