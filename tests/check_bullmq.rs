//! The BullMQ checker against a real server and a real BullMQ state: the official Python client
//! (bullmq 2.26.0, `.tools/bullmq-venv`, made by `scripts/setup`) adds the harness's jobs, with
//! the harness's ids and payloads, and its Workers complete, fail and hold some
//! (`tests/bullmq/make_state.py`); the checker must read each job where BullMQ put it and find
//! nothing wrong. Then each violation, planted with plain commands on top of such a state, must
//! be named with the right invariant and job (and nothing else may be).

mod support;

use emq_bench::bullmq::data::encode_data;
use emq_bench::check::{
    check_bullmq, check_structural, check_structural_bullmq, scan_bullmq, Invariant, Location, ServerState,
};
use emq_bench::keyspace::{JobId, JobIdGen, QueueName};
use emq_bench::net::Control;
use emq_bench::payload::{PayloadCheck, PayloadPool};
use emq_bench::server::EmbeddedServer;
use std::path::PathBuf;
use std::process::Command;
use support::*;

/// A job's end in the plan, as `make_state.py` names it, and the location it must be read in.
const ENDS: [(&str, Location); 6] = [
    ("completed", Location::Completed),
    ("failed", Location::Failed),
    ("active", Location::Active),
    ("wait", Location::Wait),
    ("prioritized", Location::Prioritized),
    ("delayed", Location::Delayed),
];

/// The official client's interpreter; a missing venv fails the test (never a silent skip).
fn python() -> PathBuf {
    let python = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".tools/bullmq-venv/bin/python");
    assert!(
        python.is_file(),
        "{} is missing: run scripts/setup, which makes the venv with the official BullMQ client (bullmq==2.26.0)",
        python.display()
    );
    python
}

/// A server whose queue `q` (keys `bull:{q}:*`) the official client filled: `jobs[i]` are the
/// ids that ended as `ENDS[i]`.
struct Made {
    _server: EmbeddedServer,
    conn: Control,
    queue: QueueName,
    jobs: Vec<Vec<JobId>>,
}

impl Made {
    /// The ids that ended as `end` (a name of [`ENDS`]).
    fn ids(&self, end: &str) -> &[JobId] {
        &self.jobs[ENDS.iter().position(|(name, _)| *name == end).unwrap()]
    }

    fn key(&self, rest: &str) -> String {
        format!("bull:{{{}}}:{rest}", self.queue)
    }

    async fn cmd(&self, args: &[&str]) {
        let mut cmd = redis::cmd(args[0]);
        for arg in &args[1..] {
            cmd.arg(*arg);
        }
        let _: redis::Value = cmd.query_async(&mut self.conn.clone()).await.unwrap();
    }

    async fn state(&self) -> ServerState {
        scan_bullmq(&self.conn, std::slice::from_ref(&self.queue)).await.unwrap()
    }

    /// Every violation as (invariant, job, finding), in the checker's order (which is sorted).
    async fn found(&self, drained: bool) -> Vec<(Invariant, String, String)> {
        let state = self.state().await;
        check_structural_bullmq(&state, drained).into_iter().map(|v| (v.invariant, v.job.unwrap(), v.found)).collect()
    }
}

/// `v`, sorted: the checker's order, to compare with what it found.
fn sorted(mut v: Vec<(Invariant, String, String)>) -> Vec<(Invariant, String, String)> {
    v.sort();
    v
}

/// Makes a [`Made`] with `counts[i]` jobs ending as `ENDS[i]`, payloads of 20.. bytes.
async fn made(seed: u64, counts: [usize; 6]) -> Made {
    let python = python();
    let server = server();
    let conn = client(&server).await.connection().clone();
    let mut ids = JobIdGen::new(seed);
    let pool = PayloadPool::new(seed);
    let (mut plan, mut jobs) = (Vec::new(), Vec::new());
    let (mut payload, mut data) = (Vec::new(), Vec::new());
    for ((end, _), count) in ENDS.iter().zip(counts) {
        let mut these = Vec::new();
        for _ in 0..count {
            let id = ids.next_id();
            pool.build(&id, 20 + 37 * plan.len(), &mut payload);
            data.clear();
            encode_data(&payload, &mut data);
            // The client is handed the string; it writes it JSON-encoded, i.e. as encode_data does.
            let text = std::str::from_utf8(&data[1..data.len() - 1]).unwrap();
            plan.push(serde_json::json!({"id": id.as_str(), "data": text, "end": end}));
            these.push(id);
        }
        jobs.push(these);
    }
    let dir = tempfile::tempdir().unwrap();
    let plan_file = dir.path().join("plan.json");
    std::fs::write(&plan_file, serde_json::to_vec(&plan).unwrap()).unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/bullmq/make_state.py");
    let out = Command::new(python)
        .arg(script)
        .args(["--url", &server.url(), "--queue", "q", "--plan"])
        .arg(&plan_file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "make_state.py: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Made { _server: server, conn, queue: QueueName::new("q").unwrap(), jobs }
}

/// Two of each end but one delayed, one prioritized and none active: enough to plant on.
async fn small(seed: u64) -> Made {
    made(seed, [2, 2, 0, 2, 1, 1]).await
}

#[tokio::test]
async fn the_official_clients_state_reads_into_its_locations_and_is_clean() {
    let made = made(21, [6, 4, 2, 5, 2, 3]).await;
    let state = made.state().await;
    let queue = &state.queues[0];
    assert_eq!(queue.queue, "q");
    assert_eq!((queue.stray_keys.len(), queue.stray_members.len()), (0, 0), "{:?}", queue.stray_keys);
    assert_eq!(queue.rows.len(), 22);
    for ((end, loc), ids) in ENDS.iter().zip(&made.jobs) {
        for id in ids {
            assert_eq!(queue.members.get(id), Some(&loc.bit()), "{id} should be in {end}");
            let row = &queue.rows[id];
            let bull = row.bull.as_deref().unwrap();
            assert_eq!(row.payload_check, Some(PayloadCheck::Intact), "{id}");
            assert_eq!(bull.born, 0b11_1111, "{id}: the add's six fields");
            assert!(row.foreign_fields.is_empty(), "{id}: {:?}", row.foreign_fields);
            let finished = matches!(loc, Location::Completed | Location::Failed);
            // BullMQ writes no counter at add; the worker's one claim and one finish write 1.
            let started = (finished || *loc == Location::Active).then_some(Ok(1));
            let made = finished.then_some(Ok(1));
            assert_eq!((&bull.ats, &bull.atm, &bull.stc), (&started, &made, &None), "{id} ({end})");
            assert_eq!(bull.finished_on.is_some(), finished, "{id}");
            assert_eq!(bull.has_returnvalue, *loc == Location::Completed, "{id}");
            assert_eq!(row.has_last_error, *loc == Location::Failed, "{id}");
            assert_eq!(bull.has_lock, *loc == Location::Active, "{id}: the held jobs' locks, no other");
            assert!(!row.stalled, "{id}");
        }
    }
    // The delayed jobs' due time: an hour after they were added.
    let now = state.now_ms.unwrap() as f64;
    for id in made.ids("delayed") {
        let due = queue.deadlines[id];
        assert!(due > now + 3_500_000.0 && due < now + 3_700_000.0, "{id}: due {due}, now {now}");
    }
    assert_eq!(check_structural_bullmq(&state, false), vec![]);
    assert_eq!(check_structural(&state), vec![], "check_structural applies BullMQ's rules to a BullMQ queue");
    let outcome = check_bullmq(&made.conn, std::slice::from_ref(&made.queue), false, None).await.unwrap();
    assert_eq!((outcome.report.checked_jobs, outcome.report.violations_total), (22, 0));
    assert_eq!((outcome.jobs_with_retries, outcome.failed_by_stall), (0, 0));
}

#[tokio::test]
async fn an_id_in_two_locations_or_twice_in_one_is_i2() {
    let made = small(22).await;
    let (done, waiting) = (made.ids("completed")[0], made.ids("wait")[0]);
    made.cmd(&["LPUSH", &made.key("wait"), done.as_str()]).await;
    made.cmd(&["LPUSH", &made.key("wait"), waiting.as_str()]).await;
    assert_eq!(
        made.found(false).await,
        sorted(vec![
            (Invariant::I2, done.to_string(), "in wait and completed".into()),
            (Invariant::I2, waiting.to_string(), "listed 2 times in bull:{q}:wait".into()),
        ])
    );
}

#[tokio::test]
async fn a_hash_in_no_location_and_a_member_with_no_hash_are_i1() {
    let made = small(23).await;
    let (waiting, delayed) = (made.ids("wait")[1], made.ids("delayed")[0]);
    made.cmd(&["LREM", &made.key("wait"), "0", waiting.as_str()]).await;
    made.cmd(&["DEL", &made.key(delayed.as_str())]).await;
    assert_eq!(
        made.found(false).await,
        sorted(vec![
            (Invariant::I1, waiting.to_string(), "a job hash in no location".into()),
            (Invariant::I1, delayed.to_string(), "in delayed, but no job hash".into()),
        ])
    );
}

#[tokio::test]
async fn corrupted_data_is_i4() {
    let made = small(24).await;
    let (changed, garbled, swapped) = (made.ids("wait")[0], made.ids("failed")[0], made.ids("completed")[0]);
    let mut conn = made.conn.clone();
    let data: Vec<u8> =
        redis::cmd("HGET").arg(made.key(changed.as_str())).arg("data").query_async(&mut conn).await.unwrap();
    // One base64 digit near the end changed: still base64, but not the bytes that were sent.
    let mut bad = data.clone();
    let at = bad.len() - 4;
    bad[at] = if bad[at] == b'A' { b'B' } else { b'A' };
    made.cmd(&["HSET", &made.key(changed.as_str()), "data", std::str::from_utf8(&bad).unwrap()]).await;
    made.cmd(&["HSET", &made.key(garbled.as_str()), "data", "{\"not\":\"base64\"}"]).await;
    // Another job's payload: intact bytes, the wrong id.
    made.cmd(&["HSET", &made.key(swapped.as_str()), "data", std::str::from_utf8(&data).unwrap()]).await;
    let found = made.found(false).await;
    assert_eq!(found.len(), 3, "{found:?}");
    let find = |id: &JobId| found.iter().find(|(_, job, _)| job == id.as_str()).unwrap();
    assert_eq!(find(&changed).0, Invariant::I4);
    assert!(find(&changed).2.contains("does not match its header CRC-32"), "{:?}", find(&changed));
    assert_eq!(
        find(&garbled).clone(),
        (Invariant::I4, garbled.to_string(), "data of 16 bytes is not a JSON string of base64".into())
    );
    assert_eq!(
        find(&swapped).clone(),
        (Invariant::I4, swapped.to_string(), "payload header (bytes 0..16) names another job".into())
    );
}

#[tokio::test]
async fn a_foreign_field_and_a_missing_born_one_are_i3() {
    let made = small(25).await;
    let (waiting, done) = (made.ids("wait")[0], made.ids("completed")[1]);
    made.cmd(&["HSET", &made.key(waiting.as_str()), "zz", "1"]).await;
    made.cmd(&["HDEL", &made.key(done.as_str()), "opts", "priority"]).await;
    let mut want = vec![
        (Invariant::I3, waiting.to_string(), "foreign field zz".into()),
        (Invariant::I3, done.to_string(), "missing opts, priority".into()),
    ];
    want.sort();
    assert_eq!(made.found(false).await, want);
}

#[tokio::test]
async fn attempts_made_past_attempts_started_and_a_bad_counter_are_i5() {
    let made = small(26).await;
    let (done, failed) = (made.ids("completed")[0], made.ids("failed")[1]);
    made.cmd(&["HSET", &made.key(done.as_str()), "atm", "5"]).await;
    made.cmd(&["HSET", &made.key(failed.as_str()), "stc", "-1"]).await;
    let found = made.found(false).await;
    let mut want = vec![
        (Invariant::I5, done.to_string(), "atm = 5, ats = 1".into()),
        (Invariant::I5, failed.to_string(), "stc = \"-1\"".into()),
    ];
    want.sort();
    assert_eq!(found, want);
}

#[tokio::test]
async fn stray_keys_and_members_are_i1() {
    let made = small(27).await;
    let gone = JobIdGen::new(99).next_id();
    made.cmd(&["SET", &made.key("junk"), "1"]).await;
    made.cmd(&["HSET", &made.key("smoke-1"), "name", "x"]).await;
    made.cmd(&["SET", &made.key(&format!("{gone}:lock")), "tok"]).await;
    made.cmd(&["LPUSH", &made.key("wait"), "smoke-2"]).await;
    // BullMQ's own keys are no strays: a worker's stalled check and a deduplication key.
    made.cmd(&["SET", &made.key("stalled-check"), "1"]).await;
    made.cmd(&["SET", &made.key("de:abc"), "x"]).await;
    let found = made.found(false).await;
    let mut want = vec![
        (Invariant::I1, "bull:{q}:junk".into(), "key bull:{q}:junk".into()),
        (Invariant::I1, "bull:{q}:smoke-1".into(), "key bull:{q}:smoke-1".into()),
        (
            Invariant::I1,
            format!("bull:{{q}}:{gone}:lock"),
            format!("key bull:{{q}}:{gone}:lock belongs to no job hash"),
        ),
        (Invariant::I1, "smoke-2".into(), "member \"smoke-2\" of bull:{q}:wait".into()),
    ];
    want.sort();
    assert_eq!(found, want);
}

#[tokio::test]
async fn after_a_drain_a_waiting_job_is_i7() {
    let made = small(28).await;
    let mut want: Vec<(Invariant, String, String)> = Vec::new();
    for (end, loc) in [("wait", "wait"), ("prioritized", "prioritized"), ("delayed", "delayed")] {
        for id in made.ids(end) {
            want.push((Invariant::I7, id.to_string(), format!("in {loc} after the drain")));
        }
    }
    want.sort();
    let found = made.found(true).await;
    assert_eq!(found, want);
    // Without the drain, the same state is clean.
    assert_eq!(made.found(false).await, vec![]);
}

#[tokio::test]
async fn a_finished_job_missing_its_outcome_is_i7_and_an_active_one_without_its_lock_is_a_legal_stall() {
    let made = small(29).await;
    let (done, failed, held, lost) =
        (made.ids("completed")[0], made.ids("failed")[0], made.ids("wait")[0], made.ids("wait")[1]);
    made.cmd(&["HDEL", &made.key(done.as_str()), "returnvalue"]).await;
    made.cmd(&["SET", &made.key(&format!("{failed}:lock")), "tok"]).await;
    // Two claims done by hand, as moveToActive does them; only `held` gets its lock.
    for id in [held, lost] {
        made.cmd(&["LREM", &made.key("wait"), "0", id.as_str()]).await;
        made.cmd(&["LPUSH", &made.key("active"), id.as_str()]).await;
        made.cmd(&["HSET", &made.key(id.as_str()), "ats", "1", "processedOn", "1"]).await;
    }
    made.cmd(&["SET", &made.key(&format!("{held}:lock")), "tok"]).await;
    let found = made.found(false).await;
    let mut want = vec![
        (Invariant::I7, done.to_string(), "no returnvalue".into()),
        (Invariant::I7, failed.to_string(), "its lock key still there".into()),
    ];
    want.sort();
    assert_eq!(found, want);
    let state = made.state().await;
    assert!(state.queues[0].rows[&held].bull.as_ref().unwrap().has_lock);
    assert!(!state.queues[0].rows[&lost].bull.as_ref().unwrap().has_lock, "a stall not moved back yet is no violation");
}
