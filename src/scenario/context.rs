//! Error construction for validation: the file, and the line of the offending key,
//! found by re-reading the text with spans (`toml::de::DeTable`), so the raw
//! structs need no `Spanned` wrappers.

use std::fmt::Display;
use std::path::Path;

use toml::de::{DeTable, DeValue};

use super::error::{Problem, ScenarioError};
use super::plan::Fraction;

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

    /// Shared rules of `[producers]` and `[consumers]`: connections >= 1 and
    /// <= count when count > 0 (tasks share connections), pipeline >= 1.
    pub fn tasks(&self, table: &str, count: u32, connections: u32, pipeline: u32) -> Result<(), ScenarioError> {
        if connections == 0 || (count > 0 && connections > count) {
            let expected = format!("1..={} (at least 1, at most {table}.count)", count.max(1));
            return Err(self.err(&format!("{table}.connections"), connections, expected));
        }
        if pipeline == 0 {
            return Err(self.err(&format!("{table}.pipeline"), 0, "at least 1 request in flight"));
        }
        Ok(())
    }
}

/// The 1-based line of the deepest key of `dotted` (e.g. `producers.payload.uniform`)
/// present in `text`; `[i]` suffixes are ignored.
pub(crate) fn line_of(text: &str, dotted: &str) -> Option<usize> {
    let doc = DeTable::parse(text).ok()?;
    let mut table = doc.get_ref();
    let mut found = None;
    for part in dotted.split('.') {
        let key = part.split('[').next().unwrap_or(part).trim();
        let Some((k, v)) = table.iter().find(|(k, _)| k.get_ref() == key) else {
            break;
        };
        found = Some(k.span());
        match v.get_ref() {
            DeValue::Table(t) => table = t,
            _ => break,
        }
    }
    found.map(|span| text[..span.start].matches('\n').count() + 1)
}
