//! What the server state alone can prove (docs/protocol.md "Invariants the harness checks");
//! this is also everything `emq-bench check` reports without a history:
//!
//! | invariant | rule checked here |
//! | --- | --- |
//! | I1 | every key under `emq:{q}:` is a job row with a well-formed id or one of the five location sets |
//! | I2 | a row is a member of exactly the set its `state` names; `state` is one of the five; every member has a row; members are well-formed ids |
//! | I3 | the born fields `state attempts payload` are present; no field outside them and `last_error progress group` |
//! | I4 | the payload matches its own id and CRC-32 header ([`verify`](crate::payload::verify)) |
//! | I5 | `attempts` is a non-negative integer, and ≥ 1 in `active`, `completed`, `failed` (those need a claim) |
//!
//! "No row the harness did not enqueue" (I1), and I5–I8 in full, need the run's history.

use super::scan::{BORN_FIELDS, LATER_FIELDS};
use super::state::{Location, QueueState, Row, ServerState, StateField};
use super::violation::{Invariant, Violation};
use crate::keyspace::JobId;
use crate::payload::{PayloadCheck, HEADER_LEN};
use rayon::prelude::*;

/// Every violation the server state alone shows, sorted by queue (in `state` order), then
/// invariant, then job. Rows are analysed in parallel (rayon).
///
/// A BullMQ queue (one with [`QueueState::bull`]) gets BullMQ's rules instead
/// ([`super::bullmq::check_queue`]), with no claim that the run drained: for the drained rule
/// call [`super::bullmq::check_structural_bullmq`].
pub fn check_structural(state: &ServerState) -> Vec<Violation> {
    let mut out = Vec::new();
    for queue in &state.queues {
        let mut found = match queue.bull {
            Some(_) => super::bullmq::check_queue(queue, false),
            None => check_queue(queue),
        };
        out.append(&mut found);
    }
    out
}

/// The violations of one EchoMQ queue, sorted by invariant, then job, then finding.
pub(super) fn check_queue(queue: &QueueState) -> Vec<Violation> {
    let mut found: Vec<Violation> = queue
        .rows
        .par_iter()
        .flat_map_iter(|(id, row)| check_row(queue, id, row, queue.members.get(id).copied().unwrap_or(0)))
        .collect();
    found.par_extend(queue.members.par_iter().filter(|(id, _)| !queue.rows.contains_key(*id)).map(|(id, mask)| {
        violation(
            Invariant::I2,
            queue,
            id.as_str(),
            format!("a row emq:{{{}}}:job:<id> for each location-set member", queue.queue),
            format!("member of {}, but no row", mask_names(*mask)),
        )
    }));
    found.extend(queue.stray_keys.iter().map(|key| stray_key(queue, key)));
    found.extend(queue.stray_members.iter().map(|(loc, member)| {
        violation(
            Invariant::I2,
            queue,
            member,
            "location sets hold only job ids (JOB + 26-char lowercase Crockford-base32 ULID)".into(),
            format!("member {member:?} of {}", set_key(&queue.queue, *loc)),
        )
    }));
    found.par_sort_unstable_by(|a, b| (a.invariant, &a.job, &a.found).cmp(&(b.invariant, &b.job, &b.found)));
    found
}

/// Distinct job ids seen in `state`: rows plus members that have no row, over every queue.
pub fn checked_jobs(state: &ServerState) -> usize {
    let orphans = |q: &QueueState| q.members.par_iter().filter(|(id, _)| !q.rows.contains_key(*id)).count();
    state.queues.iter().map(|q| q.rows.len() + orphans(q)).sum()
}

/// The violations of one row whose id is a member of the sets in `mask`.
fn check_row(queue: &QueueState, id: &JobId, row: &Row, mask: u8) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut add = |invariant, expected: String, found: String| {
        out.push(violation(invariant, queue, id.as_str(), expected, found));
    };
    // I2: the one location its state names.
    match &row.state {
        StateField::Known(loc) if mask != loc.bit() => add(
            Invariant::I2,
            format!("member of exactly {} (state = {})", set_key(&queue.queue, *loc), loc.name()),
            format!("member of {}", mask_names(mask)),
        ),
        StateField::Known(_) => {}
        other => add(
            Invariant::I2,
            "state one of pending, delayed, active, completed, failed, naming the row's one location set".into(),
            format!("{}; member of {}", describe_state(other), mask_names(mask)),
        ),
    }
    // I3: born fields present, no foreign field.
    let missing: Vec<&str> = BORN_FIELDS
        .into_iter()
        .zip([row.state != StateField::Missing, row.attempts.is_some(), row.payload_len.is_some()])
        .filter(|(_, present)| !present)
        .map(|(name, _)| name)
        .collect();
    if !missing.is_empty() {
        add(
            Invariant::I3,
            "born fields state, attempts, payload present".into(),
            format!("missing {}", missing.join(", ")),
        );
    }
    if !row.foreign_fields.is_empty() {
        add(
            Invariant::I3,
            format!("fields only among {}, {}", BORN_FIELDS.join(", "), LATER_FIELDS.join(", ")),
            format!("foreign field {}", row.foreign_fields.join(", ")),
        );
    }
    // I4: the payload against its own header.
    if let Some(found) = payload_damage(row) {
        add(Invariant::I4, PAYLOAD_EXPECTED.into(), found);
    }
    // I5 sanity: attempts is a count of claims.
    match (&row.attempts, &row.state) {
        (Some(Err(raw)), _) => add(
            Invariant::I5,
            "attempts a non-negative integer (the number of claims)".into(),
            format!("attempts = {raw:?}"),
        ),
        (Some(Ok(0)), StateField::Known(loc @ (Location::Active | Location::Completed | Location::Failed))) => add(
            Invariant::I5,
            format!("attempts ≥ 1 in state {} (reaching it needs a claim)", loc.name()),
            "attempts = 0".into(),
        ),
        _ => {}
    }
    out
}

/// What I4 expects of a payload.
pub(super) const PAYLOAD_EXPECTED: &str = "payload carrying its job's ULID and a matching CRC-32 (bytes as sent)";

/// What is wrong with `row`'s payload by its own header, or `None` when it is intact or absent.
pub(super) fn payload_damage(row: &Row) -> Option<String> {
    let check = row.payload_check.filter(|c| *c != PayloadCheck::Intact)?;
    let len = row.payload_len.unwrap_or(0);
    Some(match check {
        PayloadCheck::TooShort => format!("payload of {len} bytes, shorter than the {HEADER_LEN}-byte header"),
        PayloadCheck::WrongId => "payload header (bytes 0..16) names another job".into(),
        _ => format!(
            "payload of {len} bytes does not match its header CRC-32 {:#010x} (bytes changed since it was built)",
            row.payload_crc.unwrap_or(0)
        ),
    })
}

/// The I1 violation of a key that is neither a well-formed job row nor a location set.
fn stray_key(queue: &QueueState, key: &str) -> Violation {
    let prefix = format!("emq:{{{}}}:", queue.queue);
    let rest = key.strip_prefix(&prefix).unwrap_or(key);
    let found = if let Some(id) = rest.strip_prefix("job:") {
        match JobId::parse(id.as_bytes()) {
            Ok(_) => format!("key {key} is not a HASH"),
            Err(_) => format!("key {key} has an ill-formed job id {id:?}"),
        }
    } else if Location::ALL.iter().any(|loc| loc.name() == rest) {
        format!("key {key} is not a ZSET")
    } else {
        format!("key {key}")
    };
    violation(
        Invariant::I1,
        queue,
        key,
        format!("only job rows {prefix}job:<id> (HASH) and the five location sets (ZSET) under {prefix}"),
        found,
    )
}

pub(super) fn violation(
    invariant: Invariant,
    queue: &QueueState,
    job: &str,
    expected: String,
    found: String,
) -> Violation {
    Violation { invariant, queue: queue.queue.clone(), job: Some(job.to_string()), expected, found, at_us: None }
}

fn describe_state(state: &StateField) -> String {
    match state {
        StateField::Known(loc) => format!("state = {}", loc.name()),
        StateField::Other(value) => format!("state = {value:?}"),
        StateField::Missing => "no state field".into(),
    }
}

/// `emq:{q}:<name>`.
fn set_key(queue: &str, loc: Location) -> String {
    format!("emq:{{{queue}}}:{}", loc.name())
}

/// The sets of a membership mask as words: `no location set`, `active`, `active and completed`,
/// `pending, active and completed`.
pub fn mask_names(mask: u8) -> String {
    let names: Vec<&str> = Location::EVERY.iter().filter(|loc| mask & loc.bit() != 0).map(|loc| loc.name()).collect();
    match names.as_slice() {
        [] => "no location set".into(),
        [one] => (*one).into(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::JobIdGen;

    fn row(state: StateField, attempts: u64) -> Row {
        Row {
            state,
            attempts: Some(Ok(attempts)),
            payload_len: Some(32),
            payload_check: Some(PayloadCheck::Intact),
            payload_crc: Some(7),
            foreign_fields: vec![],
            has_last_error: false,
            stalled: false,
            has_progress: false,
            bull: None,
        }
    }

    #[test]
    fn masks_read_as_words() {
        assert_eq!(mask_names(0), "no location set");
        assert_eq!(mask_names(Location::Active.bit()), "active");
        assert_eq!(mask_names(Location::Active.bit() | Location::Completed.bit()), "active and completed");
        assert_eq!(mask_names(1 | 4 | 8), "pending, active and completed");
    }

    #[test]
    fn a_consistent_queue_has_no_violation_and_each_break_is_named() {
        let mut ids = JobIdGen::new(3);
        let (a, b, c, d) = (ids.next_id(), ids.next_id(), ids.next_id(), ids.next_id());
        let mut q = QueueState { queue: "q".into(), ..Default::default() };
        q.rows.insert(a, row(StateField::Known(Location::Completed), 1));
        q.members.insert(a, Location::Completed.bit());
        q.rows.insert(b, row(StateField::Known(Location::Pending), 0));
        q.members.insert(b, Location::Pending.bit());
        let mut state = ServerState { queues: vec![q.clone()], now_ms: None };
        assert_eq!(check_structural(&state), vec![]);
        assert_eq!(checked_jobs(&state), 2);

        q.members.insert(a, Location::Completed.bit() | Location::Active.bit());
        q.rows.get_mut(&b).unwrap().attempts = Some(Err("x".into()));
        q.members.insert(c, Location::Failed.bit());
        q.rows.insert(d, row(StateField::Known(Location::Active), 0));
        q.stray_keys.push("emq:{q}:junk".into());
        state.queues[0] = q;
        let found: Vec<(Invariant, String, String)> =
            check_structural(&state).into_iter().map(|v| (v.invariant, v.job.unwrap(), v.found)).collect();
        assert_eq!(
            found,
            vec![
                (Invariant::I1, "emq:{q}:junk".into(), "key emq:{q}:junk".into()),
                (Invariant::I2, a.to_string(), "member of active and completed".into()),
                (Invariant::I2, c.to_string(), "member of failed, but no row".into()),
                (Invariant::I2, d.to_string(), "member of no location set".into()),
                (Invariant::I5, b.to_string(), "attempts = \"x\"".into()),
                (Invariant::I5, d.to_string(), "attempts = 0".into()),
            ]
        );
        assert_eq!(checked_jobs(&state), 4);
    }
}
