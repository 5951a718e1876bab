//! The progress of the deletion of a run's keys: nothing for its first second (a deletion of a
//! short run's keys ends within it), then a line with the keys deleted so far, their rate and
//! the queue under way (in place on a terminal; in a log at once, then every
//! `--progress-every`), and one line at the end when any was due. Hidden with `--quiet`.

use super::Progress;
use std::time::{Duration, Instant};

/// How long a deletion runs before its progress is shown.
pub const QUIET_FOR: Duration = Duration::from_secs(1);

/// The progress of one deletion, from its start.
pub struct Deletion {
    progress: Progress,
    start: Instant,
}

impl Deletion {
    /// The progress of a deletion starting now, on stderr as it is (see [`Progress::new`]);
    /// nothing when `quiet`.
    pub fn start(quiet: bool, every: Duration) -> Deletion {
        Deletion { progress: Progress::first_after(quiet, every, QUIET_FOR), start: Instant::now() }
    }

    /// Shows `deleted` keys so far (every queue's), `queue` being deleted, once the deletion
    /// has taken [`QUIET_FOR`].
    pub fn update(&self, queue: &str, deleted: u64) {
        let secs = self.start.elapsed();
        if secs >= QUIET_FOR {
            self.progress
                .show(|| format!("deleting the run's keys: queue {queue}, {deleted} deleted, {}", rate(deleted, secs)));
        }
    }

    /// Clears the line in place and, for a deletion that took [`QUIET_FOR`] or more, says
    /// how it ended: `deleted` keys in all, or `failed` after them.
    pub fn finish(&self, deleted: u64, failed: bool) {
        self.progress.finish();
        let secs = self.start.elapsed();
        if secs >= QUIET_FOR && !self.progress.is_hidden() {
            let how = if failed { "the deletion failed after" } else { "deleted" };
            super::note(
                "cleanup",
                &format!("{how} {deleted} keys in {:.1} s, {}", secs.as_secs_f64(), rate(deleted, secs)),
            );
        }
    }
}

fn rate(deleted: u64, secs: Duration) -> String {
    format!("{:.0} keys/s", deleted as f64 / secs.as_secs_f64().max(1e-9))
}
