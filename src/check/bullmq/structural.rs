//! What a BullMQ queue's state alone can prove, in the terms of the invariants of docs/protocol.md
//! (docs/bullmq-mapping.md section 6); the ids are those of [`Invariant`] where the rule means
//! the same thing:
//!
//! | invariant | rule checked here |
//! | --- | --- |
//! | I1 | one job hash per id any location names, none in no location; every key under `bull:{q}:` is BullMQ's own (a well-formed id's hash, lock or logs; a location; `stalled`, `meta`, `id`, `events`, ...); members are well-formed ids |
//! | I2 | each id in exactly one of `wait paused prioritized delayed active completed failed`, once; `stalled` holds only `active` ids (BullMQ has no state field: the location is the state) |
//! | I3 | the fields of the add (`name data opts timestamp delay priority`) present; no field outside BullMQ's |
//! | I4 | `data` is a JSON string of base64 whose bytes match their own id and CRC-32 header |
//! | I5 | `ats`, `atm`, `stc` non-negative integers, `atm ≤ ats`; `ats ≥ 1` in `active`, `completed`, `failed`, `atm ≥ 1` in the last two |
//! | I7 | a completed job has `finishedOn` and `returnvalue`, a failed one `finishedOn` and `failedReason`, neither a lock; an `active` job has its lock; after a drain nothing is in `wait paused prioritized delayed active` |

use crate::check::state::{
    BullQueue, BullRow, Location, QueueState, Row, ServerState, BULL_BORN_FIELDS, BULL_LATER_FIELDS,
};
use crate::check::structural::{mask_names, payload_damage, violation, PAYLOAD_EXPECTED};
use crate::check::violation::{Invariant, Violation};
use crate::keyspace::JobId;
use rayon::prelude::*;
use std::collections::HashMap;

use super::keys::{classify, BullKey};

/// Every location bit of BullMQ's seven.
const BULL_MASK: u8 = Location::Wait.bit()
    | Location::Paused.bit()
    | Location::Prioritized.bit()
    | Location::Delayed.bit()
    | Location::Active.bit()
    | Location::Completed.bit()
    | Location::Failed.bit();

/// The locations a drained queue has nothing in.
const NOT_DRAINED: u8 = BULL_MASK & !(Location::Completed.bit() | Location::Failed.bit());

/// Every violation the state alone shows, for every queue of `state`, sorted like
/// [`check_structural`](crate::check::check_structural) (by queue, then invariant, job, finding).
/// BullMQ queues ([`QueueState::bull`]) get BullMQ's rules ([`check_queue`]); `drained` says the
/// run's drain finished, so nothing may be left to do (I7). EchoMQ queues get EchoMQ's rules,
/// whatever `drained` says (EchoMQ's drained rule needs the history).
pub fn check_structural_bullmq(state: &ServerState, drained: bool) -> Vec<Violation> {
    let mut out = Vec::new();
    for queue in &state.queues {
        let mut found = match queue.bull {
            Some(_) => check_queue(queue, drained),
            None => crate::check::structural::check_queue(queue),
        };
        out.append(&mut found);
    }
    out
}

/// The violations of one BullMQ queue (the rules in this module's table), sorted by invariant,
/// job, finding. A queue without [`QueueState::bull`] is read as one with no `stalled` members.
pub fn check_queue(queue: &QueueState, drained: bool) -> Vec<Violation> {
    let empty = BullQueue::default();
    let bull = queue.bull.as_deref().unwrap_or(&empty);
    let prefix = if bull.prefix.is_empty() { format!("bull:{{{}}}:", queue.queue) } else { bull.prefix.clone() };
    let mut found: Vec<Violation> = queue
        .rows
        .par_iter()
        .flat_map_iter(|(id, row)| check_row(queue, id, row, queue.members.get(id).copied().unwrap_or(0), drained))
        .collect();
    found.par_extend(queue.members.par_iter().filter(|(id, _)| !queue.rows.contains_key(*id)).map(|(id, mask)| {
        violation(
            Invariant::I1,
            queue,
            id.as_str(),
            format!("a job hash {prefix}<id> for each id a location holds"),
            format!("in {}, but no job hash", mask_names(*mask)),
        )
    }));
    found.extend(queue.stray_keys.iter().map(|key| stray_key(queue, &prefix, key)));
    let stray_member = |member: &str, key: String| {
        violation(
            Invariant::I1,
            queue,
            member,
            "locations and stalled hold only the harness's job ids (JOB + 26-char lowercase Crockford-base32 ULID)"
                .into(),
            format!("member {member:?} of {key}"),
        )
    };
    found.extend(
        queue.stray_members.iter().map(|(loc, member)| stray_member(member, format!("{prefix}{}", loc.name()))),
    );
    found.extend(bull.stray_stalled.iter().map(|member| stray_member(member, format!("{prefix}stalled"))));
    let mut repeats: HashMap<(Location, JobId), usize> = HashMap::new();
    for (loc, id) in &bull.repeated {
        *repeats.entry((*loc, *id)).or_insert(1) += 1;
    }
    found.extend(repeats.into_iter().map(|((loc, id), times)| {
        violation(
            Invariant::I2,
            queue,
            id.as_str(),
            "each id in exactly one location, once".into(),
            format!("listed {times} times in {prefix}{}", loc.name()),
        )
    }));
    found.extend(bull.stalled.iter().filter_map(|id| {
        let mask = queue.members.get(id).copied().unwrap_or(0);
        (mask & Location::Active.bit() == 0).then(|| {
            violation(
                Invariant::I2,
                queue,
                id.as_str(),
                format!("{prefix}stalled holds only ids in active (each finish, retry and extendLock SREMs its id)"),
                format!("in stalled and {}", mask_names(mask)),
            )
        })
    }));
    found.par_sort_unstable_by(|a, b| (a.invariant, &a.job, &a.found).cmp(&(b.invariant, &b.job, &b.found)));
    found
}

/// The violations of one job hash whose id is in the locations of `mask`.
fn check_row(queue: &QueueState, id: &JobId, row: &Row, mask: u8, drained: bool) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut add = |invariant, expected: String, found: String| {
        out.push(violation(invariant, queue, id.as_str(), expected, found));
    };
    let empty = BullRow::default();
    let bull = row.bull.as_deref().unwrap_or(&empty);
    let is = |loc: Location| mask == loc.bit();
    // I1 and I2: one location, the one that is its state.
    match (mask & BULL_MASK).count_ones() {
        0 => add(Invariant::I1, "no job hash outside the locations".into(), "a job hash in no location".into()),
        1 => {}
        _ => add(Invariant::I2, "each id in exactly one location, once".into(), format!("in {}", mask_names(mask))),
    }
    // I3: the add's fields present, no foreign field.
    let missing: Vec<&str> =
        BULL_BORN_FIELDS.iter().enumerate().filter(|(i, _)| bull.born & (1 << i) == 0).map(|(_, name)| *name).collect();
    if !missing.is_empty() {
        add(
            Invariant::I3,
            format!("the fields of the add present: {}", BULL_BORN_FIELDS.join(", ")),
            format!("missing {}", missing.join(", ")),
        );
    }
    if !row.foreign_fields.is_empty() {
        add(
            Invariant::I3,
            format!("fields only among {}, {}", BULL_BORN_FIELDS.join(", "), BULL_LATER_FIELDS.join(", ")),
            format!("foreign field {}", row.foreign_fields.join(", ")),
        );
    }
    // I4: the payload inside `data`.
    if bull.data_undecodable {
        add(
            Invariant::I4,
            "data a JSON string of the payload's standard base64".into(),
            format!("data of {} bytes is not a JSON string of base64", row.payload_len.unwrap_or(0)),
        );
    } else if let Some(damage) = payload_damage(row) {
        add(Invariant::I4, PAYLOAD_EXPECTED.into(), damage);
    }
    // I5: counters are counts (absent = 0: BullMQ writes none at add); a finished attempt needs a
    // started one.
    let [ats, atm, _] = [("ats", &bull.ats), ("atm", &bull.atm), ("stc", &bull.stc)].map(|(name, value)| match value {
        None => Some(0),
        Some(Ok(n)) => Some(*n),
        Some(Err(raw)) => {
            add(Invariant::I5, format!("{name} a non-negative integer (a count)"), format!("{name} = {raw:?}"));
            None
        }
    });
    if let (Some(ats), Some(atm)) = (ats, atm) {
        if atm > ats {
            add(
                Invariant::I5,
                "atm ≤ ats (an attempt is made only after it was started)".into(),
                format!("atm = {atm}, ats = {ats}"),
            );
        }
        for loc in [Location::Active, Location::Completed, Location::Failed] {
            if is(loc) && ats == 0 {
                add(
                    Invariant::I5,
                    format!("ats ≥ 1 in {} (reaching it needs a claim)", loc.name()),
                    "no claim (ats = 0)".into(),
                );
            }
        }
        for loc in [Location::Completed, Location::Failed] {
            if is(loc) && atm == 0 && ats > 0 {
                add(
                    Invariant::I5,
                    format!("atm ≥ 1 in {} (finishing is an attempt made)", loc.name()),
                    "atm = 0".into(),
                );
            }
        }
    }
    // I7: a finished job says how it finished; an active one is held; after a drain, nothing waits.
    for (loc, field, has) in [
        (Location::Completed, "returnvalue", bull.has_returnvalue),
        (Location::Failed, "failedReason", row.has_last_error),
    ] {
        if !is(loc) {
            continue;
        }
        let mut lacks = Vec::new();
        match &bull.finished_on {
            None => lacks.push("no finishedOn".to_string()),
            Some(Err(raw)) => lacks.push(format!("finishedOn = {raw:?}")),
            Some(Ok(_)) => {}
        }
        if !has {
            lacks.push(format!("no {field}"));
        }
        if bull.has_lock {
            lacks.push("its lock key still there".into());
        }
        if !lacks.is_empty() {
            add(
                Invariant::I7,
                format!("a {} job has finishedOn (ms) and {field}, and no lock", loc.name()),
                lacks.join(", "),
            );
        }
    }
    // An active job without its lock is legal in BullMQ: a stall the stalled check has not
    // moved back yet (docs/bullmq-mapping.md section 6); after a drain, the rule below names
    // any job still active.
    if drained && mask & NOT_DRAINED != 0 {
        add(
            Invariant::I7,
            "completed or failed after the drain".into(),
            format!("in {} after the drain", mask_names(mask & NOT_DRAINED)),
        );
    }
    out
}

/// The I1 violation of a stray key, saying why it is one.
fn stray_key(queue: &QueueState, prefix: &str, key: &str) -> Violation {
    let found = match classify(prefix, key.as_bytes()) {
        BullKey::Location(loc) => {
            let kind =
                if matches!(loc, Location::Wait | Location::Paused | Location::Active) { "LIST" } else { "ZSET" };
            format!("key {key} is not a {kind}")
        }
        BullKey::Stalled => format!("key {key} is not a SET"),
        BullKey::Job(_) => format!("key {key} is not a HASH"),
        BullKey::Lock(_) | BullKey::JobPart(_) => format!("key {key} belongs to no job hash"),
        BullKey::Own | BullKey::Stray => match key.strip_prefix(prefix) {
            Some(rest) if rest.len() >= 3 && rest.starts_with("JOB") => {
                format!("key {key} is no job of the harness (ill-formed id)")
            }
            _ => format!("key {key}"),
        },
    };
    violation(
        Invariant::I1,
        queue,
        key,
        format!("only BullMQ's keys under {prefix}: job hashes {prefix}<id> (and <id>:lock, <id>:logs, ...) with the harness's ids, the seven locations, stalled, meta, id, events, marker, pc, ..."),
        found,
    )
}
