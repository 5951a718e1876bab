//! Time in queue: how long each job waited between its enqueue and its first claim, from the
//! run's history (summary.json `time_in_queue_us`). A rate the consumers keep up with shows a
//! short, flat wait; a backlog shows here before it shows in any script's latency, because a
//! claim's own latency measures only the call, not the wait of the job it hands out.

use hdrhistogram::Histogram;

use crate::history::file::HistoryFileError;
use crate::history::{History, HistoryParts, Kind, Outcome};

/// The histogram of every job's wait, µs, as an upper bound: from its enqueue's send (the job
/// entered the queue after it) to the reply of the first claim that handed it out (it left
/// the queue before then). Both ends are the harness's, so the bound holds whatever order two
/// connections' replies are read in; it exceeds the true wait by at most the two calls' round
/// trips. Jobs never claimed are not in it. A delayed job's wait includes its delay.
///
/// Errors: a part of the history that cannot be read back.
pub fn time_in_queue(history: &HistoryParts) -> Result<Histogram<u64>, HistoryFileError> {
    let mut h = crate::metrics::new_histogram();
    history.each(|_, _, part| {
        record_waits(part, &mut h);
        Ok::<(), HistoryFileError>(())
    })?;
    Ok(h)
}

/// Records the wait of every job of `history` (one part) into `h`.
fn record_waits(history: &History, h: &mut Histogram<u64>) {
    for job in history.per_job() {
        let enqueued = job.iter().find(|e| e.kind == Kind::Enqueue && e.outcome == Outcome::Ok);
        let claimed = job.iter().find(|e| e.kind == Kind::Claim && matches!(e.outcome, Outcome::Ok | Outcome::Alt));
        if let (Some(e), Some(c)) = (enqueued, claimed) {
            // The histogram grows to any value: the record cannot fail.
            let _ = h.record(c.done_us.saturating_sub(e.sent_us));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Event, HistoryHeader};

    fn event(job: u32, kind: Kind, outcome: Outcome, done_us: u64) -> Event {
        Event {
            job,
            kind,
            outcome,
            token: 1,
            queue: 0,
            id_ms: 0,
            sent_us: done_us / 2,
            done_us,
            worker: None,
            holder: None,
            shard: None,
        }
    }

    #[test]
    fn each_claimed_job_counts_once_from_its_enqueue_send_to_its_first_claim_reply() {
        let events = vec![
            event(0, Kind::Enqueue, Outcome::Ok, 100),
            event(0, Kind::Claim, Outcome::Ok, 1_100),
            event(0, Kind::Claim, Outcome::Ok, 9_000),
            event(1, Kind::Enqueue, Outcome::Ok, 200),
            event(1, Kind::Claim, Outcome::Unknown, 300),
            event(1, Kind::Claim, Outcome::Alt, 5_200),
            event(2, Kind::Enqueue, Outcome::Ok, 300),
            event(3, Kind::Enqueue, Outcome::Ok, 900),
            event(3, Kind::Claim, Outcome::Ok, 800),
        ];
        let header = HistoryHeader::for_tests(4);
        let history = History { header, events, encoded_bytes: 0 };
        let h = time_in_queue(&HistoryParts::from(history)).unwrap();
        assert_eq!(h.len(), 3, "job 2 was never claimed");
        // From the enqueue's send (half its reply time here) to the first claim's reply: job 3's
        // claim reply was read before its enqueue's, and still waited 800 - 450 µs at most.
        assert_eq!(h.min(), h.lowest_equivalent(350));
        assert_eq!(h.value_at_quantile(0.5), h.highest_equivalent(1_050));
        assert_eq!(h.max(), h.highest_equivalent(5_100));
    }
}
