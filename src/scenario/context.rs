//! Error construction for validation: the file, and the line of the offending key,
//! found by re-reading the text with spans (`toml::de::DeTable`), so the raw
//! structs need no `Spanned` wrappers.

use std::fmt::Display;
use std::path::Path;
use std::time::Duration;

use bytesize::ByteSize;
use toml::de::{DeTable, DeValue};

use super::bounds::{MAX_CONNECTIONS, MAX_LANES, MAX_PIPELINE, MAX_TASKS};
use super::error::{Problem, ScenarioError};
use super::plan::Fraction;
use super::units::{Count, HumanDuration};

/// The counts of `[producers]` or `[consumers]`, checked.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tasks {
    pub count: u32,
    pub connections: u32,
    pub pipeline: u32,
}

impl Tasks {
    /// Requests in flight over all tasks of the role.
    pub fn lanes(self) -> u64 {
        u64::from(self.count) * u64::from(self.pipeline)
    }
}

/// What an error needs besides the rule: the file and its text (to find the line).
pub(crate) struct Ctx<'a> {
    pub text: &'a str,
    pub path: &'a Path,
}

impl Ctx<'_> {
    /// An [`ScenarioError::Invalid`] for `field`, with the line of that key.
    pub fn err(&self, field: &str, found: impl Display, expected: impl Into<String>) -> ScenarioError {
        self.err_at(field, field, found, expected)
    }

    /// Like [`Ctx::err`], but the line is that of the key `locate`.
    pub fn err_at(&self, locate: &str, field: &str, found: impl Display, expected: impl Into<String>) -> ScenarioError {
        ScenarioError::Invalid {
            path: self.path.to_owned(),
            line: line_of(self.text, locate),
            field: field.to_owned(),
            found: found.to_string(),
            expected: expected.into(),
        }
    }

    /// A [`Problem`] found inside the value at `prefix`.
    pub fn problem(&self, prefix: &str, p: Problem) -> ScenarioError {
        self.err(&format!("{prefix}.{}", p.field), p.found, p.expected)
    }

    pub fn fraction(&self, field: &str, v: f64) -> Result<Fraction, ScenarioError> {
        Fraction::new(v).ok_or_else(|| self.err(field, v, "a fraction between 0 and 1"))
    }

    /// The count `field` when it is an integer in `lo..=hi` (every bound fits a `u32`);
    /// `what` says what it counts, for the message.
    pub fn count(&self, field: &str, value: Count, lo: u64, hi: u64, what: &str) -> Result<u32, ScenarioError> {
        match value.within(lo..=hi).map(u32::try_from) {
            Some(Ok(n)) => Ok(n),
            _ => Err(self.err(field, value, format!("an integer in {lo}..={hi} ({what})"))),
        }
    }

    /// The duration `field` when it is at most `max`.
    pub fn at_most(&self, field: &str, d: &HumanDuration, max: Duration) -> Result<Duration, ScenarioError> {
        if d.get() > max {
            let expected = format!("a duration of at most {}", humantime::format_duration(max));
            return Err(self.err(field, format!("{:?}", d.as_str()), expected));
        }
        Ok(d.get())
    }

    /// Shared rules of `[producers]` and `[consumers]`: count in 0..=[`MAX_TASKS`];
    /// connections >= 1, <= count when count > 0 (tasks share connections) and <=
    /// [`MAX_CONNECTIONS`]; pipeline in 1..=[`MAX_PIPELINE`]; count x pipeline (the role's
    /// requests in flight, one task each) at most [`MAX_LANES`].
    pub fn tasks(
        &self,
        table: &str,
        count: Count,
        connections: Count,
        pipeline: Count,
    ) -> Result<Tasks, ScenarioError> {
        let count = self.count(&format!("{table}.count"), count, 0, MAX_TASKS, "tasks")?;
        let most = u64::from(count).clamp(1, MAX_CONNECTIONS);
        let Some(connections) = connections.within(1..=most) else {
            let expected = format!("1..={most} (at least 1, at most {table}.count and at most {MAX_CONNECTIONS})");
            return Err(self.err(&format!("{table}.connections"), connections, expected));
        };
        let pipeline =
            self.count(&format!("{table}.pipeline"), pipeline, 1, MAX_PIPELINE, "requests in flight per task")?;
        let tasks = Tasks { count, connections: connections as u32, pipeline };
        if tasks.lanes() > MAX_LANES {
            let field = format!("{table}.count × {table}.pipeline");
            let found = format!("{count} × {pipeline} = {}", tasks.lanes());
            let expected = format!(
                "at most {MAX_LANES} requests in flight per role (each a task of ~8 KiB): fewer tasks or a shallower pipeline"
            );
            return Err(self.err_at(&format!("{table}.pipeline"), &field, found, expected));
        }
        Ok(tasks)
    }

    /// Refuses `total` payload bytes in flight above `max`: `factors` names the product (e.g.
    /// `producers.count × producers.pipeline × largest payload`), `found` its factors' values;
    /// the line is that of the key `locate`.
    pub fn in_flight(
        &self,
        locate: &str,
        factors: &str,
        found: String,
        total: u64,
        max: u64,
    ) -> Result<(), ScenarioError> {
        if total <= max {
            return Ok(());
        }
        let found = format!("{found} = {}", ByteSize(total));
        let expected = format!(
            "at most {} of payload in flight per role (the harness holds each about 3 times): fewer lanes or smaller payloads",
            ByteSize(max)
        );
        Err(self.err_at(locate, factors, found, expected))
    }
}

/// The 1-based line of the deepest key of `dotted` (e.g. `producers.payload.uniform`, or
/// `stages[2].rate` inside an array of tables) present in `text`.
pub(crate) fn line_of(text: &str, dotted: &str) -> Option<usize> {
    let doc = DeTable::parse(text).ok()?;
    let mut table = doc.get_ref();
    let mut found = None;
    for part in dotted.split('.') {
        let (key, index) = match part.split_once('[') {
            Some((key, rest)) => (key.trim(), rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (part.trim(), None),
        };
        let Some((k, v)) = table.iter().find(|(k, _)| k.get_ref() == key) else {
            break;
        };
        found = Some(k.span());
        let value = match (v.get_ref(), index) {
            (DeValue::Array(items), Some(i)) => match items.get(i) {
                Some(item) => item.get_ref(),
                None => break,
            },
            (value, _) => value,
        };
        match value {
            DeValue::Table(t) => table = t,
            _ => break,
        }
    }
    found.map(|span| text[..span.start].matches('\n').count() + 1)
}
