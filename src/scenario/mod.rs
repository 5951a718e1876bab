//! Scenario files (`scenarios/*.toml`): the raw file model, its validation, and
//! the resolved [`Plan`] the load driver runs.
//!
//! Two layers, so every value is resolved before the run starts and the hot path never parses:
//! - the raw layer mirrors the file, one struct per TOML table, every struct
//!   `#[serde(deny_unknown_fields)]`, so a misspelt key is an error, never ignored: [`Scenario`] (`file.rs`),
//!   [`TargetTable`] (with [`WaitTable`]), [`Producers`], [`Consumers`], [`Maintenance`], [`StageSpec`], with [`Dist`]
//!   (`dist.rs`) and the unit types [`HumanDuration`] / [`HumanSize`] / [`Count`] (`units.rs`).
//!   Defaults live in the raw structs' `Default` impls, so a serialized
//!   [`Scenario`] shows every value the run used.
//! - [`validate`] resolves it into a [`Plan`] (`plan.rs`): `Duration`s, byte
//!   counts, checked [`Fraction`]s, queue names, samplers; every count and size within
//!   the upper bounds of [`bounds`], chosen so the largest scenario fits in memory.
//!
//! Errors: syntax, type, unknown-field and unit errors come from the toml crate
//! with line, column and caret; rule violations are [`ScenarioError::Invalid`] with
//! the file, the key's line, the field, the value found and what was expected.

pub mod bounds;
mod consumers;
mod context;
mod dist;
mod error;
pub mod faults;
mod file;
mod maintenance;
mod plan;
mod producers;
mod sampler;
pub mod settings;
pub mod shard;
pub mod shipped;
mod stages;
mod target;
pub mod thresholds;
mod units;
pub mod validate;
mod wait;

#[cfg(test)]
mod tests;

use std::path::Path;

pub use consumers::{BackoffSpec, Consumers, ExtendSpec};
pub use dist::{Dist, LogNormalSpec};
pub use error::ScenarioError;
pub use faults::{
    FailoverMode, FaultKind, FaultPlan, FaultSpec, ModeSpec, Needs, PartitionSide, PauseMode, RestartSignal,
    TargetShape,
};
pub use file::{Queues, Scenario};
pub use maintenance::Maintenance;
pub use plan::{
    Backoff, ClusterShape, ConsumerPlan, Fraction, MaintenancePlan, OpenLoop, Plan, ProducerPlan, Stop, TargetPlan,
};
pub use producers::{Arrival, Producers};
pub use sampler::{DurationSampler, SizeSampler, MAX_DURATION, MAX_SIZE};
pub use shard::{FleetLayout, JobNumbers, QueueMode, Shard, ShardRole, TaskRange};
pub use stages::{StagePlan, StageSpec, Stages};
pub use target::{redact_url, TargetTable};
pub use units::{Count, HumanDuration, HumanSize};
pub use wait::WaitTable;

/// Smallest payload in bytes: every payload starts with the harness's 20-byte
/// header (used to check I4 payload-intact), so each configured size must fit it.
pub const MIN_PAYLOAD: u64 = crate::payload::HEADER_LEN as u64;

/// Reads the scenario at `path` (as [`read_text`]), writes `settings` into it (`--set`,
/// [`settings::apply`]) and resolves it: every setting checked as the file's own keys are.
///
/// # Errors
/// As [`load`], and [`settings::apply`]'s.
pub fn load_with(path: &Path, settings: &[settings::Setting]) -> Result<Plan, ScenarioError> {
    if settings.is_empty() {
        return load(path);
    }
    let text = read_text(path)?;
    let err = match parse(&settings::apply(&text, settings, path)?, path) {
        Ok(plan) => return Ok(plan),
        Err(err) => err,
    };
    // The file read without the settings: name the first setting that breaks it, with what
    // is wrong and no line (the lines are of the file with the settings written in).
    if parse(&text, path).is_ok() {
        for k in 0..settings.len() {
            if let Err(err) = parse(&settings::apply(&text, &settings[..=k], path)?, path) {
                let detail = match err {
                    ScenarioError::Syntax { message, .. } => {
                        message.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or_default().trim().to_owned()
                    }
                    ScenarioError::Invalid { field, found, expected, .. } => {
                        format!("{field} = {found}, expected {expected}")
                    }
                    other => other.to_string(),
                };
                return Err(ScenarioError::Setting { path: path.to_owned(), key: settings[k].key.join("."), detail });
            }
        }
    }
    Err(err)
}

/// Reads and resolves the scenario file at `path`.
///
/// # Errors
/// [`ScenarioError::Read`] if the file cannot be read, else as [`parse`].
pub fn load(path: &Path) -> Result<Plan, ScenarioError> {
    parse(&read_text(path)?, path)
}

/// The text of the scenario `path`: the file when it exists, else, for a bare name such as
/// `smoke` (or `smoke.toml`), the shipped scenario of that name built into the binary.
///
/// # Errors
/// [`ScenarioError::Read`] naming the path when it is neither (the message lists the
/// shipped names).
pub fn read_text(path: &Path) -> Result<String, ScenarioError> {
    let err = match std::fs::read_to_string(path) {
        Ok(text) => return Ok(text),
        Err(err) => err,
    };
    // Only a bare name that names no file may mean a shipped scenario.
    let bare = path.parent().is_none_or(|p| p.as_os_str().is_empty()) && err.kind() == std::io::ErrorKind::NotFound;
    let name = path.to_str().filter(|_| bare);
    if let Some(text) = name.and_then(shipped::shipped) {
        return Ok(text.to_owned());
    }
    let source = match (name, err.kind()) {
        (Some(_), _) | (None, std::io::ErrorKind::NotFound) => {
            std::io::Error::new(err.kind(), format!("{err} ({})", shipped_near(path, name.is_some())))
        }
        (None, _) => err,
    };
    Err(ScenarioError::Read { path: path.to_owned(), source })
}

/// What a missing scenario `path` may have meant: the shipped scenarios whose names are close
/// to its file's (all of them when none is). `bare`: the path is a bare name, itself tried as
/// a shipped one (then all are listed, and the close ones offered).
fn shipped_near(path: &Path, bare: bool) -> String {
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
    let all = shipped::names();
    let close = crate::names::close(stem, &all);
    match (bare, close.is_empty()) {
        (true, true) => format!("nor is it a shipped scenario: {}", all.join(", ")),
        (true, false) => {
            format!("nor is it a shipped scenario: {}; did you mean {}?", all.join(", "), close.join(" or "))
        }
        (false, true) => format!("shipped scenarios run by their name: {}", all.join(", ")),
        (false, false) => format!(
            "did you mean the shipped {}? shipped scenarios run by their name: `emq-bench run {}`",
            close.join(" or "),
            close[0]
        ),
    }
}

/// Parses and resolves scenario `text`; `path` is used only in messages and
/// recorded as [`Plan::source`].
///
/// # Errors
/// [`ScenarioError::Syntax`] for TOML syntax, type, unknown-field, unit-string and
/// missing-key errors (the toml crate's full message); [`ScenarioError::Invalid`]
/// for a value that breaks a rule of the format.
pub fn parse(text: &str, path: &Path) -> Result<Plan, ScenarioError> {
    let raw: Scenario = toml::from_str(text).map_err(|e| ScenarioError::Syntax {
        path: path.to_owned(),
        line: e.span().map(|s| text[..s.start].matches('\n').count() + 1),
        message: e.to_string().trim_end().to_owned(),
    })?;
    validate::resolve(raw, text, path)
}
