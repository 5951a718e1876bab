//! A run's live check, as one repetition starts and ends it: the check's thread fed by the
//! history writer, `--fail-fast`'s own stop signal, and what the run's end makes of the first
//! violation (an interruption that names it).

use super::options::RunOptions;
use crate::check::live::{LiveCheck, LiveFindings};
use crate::error::AppError;
use crate::history::spool::SpoolOptions;
use crate::history::{HistoryHeader, KeepHistory};
use crate::load::stop::{Interruption, StopSignal};
use crate::scenario::Plan;
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;

/// A started live check: its findings, and its thread (none when it runs inside the history
/// writer, `--keep-history violations`).
pub(super) struct Started {
    /// What it found so far (the metrics endpoint reads them).
    pub(super) findings: Arc<LiveFindings>,
    thread: Option<JoinHandle<()>>,
}

/// Starts the live check of a run of `plan` writing its folder `dir` under `header`, unless the
/// run checks nothing (`--no-check`) or is a `shared` fleet's shard (its history holds a part
/// of each job's only: the merge checks those). Returns the check and how the history is to be
/// written: tapped by the check's own thread, or (`--keep-history violations`) filtered by the
/// check inside the writer.
///
/// Errors: the check's thread could not be started.
pub(super) fn start(
    opts: &RunOptions,
    plan: &Plan,
    dir: &Path,
    header: &HistoryHeader,
) -> Result<(Option<Started>, SpoolOptions), AppError> {
    if !opts.check || plan.shares_queues() {
        return Ok((None, SpoolOptions::default()));
    }
    let findings = Arc::new(LiveFindings::new(Some(dir.to_path_buf())));
    if opts.keep_history == KeepHistory::Violations {
        let filter = LiveCheck::keeping(header.clone()).into_filter(findings.clone());
        let spool = SpoolOptions { filter: Some(Box::new(filter)), ..SpoolOptions::default() };
        return Ok((Some(Started { findings, thread: None }), spool));
    }
    let (tap, thread) = LiveCheck::new(header.clone())
        .spawn(findings.clone())
        .map_err(|source| AppError::Io { path: "the live check's thread".into(), source })?;
    Ok((Some(Started { findings, thread: Some(thread) }), SpoolOptions { tap: Some(tap), ..SpoolOptions::default() }))
}

/// The stop signal the load follows: `stop` itself, or with `--fail-fast` a signal of the run's
/// own that follows `stop` and also stops at the first violation `live` finds.
pub(super) fn stop_signal(stop: StopSignal, live: Option<&Started>, fail_fast: bool) -> StopSignal {
    let Some(live) = live.filter(|_| fail_fast) else { return stop };
    let (trigger, own) = StopSignal::new();
    let trigger = Arc::new(trigger);
    let on_violation = trigger.clone();
    live.findings.on_first(move |_| on_violation.stop());
    tokio::spawn(async move {
        stop.stopped().await;
        trigger.stop();
        stop.aborted().await;
        trigger.abort();
    });
    own
}

impl Started {
    /// Waits for the check's thread, which ends with the history writer (call it after the
    /// writer finished): its last `invariants.json` is written before the end check's, which
    /// holds every violation. With `--fail-fast`, a first violation names the stop it caused
    /// ([`Interruption::FailFast`]; a violation found after the load ended stops nothing and
    /// names nothing); returns true when one was found, whose keys are then the evidence.
    pub(super) fn finish(self, fail_fast: bool, interrupted: &mut Option<Interruption>) -> bool {
        if let Some(thread) = self.thread {
            let _ = thread.join();
        }
        let Some(first) = self.findings.first().filter(|_| fail_fast) else { return false };
        if matches!(interrupted, Some(Interruption::Stopped)) {
            let job = first.job.as_deref().unwrap_or("-");
            *interrupted = Some(Interruption::FailFast(format!(
                "{} in queue {}, job {job}: expected {}; found {}",
                first.invariant.id(),
                first.queue,
                first.expected,
                first.found
            )));
        }
        true
    }
}
