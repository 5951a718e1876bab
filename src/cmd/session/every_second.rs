//! What a repetition does with the load's once-a-second call: the progress line, the metrics
//! endpoint's tick, the queues' depths (kept for the results and streamed to depth.csv) and the
//! soak's growth samples.

use crate::exposition::{Board, Tick};
use crate::load::coordinator::Depths;
use crate::metrics::LiveSnapshot;
use crate::output::Progress;
use crate::probe::Row;
use crate::report::growth::{folder_bytes, own_rss, GrowthSample, GrowthSampler};
use crate::report::DepthSample;
use crate::scenario::Plan;
use std::path::Path;
use std::sync::{mpsc, Arc};
use std::time::SystemTime;
use tokio::sync::watch;

/// The per-second observer of one repetition's load, and what it gathered.
pub(super) struct EverySecond<'a> {
    pub(super) plan: &'a Plan,
    /// The results folder, whose size the growth samples.
    pub(super) dir: &'a Path,
    pub(super) progress: &'a Progress,
    pub(super) board: Option<Arc<Board>>,
    /// The probe's latest round, whose servers' memory the growth samples.
    pub(super) server_rows: watch::Receiver<Vec<Row>>,
    /// depth.csv's stream (s since the run start).
    pub(super) live_depths: mpsc::Sender<DepthSample>,
    /// The endpoint's previous tick, which its rates are taken against.
    pub(super) last_tick: Option<Tick>,
    /// The queues' depths read each second, s since the epoch (rebased once the run ends).
    pub(super) depth_log: Vec<DepthSample>,
    /// The soak's growth: the server's memory, the harness's and the results folder's, sampled
    /// every few seconds.
    pub(super) growth: GrowthSampler,
}

impl EverySecond<'_> {
    /// Takes one second of the load: `live` its figures so far, `depths` the queues' depths
    /// when they could be read.
    pub(super) fn second(&mut self, live: &LiveSnapshot, depths: Option<Depths>) {
        let t_s = live.elapsed.as_secs_f64();
        let server_rows = &self.server_rows;
        let dir = self.dir;
        self.growth.offer(t_s, || GrowthSample {
            t_s,
            server_memory: {
                let rows = server_rows.borrow();
                let up: Vec<u64> = rows.iter().filter_map(|r| Some(r.figures.as_ref()?.level.used_memory)).collect();
                (!up.is_empty()).then(|| up.iter().sum())
            },
            client_rss: own_rss(),
            results: folder_bytes(dir),
        });
        if let Some(depths) = depths {
            self.depth_log.push(DepthSample { t_s: crate::probe::epoch_secs(SystemTime::now()), depths });
            let _ = self.live_depths.send(DepthSample { t_s, depths });
        }
        if let Some(board) = &self.board {
            let tick = Tick::of(self.plan, live, depths, self.last_tick.as_ref());
            board.post(tick.clone(), live.totals.clone());
            self.last_tick = Some(tick);
        }
        self.progress.update(live, depths)
    }
}
