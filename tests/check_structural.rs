//! The structural checker against a real server: a queue driven through every state by the
//! protocol's own scripts is clean, and each violation planted with raw commands is named with
//! the right invariant and job. The `check` command's exit codes too.

mod support;

use emq_bench::check::{check_structural, checked_jobs, scan, Invariant, Location, StateField, Violation};
use emq_bench::keyspace::{JobId, JobIdGen, QueueKeys};
use emq_bench::net::Control;
use emq_bench::payload::PayloadPool;
use emq_bench::queue::{FailArgs, FailReply};
use emq_bench::resp::ScriptClient;
use emq_bench::server::EmbeddedServer;
use std::process::{Command, Output};
use support::*;

/// A server whose queue `q` holds one job in each state (two pending: fresh and retried).
struct Fixture {
    server: EmbeddedServer,
    conn: Control,
    q: QueueKeys,
    completed: JobId,
    retried: JobId,
    failed: JobId,
    active: JobId,
    pending: JobId,
    delayed: JobId,
}

async fn fixture() -> Fixture {
    let server = server();
    let mut c: ScriptClient = client(&server).await;
    let q = keys("q");
    let mut ids = JobIdGen::new(11);
    let all: Vec<JobId> = (0..6).map(|_| ids.next_id()).collect();
    let pool = PayloadPool::new(11);
    let mut payload = Vec::new();
    for (i, id) in all.iter().enumerate() {
        pool.build(id, 48 + i, &mut payload);
        if i == 5 {
            c.enqueue_delayed(&q, id, &payload, 60_000).await.unwrap();
        } else {
            c.enqueue(&q, id, &payload, None).await.unwrap();
        }
    }
    let claimed = c.claim(&q, 60_000, 4).await.unwrap();
    assert_eq!(claimed.iter().map(|j| j.id).collect::<Vec<_>>(), all[..4]);
    c.complete(&q, &all[0], 1).await.unwrap();
    let retry = FailArgs { error: "boom", max_attempts: 3, backoff_ms: 0, priority: 0 };
    assert_eq!(c.fail(&q, &all[1], 1, retry).await.unwrap(), FailReply::Retry);
    let fail = FailArgs { error: "boom", max_attempts: 1, backoff_ms: 0, priority: 0 };
    assert_eq!(c.fail(&q, &all[2], 1, fail).await.unwrap(), FailReply::Failed);
    let conn = c.connection().clone();
    Fixture {
        server,
        conn,
        q,
        completed: all[0],
        retried: all[1],
        failed: all[2],
        active: all[3],
        pending: all[4],
        delayed: all[5],
    }
}

impl Fixture {
    async fn violations(&mut self) -> Vec<Violation> {
        let state = scan(&self.conn, std::slice::from_ref(&self.q)).await.unwrap();
        check_structural(&state)
    }

    /// Runs a raw command (the planting tool: it bypasses the scripts on purpose).
    async fn raw(&mut self, args: &[&[u8]]) {
        let mut cmd = redis::cmd(std::str::from_utf8(args[0]).unwrap());
        for arg in &args[1..] {
            cmd.arg(*arg);
        }
        let _: redis::Value = cmd.query_async(&mut self.conn).await.unwrap();
    }

    fn row_key(&self, id: &JobId) -> String {
        self.q.job_key(id)
    }

    async fn calls(&mut self, command: &str) -> u64 {
        calls(&mut self.conn, command).await
    }

    async fn scan_calls(&mut self) -> u64 {
        self.calls("scan").await
    }
}

/// Calls of `command` the server has counted (INFO commandstats).
async fn calls(conn: &mut Control, command: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query_async(conn).await.unwrap();
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .map_or(0, |rest| rest.split(',').next().unwrap().parse().unwrap())
}

/// Asserts `found` is exactly one violation, of `invariant` for `job`, whose found text
/// contains `text`.
fn assert_one(found: &[Violation], invariant: Invariant, job: &str, text: &str) {
    assert_eq!(found.len(), 1, "{found:#?}");
    let v = &found[0];
    assert_eq!((v.invariant, v.queue.as_str(), v.job.as_deref()), (invariant, "q", Some(job)), "{v:#?}");
    assert!(v.found.contains(text), "found {:?} lacks {text:?}", v.found);
}

#[tokio::test]
async fn a_queue_driven_by_the_scripts_is_clean() {
    let mut f = fixture().await;
    let state = scan(&f.conn, std::slice::from_ref(&f.q)).await.unwrap();
    // DBSIZE equals the keys the sets led to (rows, sets): nothing to SCAN for.
    assert_eq!(f.scan_calls().await, 0);
    assert_eq!(check_structural(&state), vec![]);
    assert_eq!(checked_jobs(&state), 6);
    let queue = &state.queues[0];
    let expect = [
        (f.completed, Location::Completed, 1),
        (f.retried, Location::Pending, 1),
        (f.failed, Location::Failed, 1),
        (f.active, Location::Active, 1),
        (f.pending, Location::Pending, 0),
        (f.delayed, Location::Delayed, 0),
    ];
    for (id, loc, attempts) in expect {
        assert_eq!(queue.rows[&id].state, StateField::Known(loc), "{id}");
        assert_eq!(queue.rows[&id].attempts, Some(Ok(attempts)), "{id}");
        assert_eq!(queue.members[&id], loc.bit(), "{id}");
    }
    assert!(queue.rows[&f.retried].has_last_error && queue.rows[&f.failed].has_last_error);
    assert!(queue.stray_keys.is_empty() && queue.stray_members.is_empty());
}

#[tokio::test]
async fn a_job_in_two_sets_is_i2() {
    let mut f = fixture().await;
    let (active, completed) = (f.q.active.clone(), f.completed.to_string());
    f.raw(&[b"ZADD", active.as_bytes(), b"1", completed.as_bytes()]).await;
    let found = f.violations().await;
    assert_one(&found, Invariant::I2, &completed, "member of active and completed");
    assert_eq!(found[0].expected, "member of exactly emq:{q}:completed (state = completed)");
}

#[tokio::test]
async fn a_foreign_field_is_i3() {
    let mut f = fixture().await;
    let key = f.row_key(&f.active);
    f.raw(&[b"HSET", key.as_bytes(), b"owner", b"me"]).await;
    assert_one(&f.violations().await, Invariant::I3, f.active.as_str(), "foreign field owner");
}

#[tokio::test]
async fn a_changed_payload_byte_is_i4() {
    let mut f = fixture().await;
    let key = f.row_key(&f.pending);
    // Byte 30 lies in the filler, after the 20-byte header.
    let mut payload = row(&mut f.conn, &key).await.remove("payload").unwrap();
    payload[30] ^= 0x01;
    f.raw(&[b"HSET", key.as_bytes(), b"payload", &payload]).await;
    assert_one(&f.violations().await, Invariant::I4, f.pending.as_str(), "does not match its header CRC-32");
}

#[tokio::test]
async fn a_deleted_row_whose_id_stays_in_a_set_is_an_i2_orphan() {
    let mut f = fixture().await;
    let key = f.row_key(&f.failed);
    f.raw(&[b"DEL", key.as_bytes()]).await;
    assert_one(&f.violations().await, Invariant::I2, f.failed.as_str(), "member of failed, but no row");
}

#[tokio::test]
async fn a_row_in_no_set_is_i2() {
    let mut f = fixture().await;
    let (delayed, id) = (f.q.delayed.clone(), f.delayed.to_string());
    f.raw(&[b"ZREM", delayed.as_bytes(), id.as_bytes()]).await;
    assert_one(&f.violations().await, Invariant::I2, &id, "member of no location set");
    // The row no set names made DBSIZE exceed what the sets led to: the queue was SCANned.
    assert!(f.scan_calls().await > 0);
}

#[tokio::test]
async fn a_non_integer_attempts_is_i5() {
    let mut f = fixture().await;
    let key = f.row_key(&f.retried);
    f.raw(&[b"HSET", key.as_bytes(), b"attempts", b"1.5"]).await;
    assert_one(&f.violations().await, Invariant::I5, f.retried.as_str(), "attempts = \"1.5\"");
}

#[tokio::test]
async fn a_stray_key_is_i1() {
    let mut f = fixture().await;
    f.raw(&[b"SET", b"emq:{q}:junk", b"1"]).await;
    // Keys of other queues are not this queue's business.
    f.raw(&[b"SET", b"emq:{other}:junk", b"1"]).await;
    assert_one(&f.violations().await, Invariant::I1, "emq:{q}:junk", "key emq:{q}:junk");
    // DBSIZE exceeded what the sets could lead to: SCANned while the sets were read, and each
    // row read once although both the sets and the SCAN named it.
    assert!(f.scan_calls().await > 0);
    assert_eq!(f.calls("hgetall").await, 6);
}

#[tokio::test]
async fn a_bogus_state_is_i2() {
    let mut f = fixture().await;
    let key = f.row_key(&f.completed);
    f.raw(&[b"HSET", key.as_bytes(), b"state", b"bogus"]).await;
    assert_one(&f.violations().await, Invariant::I2, f.completed.as_str(), "state = \"bogus\"; member of completed");
}

#[tokio::test]
async fn a_row_key_that_is_not_a_hash_is_i1() {
    let mut f = fixture().await;
    let key = f.row_key(&f.pending);
    f.raw(&[b"DEL", key.as_bytes()]).await;
    f.raw(&[b"SET", key.as_bytes(), b"x"]).await;
    let found = f.violations().await;
    assert_eq!(found.len(), 2, "{found:#?}");
    assert_eq!((found[0].invariant, found[0].job.as_deref()), (Invariant::I1, Some(key.as_str())));
    assert!(found[0].found.ends_with("is not a HASH"), "{:?}", found[0]);
    assert_eq!((found[1].invariant, found[1].job.as_deref()), (Invariant::I2, Some(f.pending.as_str())));
}

fn emq_bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_emq-bench")).args(args).output().expect("run emq-bench")
}

#[tokio::test]
async fn the_check_command_exits_1_on_a_violation_and_0_when_clean() {
    let mut f = fixture().await;
    let url = f.server.url();
    let out = emq_bench(&["check", "--url", &url, "--queue", "q"]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(stdout, "checked 6 jobs in queue q: no violations\n");

    let key = f.row_key(&f.active);
    f.raw(&[b"HSET", key.as_bytes(), b"owner", b"me"]).await;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("out");
    let out = emq_bench(&["check", "--url", &url, "--queue", "q", "--out", dir.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.starts_with("invariant  name"), "{stdout}");
    assert!(stdout.contains(f.active.as_str()) && stdout.contains("foreign field owner"), "{stdout}");
    assert!(stdout.ends_with("checked 6 jobs in queue q: 1 violation (I3 1)\n"), "{stdout}");
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("invariants.json")).unwrap()).unwrap();
    assert_eq!((json["checked_jobs"].as_u64(), json["violations_total"].as_u64()), (Some(6), Some(1)));
    assert_eq!(json["by_invariant"]["I3"], 1);
    assert_eq!(json["violations"][0]["job"], f.active.as_str());

    let out = emq_bench(&["check", "--url", &url, "--queue", "q", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is invariants.json");
    assert_eq!(json["violations"][0]["invariant"], "I3");
}

#[test]
fn the_check_command_refuses_bad_input_with_exit_2() {
    for (args, text) in [
        (&["check", "--url", "http://127.0.0.1:6379/", "--queue", "q"][..], "scheme http"),
        (
            &["check", "--url", "rediss://127.0.0.1:1/", "--cacert", "/nonexistent/ca.pem", "--queue", "q"],
            "/nonexistent/ca.pem",
        ),
        (&["check", "--url", "redis://:hunter2@127.0.0.1:1/", "--queue", "q"], "redis://:***@127.0.0.1:1/0"),
        (&["check", "--url", "redis://127.0.0.1:1/", "--queue", "a{b"], "queue name"),
        (&["check", "--url", "redis://127.0.0.1:1/", "--queue", "q", "--history", "h.jsonl"], "h.jsonl"),
        (&["check", "--url", "redis://127.0.0.1:1/"], "--queue"),
    ] {
        let out = emq_bench(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(text), "{args:?}: {stderr}");
        assert!(!stderr.contains("hunter2"), "the password leaked: {stderr}");
    }
}

#[tokio::test]
async fn a_location_set_of_the_wrong_type_and_an_ill_formed_member_are_named() {
    let mut f = fixture().await;
    let failed = f.q.failed.clone();
    f.raw(&[b"DEL", failed.as_bytes()]).await;
    f.raw(&[b"SET", failed.as_bytes(), b"x"]).await;
    let completed = f.q.completed.clone();
    f.raw(&[b"ZADD", completed.as_bytes(), b"1", b"not-a-job"]).await;
    let found = f.violations().await;
    let brief: Vec<(Invariant, Option<&str>)> = found.iter().map(|v| (v.invariant, v.job.as_deref())).collect();
    assert_eq!(
        brief,
        vec![
            (Invariant::I1, Some("emq:{q}:failed")),
            (Invariant::I2, Some(f.failed.as_str())),
            (Invariant::I2, Some("not-a-job"))
        ],
        "{found:#?}"
    );
    assert!(found[0].found.ends_with("is not a ZSET"), "{:?}", found[0]);
    assert_eq!(found[1].found, "member of no location set");
    assert_eq!(found[2].found, "member \"not-a-job\" of emq:{q}:completed");
}

#[tokio::test]
async fn a_queue_larger_than_one_batch_is_read_whole() {
    const JOBS: u32 = 25_000; // more than one SCAN page, ZRANGE chunk and HGETALL window
    let server = server();
    let mut conn = client(&server).await.connection().clone();
    let q = keys("big");
    let mut ids = JobIdGen::new(5);
    let pool = PayloadPool::new(5);
    let mut payload = Vec::new();
    let mut pipe = redis::pipe();
    for n in 0..JOBS {
        let id = ids.next_id();
        pool.build(&id, 24, &mut payload);
        let (set, state, attempts) =
            if n % 2 == 0 { (&q.completed, "completed", "1") } else { (&q.pending, "pending", "0") };
        pipe.hset_multiple(
            q.job_key(&id),
            &[("state", state.as_bytes()), ("attempts", attempts.as_bytes()), ("payload", &payload)],
        )
        .ignore();
        pipe.zadd(set, id.as_str(), n).ignore();
    }
    let () = pipe.query_async(&mut conn).await.unwrap();
    let state = scan(&conn, std::slice::from_ref(&q)).await.unwrap();
    assert_eq!(check_structural(&state), vec![]);
    assert_eq!((checked_jobs(&state), state.queues[0].rows.len()), (JOBS as usize, JOBS as usize));
    assert_eq!(calls(&mut conn, "scan").await, 0);

    // A key of someone else's on the server: now the queue is SCANned too, across several
    // pages, while its sets are read, and still each row is read once.
    let _: () = redis::cmd("SET").arg("other-tenant:key").arg("1").query_async(&mut conn).await.unwrap();
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query_async(&mut conn).await.unwrap();
    let state = scan(&conn, std::slice::from_ref(&q)).await.unwrap();
    assert_eq!(check_structural(&state), vec![]);
    assert_eq!(checked_jobs(&state), JOBS as usize);
    assert!(calls(&mut conn, "scan").await > 2);
    assert_eq!(calls(&mut conn, "hgetall").await, u64::from(JOBS));
}

#[tokio::test]
async fn a_held_run_lock_is_counted_and_one_stray_key_beside_it_is_found() {
    let mut f = fixture().await;
    f.raw(&[b"SET", b"emq-lock:{q}", b"run-1"]).await;
    assert_eq!(f.violations().await, vec![]);
    assert_eq!(f.scan_calls().await, 0, "the lock is one of the keys found");
    // With the lock there, one stray key takes DBSIZE past what the sets can lead to.
    f.raw(&[b"SET", b"emq:{q}:junk", b"1"]).await;
    assert_one(&f.violations().await, Invariant::I1, "emq:{q}:junk", "key emq:{q}:junk");
    assert!(f.scan_calls().await > 0);
}

#[tokio::test]
async fn one_stray_key_without_a_lock_is_found() {
    let mut f = fixture().await;
    // DBSIZE (12) is no more than the sets can lead to (6 members, 5 sets, a lock): only the
    // count after the reads (11) shows the stray, and the second pass SCANs.
    f.raw(&[b"SET", b"emq:{q}:junk", b"1"]).await;
    assert_one(&f.violations().await, Invariant::I1, "emq:{q}:junk", "key emq:{q}:junk");
    assert!(f.scan_calls().await > 0);
}
