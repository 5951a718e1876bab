//! The live progress line (stderr, via indicatif): elapsed, ops/s per script, p99, errors and
//! the jobs in each state. Hidden with `--quiet` and when stderr is not a terminal.

use crate::load::run::Depths;
use crate::metrics::LiveSnapshot;
use crate::protocol::Script;
use crate::report::ms3;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::fmt::Write as _;

/// The progress line of one run.
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A progress line on stderr, or a hidden one when `quiet`.
    pub fn new(quiet: bool) -> Progress {
        let target = if quiet { ProgressDrawTarget::hidden() } else { ProgressDrawTarget::stderr() };
        let bar = ProgressBar::with_draw_target(None, target);
        bar.set_style(ProgressStyle::with_template("{spinner} {msg}").expect("static template"));
        Progress { bar }
    }

    /// Shows the latest snapshot.
    pub fn update(&self, live: &LiveSnapshot, depths: Option<Depths>) {
        self.bar.set_message(line(live, depths));
        self.bar.tick();
    }

    /// Removes the line (before the final table is printed).
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// The text of one progress line.
pub fn line(live: &LiveSnapshot, depths: Option<Depths>) -> String {
    let mut out = format!("{:>4}s{}", live.elapsed.as_secs(), if live.warmup { " (warmup)" } else { "" });
    for script in Script::ALL {
        let ops = live.ops_per_sec[script.index()];
        if ops > 0.0 {
            let _ = write!(out, " | {} {:.0}/s p99 {}ms", script.name(), ops, ms3(live.p99_us[script.index()]));
        }
    }
    let _ = write!(out, " | errors {}", live.errors_total);
    match depths {
        Some(d) => {
            let _ = write!(
                out,
                " | jobs pending {} delayed {} active {} completed {} failed {}",
                d.pending, d.delayed, d.active, d.completed, d.failed
            );
        }
        None => out.push_str(" | server unreachable"),
    }
    out
}
