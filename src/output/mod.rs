//! Terminal output only: the live progress line on stderr. Workers never print; the final
//! table is formatted by `report::format_table` and printed by the command.

mod progress;

pub use progress::Progress;
