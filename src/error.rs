//! Errors by stage, and the exit-code rule (0 success, 1 a run or check failed, 2 usage or
//! input error; only `main` exits, so every stage returns its error and a test can see it).

use crate::plane::PlaneError;
use crate::report::ReportError;
use crate::resp::{CallError, RegistryError};
use crate::scenario::ScenarioError;
use crate::server::ServerError;

/// Anything that stops a command.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// A malformed scenario file.
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// A script directory that cannot be read.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// The embedded server could not start.
    #[error(transparent)]
    Server(#[from] ServerError),
    /// A target that cannot be used (a bad URL or TLS settings, unreachable, not a server).
    #[error(transparent)]
    Net(#[from] crate::net::NetError),
    /// A control plane that refused the run (keys exist, locked by another run) or could not
    /// serve it.
    #[error(transparent)]
    Plane(#[from] PlaneError),
    /// A bad command-line value.
    #[error("{0}")]
    Usage(String),
    /// The target failed before the load started.
    #[error("cannot prepare the target: {0}")]
    Prepare(CallError),
    /// The history could not be saved or decoded.
    #[error("history: {0}")]
    History(String),
    /// The results folder could not be written.
    #[error(transparent)]
    Report(#[from] ReportError),
    /// An I/O error with the path it concerns.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: String,
        /// The error.
        source: std::io::Error,
    },
}

impl AppError {
    /// What to do about this error, when its message alone does not say (a target that wants
    /// a password, or refuses the one given: the flags and variable it comes from).
    pub fn hint(&self) -> Option<String> {
        crate::net::AuthRefusal::in_message(&self.to_string()).map(crate::net::AuthRefusal::hint)
    }

    /// The process exit code for this error: 2 for usage and input errors, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            AppError::Scenario(_)
            | AppError::Registry(_)
            | AppError::Server(_)
            | AppError::Net(_)
            | AppError::Plane(_)
            | AppError::Usage(_)
            | AppError::Prepare(_) => 2,
            AppError::Report(_) | AppError::Io { .. } | AppError::History(_) => 1,
        }
    }
}
