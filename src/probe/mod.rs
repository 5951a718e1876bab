//! The server sampled every second during a run: per node, one INFO call (CPU, memory, clients,
//! commands, commandstats, latencystats) on connections of its own, on a thread of its own.
//!
//! Off the measured load by construction: the probe opens its own control plane
//! ([`Plane::open_again`]) on its own thread and current-thread runtime, as the nemesis does,
//! so neither a slow INFO nor the load's threads wait on each other; its cost is one INFO per
//! node per second, reported in `summary.json` (`server_samples.cost`). A node that does not
//! answer within the interval gets a row without figures for that second (a frozen server
//! shows as a gap, not as a stall of the probe), and the probe goes on.
//!
//! Given a folder, the probe keeps no row in memory while it runs: each goes to a scratch file
//! there (`.server-rows.*.jsonl`) and the rows are read back when it finishes, so a run of
//! days holds no more of them than a run of seconds (memory keeps only a row the file could
//! not take).

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
    /// connections; its rows wait in a scratch file in `scratch` until [`finish`](Self::finish)
    /// (in memory without one, or when the file cannot be made), and each also goes to `tap`
    /// as it is taken (the results folder's server.csv, appended as the run goes). The rows'
    /// times are s since the Unix epoch until [`ServerSeries::rebase`].
    ///
    /// Panics when the OS cannot start a thread.
    pub fn start(
        plane: &Plane,
        every: Duration,
        scratch: Option<&std::path::Path>,
        tap: Option<std::sync::mpsc::Sender<Row>>,
    ) -> Probe {
        let (stop, stopped) = watch::channel(Ending::Running);
        let (latest_tx, latest) = watch::channel(Vec::new());
        let plane = plane.clone();
        let rows = RowStore::new(scratch, tap);
        let thread = crate::side_thread::spawn("emq-probe", move || sample(plane, every, stopped, latest_tx, rows));
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
    mut rows: RowStore,
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
        let mut round: Vec<Row> = Vec::new();
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
                    round.push(Row { t_s, node: node.clone(), figures: None });
                    continue;
                }
                Err(_) => {
                    round.push(Row { t_s, node: node.clone(), figures: None });
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
                round.push(Row { t_s, node: node.clone(), figures: Some(figures) });
            }
        }
        series.cost.call_sets += 1;
        series.cost.wall_s += began.elapsed().as_secs_f64();
        // The probe's own receiver is held by `Probe`: more than one means someone else reads.
        if latest.receiver_count() > 1 {
            latest.send_replace(round.iter().filter(|r| r.figures.is_some()).cloned().collect());
        }
        rows.keep(round, &mut series);
    }
    series.rows = rows.read_back(&mut series);
    series.cost.cpu_s = {
        let (user, sys) = crate::metrics::cpu::cpu_seconds(crate::metrics::cpu::CpuOf::Thread);
        user + sys
    };
    series.rows.sort_by(|a, b| a.t_s.total_cmp(&b.t_s).then_with(|| a.node.cmp(&b.node)));
    series
}

/// Where the probe's rows wait until it finishes: a scratch file (one JSON line a row, each
/// written whole in one call; after a write that failed, the next starts on a line of its own),
/// or memory.
struct RowStore {
    /// The scratch file, its own handle, and whether the last write failed; `None`: the rows
    /// stay in `kept`.
    file: Option<(tempfile::NamedTempFile, std::fs::File, bool)>,
    kept: Vec<Row>,
    /// Where each row also goes as it is kept; dropped once its receiver is gone.
    tap: Option<std::sync::mpsc::Sender<Row>>,
}

impl RowStore {
    /// A scratch file in `dir` when one is given and can be made, else memory; each row also to
    /// `tap`.
    fn new(dir: Option<&std::path::Path>, tap: Option<std::sync::mpsc::Sender<Row>>) -> RowStore {
        let file = dir
            .and_then(|dir| tempfile::Builder::new().prefix(".server-rows.").suffix(".jsonl").tempfile_in(dir).ok())
            .and_then(|f| {
                let out = f.as_file().try_clone().ok()?;
                Some((f, out, false))
            });
        RowStore { file, kept: Vec::new(), tap }
    }

    /// Keeps `round`'s rows; a row that cannot be written is kept in memory (said once in
    /// `series`' notes).
    fn keep(&mut self, round: Vec<Row>, series: &mut ServerSeries) {
        use std::io::Write;
        if let Some(tap) = &self.tap {
            if round.iter().any(|row| tap.send(row.clone()).is_err()) {
                self.tap = None;
            }
        }
        let Some((_, out, broken)) = self.file.as_mut() else {
            self.kept.extend(round);
            return;
        };
        for row in round {
            let mut line = if *broken { b"\n".to_vec() } else { Vec::new() };
            let written = serde_json::to_writer(&mut line, &row).map_err(std::io::Error::from).and_then(|()| {
                line.push(b'\n');
                out.write_all(&line)
            });
            *broken = written.is_err();
            if let Err(e) = written {
                series.note(format!("the server's rows could not go to their scratch file ({e}): kept in memory"));
                self.kept.push(row);
            }
        }
    }

    /// Every row kept: the file's (a line that does not read, from a write that failed, is
    /// left out: its row is among those memory kept), then memory's; what cannot be read back
    /// is said in `series`' notes.
    fn read_back(self, series: &mut ServerSeries) -> Vec<Row> {
        use std::io::BufRead;
        let Some((file, _, _)) = self.file else { return self.kept };
        let mut rows = Vec::new();
        let read = std::fs::File::open(file.path()).and_then(|input| {
            for line in std::io::BufReader::new(input).lines() {
                if let Ok(row) = serde_json::from_str::<Row>(&line?) {
                    rows.push(row);
                }
            }
            Ok(())
        });
        if let Err(e) = read {
            series.note(format!("the server's rows could not all be read back from their scratch file: {e}"));
        }
        rows.extend(self.kept);
        rows
    }
}

/// `at` in s since the Unix epoch (the probe's clock before [`ServerSeries::rebase`]).
pub fn epoch_secs(at: SystemTime) -> f64 {
    at.duration_since(SystemTime::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}
