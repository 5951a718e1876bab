//! Clean up: the run's keys deleted once its folder is written, each queue on its node, with
//! the folder saying how far it got. summary.json says `keys: deleting` from before the
//! deletion starts (the folder is written with it), is rewritten about once a second with
//! the keys counted before it started, those deleted so far, about how many are left and the
//! queues not finished (`cleanup`), and says `deleted`, with
//! the count, only once every queue's keys are gone. A run killed during its cleanup leaves a
//! folder that says so.

use super::judge;
use crate::keyspace::QueueKeys;
use crate::load::coordinator::queue_keys_counted;
use crate::output::Deletion;
use crate::plane::{self, Plane, Route};
use crate::report::run_summary::{RunSummary, SUMMARY_FILE};
use crate::report::write_json;
use crate::resp::CallError;
use crate::verdict::Cleanup;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// How often summary.json is rewritten while the keys are deleted: what a run killed during
/// its cleanup leaves is at most this old.
const REWRITE_EVERY: Duration = Duration::from_secs(1);

/// Deletes the keys of `queues` (their names in order) and records it in `summary`, whose keys
/// say `deleting`: its `cleanup` as it goes (summary.json in `dir` rewritten every
/// [`REWRITE_EVERY`], best effort: the end's rewrite reports a folder that cannot be written),
/// then its keys' fate, `deleted` or kept with the first failure (the queues after it are not
/// tried: the server likely went away). The caller judges again and rewrites the folder.
pub(super) async fn clean_up(
    plane: &Plane,
    queues: &[QueueKeys],
    dir: &Path,
    summary: &mut RunSummary,
    progress: &Deletion,
) {
    let start = Instant::now();
    let names: Vec<String> = queues.iter().map(|keys| keys.queue.to_string()).collect();
    let mut record = Cleanup::before(&names);
    // The count first, written at once: a run killed at any later moment leaves a folder that
    // says how many keys there were and about how many are left. A count that cannot be read
    // is no reason not to delete.
    if let Ok(counted) = count_keys(plane, queues).await {
        record.count(counted);
        summary.cleanup = Some(record.clone());
        let _ = write_json(&dir.join(SUMMARY_FILE), summary);
    }
    let mut rewrite_at = start + REWRITE_EVERY;
    let mut error = None;
    for keys in queues {
        let before = record.deleted;
        let deleted = plane::delete_queue(&mut plane.conn_for(keys), keys, |so_far| {
            record.deleted = before + so_far;
            progress.update(keys.queue.as_str(), record.deleted);
            if Instant::now() >= rewrite_at {
                // What is left is read only from a written record: worked out when one is.
                record.under_way(so_far);
                record.secs = start.elapsed().as_secs_f64();
                summary.cleanup = Some(record.clone());
                let _ = write_json(&dir.join(SUMMARY_FILE), summary);
                rewrite_at = Instant::now() + REWRITE_EVERY;
            }
        })
        .await;
        match deleted {
            Ok(deleted) => {
                record.deleted = before + deleted;
                record.remaining.retain(|queue| queue != keys.queue.as_str());
                record.under_way(0);
            }
            Err(err) => {
                record.under_way(record.deleted - before);
                error = Some(format!("queue {}: {err}", keys.queue));
                break;
            }
        }
    }
    progress.finish(record.deleted, error.is_some());
    record.secs = start.elapsed().as_secs_f64();
    summary.cleanup = Some(record);
    summary.keys = Some(judge::keys_deleted(error));
}

/// Each queue's keys as its places count them ([`queue_keys_counted`]), by queue name.
async fn count_keys(plane: &Plane, queues: &[QueueKeys]) -> Result<BTreeMap<String, u64>, CallError> {
    let mut counted = BTreeMap::new();
    for keys in queues {
        counted.insert(keys.queue.to_string(), queue_keys_counted(plane, keys).await?);
    }
    Ok(counted)
}
