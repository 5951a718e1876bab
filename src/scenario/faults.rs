//! `[[faults]]`: the nemesis schedule (Jepsen's nemesis is the model): faults injected on
//! purpose during the load phase, so a soak tests fencing under faults, not only contention.
//!
//! ```toml
//! [[faults]]
//! kind = "kill-connections"   # CLIENT KILL of the harness's own load connections
//! every = "4s"                # repeat; the first at `at` (default: one `every` in)
//!
//! [[faults]]
//! kind = "pause"              # CLIENT PAUSE for `duration`; mode "write" (default) or "all"
//! at = "3s"
//! duration = "1s"
//! mode = "write"
//!
//! [[faults]]
//! kind = "restart"            # embedded server only: stop it ("term" or "kill") and start it
//! at = "6s"                   # again on the same port and data directory
//! signal = "kill"
//! ```
//! Kinds: `kill-connections`, `pause`, `script-flush` (SCRIPT FLUSH), `maxmemory` (lowered to
//! the memory in use, `noeviction`, for `duration`), and with the embedded server `freeze`
//! (SIGSTOP for `duration`, then SIGCONT), `restart` and `failover` (to an embedded replica
//! started with the run: FAILOVER, then every connection follows the new primary). What survives a restart is what the
//! `[target] server` persistence options keep (`appendonly = "yes"`, `appendfsync = "always"`).

use super::context::Ctx;
use super::error::ScenarioError;
use super::units::HumanDuration;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The most `[[faults]]` entries a scenario may have.
pub const MAX_FAULTS: usize = 64;
/// The shortest `every`: faults closer than this would be one long fault.
const MIN_EVERY: Duration = Duration::from_millis(100);
/// The longest fault `duration` (a pause or freeze longer than this is an outage, which
/// `--give-up` handles).
const MAX_FAULT_DURATION: Duration = Duration::from_secs(600);

/// One `[[faults]]` entry as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    /// What to do.
    pub kind: FaultKind,
    /// When, counted from the start of the run (the first time, with `every`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<HumanDuration>,
    /// Repeat this often during the load phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every: Option<HumanDuration>,
    /// How long the fault lasts (`pause`, `freeze`, `maxmemory`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<HumanDuration>,
    /// `pause` only: `write` (CLIENT PAUSE WRITE, the default) or `all`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<PauseMode>,
    /// `restart` only: `term` (SIGTERM, a clean shutdown, the default) or `kill` (SIGKILL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<RestartSignal>,
}

/// The fault kinds. TOML: kebab-case strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// CLIENT KILL of the load's own connections (by their client name, `emq-bench-load`).
    KillConnections,
    /// CLIENT PAUSE WRITE (or ALL) for `duration`.
    Pause,
    /// SCRIPT FLUSH: the load must load its scripts again (NOSCRIPT).
    ScriptFlush,
    /// `maxmemory` lowered to the memory in use, policy `noeviction`, for `duration`: writes
    /// are refused with OOM.
    Maxmemory,
    /// SIGSTOP of the embedded server for `duration`, then SIGCONT.
    Freeze,
    /// The embedded server stopped (`signal`) and started again on its port and data directory.
    Restart,
    /// FAILOVER to the embedded replica the run started (REPLICAOF the primary); every
    /// connection then follows the new primary, and the old one becomes its replica.
    Failover,
}

impl FaultKind {
    /// Every kind, in declaration order.
    pub const ALL: [FaultKind; 7] = [
        FaultKind::KillConnections,
        FaultKind::Pause,
        FaultKind::ScriptFlush,
        FaultKind::Maxmemory,
        FaultKind::Freeze,
        FaultKind::Restart,
        FaultKind::Failover,
    ];

    /// The kind as the scenario spells it (and summary.json, intervals.csv and the table).
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::KillConnections => "kill-connections",
            FaultKind::Pause => "pause",
            FaultKind::ScriptFlush => "script-flush",
            FaultKind::Maxmemory => "maxmemory",
            FaultKind::Freeze => "freeze",
            FaultKind::Restart => "restart",
            FaultKind::Failover => "failover",
        }
    }

    /// True when the fault lasts a `duration`.
    pub fn lasts(self) -> bool {
        matches!(self, FaultKind::Pause | FaultKind::Freeze | FaultKind::Maxmemory)
    }

    /// True when the fault needs the embedded server (a process the harness started).
    pub fn needs_embedded(self) -> bool {
        matches!(self, FaultKind::Freeze | FaultKind::Restart | FaultKind::Failover)
    }
}

/// `pause`'s CLIENT PAUSE mode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PauseMode {
    /// Commands that may write wait (EVALSHA of a script without `no-writes` is one).
    #[default]
    Write,
    /// Every command waits.
    All,
}

/// `restart`'s signal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RestartSignal {
    /// SIGTERM: the server saves (when persistence is on) and exits.
    #[default]
    Term,
    /// SIGKILL: whatever was not on disk is lost.
    Kill,
}

/// One resolved fault.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultPlan {
    /// What to do.
    pub kind: FaultKind,
    /// The first time, from the run start.
    pub first: Duration,
    /// The repeat period, if any.
    pub every: Option<Duration>,
    /// How long it lasts (zero for the instant kinds and `restart`, whose length is the
    /// server's own).
    pub duration: Duration,
    /// `pause`'s mode.
    pub mode: PauseMode,
    /// `restart`'s signal.
    pub signal: RestartSignal,
}

impl FaultPlan {
    /// How many times it fires before `until` (what [`FaultPlan::times`] would list, without
    /// a limit or a list).
    pub fn count_before(&self, until: Duration) -> usize {
        if self.first >= until {
            return 0;
        }
        match self.every {
            None => 1,
            Some(every) => ((until - self.first).as_nanos().saturating_sub(1) / every.as_nanos().max(1)) as usize + 1,
        }
    }

    /// The times it fires before `until` (the end of the load phase), in order; at most
    /// `limit` of them.
    pub fn times(&self, until: Duration, limit: usize) -> Vec<Duration> {
        let mut out = Vec::new();
        let mut at = self.first;
        while at < until && out.len() < limit {
            out.push(at);
            match self.every {
                Some(every) => at += every,
                None => break,
            }
        }
        out
    }
}

/// Resolves the `[[faults]]` entries. `load_for` is the load phase's length when the run is
/// time-bounded; `embedded` is false when the scenario names a url.
pub(crate) fn faults(
    cx: &Ctx,
    specs: &[FaultSpec],
    load_for: Option<Duration>,
    embedded: bool,
) -> Result<Vec<FaultPlan>, ScenarioError> {
    if specs.len() > MAX_FAULTS {
        return Err(cx.err("faults", specs.len(), format!("at most {MAX_FAULTS} [[faults]] entries")));
    }
    specs.iter().enumerate().map(|(i, spec)| fault(cx, i, spec, load_for, embedded)).collect()
}

fn fault(
    cx: &Ctx,
    i: usize,
    spec: &FaultSpec,
    load_for: Option<Duration>,
    embedded: bool,
) -> Result<FaultPlan, ScenarioError> {
    let field = |name: &str| format!("faults[{i}].{name}");
    let kind = spec.kind;
    let every = spec.every.as_ref().map(HumanDuration::get);
    if let Some(e) = every.filter(|e| *e < MIN_EVERY) {
        let expected = format!("at least {} between two faults", humantime::format_duration(MIN_EVERY));
        return Err(cx.err(&field("every"), humantime::format_duration(e), expected));
    }
    let first = match (spec.at.as_ref().map(HumanDuration::get), every) {
        (Some(at), _) => at,
        (None, Some(every)) => every,
        (None, None) => {
            return Err(cx.err(&field("at"), "neither at nor every", "at = \"3s\", every = \"5s\" or both"))
        }
    };
    if let Some(load) = load_for.filter(|load| first >= *load) {
        let expected = format!("a time within the load phase (duration = {})", humantime::format_duration(load));
        return Err(cx.err(&field("at"), humantime::format_duration(first), expected));
    }
    let duration = match (kind.lasts(), spec.duration.as_ref().map(HumanDuration::get)) {
        (true, None) => return Err(cx.err(&field("duration"), "none", format!("how long the {} lasts", kind.name()))),
        (true, Some(d)) if d.is_zero() || d > MAX_FAULT_DURATION => {
            let expected = format!("more than 0 and at most {}", humantime::format_duration(MAX_FAULT_DURATION));
            return Err(cx.err(&field("duration"), humantime::format_duration(d), expected));
        }
        (true, Some(d)) => d,
        (false, Some(_)) => {
            let expected = format!("no duration: a {} is instant", kind.name());
            return Err(cx.err(&field("duration"), spec.duration.as_ref().map_or("", |d| d.as_str()), expected));
        }
        (false, None) => Duration::ZERO,
    };
    if let Some(e) = every.filter(|e| duration >= *e) {
        let expected = format!("a duration shorter than every ({})", humantime::format_duration(e));
        return Err(cx.err(&field("duration"), humantime::format_duration(duration), expected));
    }
    if spec.mode.is_some() && kind != FaultKind::Pause {
        return Err(cx.err(&field("mode"), format!("{:?}", spec.mode), "mode only for kind = \"pause\""));
    }
    if spec.signal.is_some() && kind != FaultKind::Restart {
        return Err(cx.err(&field("signal"), format!("{:?}", spec.signal), "signal only for kind = \"restart\""));
    }
    if kind.needs_embedded() && !embedded {
        let expected =
            "the embedded server (no [target] url): the harness can only freeze, restart or fail over a server it started";
        return Err(cx.err(&field("kind"), kind.name(), expected));
    }
    Ok(FaultPlan {
        kind,
        first,
        every,
        duration,
        mode: spec.mode.unwrap_or_default(),
        signal: spec.signal.unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use crate::scenario::{parse, FaultKind, ScenarioError};
    use std::path::Path;
    use std::time::Duration;

    const BASE: &str = "name = \"f\"\nseed = 1\nduration = \"10s\"\n";

    fn faults(text: &str) -> Result<Vec<super::FaultPlan>, ScenarioError> {
        parse(&format!("{BASE}{text}"), Path::new("f.toml")).map(|plan| plan.faults)
    }

    fn refused(text: &str) -> String {
        faults(text).expect_err("refused").to_string()
    }

    #[test]
    fn a_schedule_resolves_to_its_times_within_the_load_phase() {
        let plan = faults(
            "[[faults]]\nkind = \"pause\"\nevery = \"3s\"\nduration = \"500ms\"\nmode = \"all\"\n\
             [[faults]]\nkind = \"restart\"\nat = \"2s\"\nsignal = \"kill\"\n",
        )
        .unwrap();
        assert_eq!(plan[0].kind, FaultKind::Pause);
        assert_eq!(plan[0].times(Duration::from_secs(10), 100), [3, 6, 9].map(Duration::from_secs));
        assert_eq!(plan[0].count_before(Duration::from_secs(10)), 3);
        assert_eq!(plan[0].count_before(Duration::from_secs(9)), 2, "9 s is not before 9 s");
        assert_eq!(plan[1].count_before(Duration::from_secs(2)), 0);
        assert_eq!(plan[1].times(Duration::from_secs(10), 100), [Duration::from_secs(2)]);
        assert_eq!(plan[1].signal, super::RestartSignal::Kill);
    }

    #[test]
    fn every_bad_entry_names_its_field_and_what_was_expected() {
        let cases = [
            ("[[faults]]\nkind = \"pause\"\nduration = \"1s\"\n", "faults[0].at", "at = \"3s\", every"),
            ("[[faults]]\nkind = \"pause\"\nat = \"1s\"\n", "faults[0].duration", "how long the pause lasts"),
            (
                "[[faults]]\nkind = \"script-flush\"\nat = \"1s\"\nduration = \"1s\"\n",
                "faults[0].duration",
                "is instant",
            ),
            (
                "[[faults]]\nkind = \"freeze\"\nevery = \"1s\"\nduration = \"2s\"\n",
                "faults[0].duration",
                "shorter than every",
            ),
            ("[[faults]]\nkind = \"kill-connections\"\nevery = \"10ms\"\n", "faults[0].every", "at least 100ms"),
            ("[[faults]]\nkind = \"kill-connections\"\nat = \"10s\"\n", "faults[0].at", "within the load phase"),
            (
                "[[faults]]\nkind = \"restart\"\nat = \"1s\"\nmode = \"all\"\n",
                "faults[0].mode",
                "only for kind = \"pause\"",
            ),
            (
                "[[faults]]\nkind = \"pause\"\nat = \"1s\"\nduration = \"1s\"\nsignal = \"kill\"\n",
                "faults[0].signal",
                "only for kind = \"restart\"",
            ),
            ("[[faults]]\nkind = \"pause\"\nat = \"1s\"\nduration = \"11m\"\n", "faults[0].duration", "at most 10m"),
        ];
        for (text, field, expected) in cases {
            let err = refused(text);
            assert!(err.contains(field) && err.contains(expected), "{text}: {err}");
        }
        let err = refused("[target]\nurl = \"redis://127.0.0.1:1/\"\n[[faults]]\nkind = \"failover\"\nat = \"1s\"\n");
        assert!(err.contains("faults[0].kind") && err.contains("embedded server"), "{err}");
        let err = refused("[[faults]]\nkind = \"reboot\"\nat = \"1s\"\n");
        assert!(err.contains("reboot") && err.contains("kill-connections"), "{err}");
        let many = "[[faults]]\nkind = \"script-flush\"\nat = \"1s\"\n".repeat(super::MAX_FAULTS + 1);
        assert!(refused(&many).contains("at most 64 [[faults]] entries"));
    }
}
