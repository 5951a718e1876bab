//! The scratch file of a run's seconds' counts (`.seconds.*.jsonl` in the results folder, removed
//! at the end): its line format, written as each second closes and read back at the end.

use crate::lua::{ErrorCode, Script};
use crate::metrics::{CompactHistogram, IntervalRecord, IntervalScript, JobCounter};
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;

/// The scratch file of the seconds' counts, one JSON line a second, each written whole in one
/// call; after a write that failed (a full disk), the next line starts on a line of its own,
/// so the part of the failed one that reached the file spoils no other.
pub(super) struct SecondsSpill {
    pub(super) file: File,
    pub(super) path: PathBuf,
    /// The last write failed: the next line starts on a line of its own.
    pub(super) broken: bool,
}

impl SecondsSpill {
    /// Appends `rec`'s counts as one line.
    pub(super) fn append(&mut self, rec: &IntervalRecord) -> std::io::Result<()> {
        let mut line = if self.broken { b"\n".to_vec() } else { Vec::new() };
        serde_json::to_writer(&mut line, &SpilledSecond::of(rec))?;
        line.push(b'\n');
        let written = self.file.write_all(&line);
        self.broken = written.is_err();
        written
    }
}

/// The prefix of the scratch file of the seconds' counts.
pub(super) const SECONDS_PREFIX: &str = ".seconds.";

/// One second's counts as the scratch file keeps them (one JSON line; a script's errors by
/// [`ErrorCode::index`](crate::lua::ErrorCode::index), only the codes seen).
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct SpilledSecond {
    index: u64,
    start_us: u64,
    duration_us: u64,
    jobs: Vec<u64>,
    scripts: Vec<SpilledScript>,
}

/// One script's part of a [`SpilledSecond`].
#[derive(serde::Serialize, serde::Deserialize)]
struct SpilledScript {
    script: usize,
    ok: u64,
    errors: Vec<(usize, u64)>,
    late: u64,
    p50_us: u64,
    p99_us: u64,
    max_us: u64,
}

impl SpilledSecond {
    /// `rec`'s counts (its histograms go to latency.hlog).
    pub(super) fn of(rec: &IntervalRecord) -> SpilledSecond {
        SpilledSecond {
            index: rec.index,
            start_us: rec.start_us,
            duration_us: rec.duration_us,
            jobs: rec.jobs.to_vec(),
            scripts: rec
                .scripts
                .iter()
                .map(|s| SpilledScript {
                    script: s.script.index(),
                    ok: s.ok,
                    errors: s.errors.iter().enumerate().filter(|(_, n)| **n > 0).map(|(i, n)| (i, *n)).collect(),
                    late: s.late,
                    p50_us: s.p50_us,
                    p99_us: s.p99_us,
                    max_us: s.max_us,
                })
                .collect(),
        }
    }

    /// The record back (no histogram); `None` when an index is out of range.
    pub(super) fn record(self) -> Option<IntervalRecord> {
        let mut jobs = [0u64; JobCounter::COUNT];
        for (slot, n) in jobs.iter_mut().zip(self.jobs) {
            *slot = n;
        }
        let scripts = self
            .scripts
            .into_iter()
            .map(|s| {
                let mut errors = [0u64; ErrorCode::COUNT];
                for (i, n) in s.errors {
                    *errors.get_mut(i)? = n;
                }
                Some(IntervalScript {
                    script: *Script::ALL.get(s.script)?,
                    ok: s.ok,
                    errors,
                    late: s.late,
                    p50_us: s.p50_us,
                    p99_us: s.p99_us,
                    max_us: s.max_us,
                    latency: CompactHistogram::default(),
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(IntervalRecord {
            index: self.index,
            start_us: self.start_us,
            duration_us: self.duration_us,
            scripts,
            jobs,
        })
    }
}
