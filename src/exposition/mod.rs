//! The metrics endpoint (`--metrics-addr`): Prometheus text exposition of a run while it lasts.
//!
//! Off the hot path by construction: nothing here is touched per request. The figures are the
//! ones the run already makes once a second, posted to one [`Board`]:
//!
//! ```text
//! Reporter tick (1/s) ── LiveSnapshot { totals: Arc<Cumulative> } ─┐
//! coordinator (1/s) ──── queue depths ──────────────── session ────┼──▶ Board (Mutex, 1 write/s)
//! Probe round (1/s) ──── watch::Receiver<Vec<Row>> (server.csv) ───┤
//! live check ─────────── Arc<LiveFindings> (violations found) ──────┘        │
//!                                                                           ▼ per scrape
//! HTTP thread (tiny_http) ── GET /metrics ── encode::Families (prometheus-client, OpenMetrics)
//! ```
//!
//! The counters and histograms are the measured part of the run (warmup excluded), as in
//! summary.json; the reporter folds an interval into them when it closes (2-3 s after it
//! ends), and [`Board::finish`] posts the finished run's totals, the very figures summary.json
//! is written from. The endpoint serves that final state until it is dropped (`--metrics-linger`
//! holds it up after the run so a last scrape sees it).

mod encode;
mod server;
mod tick;

pub use server::{MetricsEndpoint, MetricsEndpointError};
pub use tick::Tick;

use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::watch;

use crate::check::live::LiveFindings;
use crate::load::coordinator::Depths;
use crate::metrics::Cumulative;
use crate::probe::Row;

/// What `emq_run_info` labels: the run being watched.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunInfo {
    /// The scenario's name.
    pub scenario: String,
    /// The run's seed.
    pub seed: u64,
    /// The target URL, its password masked (`redis://user:***@host:port/db`).
    pub target: String,
    /// The queue protocol (`echomq`, `bullmq`).
    pub protocol: String,
}

/// The latest figures of the run, written about once a second by the run and read by every
/// scrape (each takes a copy of the few pointers and arrays, then encodes without the lock).
#[derive(Debug, Default)]
pub struct Board {
    state: Mutex<State>,
}

/// One scrape's view of the board.
#[derive(Clone, Debug, Default)]
struct State {
    info: Option<RunInfo>,
    tick: Option<Tick>,
    totals: Option<Arc<Cumulative>>,
    server: Option<watch::Receiver<Vec<Row>>>,
    violations: Option<Arc<LiveFindings>>,
    finished: bool,
}

impl Board {
    /// Sets the labels of `emq_run_info`.
    pub fn set_info(&self, info: RunInfo) {
        self.lock().info = Some(info);
    }

    /// Posts one second of the run: its rates, depths and faults, and the totals the reporter
    /// folded (kept from the last tick that had them when this one has none).
    pub fn post(&self, tick: Tick, totals: Option<Arc<Cumulative>>) {
        let mut state = self.lock();
        state.tick = Some(tick);
        if totals.is_some() {
            state.totals = totals;
        }
        state.finished = false;
    }

    /// Reads the server figures (server.csv's rows) from the probe's latest round.
    pub fn watch_server(&self, rows: watch::Receiver<Vec<Row>>) {
        self.lock().server = Some(rows);
    }

    /// Reads the live check's findings (`emq_violations_total`) at each scrape.
    pub fn watch_violations(&self, findings: Arc<LiveFindings>) {
        self.lock().violations = Some(findings);
    }

    /// Posts the finished run's totals (what summary.json is written from) and, when read,
    /// its queue depths after the drain (summary.json's `depths_end`, which the last second's
    /// tick predates); `emq_run_finished` becomes 1 and the probe is no longer read.
    pub fn finish(&self, totals: Cumulative, depths_end: Option<Depths>) {
        let mut state = self.lock();
        state.totals = Some(Arc::new(totals));
        if let Some(depths) = depths_end {
            state.tick.get_or_insert_with(Tick::default).depths = Some(depths);
        }
        state.finished = true;
        state.server = None;
    }

    /// A copy of the board for one scrape.
    fn snapshot(&self) -> State {
        self.lock().clone()
    }

    /// The state; a writer that panicked leaves figures that are still whole (plain values).
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests;
