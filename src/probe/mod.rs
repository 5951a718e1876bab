//! The server sampled every second during a run: per node, one INFO call (CPU, memory, clients,
//! commands, commandstats, latencystats) on connections of its own, on a thread of its own.
//!
//! Off the measured load by construction: the probe opens its own control plane
//! ([`Plane::open_again`]) on its own thread and current-thread runtime, as the nemesis does,
//! so neither a slow INFO nor the load's threads wait on each other; its cost is one INFO per
//! node per second, reported in `summary.json` (`server_samples.cost`). A node that does not
//! answer within the interval gets a row without figures for that second (a frozen server
//! shows as a gap, not as a stall of the probe), and the probe goes on.

pub mod reading;
pub mod series;

pub use reading::{Figures, Reading, Row};
pub use series::{ServerSamples, ServerSeries};

use crate::plane::Plane;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::watch;

/// How often the server is sampled.
pub const EVERY: Duration = Duration::from_secs(1);

/// How the probe is told to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// Not yet: sample on.
    Running,
    /// The run ended: finish the round in flight, then stop.
    Finish,
    /// The run was aborted: stop at once.
    Abort,
}

/// The probe thread of one run; [`Probe::finish`] stops it and returns what it sampled.
pub struct Probe {
    stop: watch::Sender<Ending>,
    thread: std::thread::JoinHandle<ServerSeries>,
    latest: watch::Receiver<Vec<Row>>,
}

impl Probe {
    /// Starts sampling every node of `plane` every `every`, on a new thread with its own
    /// connections. The rows' times are s since the Unix epoch until [`ServerSeries::rebase`].
    ///
    /// Panics when the OS cannot start a thread.
    pub fn start(plane: &Plane, every: Duration) -> Probe {
        let (stop, stopped) = watch::channel(Ending::Running);
        let (latest_tx, latest) = watch::channel(Vec::new());
        let plane = plane.clone();
        let thread = crate::side_thread::spawn("emq-probe", move || sample(plane, every, stopped, latest_tx));
        Probe { stop, thread, latest }
    }

    /// The rows of the last round (one per node that answered), replaced once per round: what
    /// the metrics endpoint shows. The rows are copied only while a receiver is held.
    pub fn latest(&self) -> watch::Receiver<Vec<Row>> {
        self.latest.clone()
    }

    /// Stops the probe and returns its series. The round of INFO calls in flight, if any,
    /// completes (each call is bounded by the sampling interval), so the last second has a
    /// row for every node; after an abort (`aborted`) it is cut short: an abort never waits on
    /// the server.
    pub async fn finish(self, aborted: bool) -> ServerSeries {
        let _ = self.stop.send(if aborted { Ending::Abort } else { Ending::Finish });
        let thread = self.thread;
        tokio::task::spawn_blocking(move || thread.join()).await.ok().and_then(Result::ok).unwrap_or_default()
    }
}

/// The probe's loop: a first reading per node as the baseline, then one row per node per tick.
async fn sample(
    plane: Plane,
    every: Duration,
    mut stopped: watch::Receiver<Ending>,
    latest: watch::Sender<Vec<Row>>,
) -> ServerSeries {
    let mut series = ServerSeries::default();
    // Cut short by the stop: a server frozen while these connections open (a slow start on a
    // loaded machine puts the open late) would otherwise hold `finish`, and so the run's end,
    // for the connect and reply timeouts.
    let opened = tokio::select! {
        opened = plane.open_again() => opened,
        _ = stopped.wait_for(|s| *s != Ending::Running) => {
            series.note("the server was not sampled: the run ended before the probe's connections opened".into());
            return series;
        }
    };
    let own = match opened {
        Ok(own) => own,
        Err(err) => {
            series.note(format!("the server was not sampled: the probe's connections failed: {err}"));
            return series;
        }
    };
    let nodes: Vec<String> = own.topology().nodes.iter().map(|n| n.address.clone()).collect();
    let conns = own.nodes();
    let mut last: Vec<Option<(Instant, Reading)>> = vec![None; nodes.len()];
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stopped.wait_for(|s| *s != Ending::Running) => break,
        }
        let began = Instant::now();
        let round = series.rows.len();
        let t_s = epoch_secs(SystemTime::now());
        // Every node at once: one slow node does not delay the others' readings.
        let mut calls = tokio::task::JoinSet::new();
        for (index, conn) in conns.iter().cloned().enumerate() {
            calls.spawn(async move {
                let mut conn = conn;
                let mut cmd = redis::cmd("INFO");
                for section in reading::SECTIONS {
                    cmd.arg(section);
                }
                let reply = tokio::time::timeout(every, cmd.query_async::<String>(&mut conn)).await;
                (index, Instant::now(), reply)
            });
        }
        loop {
            // An abort cuts the round short: it never waits out an INFO.
            let done = tokio::select! {
                done = calls.join_next() => done,
                _ = stopped.wait_for(|s| *s == Ending::Abort) => None,
            };
            let Some(done) = done else { break };
            let Ok((index, at, reply)) = done else { continue };
            let node = &nodes[index];
            let reading = match reply {
                Ok(Ok(text)) => reading::parse(&text),
                Ok(Err(err)) => {
                    series.note(format!("INFO on {node} failed ({err}): that node's rows have no figures"));
                    series.rows.push(Row { t_s, node: node.clone(), figures: None });
                    continue;
                }
                Err(_) => {
                    series.rows.push(Row { t_s, node: node.clone(), figures: None });
                    continue;
                }
            };
            if !reading.has_latencystats {
                series.note(format!(
                    "INFO latencystats: not reported by {node} (an older server): no server-side percentiles"
                ));
            }
            let previous = last[index].replace((at, reading));
            if let (Some((then, before)), Some((_, after))) = (previous, last[index].as_ref()) {
                let figures = Figures::between(&before, after, at.duration_since(then).as_secs_f64());
                series.rows.push(Row { t_s, node: node.clone(), figures: Some(figures) });
            }
        }
        series.cost.call_sets += 1;
        series.cost.wall_s += began.elapsed().as_secs_f64();
        // The probe's own receiver is held by `Probe`: more than one means someone else reads.
        if latest.receiver_count() > 1 {
            latest.send_replace(series.rows[round..].iter().filter(|r| r.figures.is_some()).cloned().collect());
        }
    }
    series.cost.cpu_s = {
        let (user, sys) = crate::metrics::cpu::cpu_seconds(crate::metrics::cpu::CpuOf::Thread);
        user + sys
    };
    series.rows.sort_by(|a, b| a.t_s.total_cmp(&b.t_s).then_with(|| a.node.cmp(&b.node)));
    series
}

/// `at` in s since the Unix epoch (the probe's clock before [`ServerSeries::rebase`]).
pub fn epoch_secs(at: SystemTime) -> f64 {
    at.duration_since(SystemTime::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}
