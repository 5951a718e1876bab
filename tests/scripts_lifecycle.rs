//! `claim`, `complete`, `fail`, `extend`, `progress`, `reap`, `promote` against a real server:
//! happy paths, every error code each can return, and the fencing story of docs/protocol.md.

mod support;

use emq_bench::keyspace::{JobId, JobIdGen, QueueKeys};
use emq_bench::lua::{ErrorCode, Script};
use emq_bench::queue::{CompleteReply, FailArgs, FailReply};
use emq_bench::resp::{CallError, ScriptClient};
use std::time::Duration;
use support::*;

fn code<T: std::fmt::Debug>(result: Result<T, CallError>) -> ErrorCode {
    match result {
        Err(CallError::Emq { code, .. }) => code,
        other => panic!("expected an EMQ error, got {other:?}"),
    }
}

const FAIL_NOW: FailArgs<'static> = FailArgs { error: "boom", max_attempts: 3, backoff_ms: 0, priority: 0 };

/// Enqueues one job and claims it: returns its id and token (1).
async fn active_job(c: &mut ScriptClient, q: &QueueKeys, seed: u64) -> (JobId, u64) {
    let id = JobIdGen::new(seed).next_id();
    c.enqueue(q, &id, b"work", None).await.unwrap();
    let claimed = c.claim(q, 60_000, 1).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].id, id);
    (id, claimed[0].token)
}

#[tokio::test]
async fn claim_leases_in_priority_then_mint_order_and_hands_out_token_1() {
    let server = server();
    let mut c = client(&server).await;
    let q = keys("q");
    assert!(c.claim(&q, 1000, 10).await.unwrap().is_empty(), "nothing pending: empty array");
    let mut ids = JobIdGen::new(9);
    let (a, b, urgent) = (ids.next_id(), ids.next_id(), ids.next_id());
    c.enqueue(&q, &a, b"a", Some(5)).await.unwrap();
    c.enqueue(&q, &b, b"b", Some(5)).await.unwrap();
    c.enqueue(&q, &urgent, b"u", Some(0)).await.unwrap();
    let mut conn = c.connection().clone();
    let before = server_ms(&mut conn).await;
    let claimed = c.claim(&q, 30_000, 2).await.unwrap();
    let order: Vec<_> = claimed.iter().map(|j| (j.id, j.payload.clone(), j.token, j.priority)).collect();
    assert_eq!(order, vec![(urgent, b"u".to_vec(), 1, 0), (a, b"a".to_vec(), 1, 5)]);
    let row = row(&mut conn, &q.job_key(&urgent)).await;
    assert_eq!(row["state"], b"active");
    assert_eq!(row["attempts"], b"1");
    let deadline = score(&mut conn, &q.active, urgent.as_str()).await.unwrap() as u64;
    assert!(deadline >= before + 30_000 && deadline < before + 31_000);
    assert_eq!(score(&mut conn, &q.pending, urgent.as_str()).await, None);
    assert_eq!(score(&mut conn, &q.pending, b.as_str()).await, Some(5.0));
}

#[tokio::test]
async fn claim_refuses_bad_arguments_and_foreign_slots_without_writing() {
    let server = server();
    let mut c = client(&server).await;
    let q = keys("q");
    let id = JobIdGen::new(10).next_id();
    c.enqueue(&q, &id, b"x", None).await.unwrap();
    let mut conn = c.connection().clone();
    let before = snapshot(&mut conn, &q).await;
    let ks = [q.pending.as_str(), q.active.as_str()];
    let prefix = q.job_prefix.as_bytes();
    for args in [
        vec![&b"emq:{other}:job:"[..], b"1000", b"1"],
        vec![prefix, b"0", b"1"],
        vec![prefix, b"ten", b"1"],
        vec![prefix, b"1000", b"0"],
        vec![prefix, b"1000", b"1001"],
        vec![prefix],
    ] {
        assert_eq!(code(raw(&mut c, Script::Claim, &ks, &args).await), ErrorCode::Arg, "{args:?}");
    }
    assert_eq!(snapshot(&mut conn, &q).await, before);
}

#[tokio::test]
async fn complete_is_fenced_and_safe_to_retry() {
    let server = server();
    let mut c = client(&server).await;
    let q = keys("q");
    let (id, token) = active_job(&mut c, &q, 11).await;
    assert_eq!(code(c.complete(&q, &id, token + 1).await), ErrorCode::Fence);
    assert_eq!(c.complete(&q, &id, token).await.unwrap(), CompleteReply::Completed);
    assert_eq!(c.complete(&q, &id, token).await.unwrap(), CompleteReply::AlreadyCompleted, "safe retry");
    assert_eq!(code(c.complete(&q, &id, token + 1).await), ErrorCode::State);
    let mut conn = c.connection().clone();
    let row = row(&mut conn, &q.job_key(&id)).await;
    assert_eq!(row["state"], b"completed");
    assert!(score(&mut conn, &q.completed, id.as_str()).await.is_some());
    assert_eq!(score(&mut conn, &q.active, id.as_str()).await, None);

    let missing = JobIdGen::new(12).next_id();
    assert_eq!(code(c.complete(&q, &missing, 1).await), ErrorCode::NoJob);
    let pending = JobIdGen::new(13).next_id();
    c.enqueue(&q, &pending, b"p", None).await.unwrap();
    assert_eq!(code(c.complete(&q, &pending, 1).await), ErrorCode::State);
    let ks = [q.job_key(&pending), q.active.clone(), q.completed.clone()];
    let ks: Vec<&str> = ks.iter().map(String::as_str).collect();
    assert_eq!(code(raw(&mut c, Script::Complete, &ks, &[b"task1", b"1"]).await), ErrorCode::Kind);
    assert_eq!(code(raw(&mut c, Script::Complete, &ks, &[pending.as_bytes(), b"x"]).await), ErrorCode::Arg);
    assert_eq!(code(raw(&mut c, Script::Complete, &ks, &[pending.as_bytes(), b"0"]).await), ErrorCode::Arg);
}

#[tokio::test]
async fn fencing_a_reaped_lease_refuses_the_stale_token() {
    // docs/protocol.md: claim (token 1), lease expires, reap, claim again (token 2), then complete
    // with token 1 -> EMQFENCE and complete with token 2 -> 1.
    let server = server();
    let mut c = client(&server).await;
    let q = keys("fence");
    let id = JobIdGen::new(14).next_id();
    c.enqueue(&q, &id, b"job", None).await.unwrap();
    let first = c.claim(&q, 5, 1).await.unwrap();
    assert_eq!(first[0].token, 1);
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert_eq!(c.reap(&q, 100, 0).await.unwrap(), 1);
    let mut conn = c.connection().clone();
    let reaped = row(&mut conn, &q.job_key(&id)).await;
    assert_eq!(reaped["state"], b"pending");
    assert_eq!(reaped["attempts"], b"1", "reap leaves attempts unchanged");
    assert_eq!(score(&mut conn, &q.pending, id.as_str()).await, Some(0.0));
    let second = c.claim(&q, 60_000, 1).await.unwrap();
    assert_eq!(second[0].token, 2);
    assert_eq!(code(c.complete(&q, &id, 1).await), ErrorCode::Fence);
    assert_eq!(c.complete(&q, &id, 2).await.unwrap(), CompleteReply::Completed);
    assert_eq!(row(&mut conn, &q.job_key(&id)).await["attempts"], b"2");
}

#[tokio::test]
async fn fail_retries_to_pending_or_delayed_then_fails_for_good() {
    let server = server();
    let mut c = client(&server).await;
    let q = keys("q");
    let mut conn = c.connection().clone();
    let (id, t1) = active_job(&mut c, &q, 15).await;
    let args = FailArgs { error: "e1", max_attempts: 3, backoff_ms: 0, priority: 4 };
    assert_eq!(c.fail(&q, &id, t1, args).await.unwrap(), FailReply::Retry);
    let r = row(&mut conn, &q.job_key(&id)).await;
    assert_eq!((r["state"].as_slice(), r["last_error"].as_slice()), (&b"pending"[..], &b"e1"[..]));
    assert_eq!(score(&mut conn, &q.pending, id.as_str()).await, Some(4.0));
    assert_eq!(score(&mut conn, &q.active, id.as_str()).await, None);

    let t2 = c.claim(&q, 60_000, 1).await.unwrap()[0].token;
    assert_eq!(t2, 2);
    let before = server_ms(&mut conn).await;
    let backoff = FailArgs { error: "e2", max_attempts: 3, backoff_ms: 50_000, priority: 0 };
    assert_eq!(c.fail(&q, &id, t2, backoff).await.unwrap(), FailReply::Retry);
    assert_eq!(row(&mut conn, &q.job_key(&id)).await["state"], b"delayed");
    let due = score(&mut conn, &q.delayed, id.as_str()).await.unwrap() as u64;
    assert!(due >= before + 50_000 && due < before + 51_000);

    redis::cmd("ZADD").arg(&q.delayed).arg(0).arg(id.as_str()).exec_async(&mut conn).await.unwrap();
    assert_eq!(c.promote(&q, 10).await.unwrap(), 1);
    let t3 = c.claim(&q, 60_000, 1).await.unwrap()[0].token;
    assert_eq!(t3, 3);
    assert_eq!(code(c.fail(&q, &id, t2, FAIL_NOW).await), ErrorCode::Fence);
    assert_eq!(c.fail(&q, &id, t3, FailArgs { error: "last", ..FAIL_NOW }).await.unwrap(), FailReply::Failed);
    let r = row(&mut conn, &q.job_key(&id)).await;
    assert_eq!((r["state"].as_slice(), r["last_error"].as_slice()), (&b"failed"[..], &b"last"[..]));
    assert!(score(&mut conn, &q.failed, id.as_str()).await.is_some());
    assert_eq!(code(c.fail(&q, &id, t3, FAIL_NOW).await), ErrorCode::State);
    assert_eq!(code(c.fail(&q, &JobIdGen::new(16).next_id(), 1, FAIL_NOW).await), ErrorCode::NoJob);
}

#[tokio::test]
async fn fail_refuses_bad_arguments_without_writing() {
    let server = server();
    let mut c = client(&server).await;
    let q = keys("q");
    let (id, _) = active_job(&mut c, &q, 17).await;
    let mut conn = c.connection().clone();
    let before = snapshot(&mut conn, &q).await;
    let key = q.job_key(&id);
    let ks = [key.as_str(), &q.active, &q.pending, &q.delayed, &q.failed];
    let i = id.as_bytes();
    assert_eq!(code(raw(&mut c, Script::Fail, &ks, &[b"task", b"1", b"e", b"3", b"0", b"0"]).await), ErrorCode::Kind);
    for args in [
        vec![i, b"one", b"e", b"3", b"0", b"0"],
        vec![i, b"1", b"e", b"0", b"0", b"0"],
        vec![i, b"1", b"e", b"3", b"-1", b"0"],
        vec![i, b"1", b"e", b"3", b"0", b"x"],
        vec![i, b"1"],
    ] {
        assert_eq!(code(raw(&mut c, Script::Fail, &ks, &args).await), ErrorCode::Arg, "{args:?}");
    }
    assert_eq!(snapshot(&mut conn, &q).await, before);
}

#[tokio::test]
async fn extend_moves_the_deadline_and_is_fenced() {
    let server = server();
    let mut c = client(&server).await;
    let q = keys("q");
    let (id, token) = active_job(&mut c, &q, 18).await;
    let mut conn = c.connection().clone();
    let before = server_ms(&mut conn).await;
    c.extend(&q, &id, token, 500_000).await.unwrap();
    let deadline = score(&mut conn, &q.active, id.as_str()).await.unwrap() as u64;
    assert!(deadline >= before + 500_000 && deadline < before + 501_000);
    assert_eq!(code(c.extend(&q, &id, token + 1, 1000).await), ErrorCode::Fence);
    assert_eq!(code(c.extend(&q, &JobIdGen::new(19).next_id(), 1, 1000).await), ErrorCode::NoJob);
    let key = q.job_key(&id);
    assert_eq!(
        code(raw(&mut c, Script::Extend, &[&key, &q.active], &[id.as_bytes(), b"1", b"0"]).await),
        ErrorCode::Arg
    );
    assert_eq!(code(raw(&mut c, Script::Extend, &[&key, &q.active], &[b"x", b"1", b"10"]).await), ErrorCode::Kind);
    c.complete(&q, &id, token).await.unwrap();
    assert_eq!(code(c.extend(&q, &id, token, 1000).await), ErrorCode::State);
    assert_eq!(score(&mut conn, &q.active, id.as_str()).await, None, "extend never re-adds a finished job");
}

#[tokio::test]
async fn progress_writes_its_field_and_is_fenced() {
    let server = server();
    let mut c = client(&server).await;
    let q = keys("q");
    let (id, token) = active_job(&mut c, &q, 20).await;
    c.progress(&q, &id, token, b"50%").await.unwrap();
    let mut conn = c.connection().clone();
    let r = row(&mut conn, &q.job_key(&id)).await;
    assert_eq!(r["progress"], b"50%");
    assert_eq!(r.len(), 4);
    assert_eq!(code(c.progress(&q, &id, token + 1, b"x").await), ErrorCode::Fence);
    assert_eq!(code(c.progress(&q, &JobIdGen::new(21).next_id(), 1, b"x").await), ErrorCode::NoJob);
    let key = q.job_key(&id);
    assert_eq!(code(raw(&mut c, Script::Progress, &[&key], &[id.as_bytes(), b"1"]).await), ErrorCode::Arg);
    assert_eq!(code(raw(&mut c, Script::Progress, &[&key], &[b"x", b"1", b"p"]).await), ErrorCode::Kind);
    c.complete(&q, &id, token).await.unwrap();
    assert_eq!(code(c.progress(&q, &id, token, b"x").await), ErrorCode::State);
}

#[tokio::test]
async fn reap_and_promote_move_only_what_is_due_and_refuse_foreign_prefixes() {
    let server = server();
    let mut c = client(&server).await;
    let q = keys("q");
    let mut ids = JobIdGen::new(22);
    let (soon, later) = (ids.next_id(), ids.next_id());
    c.enqueue_delayed(&q, &soon, b"s", 0).await.unwrap();
    c.enqueue_delayed(&q, &later, b"l", 600_000).await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert_eq!(c.promote(&q, 100).await.unwrap(), 1);
    let mut conn = c.connection().clone();
    assert_eq!(row(&mut conn, &q.job_key(&soon)).await["state"], b"pending");
    assert_eq!(row(&mut conn, &q.job_key(&later)).await["state"], b"delayed");
    assert_eq!(c.reap(&q, 100, 0).await.unwrap(), 0, "a held lease is not reaped");
    c.claim(&q, 600_000, 1).await.unwrap();
    assert_eq!(c.reap(&q, 100, 0).await.unwrap(), 0);
    let before = snapshot(&mut conn, &q).await;
    for (script, set) in [(Script::Reap, &q.active), (Script::Promote, &q.delayed)] {
        let ks = [set.as_str(), q.pending.as_str()];
        assert_eq!(code(raw(&mut c, script, &ks, &[b"emq:{x}:job:", b"10"]).await), ErrorCode::Arg);
        assert_eq!(code(raw(&mut c, script, &ks, &[q.job_prefix.as_bytes(), b"0"]).await), ErrorCode::Arg);
    }
    assert_eq!(snapshot(&mut conn, &q).await, before);
}

#[tokio::test]
async fn reap_and_promote_never_invent_or_revive_rows() {
    let server = server();
    let mut c = client(&server).await;
    let q = keys("q");
    let mut conn = c.connection().clone();
    let mut ids = JobIdGen::new(24);
    let (ghost, done) = (ids.next_id(), ids.next_id());
    // An expired lease of a job with no row, and a due delayed member whose row is completed.
    redis::cmd("ZADD").arg(&q.active).arg(1).arg(ghost.as_str()).exec_async(&mut conn).await.unwrap();
    c.enqueue(&q, &done, b"d", None).await.unwrap();
    let token = c.claim(&q, 60_000, 1).await.unwrap()[0].token;
    c.complete(&q, &done, token).await.unwrap();
    redis::cmd("ZADD").arg(&q.delayed).arg(1).arg(done.as_str()).exec_async(&mut conn).await.unwrap();
    assert_eq!(c.reap(&q, 10, 0).await.unwrap(), 0);
    assert_eq!(c.promote(&q, 10).await.unwrap(), 0);
    assert!(row(&mut conn, &q.job_key(&ghost)).await.is_empty(), "reap invented a row");
    assert_eq!(row(&mut conn, &q.job_key(&done)).await["state"], b"completed", "promote revived a finished job");
    assert_eq!(score(&mut conn, &q.pending, done.as_str()).await, None);
}

#[tokio::test]
async fn the_registry_survives_script_flush() {
    let server = server();
    let mut c = client(&server).await;
    let q = keys("q");
    let mut conn = c.connection().clone();
    redis::cmd("SCRIPT").arg("FLUSH").exec_async(&mut conn).await.unwrap();
    let id = JobIdGen::new(23).next_id();
    assert_eq!(c.enqueue(&q, &id, b"after flush", None).await.unwrap(), emq_bench::queue::EnqueueReply::Enqueued);
    redis::cmd("SCRIPT").arg("FLUSH").exec_async(&mut conn).await.unwrap();
    assert_eq!(c.claim(&q, 1000, 1).await.unwrap()[0].id, id);
}
