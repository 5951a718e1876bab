//! Errors for reading, parsing and validating a scenario file. A bad scenario names the file,
//! the line when known, the key and what was expected, so its author can fix it without the code.

use std::fmt;
use std::path::{Path, PathBuf};

/// Everything that can go wrong turning a scenario file into a [`Plan`](super::Plan).
///
/// `Display` is one self-contained message that starts with the file path; the
/// only variant with a `source` is [`ScenarioError::Read`] (the I/O error).
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("{}: cannot read the scenario file: {source}", .path.display())]
    Read {
        /// The scenario path as given.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },

    /// TOML syntax error, wrong type, unknown field, bad duration/size string, or a
    /// missing required key. `message` is the toml crate's whole multi-line message
    /// (line, column, the source line and a caret).
    #[error("{}: {message}", .path.display())]
    Syntax {
        /// The scenario path as given.
        path: PathBuf,
        /// 1-based line of the error, when the toml crate reported a span.
        line: Option<usize>,
        /// The toml crate's rendering of the error.
        message: String,
    },

    /// The file is well-formed TOML of the right types but a value breaks a rule,
    /// e.g. `scenarios/x.toml:31: consumers.stall + consumers.fail = 1.2, expected at most 1`.
    #[error("{}: {field} = {found}, expected {expected}", Location(.path, .line))]
    Invalid {
        /// The scenario path as given.
        path: PathBuf,
        /// 1-based line of the offending key, when it could be found in the text.
        line: Option<usize>,
        /// Dotted field path, e.g. `consumers.stall` or `producers.payload.uniform`.
        field: String,
        /// The offending value as written (or a short description).
        found: String,
        /// What the rule requires.
        expected: String,
    },

    /// A `--set KEY=VALUE` makes the scenario fail to read or validate: `detail` says why, as
    /// the file's own key would (its line numbers would be of no file, so none is given).
    #[error("{}: --set {key}: {detail}", .path.display())]
    Setting {
        /// The scenario path as given.
        path: PathBuf,
        /// The setting's dotted key.
        key: String,
        /// What is wrong with its value.
        detail: String,
    },

    /// A command-line override (e.g. `--duration`) conflicts with the scenario.
    #[error("{}: {flag} = {found}, expected {expected}", .path.display())]
    Override {
        /// The scenario path the plan came from.
        path: PathBuf,
        /// The flag, e.g. `--duration`.
        flag: String,
        /// The value given.
        found: String,
        /// What the rule requires.
        expected: String,
    },
}

impl ScenarioError {
    /// The 1-based line the error points at, when known.
    pub fn line(&self) -> Option<usize> {
        match self {
            Self::Syntax { line, .. } | Self::Invalid { line, .. } => *line,
            _ => None,
        }
    }

    /// The dotted field path for a validation error.
    pub fn field(&self) -> Option<&str> {
        match self {
            Self::Invalid { field, .. } => Some(field),
            Self::Override { flag, .. } => Some(flag),
            Self::Setting { key, .. } => Some(key),
            _ => None,
        }
    }
}

/// `path:line` or just `path`.
struct Location<'a>(&'a Path, &'a Option<usize>);

impl fmt::Display for Location<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self.1 {
            Some(line) => write!(f, "{}:{line}", self.0.display()),
            None => write!(f, "{}", self.0.display()),
        }
    }
}

/// A rule broken inside one value, before the file path and line are known.
/// `field` is relative to the value being resolved (e.g. `uniform`, `lognormal.p99`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Problem {
    pub field: String,
    pub found: String,
    pub expected: String,
}

impl Problem {
    pub fn new(field: &str, found: impl fmt::Display, expected: impl Into<String>) -> Self {
        Self { field: field.to_owned(), found: found.to_string(), expected: expected.into() }
    }
}
