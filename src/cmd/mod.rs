//! One file per subcommand: each resolves its arguments, calls the library and returns an
//! outcome for `main` to turn into an exit code.

pub mod run;
pub mod server;

/// How a command ended, when it ran to its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Exit 0.
    Success,
    /// Exit 1: the run was interrupted, or a check found a violation.
    Failed,
}
