//! A run's end, typed: the [`Verdict`] (passed or not, the exit code, every [`Finding`] that
//! decided it) and what became of the run's keys ([`KeysFate`], [`Cleanup`]). One type each, written into
//! summary.json and read back by the report, so the terminal's `FAIL` lines, summary.json's
//! `verdict` and report.html show the same findings.
//!
//! A leaf: it imports nothing of the crate. What the findings are made from, and the rules
//! that make them, live with the run's stages (`cmd::session::judge`).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// The exit code of a run that passed.
pub const EXIT_PASS: u8 = 0;
/// The exit code of a run some finding failed.
pub const EXIT_FAIL: u8 = 1;

/// Why a run passed or failed: the judge's one answer. summary.json's `verdict` object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// True when no finding failed the run.
    pub passed: bool,
    /// The process's exit code for this run: [`EXIT_PASS`] or [`EXIT_FAIL`] (usage errors, 2,
    /// and inconclusive comparisons, 3, end before any run is judged).
    pub exit_code: u8,
    /// Every reason the run failed, in the order the terminal prints them (`FAIL <message>`);
    /// empty when it passed.
    pub findings: Vec<Finding>,
}

impl Verdict {
    /// The verdict of these findings: passed when there are none.
    pub fn of(findings: Vec<Finding>) -> Verdict {
        let passed = findings.is_empty();
        Verdict { passed, exit_code: if passed { EXIT_PASS } else { EXIT_FAIL }, findings }
    }

    /// The findings' messages, one line each, as the terminal prints them after `FAIL`.
    pub fn lines(&self) -> Vec<String> {
        self.findings.iter().map(|f| f.message.clone()).collect()
    }
}

/// One reason a run failed: a closed kind a machine can match on, and the line a person reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// What failed.
    pub kind: FindingKind,
    /// The line the terminal prints after `FAIL` (figures included, e.g. `threshold claim.p99
    /// < 2ms failed: 2.531 ms`).
    pub message: String,
}

impl Finding {
    /// A finding of `kind` that says `message`.
    pub fn new(kind: FindingKind, message: impl Into<String>) -> Finding {
        Finding { kind, message: message.into() }
    }
}

/// The kinds of [`Finding`], as summary.json names them ([`FindingKind::name`], snake_case).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FindingKind {
    /// The run ended before its plan was carried out (a stop signal, an abort, the target
    /// unreachable past `--give-up`, a connect failure, a load thread's death).
    Interrupted,
    /// The invariant check found violations (invariants.json has them all).
    Violations,
    /// Claimed payloads differ from what was enqueued (I4, seen by the consumers).
    PayloadCorrupt,
    /// Re-used ids were accepted as new jobs (I8, seen by the producers).
    DuplicateAccepted,
    /// A `[thresholds]` entry did not hold.
    Threshold,
    /// A gate every run is held to without thresholds (a script whose calls all failed, more
    /// than 1 % errors, nothing enqueued or finished).
    DefaultGate,
    /// An open-loop rate was not held and `producers.allow_shortfall` is false.
    RateNotHeld,
    /// Jobs were left unfinished after the drain limit (a backlog, not a lost job).
    DrainIncomplete,
    /// A `[[faults]]` entry could not be applied or undone.
    FaultNotApplied,
    /// Fewer faults of a kind fired within the load phase than the schedule asked for.
    FaultsNotFired,
    /// The invariant check could not run (the server unreadable, the run aborted).
    CheckNotRun,
    /// The run lock was lost while the run held it: another run may have used the queues.
    LockLost,
    /// Files of the results folder could not be written (a full disk).
    WriteError,
    /// The run's keys could not be deleted: some are left on the server.
    CleanupFailed,
    /// The run's keys were kept, against the plan (not `--keep`), for a later look.
    KeysKept,
    /// A fleet's merge lacked shards: its figures cover part of the fleet only.
    ShardMissing,
    /// A fleet's shard started well after the agreed `t0`.
    LateStart,
}

impl FindingKind {
    /// Every kind, in the order the judge's rules name them.
    pub const ALL: [FindingKind; 17] = [
        FindingKind::Interrupted,
        FindingKind::Violations,
        FindingKind::PayloadCorrupt,
        FindingKind::DuplicateAccepted,
        FindingKind::Threshold,
        FindingKind::DefaultGate,
        FindingKind::RateNotHeld,
        FindingKind::DrainIncomplete,
        FindingKind::FaultNotApplied,
        FindingKind::FaultsNotFired,
        FindingKind::CheckNotRun,
        FindingKind::LockLost,
        FindingKind::WriteError,
        FindingKind::CleanupFailed,
        FindingKind::KeysKept,
        FindingKind::ShardMissing,
        FindingKind::LateStart,
    ];

    /// The kind [`FindingKind::name`] spells `name`, if any.
    pub fn from_name(name: &str) -> Option<FindingKind> {
        FindingKind::ALL.into_iter().find(|kind| kind.name() == name)
    }

    /// The name summary.json uses, e.g. `drain_incomplete`: the one spelling of each kind
    /// (serde reads and writes it too).
    pub fn name(self) -> &'static str {
        match self {
            FindingKind::Interrupted => "interrupted",
            FindingKind::Violations => "violations",
            FindingKind::PayloadCorrupt => "payload_corrupt",
            FindingKind::DuplicateAccepted => "duplicate_accepted",
            FindingKind::Threshold => "threshold",
            FindingKind::DefaultGate => "default_gate",
            FindingKind::RateNotHeld => "rate_not_held",
            FindingKind::DrainIncomplete => "drain_incomplete",
            FindingKind::FaultNotApplied => "fault_not_applied",
            FindingKind::FaultsNotFired => "faults_not_fired",
            FindingKind::CheckNotRun => "check_not_run",
            FindingKind::LockLost => "lock_lost",
            FindingKind::WriteError => "write_error",
            FindingKind::CleanupFailed => "cleanup_failed",
            FindingKind::KeysKept => "keys_kept",
            FindingKind::ShardMissing => "shard_missing",
            FindingKind::LateStart => "late_start",
        }
    }
}

impl Serialize for FindingKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for FindingKind {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        FindingKind::from_name(&name).ok_or_else(|| serde::de::Error::custom(format!("unknown finding kind `{name}`")))
    }
}

/// Why a run kept its keys on the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeptBecause {
    /// The user asked for it (`--keep`).
    Keep,
    /// A second stop signal: nothing that waits on the server ran.
    Aborted,
    /// The server could not be read at the end of the run.
    EndUnreadable,
    /// The run lock was lost: the keys may be another run's now.
    LockLost,
    /// The invariant check could not run: the keys are the evidence.
    CheckNotRun,
    /// The results folder could not be written completely: the keys are the evidence.
    FolderIncomplete,
    /// A `shared` fleet's shard: the fleet's merge checks the keys over every shard's history,
    /// then deletes them.
    FleetCheck,
    /// `--fail-fast` stopped the run at a violation: the keys are its evidence.
    Violation,
    /// The deletion itself failed, with the error.
    DeletionFailed(String),
    /// A reason read back from a summary.json that this version does not name, as written.
    Other(String),
}

impl KeptBecause {
    /// The reason its [`Display`](fmt::Display) text spells (what summary.json holds after
    /// `kept: `); a text no variant spells is [`KeptBecause::Other`].
    pub fn parse(text: &str) -> KeptBecause {
        let named = [
            KeptBecause::Keep,
            KeptBecause::Aborted,
            KeptBecause::EndUnreadable,
            KeptBecause::LockLost,
            KeptBecause::CheckNotRun,
            KeptBecause::FolderIncomplete,
            KeptBecause::FleetCheck,
            KeptBecause::Violation,
        ];
        if let Some(err) = text.strip_prefix("the deletion failed: ") {
            return KeptBecause::DeletionFailed(err.to_string());
        }
        named.into_iter().find(|why| why.to_string() == text).unwrap_or_else(|| KeptBecause::Other(text.to_string()))
    }
}

impl fmt::Display for KeptBecause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeptBecause::Keep => f.write_str("--keep"),
            KeptBecause::Aborted => f.write_str("the run was aborted"),
            KeptBecause::EndUnreadable => f.write_str("the server could not be read at the end"),
            KeptBecause::LockLost => f.write_str("the run lock was lost"),
            KeptBecause::CheckNotRun => f.write_str("the invariant check could not run"),
            KeptBecause::FolderIncomplete => f.write_str("the results folder could not be written completely"),
            KeptBecause::FleetCheck => f.write_str("for the fleet's check at the merge (shared queues)"),
            KeptBecause::Violation => {
                f.write_str("--fail-fast stopped the run at a violation: the keys are its evidence")
            }
            KeptBecause::DeletionFailed(err) => write!(f, "the deletion failed: {err}"),
            KeptBecause::Other(why) => f.write_str(why),
        }
    }
}

/// What became of a run's keys. summary.json's `keys`: `deleting`, `deleted` or `kept: <why>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeysFate {
    /// Being deleted: what the folder says from before the deletion starts until it has
    /// ended. A folder that still says it was left by a run that ended during its cleanup
    /// (killed): some keys may be left on the server; [`Cleanup`] says which queues.
    Deleting,
    /// Deleted, every one: the deletion finished ([`Cleanup`] has the count).
    Deleted,
    /// Left on the server, and why.
    Kept(KeptBecause),
}

impl KeysFate {
    /// True when the keys stay on the server.
    pub fn is_kept(&self) -> bool {
        matches!(self, KeysFate::Kept(_))
    }

    /// The fate with what `cleanup` recorded, for a reader: `deleted (3 012 345 keys in
    /// 9.8 s)`, or, for a folder left during the deletion, how many went and which queues
    /// were not finished.
    pub fn describe(&self, cleanup: Option<&Cleanup>) -> String {
        match (self, cleanup) {
            (KeysFate::Deleted, Some(c)) => format!("deleted ({} keys in {:.1} s)", c.deleted, c.secs),
            (KeysFate::Deleting, Some(c)) => {
                let left = match c.remaining_keys {
                    Some(n) => {
                        format!(", about {n} keys left of the {} counted before", c.counted.values().sum::<u64>())
                    }
                    None => String::new(),
                };
                format!(
                    "deleting, not finished: {} keys deleted as of the summary's last rewrite{left}; queues not \
                     finished: {}",
                    c.deleted,
                    c.remaining
                        .iter()
                        .map(|q| match c.counted.get(q) {
                            Some(n) => format!("{q} ({n} keys counted)"),
                            None => q.clone(),
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
            (fate, _) => fate.to_string(),
        }
    }
}

impl fmt::Display for KeysFate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeysFate::Deleting => f.write_str("deleting"),
            KeysFate::Deleted => f.write_str("deleted"),
            KeysFate::Kept(why) => write!(f, "kept: {why}"),
        }
    }
}

impl Serialize for KeysFate {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for KeysFate {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        match (text.as_str(), text.strip_prefix("kept: ")) {
            ("deleting", _) => Ok(KeysFate::Deleting),
            ("deleted", _) => Ok(KeysFate::Deleted),
            (_, Some(why)) => Ok(KeysFate::Kept(KeptBecause::parse(why))),
            _ => Err(serde::de::Error::custom(format!(
                "keys: `{text}`, expected `deleting`, `deleted` or `kept: <why>`"
            ))),
        }
    }
}

/// The deletion of a run's keys, summary.json's `cleanup`: written with `keys: deleting`
/// before the deletion starts, rewritten about once a second while it goes and when it ends.
/// Absent when the keys were kept from the start, and in folders of older versions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Cleanup {
    /// Keys deleted (UNLINK's count: a key counts once): in all once `keys` says `deleted`;
    /// as of the last rewrite while it says `deleting` (a killed run may have deleted more).
    pub deleted: u64,
    /// The queues whose keys were not all deleted yet, in the order they are deleted: the one
    /// under way and those after it. Empty once `keys` says `deleted`.
    pub remaining: Vec<String>,
    /// How long the deletion took (so far), s.
    pub secs: f64,
    /// Each queue's keys as counted on the server before the deletion started, from the job
    /// rows its places hold (one read per queue; see `queue_keys_counted`): a run killed
    /// during its cleanup leaves a folder that says how many there were. Empty when the count
    /// could not be read, and in folders of older versions.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub counted: BTreeMap<String, u64>,
    /// About how many keys were left as of the last rewrite while `keys` says `deleting`: the
    /// count of every queue not finished less what the deletion under way had removed from its
    /// own (0 once `deleted`). Absent without a count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remaining_keys: Option<u64>,
}

impl Cleanup {
    /// The record before the deletion of `queues`' keys starts: none deleted, all remaining.
    pub fn before(queues: &[String]) -> Cleanup {
        Cleanup { remaining: queues.to_vec(), ..Default::default() }
    }

    /// Records the count taken before the deletion: `counted` keys per queue.
    pub fn count(&mut self, counted: BTreeMap<String, u64>) {
        self.remaining_keys = Some(counted.values().sum());
        self.counted = counted;
    }

    /// Records `so_far` keys deleted from the queue under way (the first of `remaining`):
    /// `remaining_keys` becomes that queue's count less `so_far` (never below 0: a count that
    /// is a lower bound takes nothing off the queues after it), plus the count of each queue
    /// after it.
    pub fn under_way(&mut self, so_far: u64) {
        if self.counted.is_empty() {
            return;
        }
        let count = |q: &String| self.counted.get(q).copied().unwrap_or(0);
        let current = self.remaining.first().map_or(0, |q| count(q).saturating_sub(so_far));
        self.remaining_keys = Some(current + self.remaining.iter().skip(1).map(count).sum::<u64>());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verdict_without_findings_passes_with_exit_0_and_any_finding_fails_with_exit_1() {
        let pass = Verdict::of(Vec::new());
        assert!(pass.passed);
        assert_eq!(pass.exit_code, EXIT_PASS);
        let fail =
            Verdict::of(vec![Finding::new(FindingKind::Threshold, "threshold claim.p99 < 2ms failed: 2.531 ms")]);
        assert!(!fail.passed);
        assert_eq!(fail.exit_code, EXIT_FAIL);
        assert_eq!(fail.lines(), ["threshold claim.p99 < 2ms failed: 2.531 ms"]);
    }

    #[test]
    fn a_verdict_reads_back_what_it_writes_with_snake_case_kinds() {
        let verdict = Verdict::of(vec![
            Finding::new(FindingKind::DrainIncomplete, "drain incomplete: 3 jobs unfinished"),
            Finding::new(FindingKind::FaultsNotFired, "faults not injected: 1 of 2"),
        ]);
        let json = serde_json::to_value(&verdict).unwrap();
        assert_eq!(json["findings"][0]["kind"], "drain_incomplete");
        assert_eq!(json["findings"][1]["kind"], FindingKind::FaultsNotFired.name());
        assert_eq!(json["exit_code"], 1);
        let back: Verdict = serde_json::from_value(json).unwrap();
        assert_eq!(back, verdict);
        for kind in FindingKind::ALL {
            assert_eq!(FindingKind::from_name(kind.name()), Some(kind), "{kind:?}");
        }
        assert!(serde_json::from_value::<FindingKind>("rain".into()).is_err());
    }

    #[test]
    fn keys_fates_read_as_summary_json_has_always_written_them() {
        assert_eq!(KeysFate::Deleted.to_string(), "deleted");
        assert_eq!(serde_json::from_value::<KeysFate>("deleting".into()).unwrap(), KeysFate::Deleting);
        assert_eq!(serde_json::to_value(KeysFate::Deleting).unwrap(), "deleting");
        assert_eq!(KeysFate::Kept(KeptBecause::Aborted).to_string(), "kept: the run was aborted");
        assert_eq!(KeysFate::Kept(KeptBecause::Keep).to_string(), "kept: --keep");
        let json = serde_json::to_value(KeysFate::Kept(KeptBecause::DeletionFailed("queue q: broken pipe".into())));
        assert_eq!(json.as_ref().unwrap(), "kept: the deletion failed: queue q: broken pipe");
        let back: KeysFate = serde_json::from_value(json.unwrap()).unwrap();
        assert_eq!(back, KeysFate::Kept(KeptBecause::DeletionFailed("queue q: broken pipe".into())));
        for why in [KeptBecause::Keep, KeptBecause::Aborted, KeptBecause::LockLost, KeptBecause::FolderIncomplete] {
            let fate = KeysFate::Kept(why);
            assert_eq!(serde_json::from_value::<KeysFate>(serde_json::to_value(&fate).unwrap()).unwrap(), fate);
        }
        let older: KeysFate = serde_json::from_value("kept: a reason of another version".into()).unwrap();
        assert_eq!(older, KeysFate::Kept(KeptBecause::Other("a reason of another version".into())));
        assert!(serde_json::from_value::<KeysFate>("gone".into()).is_err());
    }

    #[test]
    fn a_fate_read_with_its_cleanup_says_how_far_the_deletion_got() {
        let done = Cleanup { deleted: 3_012_345, secs: 9.84, ..Default::default() };
        assert_eq!(KeysFate::Deleted.describe(Some(&done)), "deleted (3012345 keys in 9.8 s)");
        let left = Cleanup { deleted: 120_000, remaining: vec!["bench-1".into(), "bench-2".into()], secs: 1.0, ..done };
        assert_eq!(
            KeysFate::Deleting.describe(Some(&left)),
            "deleting, not finished: 120000 keys deleted as of the summary's last rewrite; queues not finished: \
             bench-1, bench-2"
        );
        assert_eq!(KeysFate::Deleted.describe(None), "deleted", "an older folder has no record");
        let queues = ["bench-0".to_string(), "bench-1".into(), "bench-2".into()];
        assert_eq!(Cleanup::before(&queues[..1]), Cleanup { remaining: vec!["bench-0".into()], ..Default::default() });
        // Counted first; then bench-0 done and 20 000 of bench-1's gone.
        let mut record = Cleanup::before(&queues);
        record.count(queues.iter().cloned().zip([100_000, 150_000, 50_000]).collect());
        assert_eq!(record.remaining_keys, Some(300_000));
        record.remaining.remove(0);
        record.deleted = 120_000;
        record.under_way(20_000);
        assert_eq!(record.remaining_keys, Some(180_000));
        assert_eq!(
            KeysFate::Deleting.describe(Some(&record)),
            "deleting, not finished: 120000 keys deleted as of the summary's last rewrite, about 180000 keys left of \
             the 300000 counted before; queues not finished: bench-1 (150000 keys counted), bench-2 (50000 keys \
             counted)"
        );
        let json = serde_json::to_value(&record).unwrap();
        assert_eq!(
            (json["remaining_keys"].as_u64(), json["counted"]["bench-2"].as_u64()),
            (Some(180_000), Some(50_000))
        );
        assert_eq!(serde_json::from_value::<Cleanup>(json.clone()).unwrap(), record);
        // A queue with more keys than counted (BullMQ's count is a lower bound) takes nothing
        // off the queues after it.
        record.under_way(400_000);
        assert_eq!(record.remaining_keys, Some(50_000));
    }
}
