//! The live progress: on a terminal, one line redrawn in place (stderr, via indicatif);
//! without one (a pod's log, nohup, CI), one timestamped line every few seconds, so a long
//! soak's log shows it is alive and how it goes. Hidden with `--quiet`. Each shows elapsed
//! time, ops/s per script, p99, errors and the jobs in each state.

use crate::load::coordinator::Depths;
use crate::lua::Script;
use crate::metrics::LiveSnapshot;
use crate::report::ms3;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::cell::Cell;
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::time::{Duration, Instant, SystemTime};

/// The progress of one run.
pub enum Progress {
    /// A line redrawn in place on a terminal.
    Bar(ProgressBar),
    /// A timestamped line every `every`, for a log.
    Lines {
        /// How often a line is printed.
        every: Duration,
        /// When the next one is due.
        next: Cell<Instant>,
    },
    /// Nothing (`--quiet`).
    Hidden,
}

impl Progress {
    /// The progress for stderr as it is: a line in place on a terminal, else a line at the
    /// first update (the load's first second: a log shows at once that the load started, and
    /// how it goes) and then every `every`; nothing when `quiet`.
    pub fn new(quiet: bool, every: Duration) -> Progress {
        Progress::first_after(quiet, every, Duration::ZERO)
    }

    /// As [`Progress::new`], with a log's first line due after `first` instead of `every`.
    pub fn first_after(quiet: bool, every: Duration, first: Duration) -> Progress {
        match (quiet, std::io::stderr().is_terminal()) {
            (true, _) => Progress::Hidden,
            (false, true) => {
                let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
                bar.set_style(ProgressStyle::with_template("{spinner} {msg}").expect("static template"));
                Progress::Bar(bar)
            }
            (false, false) => Progress::Lines { every, next: Cell::new(Instant::now() + first) },
        }
    }

    /// Shows the latest snapshot (about once a second; a log line only when one is due).
    pub fn update(&self, live: &LiveSnapshot, depths: Option<Depths>) {
        self.show(|| line(live, depths));
    }

    /// Shows the line `text` makes: in place on a terminal; in a log only when one is due (so
    /// `text` runs only then).
    pub fn show(&self, text: impl FnOnce() -> String) {
        match self {
            Progress::Bar(bar) => {
                bar.set_message(text());
                bar.tick();
            }
            Progress::Lines { every, next } => {
                let now = Instant::now();
                if now >= next.get() {
                    next.set(now + *every);
                    let at = humantime::format_rfc3339_seconds(SystemTime::now());
                    eprintln!("emq-bench: {at} {}", text());
                }
            }
            Progress::Hidden => {}
        }
    }

    /// True when nothing is shown (`--quiet`).
    pub fn is_hidden(&self) -> bool {
        matches!(self, Progress::Hidden)
    }

    /// Removes the line in place (before the final table is printed).
    pub fn finish(&self) {
        if let Progress::Bar(bar) = self {
            bar.finish_and_clear();
        }
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
