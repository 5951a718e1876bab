//! How a run is asked to end early, and how it says why it ended early.
//!
//! A stop request has two levels, as in most long-running tools a user interrupts (cargo,
//! Jepsen's test runner): the first Ctrl-C/SIGTERM/SIGHUP *stops* (load ends, the check, the
//! results folder and the cleanup run as usual); a second one *aborts* (everything that waits
//! on the server is cut short, what can be written is written, the run's keys are kept).

use std::future::Future;
use std::time::Duration;
use tokio::sync::watch;

/// Level 1: stop the load, finish normally.
const STOP: u8 = 1;
/// Level 2: stop at once.
const ABORT: u8 = 2;

/// The receiving end of a stop request; clones share it. Cheap to poll (a watch channel).
#[derive(Clone, Debug)]
pub struct StopSignal {
    level: watch::Receiver<u8>,
}

/// The sending end: [`StopTrigger::stop`] for the first request, [`StopTrigger::abort`] for
/// the second.
#[derive(Debug)]
pub struct StopTrigger {
    level: watch::Sender<u8>,
}

impl StopTrigger {
    /// Asks the run to stop (level 1; never lowers a level already reached).
    pub fn stop(&self) {
        self.level.send_if_modified(|l| std::mem::replace(l, (*l).max(STOP)) < STOP);
    }

    /// Asks the run to stop at once (level 2).
    pub fn abort(&self) {
        self.level.send_if_modified(|l| std::mem::replace(l, ABORT) < ABORT);
    }
}

impl StopSignal {
    /// A linked trigger and signal.
    pub fn new() -> (StopTrigger, StopSignal) {
        let (tx, rx) = watch::channel(0);
        (StopTrigger { level: tx }, StopSignal { level: rx })
    }

    /// A signal that stops (level 1, never aborts) when `shutdown` resolves: the library's
    /// entry points take a plain future, e.g. `std::future::pending()` in tests. Spawns a task
    /// on the current runtime.
    pub fn from_future(shutdown: impl Future<Output = ()> + Send + 'static) -> StopSignal {
        let (trigger, signal) = StopSignal::new();
        tokio::spawn(async move {
            shutdown.await;
            // The level stays readable after the sender is dropped (watch keeps the value).
            trigger.stop();
        });
        signal
    }

    /// Resolves once a stop (or abort) was asked for.
    pub async fn stopped(&self) {
        let mut rx = self.level.clone();
        if rx.wait_for(|l| *l >= STOP).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Resolves once an abort was asked for.
    pub async fn aborted(&self) {
        let mut rx = self.level.clone();
        if rx.wait_for(|l| *l >= ABORT).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// True once an abort was asked for.
    pub fn is_aborted(&self) -> bool {
        *self.level.borrow() >= ABORT
    }

    /// Runs `work` unless an abort comes first: `None` when aborted (before or during it).
    pub async fn unless_aborted<T>(&self, work: impl Future<Output = T>) -> Option<T> {
        if self.is_aborted() {
            return None;
        }
        tokio::select! {
            biased;
            _ = self.aborted() => None,
            out = work => Some(out),
        }
    }
}

/// A plain future as a stop signal (see [`StopSignal::from_future`]): what tests and other
/// library callers pass.
impl<F: Future<Output = ()> + Send + 'static> From<F> for StopSignal {
    fn from(shutdown: F) -> StopSignal {
        StopSignal::from_future(shutdown)
    }
}

/// Why a run ended before its plan was carried out (exit 1). Faults the run rode through are
/// not interruptions: they are [`crate::faults::FaultsSeen`], and the checker and thresholds
/// judge the run. The two are kept apart as types, not strings.
#[derive(Debug, Clone, PartialEq)]
pub enum Interruption {
    /// A stop signal: the load ended early, the check and cleanup ran.
    Stopped,
    /// A second stop signal: everything that waits on the server was cut short; the check and
    /// the cleanup were skipped and the run's keys kept.
    Aborted,
    /// The target stayed unreachable for the whole `--give-up` window.
    GaveUp {
        /// The window.
        window: Duration,
        /// Seconds into the run when the target was first found unreachable.
        since_s: f64,
        /// The last error.
        error: String,
    },
    /// A load thread could not connect before the start.
    Connect(String),
    /// A load thread died (a bug: it panicked).
    ThreadDied,
    /// The server could not be read at the end of the run: the check cannot run.
    EndUnreadable(String),
    /// `--fail-fast`: the live check found a violation (named here) and the load stopped; the
    /// check ran, the run's keys were kept as the evidence.
    FailFast(String),
}

impl Interruption {
    /// A stable word for summary.json's `interrupt_kind`.
    pub fn kind(&self) -> &'static str {
        match self {
            Interruption::Stopped => "stopped",
            Interruption::Aborted => "aborted",
            Interruption::GaveUp { .. } => "gave_up",
            Interruption::Connect(_) => "connect",
            Interruption::ThreadDied => "thread_died",
            Interruption::EndUnreadable(_) => "end_unreadable",
            Interruption::FailFast(_) => "fail_fast",
        }
    }
}

impl std::fmt::Display for Interruption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Interruption::Stopped => f.write_str("interrupted by a stop signal (Ctrl-C, SIGTERM or SIGHUP)"),
            Interruption::Aborted => f.write_str(
                "aborted by a second stop signal: the check and the cleanup were skipped, the run's keys kept",
            ),
            Interruption::GaveUp { window, since_s, error } => write!(
                f,
                "the target was unreachable for {} (--give-up), from {since_s:.1}s into the run: {error}",
                humantime::format_duration(*window)
            ),
            Interruption::Connect(err) => write!(f, "a load thread could not connect: {err}"),
            Interruption::ThreadDied => f.write_str("a load thread panicked"),
            Interruption::EndUnreadable(err) => {
                write!(f, "the server could not be read at the end of the run: {err}")
            }
            Interruption::FailFast(violation) => write!(f, "stopped at the first violation (--fail-fast): {violation}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn levels_rise_and_never_fall() {
        let (trigger, signal) = StopSignal::new();
        assert!(!signal.is_aborted());
        assert_eq!(signal.unless_aborted(async { 7 }).await, Some(7));
        trigger.stop();
        signal.stopped().await;
        assert!(!signal.is_aborted());
        trigger.abort();
        trigger.stop();
        assert!(signal.is_aborted(), "a later stop does not lower an abort");
        signal.aborted().await;
        assert_eq!(signal.unless_aborted(std::future::pending::<u8>()).await, None);
    }

    #[tokio::test]
    async fn an_abort_cuts_work_short() {
        let (trigger, signal) = StopSignal::new();
        let work = signal.unless_aborted(tokio::time::sleep(Duration::from_secs(3600)));
        let abort = async {
            tokio::time::sleep(Duration::from_millis(10)).await;
            trigger.abort();
        };
        let (out, ()) = tokio::join!(work, abort);
        assert_eq!(out, None);
    }
}
