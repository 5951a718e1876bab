//! The invariants that need the run's history (docs/protocol.md I1, I4–I8): what the harness saw
//! happen, per job, against what the server holds at the end. Unknown outcomes (timeouts, lost
//! connections) are "may have happened": they excuse an effect, never cause a false loss.

use super::state::{Location, QueueState, Row, ServerState, StateField};
use super::violation::{Invariant, Violation};
use crate::history::file::HistoryFileError;
use crate::history::{Event, History, HistoryParts, KeepHistory, Kind, Outcome};
use crate::keyspace::ids::{job_id, job_number, job_tag};
use crate::keyspace::JobId;
use crate::lua::{ErrorCode, Protocol};
use crate::payload::PayloadCheck;
use rayon::prelude::*;
use std::collections::HashMap;

/// One row of the run, found by job number.
struct Found<'a> {
    queue: &'a QueueState,
    id: JobId,
    row: &'a Row,
}

/// Checks the history against the scanned state, one part of the history at a time
/// ([`HistoryParts::each`]). Rows whose id carries another run's tag, and rows of this run
/// that no event mentions, are I1; every job with events is checked in parallel (rayon).
/// Returns every violation found.
///
/// Errors: a part of the history that cannot be read back.
pub fn check_history(history: &HistoryParts, state: &ServerState) -> Result<Vec<Violation>, HistoryFileError> {
    let mut violations = Vec::new();
    history.each(|index, count, part| {
        violations.extend(check_part(part, state, |number| number as usize % count == index, index == 0));
        Ok::<(), HistoryFileError>(())
    })?;
    Ok(violations)
}

/// [`check_history`] for one part of the history: the jobs whose numbers `in_part` takes, and
/// their rows; rows of another run once, with the `first` part.
fn check_part(history: &History, state: &ServerState, in_part: impl Fn(u32) -> bool, first: bool) -> Vec<Violation> {
    let tag = history.header.run_tag;
    let mut violations = Vec::new();
    let mut rows: HashMap<u32, Found> = HashMap::new();
    for queue in &state.queues {
        for (id, row) in &queue.rows {
            if job_tag(id) != tag {
                if first {
                    violations.push(v(
                        Invariant::I1,
                        queue,
                        Some(id),
                        "only rows this run enqueued",
                        "a row with another run's id tag",
                    ));
                }
                continue;
            }
            if !in_part(job_number(id)) {
                continue;
            }
            if let Some(other) = rows.insert(job_number(id), Found { queue, id: *id, row }) {
                violations.push(v(
                    Invariant::I1,
                    queue,
                    Some(id),
                    "one row per job",
                    &format!("a second row, also in queue {}", other.queue.queue),
                ));
            }
        }
    }
    // Claims whose outcome is unknown may have handed out tokens nobody saw; so may claims
    // abandoned in flight when a run is stopped before its drain finished.
    let drained = history.header.drained;
    let unknown_claims = history.unknown_claims() > 0 || !drained;
    // Ids seen only as set members (their row is gone) still name their job in reports.
    let mut member_ids: HashMap<u32, JobId> = HashMap::new();
    for queue in &state.queues {
        for id in queue.members.keys().filter(|id| job_tag(id) == tag && in_part(job_number(id))) {
            member_ids.insert(job_number(id), *id);
        }
    }
    let jobs: Vec<&[Event]> = history.per_job().collect();
    let dropped_passed = history.header.keep == KeepHistory::Violations;
    let per_job: Vec<Violation> = jobs
        .par_iter()
        .flat_map_iter(|events| {
            let number = events[0].job;
            let found = rows.get(&number);
            if dropped_passed && !events.iter().any(|e| matches!(e.kind, Kind::Enqueue | Kind::EnqueueDup)) {
                return check_remnant(events, found);
            }
            let rows = Rows::Read { found, member: member_ids.get(&number) };
            check_job(events, rows, history, unknown_claims, state.now_ms)
        })
        .collect();
    violations.extend(per_job);
    let mut seen: Vec<u32> = jobs.iter().map(|e| e[0].job).collect();
    seen.sort_unstable();
    for (number, found) in &rows {
        // A run stopped before its drain may have abandoned an enqueue in flight: its row can
        // exist without an event. After a drain every enqueue's reply was read. (`issued`
        // counts the numbers producers reserved, 16 at a time: up to 16 per producer below it
        // were never drawn, and a row of one is excused here too.)
        let maybe_in_flight = !drained && u64::from(*number) < history.header.issued;
        if seen.binary_search(number).is_err() && !maybe_in_flight {
            violations.push(v(
                Invariant::I1,
                found.queue,
                Some(&found.id),
                "a row only for an id the harness enqueued",
                match dropped_passed {
                    true => "a row of no job the history keeps: one no enqueue of this run created, or one the live check passed as retired by clean (--keep-history violations dropped its events)",
                    false => "a row no enqueue of this run created",
                },
            ));
        }
    }
    violations
}

fn v(invariant: Invariant, queue: &QueueState, id: Option<&JobId>, expected: &str, found: &str) -> Violation {
    Violation {
        invariant,
        queue: queue.queue.clone(),
        job: id.map(|i| i.to_string()),
        expected: expected.to_string(),
        found: found.to_string(),
        at_us: None,
    }
}

/// What the check knows of a job's row.
enum Rows<'a> {
    /// The scan read the server: the job's row (none when gone) and an id naming it in a set.
    Read { found: Option<&'a Found<'a>>, member: Option<&'a JobId> },
    /// The server was not read (the live check, as events arrive): only what the history
    /// alone shows is checked.
    NotRead,
}

/// A job the live check passed once `clean` retired it, whose events were dropped
/// (`--keep-history violations`), seen again in the history by calls that came after: no row
/// of it may be left, no call on it accepted, and no second retirement.
fn check_remnant(events: &[Event], found: Option<&Found>) -> Vec<Violation> {
    let queue = found.map_or_else(|| "-".to_string(), |f| f.queue.queue.clone());
    let job = found.map_or_else(|| format!("job number {}", events[0].job), |f| f.id.to_string());
    let retired =
        "(passed by the live check and retired by clean: --keep-history violations dropped its earlier events)";
    let mut out = Vec::new();
    let mut push = |invariant, expected: &str, found: String, at_us| {
        out.push(Violation {
            invariant,
            queue: queue.clone(),
            job: Some(job.clone()),
            expected: format!("{expected} {retired}"),
            found,
            at_us,
        })
    };
    if let Some(found) = found {
        push(Invariant::I1, "no row left of a retired job", format!("a row in queue {}", found.queue.queue), None);
    }
    for e in events.iter().filter(|e| e.outcome.accepted()) {
        let call = format!("{} with token {} accepted{}", e.kind.name(), e.token, e.maker());
        match e.kind {
            Kind::Retire => push(Invariant::I1, "a job removed once", "removed again by clean".into(), Some(e.done_us)),
            Kind::Claim => push(Invariant::I1, "a retired job never handed out again", call, Some(e.done_us)),
            Kind::Complete | Kind::Fail | Kind::Extend | Kind::Progress => {
                push(Invariant::I6, "a call on a retired job to be refused", call, Some(e.done_us))
            }
            Kind::Enqueue | Kind::EnqueueDup => {}
        }
    }
    out
}

/// What a finished job's `events` alone show (sorted by send time; every event of the job):
/// the checks of the end check that need no server state (I1 an enqueue answered "exists",
/// I4 a claim that returned changed bytes, I5 a token handed out twice, I6 every fenced call
/// and terminal outcome, I8 a repeated id accepted, and a retirement's own rules), as the live
/// check runs them on a job once its history is closed.
/// `run` is the run's history without events (its header is what counts).
pub fn history_findings(events: &[Event], run: &History) -> Vec<Violation> {
    check_job(events, Rows::NotRead, run, true, None)
}

/// True when [`history_findings`] would find nothing even if no claim's outcome were unknown:
/// the stricter reading the end check applies to a drained run (a token never handed out, a
/// retirement from `failed` without a final `fail`), so a job the live check drops for good
/// (`--keep-history violations`) is one the end check would have passed too.
pub fn passes_strictly(events: &[Event], run: &History) -> bool {
    check_job(events, Rows::NotRead, run, false, None).is_empty()
}

/// Checks one job's events (sorted by send time) against its row.
fn check_job(
    events: &[Event],
    rows: Rows,
    history: &History,
    unknown_claims: bool,
    now_ms: Option<u64>,
) -> Vec<Violation> {
    let (found, member, rows_read) = match rows {
        Rows::Read { found, member } => (found, member, true),
        Rows::NotRead => (None, None, false),
    };
    let drained = history.header.drained && rows_read;
    let mut out = Vec::new();
    let queue_name = |e: &Event| history.header.queues.get(usize::from(e.queue)).cloned().unwrap_or_default();
    // A job nothing on the server names any more is named by the id its enqueue minted.
    let minted = events
        .iter()
        .find(|e| matches!(e.kind, Kind::Enqueue) && e.id_ms > 0)
        .map(|e| job_id(history.header.run_tag, e.job, e.id_ms));
    let job_label = found
        .map(|f| f.id)
        .or(member.copied())
        .map(|id| id.to_string())
        .or_else(|| minted.map(|id| format!("{id} (no row and no set member left)")))
        .unwrap_or_else(|| format!("job number {} (no row and no set member left)", events[0].job));
    let enqueue = events.iter().find(|e| matches!(e.kind, Kind::Enqueue | Kind::EnqueueDup)).unwrap_or(&events[0]);
    let queue = found.map(|f| f.queue.queue.clone()).unwrap_or_else(|| queue_name(enqueue));
    // When the evidence of the next violation happened (see `Violation::at_us`), set just
    // before it is pushed.
    let evidence_at = std::cell::Cell::new(None);
    let mut push = |invariant, expected: String, found: String| {
        let at_us = evidence_at.take();
        out.push(Violation { invariant, queue: queue.clone(), job: Some(job_label.clone()), expected, found, at_us });
    };
    let of = |kind: Kind| events.iter().filter(move |e| e.kind == kind);

    // Enqueue (I1, I7, I8).
    let creation = of(Kind::Enqueue).next();
    let created = creation.is_some_and(|e| e.outcome == Outcome::Ok);
    if let Some(e) = creation {
        if e.outcome == Outcome::Alt {
            push(
                Invariant::I1,
                "a fresh id to be enqueued (reply 1)".into(),
                "reply 0: a row with this id already existed".into(),
            );
        }
    }
    for dup in of(Kind::EnqueueDup) {
        if dup.outcome == Outcome::Ok {
            push(Invariant::I8, "a repeated id to return 0".into(), "the repeated enqueue returned 1".into());
        }
    }
    let mut push = |at: Option<u64>, invariant, expected, found| {
        evidence_at.set(at);
        push(invariant, expected, found)
    };
    for claim in of(Kind::Claim).filter(|c| c.outcome == Outcome::Alt) {
        push(
            Some(claim.done_us),
            Invariant::I4,
            "claims to return the bytes enqueued".into(),
            format!("claim with token {} returned changed bytes", claim.token),
        );
    }
    // Retention (`clean`): a job removed on purpose has no row, and must have finished first.
    let retires: Vec<&Event> = of(Kind::Retire).filter(|e| e.outcome == Outcome::Ok).collect();
    let removable = removable_from(events, history, unknown_claims);
    if !retires.is_empty() {
        let row = found.map(|f| f.row);
        check_retired(events, &retires, row, history.header.max_attempts, unknown_claims, &mut push);
    }
    if found.is_none() && retires.is_empty() && rows_read {
        // Removed by a `clean` whose reply was lost, perhaps: not lost, and still held to what
        // its history shows below. Otherwise lost, or never created.
        if !created || removable.is_none() {
            if created {
                push(
                    creation.map(|e| e.done_us),
                    Invariant::I7,
                    "the accepted job to end in one location".into(),
                    "no row on the server: the job was lost".into(),
                );
            }
            return out;
        }
    }
    if let Some(found) = found {
        check_row(events, found, history, unknown_claims, now_ms, &mut push);
    }
    // What the history alone shows holds for a retired job as for one whose row is left.
    let mut tokens: Vec<u32> = of(Kind::Claim).map(|c| c.token).collect();
    tokens.sort_unstable();
    check_tokens(events, &tokens, unknown_claims, &mut push);
    let row = found.map(|f| f.row);
    let header = &history.header;
    let fencing = Fencing { drained, max_attempts: header.max_attempts, protocol: header.protocol, removable };
    check_fencing(events, &tokens, row, &fencing, &mut push);
    out
}

/// The earliest time (µs since the run start) `clean` may have removed this job: the send of
/// an accepted retirement of it, or of a `clean` call whose outcome is unknown, on its queue and
/// the set of a way it may have finished, that ran at least the run's retention after that
/// finish could have happened (`clean` removes only members finished `retain` before it runs).
/// `None`: nothing may have removed it.
fn removable_from(events: &[Event], history: &History, unknown_claims: bool) -> Option<u64> {
    let retired = events.iter().filter(|e| e.kind == Kind::Retire && e.outcome == Outcome::Ok).map(|e| e.sent_us).min();
    let queue = events.iter().find(|e| e.kind == Kind::Enqueue).map(|e| u32::from(e.queue))?;
    let retain_us = history.header.retain_ms.unwrap_or(0).saturating_mul(1000);
    // Each way it may have finished: the set it ended in, and the earliest time it could have.
    let mut finishes: Vec<(u32, u64)> = events
        .iter()
        .filter_map(|e| match (e.kind, e.outcome) {
            (Kind::Complete, Outcome::Ok | Outcome::Alt | Outcome::Unknown) => Some((0, e.sent_us)),
            (Kind::Fail, Outcome::Alt | Outcome::Unknown) => Some((1, e.sent_us)),
            _ => None,
        })
        .collect();
    // `reap` fails a job whose last attempt's lease expired, with no call of ours.
    let max_attempts = history.header.max_attempts;
    let claims: Vec<&Event> = events.iter().filter(|e| e.kind == Kind::Claim && e.outcome.accepted()).collect();
    if max_attempts > 0 && (unknown_claims || claims.len() >= max_attempts as usize) {
        finishes.push((1, claims.last().map_or(0, |c| c.sent_us)));
    }
    let unknown = history
        .unknown_calls()
        .filter(|c| c.kind == Kind::Retire && c.token >> 1 == queue)
        .filter(|c| finishes.iter().any(|&(set, at)| c.token & 1 == set && at + retain_us <= c.done_us))
        .map(|c| c.sent_us)
        .min();
    match (retired, unknown) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Retention: `clean` removes a row once, from the set of the state the job ended in, and the
/// row stays gone (a `row` left at the end is one that came back).
fn check_retired(
    events: &[Event],
    retires: &[&Event],
    row: Option<&Row>,
    max_attempts: u32,
    unknown_claims: bool,
    push: &mut impl FnMut(Option<u64>, Invariant, String, String),
) {
    let first = retires[0];
    let at = Some(first.done_us);
    let set = |e: &Event| if e.token == 0 { "completed" } else { "failed" };
    if retires.len() > 1 {
        let list: Vec<String> = retires.iter().map(|e| format!("from {} at {}", set(e), seconds(e.done_us))).collect();
        push(
            at,
            Invariant::I1,
            "one row per job: removed by clean at most once".into(),
            format!("clean removed it {} times: {}", retires.len(), list.join(", ")),
        );
    }
    if let Some(row) = row {
        let state = match row.state {
            StateField::Known(l) => l.name().to_string(),
            _ => "of no known state".into(),
        };
        push(
            at,
            Invariant::I1,
            "no row once clean removed the job".into(),
            format!(
                "a row {state} at the end, although clean removed it from {} at {}",
                set(first),
                seconds(first.done_us)
            ),
        );
    }
    let could = |kind: Kind, outcome: Outcome| {
        events.iter().any(|e| e.kind == kind && (e.outcome == outcome || e.outcome == Outcome::Unknown))
    };
    let claims = events.iter().filter(|e| e.kind == Kind::Claim && !matches!(e.outcome, Outcome::Refused(_))).count();
    let explained = if first.token == 0 {
        could(Kind::Complete, Outcome::Ok)
    } else {
        // `reap` fails a lease that expired on the last attempt without a call of ours.
        could(Kind::Fail, Outcome::Alt) || (max_attempts > 0 && (unknown_claims || claims >= max_attempts as usize))
    };
    // The set it was removed from is the state it ended in: it contradicts an accepted
    // terminal call of the other kind, as a row's state would.
    let accepted = |kind: Kind, outcome: Outcome| events.iter().find(|e| e.kind == kind && e.outcome == outcome);
    let contradicted = if first.token == 0 {
        accepted(Kind::Fail, Outcome::Alt).map(|e| (e, "a failed job to stay failed", "completed after a final fail"))
    } else {
        accepted(Kind::Complete, Outcome::Ok)
            .map(|e| (e, "a completed job to stay completed", "failed after an accepted complete"))
    };
    if let Some((evidence, want, got)) = contradicted {
        push(
            Some(evidence.done_us),
            Invariant::I6,
            want.into(),
            format!("clean removed it from {} at {}: it ended {got}", set(first), seconds(first.done_us)),
        );
    }
    if !explained {
        let (want, what) = if first.token == 0 {
            ("an accepted complete", "completed")
        } else {
            ("a final fail, or a stalled last attempt", "failed")
        };
        push(
            at,
            Invariant::I6,
            format!("removed from {what} only after {want}"),
            format!("clean removed it from {what} at {}, but the history holds no such call", seconds(first.done_us)),
        );
    }
}

/// What a job's row says against its history: I1 a row only for an accepted enqueue, I4/I8
/// its payload, I5 its attempts, I7 where it ended.
fn check_row(
    events: &[Event],
    found: &Found,
    history: &History,
    unknown_claims: bool,
    now_ms: Option<u64>,
    push: &mut impl FnMut(Option<u64>, Invariant, String, String),
) {
    let drained = history.header.drained;
    let of = |kind: Kind| events.iter().filter(move |e| e.kind == kind);
    let creation = of(Kind::Enqueue).next();
    let created = creation.is_some_and(|e| e.outcome == Outcome::Ok);
    let maybe_created = creation.is_some_and(|e| e.outcome == Outcome::Unknown);
    let row = found.row;
    if creation.is_none() || !(created || maybe_created) {
        let what = creation
            .map(|e| format!("its enqueue was refused ({:?})", e.outcome))
            .unwrap_or("no enqueue of it was sent".into());
        push(None, Invariant::I1, "a row only for an accepted enqueue".into(), format!("a row although {what}"));
    }
    // Payload (I4, I8): the row keeps the bytes of the accepted enqueue, not a duplicate's.
    if let (Some(e), Some(crc)) = (creation, row.payload_crc) {
        if crc != e.token && row.payload_check == Some(PayloadCheck::Intact) {
            if of(Kind::EnqueueDup).any(|d| d.token == crc) {
                push(
                    None,
                    Invariant::I8,
                    "a repeated enqueue to change nothing".into(),
                    "the row holds the payload of the repeated enqueue".into(),
                );
            } else {
                push(
                    None,
                    Invariant::I4,
                    format!("payload CRC-32 {:08x} as enqueued", e.token),
                    format!("CRC-32 {crc:08x}"),
                );
            }
        }
    }
    // I5: the row's attempts are the claims seen.
    let max_token = of(Kind::Claim).map(|c| c.token).max().unwrap_or(0);
    if let Some(Ok(attempts)) = row.attempts {
        let fits = if unknown_claims { attempts >= u64::from(max_token) } else { attempts == u64::from(max_token) };
        if !fits {
            let at = of(Kind::Claim).filter(|c| c.token == max_token).map(|c| c.done_us).next();
            push(
                at,
                Invariant::I5,
                format!("attempts = {max_token} (the claims seen)"),
                format!("attempts = {attempts}"),
            );
        }
    }

    // No loss (I7): after a drain every job that exists is completed or failed. A run meant to
    // finish its jobs whose drain did not (consumers that could not keep up) leaves a backlog,
    // which the verdict reports as such ("drain incomplete"): there, a job is a violation only
    // when it is stuck past its lease or due time at the scan, or when that cannot be told
    // (no deadline, as BullMQ's active list has none, or no server clock).
    if drained || history.header.must_finish {
        if let Some(state) = row.state.unfinished() {
            let deadline = found.queue.deadlines.get(&found.id);
            if drained || past_its_time(state, deadline, now_ms) {
                let expected = if drained {
                    "completed or failed after the drain"
                } else {
                    "completed or failed (the run had consumers; its drain did not finish)"
                };
                push(None, Invariant::I7, expected.into(), stuck(state, row, deadline, now_ms));
            }
        }
    }
}

/// I5 from the history alone: tokens 1, 2, 3, ... each handed out once. A token handed out
/// twice names each claim (its holder and when its reply was read), so a token reissued after
/// a rollback (a failover that lost the first claim) names both workers.
fn check_tokens(
    events: &[Event],
    tokens: &[u32],
    unknown_claims: bool,
    push: &mut impl FnMut(Option<u64>, Invariant, String, String),
) {
    let mut reported = None;
    for pair in tokens.windows(2) {
        if pair[0] == pair[1] && reported != Some(pair[0]) {
            reported = Some(pair[0]);
            let claims: Vec<&Event> = events.iter().filter(|c| c.kind == Kind::Claim && c.token == pair[0]).collect();
            let list: Vec<String> = claims.iter().map(|c| format!("at {}{}", seconds(c.done_us), c.maker())).collect();
            // Holders are unique per claim call: as many holders as claims says each was a
            // claim of its own (the token handed out again after the first was rolled back),
            // not one claim's reply recorded twice.
            let holders: std::collections::BTreeSet<_> = claims.iter().filter_map(|c| c.holder).collect();
            let to_holders = match claims.iter().all(|c| c.holder.is_some()) {
                true => format!(" to {} holder{}", holders.len(), if holders.len() == 1 { "" } else { "s" }),
                false => String::new(),
            };
            push(
                claims.first().map(|c| c.done_us),
                Invariant::I5,
                "each token handed out once".into(),
                format!("token {} handed out {} times{to_holders}: {}", pair[0], claims.len(), list.join("; ")),
            );
        }
    }
    let max_token = tokens.last().copied().unwrap_or(0);
    if !unknown_claims {
        if let Some(missing) = (1..=max_token).find(|t| tokens.binary_search(t).is_err()) {
            push(
                None,
                Invariant::I5,
                format!("tokens 1..={max_token} without a gap"),
                format!("token {missing} was never handed out"),
            );
        }
    }
}

/// True when a job left behind by a drain that did not finish is stuck, not merely waiting:
/// active past its lease, or delayed past its due time (`deadline`, server ms, against the
/// server's clock at the scan, `now_ms`), or either without a deadline or a clock to tell.
/// A pending job, or one whose time has not come, is a backlog.
fn past_its_time(state: Location, deadline: Option<&f64>, now_ms: Option<u64>) -> bool {
    match (state, deadline, now_ms) {
        (Location::Active | Location::Delayed, Some(&at), Some(now)) => now as f64 > at,
        (Location::Active | Location::Delayed, _, _) => true,
        _ => false,
    }
}

/// "stuck job: state active, lease expired 14600 ms ago, attempts 1": what a job left behind
/// by a run is doing, from its row, its set score (`deadline`, server ms) and the server's
/// clock at the scan (`now_ms`).
fn stuck(state: Location, row: &Row, deadline: Option<&f64>, now_ms: Option<u64>) -> String {
    let attempts = match &row.attempts {
        Some(Ok(n)) => n.to_string(),
        Some(Err(raw)) => format!("{raw:?}"),
        None => "missing".into(),
    };
    let when = match (state, deadline, now_ms) {
        (Location::Active | Location::Delayed, Some(&at), Some(now)) => {
            let past = now as f64 - at;
            let what = if state == Location::Active { "lease" } else { "due time" };
            if past > 0.0 {
                format!(", {what} passed {past:.0} ms ago")
            } else {
                format!(", {what} in {:.0} ms", -past)
            }
        }
        _ => String::new(),
    };
    format!("stuck job: state {}{when}, attempts {attempts}", state.name())
}

/// `4.213 s`: a time of the history (µs since the run start) as a violation names it.
fn seconds(us: u64) -> String {
    format!("{:.3} s", us as f64 / 1e6)
}

/// For fenced call `e` of a worker known by the history: its own claim of its token (the
/// last one it read before sending `e`) and a claim of the same token by another worker read
/// after it and before `e` was sent, when there is one.
fn handed_again<'a>(events: &'a [Event], e: &Event) -> Option<(&'a Event, &'a Event)> {
    e.worker?;
    let claims = || events.iter().filter(|c| c.kind == Kind::Claim && c.token == e.token && c.outcome.accepted());
    let own = claims().rfind(|c| !c.other_worker(e) && c.done_us <= e.sent_us)?;
    let other = claims()
        .find(|c| c.worker.is_some() && c.other_worker(e) && c.done_us > own.done_us && c.done_us < e.sent_us)?;
    Some((own, other))
}

/// What [`check_fencing`] needs of the run and of the job beside its events.
#[derive(Clone, Copy)]
struct Fencing {
    /// The run drained (an end state must then be explained by an accepted terminal call).
    drained: bool,
    /// The run's `max_attempts` (0: unknown).
    max_attempts: u32,
    /// The protocol (which calls are fenced).
    protocol: Protocol,
    /// When `clean` may have removed the job ([`removable_from`]): a stale call refused
    /// `EMQNOJOB` after that is a refusal, not a finding.
    removable: Option<u64>,
}

/// I6: every accepted fenced call carried the then-current token, at most one terminal outcome;
/// the end state of the job's `row` (none once `clean` removed it) is explained by an accepted
/// terminal call.
fn check_fencing(
    events: &[Event],
    tokens: &[u32],
    row: Option<&Row>,
    run: &Fencing,
    push: &mut impl FnMut(Option<u64>, Invariant, String, String),
) {
    // BullMQ's updateProgress takes no lock token (docs/bullmq-mapping.md): a stale worker's
    // progress is accepted by design, so only its other calls are fenced.
    let fenced = |kind: Kind| match kind {
        Kind::Complete | Kind::Fail | Kind::Extend => true,
        Kind::Progress => run.protocol != Protocol::BullMq,
        _ => false,
    };
    let terminal: Vec<&Event> = events.iter().filter(|e| is_terminal(e)).collect();
    if terminal.len() > 1 {
        let list: Vec<String> = terminal
            .iter()
            .map(|e| format!("{} with token {}{} at {}", e.kind.name(), e.token, e.maker(), seconds(e.done_us)))
            .collect();
        push(
            terminal.first().map(|e| e.done_us),
            Invariant::I6,
            "at most one terminal outcome".into(),
            format!("{} accepted: {}", terminal.len(), list.join(", ")),
        );
    }
    let job = FencedJob { events, tokens, terminal: &terminal, run };
    for e in events.iter().filter(|e| fenced(e.kind)) {
        match e.outcome {
            Outcome::Refused(code) => job.check_refused(e, code, push),
            outcome if outcome.accepted() => job.check_accepted(e, push),
            _ => {}
        }
    }
    if let Some(row) = row {
        job.check_end_state(row, push);
    }
}

/// A terminal outcome accepted: a complete that completed the job, or a fail that failed it
/// for good.
fn is_terminal(e: &Event) -> bool {
    (e.kind == Kind::Complete && e.outcome == Outcome::Ok) || (e.kind == Kind::Fail && e.outcome == Outcome::Alt)
}

/// One job's events as [`check_fencing`] reads them.
struct FencedJob<'a> {
    events: &'a [Event],
    /// The tokens its claims handed out, sorted.
    tokens: &'a [u32],
    /// Its accepted terminal calls.
    terminal: &'a [&'a Event],
    run: &'a Fencing,
}

impl FencedJob<'_> {
    /// A refused fenced call `e`: a provably stale call must be refused as stale.
    fn check_refused(&self, e: &Event, code: ErrorCode, push: &mut impl FnMut(Option<u64>, Invariant, String, String)) {
        let next_handed =
            self.events.iter().find(|c| c.kind == Kind::Claim && c.token > e.token && c.done_us < e.sent_us);
        let again = handed_again(self.events, e);
        // EMQFENCE or EMQSTATE, or EMQNOJOB once `clean` may have removed the job before the
        // call ran.
        let retired = code == ErrorCode::NoJob && self.run.removable.is_some_and(|at| at < e.done_us);
        if (next_handed.is_some() || again.is_some()) && !code.is_stale() && !retired {
            push(
                None,
                Invariant::I6,
                format!(
                    "a stale {} refused as stale (EMQFENCE, EMQSTATE; BullMQ: lock missing or mismatched)",
                    e.kind.name()
                ),
                format!("refused with {}", code.name()),
            );
        }
    }

    /// An accepted (or safely retried) fenced call `e`: its answer fits its attempt, its token
    /// was handed out and still current, and a terminal outcome came with the last token.
    fn check_accepted(&self, e: &Event, push: &mut impl FnMut(Option<u64>, Invariant, String, String)) {
        let Fencing { max_attempts, protocol, .. } = *self.run;
        let tokens = self.tokens;
        // `fail` retries while attempts < max_attempts and fails for good at max_attempts
        // (EchoMQ's script decides; BullMQ's client does, from attempts made, stalls excluded).
        if e.kind == Kind::Fail && max_attempts > 0 && protocol == Protocol::EchoMqV1 {
            let retried = e.outcome == Outcome::Ok;
            if retried != (e.token < max_attempts) {
                let (want, got) = if retried { ("failed", "retry") } else { ("retry", "failed") };
                push(
                    None,
                    Invariant::I6,
                    format!("fail with token {} of max_attempts {max_attempts} to answer {want}", e.token),
                    format!("answered {got}"),
                );
            }
        }
        let accepted_as = if e.kind == Kind::Complete && e.outcome == Outcome::Alt { "safe retry" } else { "accepted" };
        if tokens.binary_search(&e.token).is_err() && !tokens.is_empty() {
            push(
                None,
                Invariant::I6,
                format!("{} with a token some claim handed out", e.kind.name()),
                format!("{accepted_as} with token {} never handed out", e.token),
            );
            return;
        }
        // Stale too: its own token was handed out again, to another worker, after this
        // worker's claim and before this call (a claim rolled back by a failover, the counter
        // with it): the fence cannot tell the two holders apart.
        if let Some((own, other)) = handed_again(self.events, e) {
            push(
                Some(e.done_us),
                Invariant::I6,
                format!(
                    "{} with token {} refused once token {} was handed out again to another worker",
                    e.kind.name(),
                    e.token,
                    e.token
                ),
                format!(
                    "{accepted_as}{} (its claim read at {}) {} µs after token {} was handed out again at {}{}",
                    e.maker(),
                    seconds(own.done_us),
                    e.sent_us - other.done_us,
                    e.token,
                    seconds(other.done_us),
                    other.maker()
                ),
            );
        }
        // The same-token retry answer ("already completed") is only for the worker that
        // completed the job: given to another holder of a reissued token, both believe they
        // finished it.
        if e.kind == Kind::Complete && e.outcome == Outcome::Alt {
            let by_other =
                self.terminal.iter().find(|t| t.kind == Kind::Complete && t.token == e.token && t.other_worker(e));
            if let (Some(done), Some(_)) = (by_other, e.worker) {
                push(
                    Some(e.done_us),
                    Invariant::I6,
                    "\"already completed\" only to the worker whose complete was accepted (a retry of its own call)"
                        .into(),
                    format!(
                        "complete with token {}{} answered \"already completed\" at {}, but the complete accepted was{} at {}: both workers believe they finished the job",
                        e.token,
                        e.maker(),
                        seconds(e.done_us),
                        done.maker(),
                        seconds(done.done_us)
                    ),
                );
            }
        }
        // Provably stale: the next token was handed out (reply read) before this call was sent.
        if let Some(next) =
            self.events.iter().find(|c| c.kind == Kind::Claim && c.token > e.token && c.done_us < e.sent_us)
        {
            push(
                Some(e.done_us),
                Invariant::I6,
                format!("{} with token {} refused once token {} was handed out", e.kind.name(), e.token, next.token),
                format!(
                    "{accepted_as}{} {} µs after token {} was handed out{}",
                    e.origin(),
                    e.sent_us - next.done_us,
                    next.token,
                    next.origin()
                ),
            );
        }
        // A terminal outcome ends the job: its token must be the last one ever handed out.
        let max_token = tokens.last().copied().unwrap_or(0);
        if is_terminal(e) && e.token < max_token {
            push(
                None,
                Invariant::I6,
                format!("{} accepted only with the last token", e.kind.name()),
                format!("accepted{} with token {} but token {max_token} was handed out", e.origin(), e.token),
            );
        }
    }

    /// The job's end state in `row`, explained by an accepted (or possibly accepted) terminal
    /// call once the run drained, and not contradicting one.
    fn check_end_state(&self, row: &Row, push: &mut impl FnMut(Option<u64>, Invariant, String, String)) {
        let Fencing { drained, max_attempts, .. } = *self.run;
        // v1.1 poison jobs: `reap` fails a lease that expired on the last attempt
        // (`last_error = stalled`, attempts >= max_attempts): a terminal outcome of its own.
        let stall_failed =
            max_attempts > 0 && row.stalled && matches!(row.attempts, Some(Ok(n)) if n >= u64::from(max_attempts));
        // The end state must be explained by an accepted (or possibly accepted) terminal call.
        let could = |kind: Kind, outcome: Outcome| {
            self.events.iter().any(|e| e.kind == kind && (e.outcome == outcome || e.outcome == Outcome::Unknown))
        };
        match row.state {
            StateField::Known(Location::Completed) if drained && !could(Kind::Complete, Outcome::Ok) => push(
                None,
                Invariant::I6,
                "completed only through an accepted complete".into(),
                "state completed, but no complete was accepted".into(),
            ),
            StateField::Known(Location::Failed) if drained && !could(Kind::Fail, Outcome::Alt) && !stall_failed => {
                push(
                    None,
                    Invariant::I6,
                    "failed only through a final fail, or by reap after the last attempt stalled".into(),
                    "state failed, but no fail answered `failed` and it is not a stalled last attempt".into(),
                )
            }
            // The evidence is the accepted call the end state contradicts (a rollback lost it).
            StateField::Known(Location::Failed) if self.terminal.iter().any(|e| e.kind == Kind::Complete) => push(
                self.terminal.iter().find(|e| e.kind == Kind::Complete).map(|e| e.done_us),
                Invariant::I6,
                "a completed job to stay completed".into(),
                "state failed after an accepted complete".into(),
            ),
            StateField::Known(Location::Completed) if self.terminal.iter().any(|e| e.kind == Kind::Fail) => push(
                self.terminal.iter().find(|e| e.kind == Kind::Fail).map(|e| e.done_us),
                Invariant::I6,
                "a failed job to stay failed".into(),
                "state completed after a final fail".into(),
            ),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{HistoryHeader, UNKNOWN_JOB};

    fn event(job: u32, kind: Kind, outcome: Outcome, token: u32, sent_us: u64) -> Event {
        Event::for_tests(job, kind, outcome, token, sent_us, 1)
    }

    /// Job 0 enqueued, claimed and completed at 1 s (acknowledged), then its row is gone.
    /// A job whose events were dropped once it passed and was retired, seen again: a late call
    /// refused is nothing, one accepted is a finding, and so is a second retirement.
    #[test]
    fn a_dropped_jobs_late_calls_must_be_refused() {
        let nojob = Outcome::Refused(crate::lua::ErrorCode::NoJob);
        assert!(check_remnant(&[event(4, Kind::Complete, nojob, 1, 900)], None).is_empty());
        let found = check_remnant(
            &[event(4, Kind::Complete, Outcome::Ok, 1, 900), event(4, Kind::Retire, Outcome::Ok, 0, 950)],
            None,
        );
        let invariants: Vec<Invariant> = found.iter().map(|v| v.invariant).collect();
        assert_eq!(invariants, [Invariant::I6, Invariant::I1], "{found:#?}");
        assert!(found[0].expected.contains("--keep-history violations"), "{found:#?}");
    }

    fn finished_then_gone(retain_ms: u64, unknown_clean_at_us: Option<(u32, u64)>) -> Vec<Violation> {
        let mut events = vec![
            event(0, Kind::Enqueue, Outcome::Ok, 7, 0),
            event(0, Kind::Claim, Outcome::Ok, 1, 500_000),
            event(0, Kind::Complete, Outcome::Ok, 1, 1_000_000),
        ];
        if let Some((set, at)) = unknown_clean_at_us {
            events.push(event(UNKNOWN_JOB, Kind::Retire, Outcome::Unknown, set, at));
        }
        let header = HistoryHeader { retain_ms: Some(retain_ms), ..HistoryHeader::for_tests(1) };
        let history = History { header, events, encoded_bytes: 0 };
        let state = ServerState { queues: vec![QueueState { queue: "q".into(), ..Default::default() }], now_ms: None };
        check_history(&HistoryParts::from(history), &state).unwrap()
    }

    /// A lost job is excused only by a `clean` of unknown outcome that could have removed it:
    /// on its queue and set, run at least `retain` after it finished.
    #[test]
    fn an_unknown_clean_excuses_only_the_jobs_it_could_have_removed() {
        let lost = |v: &[Violation]| v.iter().any(|v| v.invariant == Invariant::I7 && v.found.contains("lost"));
        assert!(lost(&finished_then_gone(5_000, None)), "no clean: lost");
        assert!(!lost(&finished_then_gone(5_000, Some((0, 7_000_000)))), "a clean 6 s later may have removed it");
        assert!(lost(&finished_then_gone(5_000, Some((0, 2_000_000)))), "a clean 1 s later could not (retain 5 s)");
        assert!(lost(&finished_then_gone(5_000, Some((1, 7_000_000)))), "a clean of the failed set could not");
        assert!(lost(&finished_then_gone(5_000, Some((1 << 1, 7_000_000)))), "a clean of another queue could not");
    }

    /// A retired job is still held to its history: removed from `completed` after a final
    /// `fail` is I6, as a row in `completed` would be; a second accepted terminal is I6 too.
    #[test]
    fn a_retired_job_is_held_to_its_history() {
        let events = [
            event(0, Kind::Enqueue, Outcome::Ok, 7, 0),
            event(0, Kind::Claim, Outcome::Ok, 1, 100),
            event(0, Kind::Fail, Outcome::Alt, 1, 200),
            event(0, Kind::Complete, Outcome::Unknown, 1, 300),
            event(0, Kind::Retire, Outcome::Ok, 0, 400),
        ];
        let run = History { header: HistoryHeader::for_tests(1), events: Vec::new(), encoded_bytes: 0 };
        let found = history_findings(&events, &run);
        assert!(
            found.iter().any(|v| v.invariant == Invariant::I6 && v.found.contains("completed after a final fail")),
            "{found:#?}"
        );
        let twice = [
            event(0, Kind::Enqueue, Outcome::Ok, 7, 0),
            event(0, Kind::Claim, Outcome::Ok, 1, 100),
            event(0, Kind::Complete, Outcome::Ok, 1, 200),
            event(0, Kind::Complete, Outcome::Ok, 1, 300),
            event(0, Kind::Retire, Outcome::Ok, 0, 400),
        ];
        let found = history_findings(&twice, &run);
        assert!(found.iter().any(|v| v.found.starts_with("2 accepted")), "{found:#?}");
    }
}
