//! One file per subcommand: each resolves its arguments, calls the library and returns an
//! outcome for `main` to turn into an exit code.

pub mod ab;
pub mod capacity;
pub mod check;
pub mod compare;
pub mod completions;
pub mod cost;
pub mod exports;
pub mod merge;
pub mod report;
pub mod run;
pub mod server;
pub mod session;

/// How a command ended, when it ran to its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandOutcome {
    /// Exit 0.
    Success,
    /// Exit 1: the run was interrupted, a check found a violation, a threshold or a
    /// comparison failed.
    Failed,
    /// Exit 3: a comparison could not tell (too few repetitions, or too much noise).
    Inconclusive,
}
