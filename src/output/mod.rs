//! Terminal output only: the live progress line on stderr, and a command's notes as it goes
//! (a capacity probe started, ended), and the progress of the run's cleanup. Workers never
//! print; the final table is formatted by `report::format_table` and printed by the command.

mod deletion;
mod progress;

pub use deletion::Deletion;
pub use progress::Progress;

/// One note of a command's progress on stderr, `emq-bench: <what>: <line>` (stdout is the
/// table's, and `--json`'s).
pub fn note(what: &str, line: &str) {
    eprintln!("emq-bench: {what}: {line}");
}
