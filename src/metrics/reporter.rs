//! The reporter: merges every task's intervals by index, keeps the totals, publishes a live view.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::mpsc::{self, UnboundedReceiver};
use tokio::sync::watch;

use super::{
    elapsed_us, interval_index, new_histogram, CompactHistogram, Cumulative, Flush, IntervalData, IntervalRecord,
    IntervalScript, JobCounter, MetricsSink, RunMetrics, ScriptTotals, INTERVAL_US,
};
use crate::lua::Script;

/// Seconds an interval stays open after its end for slow tasks' data, before it is folded into the
/// totals and compacted (a task flushes at its first reply after the boundary). Later data for a
/// closed interval is still merged, on a slower path.
const GRACE_INTERVALS: u64 = 2;
/// How long after a boundary the live snapshot of the interval just ended is taken.
const TICK_OFFSET: Duration = Duration::from_millis(250);

/// What the progress line shows; cheap to copy (fixed arrays and one shared pointer, no
/// allocation).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LiveSnapshot {
    /// Time since the run start at the snapshot.
    pub elapsed: Duration,
    /// Index of the interval the per-script figures describe (the last one that ended).
    pub interval: u64,
    /// True while that interval is part of the warmup.
    pub warmup: bool,
    /// Ok calls per second in that interval, by [`Script::index`].
    pub ops_per_sec: [f64; Script::COUNT],
    /// p99 ok latency in that interval, µs, by [`Script::index`] (0 when no ok call).
    pub p99_us: [u64; Script::COUNT],
    /// Failed calls since the run start (warmup included), all scripts and codes.
    pub errors_total: u64,
    /// Job counters since the run start (warmup included), by [`JobCounter::index`].
    pub jobs: [u64; JobCounter::COUNT],
    /// The measured totals so far in fixed buckets, when asked for with
    /// [`Reporter::expose_totals`] (the metrics endpoint); made at the tick, shared, never copied.
    pub totals: Option<Arc<Cumulative>>,
}

/// Receives [`Flush`]es, merges them per interval index, keeps cumulative totals (warmup excluded).
///
/// Drive it either with [`run`](Reporter::run) in a tokio task, or by hand (tests) with
/// [`drain`](Reporter::drain) and [`tick`](Reporter::tick); then [`finish`](Reporter::finish).
pub struct Reporter {
    start: Instant,
    start_wall: SystemTime,
    warmup_intervals: u64,
    rx: UnboundedReceiver<Flush>,
    open: BTreeMap<u64, Box<IntervalData>>,
    // Boxed on purpose: boxes move between `open`, `pool` and the tasks without copying the struct.
    #[allow(clippy::vec_box)]
    pool: Vec<Box<IntervalData>>,
    closed: BTreeMap<u64, IntervalRecord>,
    closed_below: u64,
    /// By [`Script::index`]; a script's totals are made at its first measured call (four
    /// histograms, up to 139 KB each: allocating them for every script cost more client CPU than
    /// a 10 000-request run itself).
    totals: Vec<Option<ScriptTotals>>,
    jobs: [u64; JobCounter::COUNT],
    warmup_jobs: [u64; JobCounter::COUNT],
    live: LiveSnapshot,
    live_tx: watch::Sender<LiveSnapshot>,
    /// Whether each tick also folds the totals into [`LiveSnapshot::totals`].
    expose: bool,
    /// Where each measured interval goes as it closes (the results folder's per-second files,
    /// written as the run goes); a second sent there is not kept in `closed`.
    tap: Option<std::sync::mpsc::Sender<ClosedInterval>>,
}

/// A measured interval as it closes, with what placing it in the run takes.
#[derive(Clone, Debug)]
pub struct ClosedInterval {
    /// Wall-clock time of the run start (interval 0).
    pub start_wall: SystemTime,
    /// Whole warmup intervals (never sent: only measured intervals are).
    pub warmup_intervals: u64,
    /// The interval: 1 s long (its length is cut only by the end of the run, which the run's
    /// own files then say).
    pub record: IntervalRecord,
}

impl Reporter {
    /// A reporter for a run starting at `start`, plus the sink recorders are made from.
    ///
    /// `warmup` is rounded **up** to whole seconds: intervals `0..ceil(warmup)` are shown live but
    /// kept out of every total and of the series (the driver should start measuring at a whole
    /// second; the reporter, not the tasks, applies the phase, so no flag is needed on the hot path).
    pub fn new(start: Instant, warmup: Duration) -> (Reporter, MetricsSink) {
        let (tx, rx) = mpsc::unbounded_channel();
        let (live_tx, _) = watch::channel(LiveSnapshot::default());
        let since_start = Instant::now().saturating_duration_since(start);
        let warmup_intervals = warmup.as_micros().div_ceil(u128::from(INTERVAL_US)) as u64;
        let reporter = Reporter {
            start,
            start_wall: SystemTime::now() - since_start,
            warmup_intervals,
            rx,
            open: BTreeMap::new(),
            pool: Vec::new(),
            closed: BTreeMap::new(),
            closed_below: 0,
            totals: Script::ALL.iter().map(|_| None).collect(),
            jobs: [0; JobCounter::COUNT],
            warmup_jobs: [0; JobCounter::COUNT],
            live: LiveSnapshot::default(),
            live_tx,
            tap: None,
            expose: false,
        };
        (reporter, MetricsSink { tx, start })
    }

    /// Sends every measured interval to `tap` as it closes, once, and keeps none of them: the
    /// series [`finish`](Self::finish) returns then holds only data merged into a second after
    /// it closed (from a task that stalled past the grace period), which the tap's owner adds
    /// to what it received (see `report::live::restore_series`).
    pub fn tap_closed(&mut self, tap: std::sync::mpsc::Sender<ClosedInterval>) {
        self.tap = Some(tap);
    }

    /// A receiver of the live snapshot, updated once a second by [`tick`](Reporter::tick).
    pub fn live(&self) -> watch::Receiver<LiveSnapshot> {
        self.live_tx.subscribe()
    }

    /// Makes every tick also fold the totals so far onto fixed buckets ([`LiveSnapshot::totals`]):
    /// one pass over each called script's histograms a second, on the reporter's task.
    pub fn expose_totals(&mut self) {
        self.expose = true;
    }

    /// Merge one flushed interval and send its emptied box back to its recorder.
    pub fn absorb(&mut self, flush: Flush) {
        let Flush { mut data, back } = flush;
        let k = data.index;
        self.live.errors_total += data.scripts.iter().map(|s| s.error_total()).sum::<u64>();
        for (d, s) in self.live.jobs.iter_mut().zip(&data.jobs) {
            *d += s;
        }
        if k < self.closed_below {
            self.absorb_late(&data);
        } else {
            let pool = &mut self.pool;
            let slot = self.open.entry(k).or_insert_with(|| {
                let mut b = pool.pop().unwrap_or_default();
                b.index = k;
                b
            });
            slot.merge_from(&data);
        }
        data.reset();
        // The recorder may be gone (task ended): then the box is simply freed.
        let _ = back.send(data);
    }

    /// Absorb every flush already waiting in the channel, without blocking.
    pub fn drain(&mut self) {
        while let Ok(flush) = self.rx.try_recv() {
            self.absorb(flush);
        }
    }

    /// Once a second: publish the snapshot of the interval that ended last and close intervals
    /// older than the grace period (fold them into the totals, compact their histograms).
    pub fn tick(&mut self, now: Instant) {
        let current = interval_index(self.start, now);
        if current >= 1 {
            self.publish(current - 1, now);
        }
        let close_below = current.saturating_sub(GRACE_INTERVALS);
        while let Some(entry) = self.open.first_entry() {
            if *entry.key() >= close_below {
                break;
            }
            let data = entry.remove();
            self.close(data);
        }
        self.closed_below = self.closed_below.max(close_below);
    }

    /// Run until every sink and recorder is dropped: absorb flushes as they come, tick once a
    /// second (250 ms after each boundary). Returns the reporter for [`finish`](Reporter::finish).
    pub async fn run(mut self) -> Reporter {
        let mut next = self.start + Duration::from_secs(1) + TICK_OFFSET;
        loop {
            tokio::select! {
                msg = self.rx.recv() => match msg {
                    Some(flush) => self.absorb(flush),
                    None => break,
                },
                _ = tokio::time::sleep_until(next.into()) => {
                    let now = Instant::now();
                    self.tick(now);
                    let k = interval_index(self.start, now);
                    next = self.start + Duration::from_secs(k + 1) + TICK_OFFSET;
                }
            }
        }
        self
    }

    /// Close everything and return the finished measurement. `end` is when the driver stopped the
    /// load; the measured duration is `end - (start + warmup)` and cuts the last interval short.
    pub fn finish(mut self, end: Instant) -> RunMetrics {
        self.drain();
        while let Some((_, data)) = self.open.pop_first() {
            self.close(data);
        }
        let end_us = elapsed_us(self.start, end);
        let warmup_us = self.warmup_intervals * INTERVAL_US;
        let mut intervals: Vec<IntervalRecord> = self.closed.into_values().collect();
        for rec in &mut intervals {
            if rec.start_us < end_us {
                rec.duration_us = (end_us - rec.start_us).min(INTERVAL_US);
            }
        }
        RunMetrics {
            start_wall: self.start_wall,
            warmup_intervals: self.warmup_intervals,
            measured_us: end_us.saturating_sub(warmup_us),
            scripts: self.totals.into_iter().flatten().collect(),
            intervals,
            jobs: self.jobs,
            warmup_jobs: self.warmup_jobs,
        }
    }

    /// Compute and publish the live view of interval `k` (as merged so far).
    fn publish(&mut self, k: u64, now: Instant) {
        self.live.elapsed = now.saturating_duration_since(self.start);
        self.live.interval = k;
        self.live.warmup = k < self.warmup_intervals;
        let data = self.open.get(&k);
        for script in Script::ALL {
            let s = data.map(|d| &d.scripts[script.index()]);
            self.live.ops_per_sec[script.index()] = s.map_or(0.0, |s| s.ok as f64);
            self.live.p99_us[script.index()] = s.and_then(|s| s.latency()).map_or(0, |h| h.value_at_quantile(0.99));
        }
        if self.expose {
            self.live.totals = Some(Arc::new(Cumulative::of(self.totals.iter().flatten(), self.live.jobs)));
        }
        self.live_tx.send_replace(self.live.clone());
    }

    /// Fold a finished interval into the totals and the series (or, when tapped, send it to the
    /// tap instead of keeping it), then recycle its box.
    fn close(&mut self, mut data: Box<IntervalData>) {
        let k = data.index;
        if k < self.warmup_intervals {
            add(&mut self.warmup_jobs, &data.jobs);
        } else {
            add(&mut self.jobs, &data.jobs);
            for ((t, s), script) in self.totals.iter_mut().zip(&data.scripts).zip(Script::ALL) {
                if s.is_empty() {
                    continue;
                }
                let t = t.get_or_insert_with(|| ScriptTotals::new(script));
                t.ok += s.ok;
                t.late += s.late;
                add(&mut t.errors, &s.errors);
                let pairs = [
                    (&mut t.latency, s.latency()),
                    (&mut t.service, s.service()),
                    (&mut t.error_latency, s.error_latency()),
                    (&mut t.send_lag, s.send_lag()),
                ];
                for (dst, src) in pairs {
                    if let Some(src) = src {
                        dst.add(src).expect("a growable histogram takes any other");
                    }
                }
            }
            let rec = record(&data);
            match self.tap.as_ref().filter(|_| k >= self.closed_below) {
                // The second goes to the tap whole (the results folder's per-second files and
                // their read-back at the end), and the series keeps none of it: a run's memory
                // does not grow with its length by its seconds.
                Some(tap) => {
                    let closed = ClosedInterval {
                        start_wall: self.start_wall,
                        warmup_intervals: self.warmup_intervals,
                        record: rec,
                    };
                    if let Err(std::sync::mpsc::SendError(closed)) = tap.send(closed) {
                        // Nothing streams it: the series keeps it after all.
                        self.closed.insert(k, closed.record);
                        self.tap = None;
                    }
                }
                None => {
                    self.closed.insert(k, rec);
                }
            }
        }
        data.reset();
        self.pool.push(data);
    }

    /// Data for an interval already closed (a task stalled past the grace period): merge it the
    /// slow way, by re-opening the compacted record. Rare, and never on a load task.
    fn absorb_late(&mut self, data: &IntervalData) {
        let k = data.index;
        let mut merged = self.pool.pop().unwrap_or_default();
        merged.index = k;
        if let Some(rec) = self.closed.remove(&k) {
            merged.jobs = rec.jobs;
            for s in &rec.scripts {
                let dst = &mut merged.scripts[s.script.index()];
                dst.ok = s.ok;
                dst.late = s.late;
                dst.errors = s.errors;
                if let Ok(h) = s.latency.decode() {
                    let slot = dst.latency.get_or_insert_with(new_histogram);
                    slot.add(&h).expect("a growable histogram takes any other");
                }
            }
        }
        // Totals already hold the closed part: add only the new data to them, then rebuild the record.
        let mut fresh = self.pool.pop().unwrap_or_default();
        fresh.index = k;
        fresh.merge_from(data);
        merged.merge_from(data);
        self.close(fresh);
        if k >= self.warmup_intervals {
            self.closed.insert(k, record(&merged));
        }
        merged.reset();
        self.pool.push(merged);
    }
}

/// `dst[i] += src[i]`.
fn add<const N: usize>(dst: &mut [u64; N], src: &[u64; N]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d += s;
    }
}

/// The series entry of a merged interval: counts, p50/p99/max and the compacted latency histogram.
fn record(data: &IntervalData) -> IntervalRecord {
    let scripts = Script::ALL
        .into_iter()
        .zip(&data.scripts)
        .filter(|(_, s)| !s.is_empty())
        .map(|(script, s)| {
            let h = s.latency().filter(|h| !h.is_empty());
            IntervalScript {
                script,
                ok: s.ok,
                errors: s.errors,
                late: s.late,
                p50_us: h.map_or(0, |h| h.value_at_quantile(0.5)),
                p99_us: h.map_or(0, |h| h.value_at_quantile(0.99)),
                max_us: h.map_or(0, |h| h.max()),
                latency: h.map(CompactHistogram::encode).unwrap_or_default(),
            }
        })
        .collect();
    IntervalRecord {
        index: data.index,
        start_us: data.index * INTERVAL_US,
        duration_us: INTERVAL_US,
        scripts,
        jobs: data.jobs,
    }
}
