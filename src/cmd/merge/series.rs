//! The fleet's per-second series: the shards' `latency.hlog`, `intervals.csv` and `queue.csv`
//! added second by second. Every shard's seconds count from its own start, which the barrier
//! put at the same server time `t0` (within each shard's `start_offset_ms`), so second `k` of
//! every shard is the same second of the fleet.

use crate::error::AppError;
use crate::report::hlog::{read_log, write_intervals};
use crate::report::queue_csv::QueueRow;
use crate::report::write_text;
use hdrhistogram::Histogram;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// Per second and script of intervals.csv: (ok, errors, ops/s, faults, the load shape's
/// (stage, intended rate)).
type IntervalSums = BTreeMap<(u64, String), (u64, u64, f64, Vec<String>, Shape)>;
/// Per second of queue.csv: (shards that reported it, the depths with `None` once any shard
/// lacked one, the counters, the stage).
type QueueSums = BTreeMap<u64, (usize, [Option<u64>; 5], [u64; 4], Option<usize>)>;
/// A second's stage (the same in every shard: the stages follow the fleet's common start) and
/// intended rate (each shard's part of the fleet's, so their sum is the fleet's).
type Shape = (Option<usize>, Option<f64>);

/// One row of a shard's intervals.csv (the columns the fleet adds up).
#[derive(Debug, Deserialize)]
struct IntervalRow {
    t_s: u64,
    script: String,
    ok: u64,
    errors: u64,
    ops_per_sec: f64,
    #[serde(default)]
    faults: String,
    #[serde(default)]
    stage: Option<usize>,
    #[serde(default)]
    intended_rate: Option<f64>,
}

fn usage(path: &Path, e: impl std::fmt::Display) -> AppError {
    AppError::Usage(format!("{}: {e}", path.display()))
}

fn rows<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Vec<T>, AppError> {
    let mut reader = csv::Reader::from_path(path).map_err(|e| usage(path, e))?;
    reader.deserialize().collect::<Result<Vec<T>, _>>().map_err(|e| usage(path, e))
}

/// Writes the fleet's `latency.hlog`, `intervals.csv` and `queue.csv` into `out` from the
/// shards' folders `dirs`, its time base `start` (the earliest shard's start); `shared` when
/// the shards drove the same queues (their depths are one reading, not a sum). A file that
/// no shard has is not written (report.html says it is missing); one that some shards lack is
/// named in the returned notes, and the sums are of the shards that have it.
///
/// Errors: a shard's file that is there but does not read, or a merged file not written.
pub fn merge_series(dirs: &[&Path], out: &Path, start: SystemTime, shared: bool) -> Result<Vec<String>, AppError> {
    let mut notes = Vec::new();
    let present = |name: &str, notes: &mut Vec<String>| -> Vec<std::path::PathBuf> {
        let (have, lack): (Vec<_>, Vec<_>) = dirs.iter().map(|d| d.join(name)).partition(|p| p.is_file());
        if !have.is_empty() && !lack.is_empty() {
            notes.push(format!("{name}: missing in {} shard folder(s), the fleet's sums leave them out", lack.len()));
        }
        have
    };
    // Per second and script: the ok latency histograms added, and the longest of the shards'
    // lengths of that interval (each shard's last one is shorter than a second, by its own
    // amount).
    let mut seconds: BTreeMap<(u64, String), (Histogram<u64>, f64)> = BTreeMap::new();
    for path in present(crate::report::hlog::LATENCY_HLOG, &mut notes) {
        for e in read_log(&path).map_err(|e| AppError::Usage(e.to_string()))? {
            let key = (e.start_s.round() as u64, e.tag.clone());
            match seconds.get_mut(&key) {
                Some((h, length)) => {
                    h.add(&e.histogram).map_err(|err| usage(&path, format!("{}: {err:?}", e.tag)))?;
                    *length = length.max(e.length_s);
                }
                None => {
                    seconds.insert(key, (e.histogram, e.length_s));
                }
            }
        }
    }
    if !seconds.is_empty() {
        let entries: Vec<(String, Duration, Duration, Histogram<u64>)> = seconds
            .iter()
            .map(|((t, tag), (h, length))| {
                (tag.clone(), Duration::from_secs(*t), Duration::from_secs_f64(length.clamp(0.0, 1.0)), h.clone())
            })
            .collect();
        let comment =
            "emq-bench fleet latency per script per second: the shards' ok calls together, us from the intended send";
        write_intervals(&out.join(crate::report::hlog::LATENCY_HLOG), comment, start, &entries)
            .map_err(AppError::Report)?;
    }
    let interval_files = present("intervals.csv", &mut notes);
    if !interval_files.is_empty() {
        // (ok, errors, ops/s, faults): each shard's ops/s is over its own interval's length (its last one
        // shorter than a second), so their sum is the fleet's rate in that second.
        let mut sums = IntervalSums::new();
        for path in interval_files {
            for r in rows::<IntervalRow>(&path)? {
                let entry = sums.entry((r.t_s, r.script)).or_default();
                entry.0 += r.ok;
                entry.1 += r.errors;
                entry.2 += r.ops_per_sec;
                entry.4 .0 = entry.4 .0.or(r.stage);
                if let Some(rate) = r.intended_rate {
                    entry.4 .1 = Some(entry.4 .1.unwrap_or(0.0) + rate);
                }
                for f in r.faults.split(';').filter(|f| !f.is_empty()) {
                    if !entry.3.iter().any(|x| x == f) {
                        entry.3.push(f.to_string());
                    }
                }
            }
        }
        let mut csv =
            String::from("t_s,script,ok,errors,ops_per_sec,p50_ms,p99_ms,max_ms,faults,stage,intended_rate\n");
        for ((t, script), (ok, errors, ops, faults, (stage, intended))) in &sums {
            let ms = |q: f64| {
                seconds.get(&(*t, script.clone())).map_or("0.000".to_string(), |(h, _)| {
                    let us = if q >= 1.0 { h.max() } else { h.value_at_quantile(q) };
                    format!("{:.3}", us as f64 / 1000.0)
                })
            };
            csv.push_str(&format!(
                "{t},{script},{ok},{errors},{ops:.1},{},{},{},{},{},{}\n",
                ms(0.5),
                ms(0.99),
                ms(1.0),
                faults.join(";"),
                stage.map(|s| s.to_string()).unwrap_or_default(),
                intended.map(|r| format!("{r:.1}")).unwrap_or_default(),
            ));
        }
        write_text(&out.join("intervals.csv"), &csv).map_err(AppError::Report)?;
    }
    let queue_files = present("queue.csv", &mut notes);
    if !queue_files.is_empty() {
        let shards = queue_files.len();
        let mut sums = QueueSums::new();
        for path in queue_files {
            for r in rows::<QueueRow>(&path)? {
                let entry = sums.entry(r.t_s).or_insert((0, [Some(0); 5], [0; 4], None));
                entry.0 += 1;
                entry.3 = entry.3.or(r.stage);
                for (sum, v) in entry.1.iter_mut().zip([r.pending, r.active, r.delayed, r.completed, r.failed]) {
                    // Shards of a `shared` fleet read the same queues: the deepest reading
                    // of the second, not a sum that counts every job once per shard.
                    *sum = sum.zip(v).map(|(a, b)| if shared { a.max(b) } else { a + b });
                }
                for (sum, v) in entry.2.iter_mut().zip([r.enqueued, r.completed_calls, r.reaped, r.stale_refused]) {
                    *sum += v;
                }
            }
        }
        let path = out.join("queue.csv");
        let mut csv = csv::Writer::from_writer(Vec::new());
        for (t, (seen, depths, counters, stage)) in &sums {
            // A depth is the fleet's only when every shard read its queues in that second.
            let depth = |i: usize| depths[i].filter(|_| *seen == shards);
            let row = QueueRow {
                t_s: *t,
                pending: depth(0),
                active: depth(1),
                delayed: depth(2),
                completed: depth(3),
                failed: depth(4),
                enqueued: counters[0],
                completed_calls: counters[1],
                reaped: counters[2],
                stale_refused: counters[3],
                stage: *stage,
            };
            csv.serialize(row).map_err(|e| usage(&path, e))?;
        }
        let bytes = csv.into_inner().map_err(|e| usage(&path, e))?;
        let text = String::from_utf8(bytes).map_err(|e| usage(&path, e))?;
        write_text(&path, &text).map_err(AppError::Report)?;
    }
    Ok(notes)
}
