//! The check of a `shared` fleet, run by its merge: every shard drove the same queues, so no
//! shard's history alone says what happened to a job (its claim may be on one machine, its
//! completion on another). The shards' histories join into one, on the server's clock; the
//! invariants I1–I8 are checked once against it and the server's final state; then the keys
//! are deleted and the fleet's run lock released.
//!
//! Times: each shard's events count µs from its own start, which it measured against the
//! server's clock (`start_offset_ms`, good to its `clock_uncertainty_ms`). Adding the offset
//! puts every event on one axis, µs since the fleet's `t0`. The check needs order only within
//! one job's events; two events of one job on different shards closer than the shards'
//! clock uncertainties may be ordered either way, and the check judges what the server kept
//! (tokens, states), not which machine was first.

use super::ShardFolder;
use crate::check::{self, CheckOutcome};
use crate::history::{self, Event, History, HistoryBuf, HistoryHeader, HistoryParts};
use crate::keyspace::{QueueKeys, QueueName};
use crate::net::{ConnectOptions, Connector, Endpoint, TargetFlags};
use crate::plane::{self, Plane, Route, RunLock};
use crate::scenario::JobNumbers;
use std::path::Path;
use std::time::Instant;

/// Where the merge reaches the fleet's server: `merge --url` with its flags, or the last
/// shard's own target when it merges.
#[derive(Debug, Clone)]
pub struct FleetTarget {
    /// The server's URL (any node of a cluster).
    pub url: String,
    /// Authentication and TLS.
    pub flags: TargetFlags,
}

/// What the fleet's check found (`None`: the fleet asked for no check), and the connection and
/// lock its cleanup needs.
pub(super) struct SharedCheck {
    pub(super) outcome: Option<CheckOutcome>,
    pub(super) plane: Plane,
    pub(super) queues: Vec<QueueKeys>,
    pub(super) lock: RunLock,
}

/// The union of the shards' histories (each shard's `history.bin`), on the fleet's clock,
/// with the header of the whole fleet; and its encoded streams (what the merged folder's
/// `history.bin` holds).
///
/// Errors: a shard without a readable `history.bin`, or shards of different runs (run tag,
/// queues or protocol), named.
pub(super) fn union_history(shards: &[ShardFolder]) -> Result<(HistoryHeader, Vec<Vec<u8>>), String> {
    let mut header: Option<HistoryHeader> = None;
    let (mut issued, mut drained, mut must_finish) = (0u64, true, false);
    let mut consumer_shards = 0;
    // Each shard's events encoded again (the offset moved every time) into streams of its
    // own, so the merged file says which shard made each call.
    let mut streams: Vec<Vec<u8>> = Vec::new();
    let mut stream_shards: Vec<u16> = Vec::new();
    let base = Instant::now();
    for shard in shards {
        let record = shard.summary.shard.as_ref().expect("read_fleet checks it");
        let path = shard.dir.join("history.bin");
        let (own, own_streams) = history::file::load(&path).map_err(|e| e.to_string())?;
        let decoded = History::merge(own.clone(), &own_streams).map_err(|e| format!("{}: {e}", path.display()))?;
        match &header {
            None => header = Some(own.clone()),
            Some(first) => {
                let same = (first.run_tag, &first.queues, first.protocol) == (own.run_tag, &own.queues, own.protocol);
                if !same {
                    return Err(format!(
                        "{}: another run's history (run tag, queues or protocol differ from the first shard's)",
                        path.display()
                    ));
                }
            }
        }
        let [stride, offset] = record.job_numbers;
        let numbers = JobNumbers { stride: stride.max(1), offset };
        issued = issued.max(numbers.issued_bound(own.issued));
        if record.consumers[1] > 0 {
            consumer_shards += 1;
            drained &= own.drained;
        }
        must_finish |= own.must_finish;
        // The shard's µs since its start, on the server's clock: its start's offset from t0,
        // plus the drift of its clock (the offset measured again after the run) in proportion.
        let offset_us = record.start_offset_ms * 1000.0;
        let drift_per_us = match record.clock_offset_end_ms {
            Some(end) if record.clock_end_after_s > 0.0 => {
                (end - record.clock_offset_ms) * 1000.0 / (record.clock_end_after_s * 1e6)
            }
            _ => 0.0,
        };
        let shift = |us: u64| (us as f64 * (1.0 + drift_per_us) + offset_us).round().max(0.0) as u64;
        let mut buf = HistoryBuf::new(base);
        for e in &decoded.events {
            buf.push_event(&Event { sent_us: shift(e.sent_us), done_us: shift(e.done_us), ..*e });
        }
        for stream in buf.take() {
            streams.push(stream);
            stream_shards.push(record.index as u16);
        }
    }
    let first = header.ok_or("no shard to merge")?;
    let interrupted = shards.iter().any(|s| s.summary.interrupted);
    let header = HistoryHeader {
        issued,
        drained: consumer_shards > 0 && drained,
        must_finish: must_finish && !interrupted,
        stream_shards,
        // The shards' events are encoded again above, by this build.
        event_version: history::EVENT_VERSION,
        complete: true,
        ..first
    };
    Ok((header, streams))
}

/// Writes the fleet's `history.bin` (`header`, `streams`) into `out` and checks the fleet's
/// queues against it on `target` (unless `run_check` is false: the fleet's `--no-check`),
/// holding the fleet's run lock (group `group`) while it reads.
///
/// Errors: why the check could not run (the server unreachable, the lock held by another
/// run, the scan failing, the history not written).
pub(super) async fn check_shared(
    header: &HistoryHeader,
    streams: &[Vec<u8>],
    target: &FleetTarget,
    group: &str,
    out: &Path,
    run_check: bool,
) -> Result<SharedCheck, String> {
    history::file::save(&out.join("history.bin"), header, streams).map_err(|e| e.to_string())?;
    let endpoint =
        Endpoint::resolve(&target.url, &target.flags, |name| std::env::var(name).ok()).map_err(|e| e.to_string())?;
    let connector = Connector::new(endpoint).map_err(|e| e.to_string())?;
    let opts = ConnectOptions {
        response_timeout: crate::cmd::check::RESPONSE_TIMEOUT,
        client_name: None,
        ..ConnectOptions::default()
    };
    let plane = Plane::open(&connector, opts).await.map_err(|e| e.to_string())?;
    let queues = header
        .queues
        .iter()
        .map(|q| QueueName::new(q).map(|name| QueueKeys::for_protocol(name, header.protocol)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    // The shards' lease may still run (the same id joins it), else it is taken again: no other
    // run may start on the queues between the fleet's end and its cleanup.
    let lock = RunLock::join_or_acquire(&plane, &queues, &plane::lock::fleet_run_id(group))
        .await
        .map_err(|e| e.to_string())?;
    if !run_check {
        return Ok(SharedCheck { outcome: None, plane, queues, lock });
    }
    // Read back from the file just written, in parts when it is large (the streams themselves
    // are held until the merge ends).
    let budget = crate::cli::DEFAULT_CHECK_MEMORY_MB << 20;
    let parts = match HistoryParts::read(&out.join("history.bin"), budget, out) {
        Ok(parts) => parts,
        Err(err) => {
            lock.release_all().await;
            return Err(err.to_string());
        }
    };
    match check::check(&plane, &queues, Some(&parts)).await {
        Ok(outcome) => Ok(SharedCheck { outcome: Some(outcome), plane, queues, lock }),
        Err(err) => {
            lock.release_all().await;
            Err(err.to_string())
        }
    }
}

/// Deletes the fleet's keys, queue by queue; returns the keys deleted and the first failure
/// (its queue, and the error naming it), after which no queue is tried.
pub(super) async fn delete_keys(checked: &SharedCheck) -> (u64, Result<(), (String, String)>) {
    let mut deleted = 0;
    for keys in &checked.queues {
        let mut so_far = 0;
        match plane::delete_queue(&mut checked.plane.conn_for(keys), keys, |n| so_far = n).await {
            Ok(n) => deleted += n,
            Err(err) => {
                return (deleted + so_far, Err((keys.queue.to_string(), format!("queue {}: {err}", keys.queue))))
            }
        }
    }
    (deleted, Ok(()))
}
