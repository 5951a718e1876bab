//! The small closed sets a `[[faults]]` entry chooses from: `mode` (one key, whose values
//! depend on the kind: a pause's CLIENT PAUSE mode or a cluster failover's), `restart`'s
//! signal, and `partition`'s side.

use super::FaultKind;
use serde::{Deserialize, Serialize};

/// `mode` as written: the modes of every kind that takes one, checked against the entry's kind
/// when it is resolved (a pause takes `write` or `all`, a cluster failover `default`, `force`
/// or `takeover`), so a mode of the wrong kind is refused naming `faults[i].mode` and the
/// modes that kind allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModeSpec {
    /// `pause`: CLIENT PAUSE WRITE.
    Write,
    /// `pause`: CLIENT PAUSE ALL.
    All,
    /// `cluster-failover`: CLUSTER FAILOVER (the primary agrees and hands over its last writes).
    Default,
    /// `cluster-failover`: CLUSTER FAILOVER FORCE (no handshake with the primary).
    Force,
    /// `cluster-failover`: CLUSTER FAILOVER TAKEOVER (no handshake, no election).
    Takeover,
}

impl ModeSpec {
    /// The mode as the scenario spells it.
    pub fn name(self) -> &'static str {
        match self {
            ModeSpec::Write => "write",
            ModeSpec::All => "all",
            ModeSpec::Default => "default",
            ModeSpec::Force => "force",
            ModeSpec::Takeover => "takeover",
        }
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

/// `cluster-failover`'s CLUSTER FAILOVER mode (Valkey's manual failover).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FailoverMode {
    /// The replica asks its primary to stop its clients, catches up to its offset, then is
    /// elected: nothing the primary acknowledged is lost.
    #[default]
    Default,
    /// No handshake with the primary (it may be unreachable); the replica is still elected by
    /// the other primaries. Writes the replica had not received are lost.
    Force,
    /// No handshake and no election: the replica takes the slots with a new epoch of its own.
    /// Writes the replica had not received are lost.
    Takeover,
}

impl FailoverMode {
    /// The CLUSTER FAILOVER option (none for the default mode).
    pub fn option(self) -> Option<&'static str> {
        match self {
            FailoverMode::Default => None,
            FailoverMode::Force => Some("FORCE"),
            FailoverMode::Takeover => Some("TAKEOVER"),
        }
    }

    /// The mode as the scenario spells it.
    pub fn name(self) -> &'static str {
        match self {
            FailoverMode::Default => "default",
            FailoverMode::Force => "force",
            FailoverMode::Takeover => "takeover",
        }
    }
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

/// `partition`'s `side`: where the harness's own connections are when the primary is cut off.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PartitionSide {
    /// The harness still reaches the isolated primary: it keeps writing there, and the primary
    /// acknowledges until it notices (after the node timeout) that it lost the majority.
    #[default]
    Minority,
    /// The harness is cut off from the isolated primary too: its calls there time out, and it
    /// follows the slot to the replica the majority promotes.
    Majority,
}

impl PartitionSide {
    /// The side as the scenario spells it.
    pub fn name(self) -> &'static str {
        match self {
            PartitionSide::Minority => "minority",
            PartitionSide::Majority => "majority",
        }
    }
}

/// Each kind's mode, resolved from `mode` (its default when absent).
pub(crate) struct Modes {
    /// `pause`'s.
    pub pause: PauseMode,
    /// `cluster-failover`'s.
    pub failover: FailoverMode,
}

/// Resolves `mode` for `kind`: `Err` with what that kind allows (as the error's "expected")
/// when the mode is not one of its own, or the kind takes none.
pub(crate) fn resolve(kind: FaultKind, mode: Option<ModeSpec>) -> Result<Modes, String> {
    let mut modes = Modes { pause: PauseMode::default(), failover: FailoverMode::default() };
    let Some(mode) = mode else { return Ok(modes) };
    match (kind, mode) {
        (FaultKind::Pause, ModeSpec::Write) => modes.pause = PauseMode::Write,
        (FaultKind::Pause, ModeSpec::All) => modes.pause = PauseMode::All,
        (FaultKind::Pause, _) => return Err("\"write\" or \"all\" for kind = \"pause\"".into()),
        (FaultKind::ClusterFailover, ModeSpec::Default) => modes.failover = FailoverMode::Default,
        (FaultKind::ClusterFailover, ModeSpec::Force) => modes.failover = FailoverMode::Force,
        (FaultKind::ClusterFailover, ModeSpec::Takeover) => modes.failover = FailoverMode::Takeover,
        (FaultKind::ClusterFailover, _) => {
            return Err("\"default\", \"force\" or \"takeover\" for kind = \"cluster-failover\"".into())
        }
        (other, _) => {
            return Err(format!(
                "no mode for kind = \"{}\" (mode only for kind = \"pause\" or \"cluster-failover\")",
                other.name()
            ))
        }
    }
    Ok(modes)
}
