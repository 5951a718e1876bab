//! EchoMQ v1.1 (docs/protocol.md "Why v1.1") against a real server, for every script it touches:
//! canonical tokens in the four fenced verbs, one slot (every key's hash tag is KEYS[1]'s, never
//! empty), orphans dropped by `reap` and `promote`, and poison jobs failed by `reap`. Every refusal
//! is shown to write nothing with a DUMP of both queues before and after.

mod support;

use emq_bench::keyspace::{JobId, JobIdGen, QueueKeys};
use emq_bench::lua::{ErrorCode, Protocol, Script};
use emq_bench::net::Control;
use emq_bench::resp::{CallError, ScriptClient};
use std::time::Duration;
use support::*;

fn code<T: std::fmt::Debug>(result: Result<T, CallError>) -> ErrorCode {
    match result {
        Err(CallError::Emq { code, .. }) => code,
        other => panic!("expected an EMQ error, got {other:?}"),
    }
}

/// DUMPs of every key of both queues: a refused call must leave all of them as they were.
async fn both(conn: &mut Control, a: &QueueKeys, b: &QueueKeys) -> Vec<(String, Vec<u8>)> {
    let mut all = snapshot(conn, a).await;
    all.extend(snapshot(conn, b).await);
    all
}

/// One job of queue `q` held (claimed) with token 1, plus one pending and one delayed job, so
/// that every set of `q` exists and a stray write would show.
async fn populated(c: &mut ScriptClient, q: &QueueKeys, seed: u64) -> JobId {
    let mut ids = JobIdGen::new(seed);
    let held = ids.next_id();
    c.enqueue(q, &held, b"held", None).await.unwrap();
    assert_eq!(c.claim(q, 600_000, 1).await.unwrap()[0].token, 1);
    c.enqueue(q, &ids.next_id(), b"pending", None).await.unwrap();
    c.enqueue_delayed(q, &ids.next_id(), b"delayed", 600_000).await.unwrap();
    held
}

/// The KEYS and ARGV each script takes for `held` in queue `q` (a valid call, token 1).
fn call_of(script: Script, q: &QueueKeys, held: &JobId) -> (Vec<String>, Vec<Vec<u8>>) {
    let job = q.job_key(held);
    let id = held.as_bytes().to_vec();
    let prefix = q.job_prefix.as_bytes().to_vec();
    let s = |k: &String| k.clone();
    let a = |v: &[u8]| v.to_vec();
    match script {
        Script::Enqueue => (vec![job, s(&q.pending)], vec![id, a(b"p")]),
        Script::EnqueueDelayed => (vec![job, s(&q.delayed)], vec![id, a(b"p"), a(b"10")]),
        Script::Claim => (vec![s(&q.pending), s(&q.active)], vec![prefix, a(b"1000"), a(b"1")]),
        Script::Complete => (vec![job, s(&q.active), s(&q.completed)], vec![id, a(b"1")]),
        Script::Fail => (
            vec![job, s(&q.active), s(&q.pending), s(&q.delayed), s(&q.failed)],
            vec![id, a(b"1"), a(b"e"), a(b"3"), a(b"0"), a(b"0")],
        ),
        Script::Extend => (vec![job, s(&q.active)], vec![id, a(b"1"), a(b"1000")]),
        Script::Progress => (vec![job], vec![id, a(b"1"), a(b"50%")]),
        Script::Reap => (vec![s(&q.active), s(&q.pending), s(&q.failed)], vec![prefix, a(b"10"), a(b"3")]),
        Script::Promote => (vec![s(&q.delayed), s(&q.pending)], vec![prefix, a(b"10")]),
        Script::Clean => (vec![s(&q.completed)], vec![prefix, a(b"0"), a(b"10")]),
        other => panic!("{} is not an EchoMQ script", other.name()),
    }
}

async fn call(
    c: &mut ScriptClient,
    script: Script,
    keys: &[String],
    args: &[Vec<u8>],
) -> Result<redis::Value, CallError> {
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    raw(c, script, &keys, &args).await
}

#[tokio::test]
async fn fenced_verbs_take_only_canonical_tokens_and_refusals_write_nothing() {
    let server = server();
    let mut c = client(&server).await;
    let (q, other) = (keys("q"), keys("other"));
    let held = populated(&mut c, &q, 40).await;
    let mut conn = c.connection().clone();
    let before = both(&mut conn, &q, &other).await;
    let loose: [&[u8]; 16] = [
        b"0",
        b"01",
        b"0001",
        b"1.0",
        b"1e0",
        b" 1",
        b"1 ",
        b"+1",
        b"-1",
        b"0x1",
        b"inf",
        b"nan",
        b"",
        b"1_0",
        b"9007199254740992",
        b"99999999999999999999",
    ];
    for script in [Script::Complete, Script::Fail, Script::Extend, Script::Progress] {
        let (ks, mut args) = call_of(script, &q, &held);
        for token in loose {
            args[1] = token.to_vec();
            let got = code(call(&mut c, script, &ks, &args).await);
            assert_eq!(got, ErrorCode::Arg, "{} with token {:?}", script.name(), String::from_utf8_lossy(token));
        }
        // The largest canonical token is well-formed: it is only stale (EMQFENCE), not EMQARG.
        args[1] = b"9007199254740991".to_vec();
        assert_eq!(code(call(&mut c, script, &ks, &args).await), ErrorCode::Fence, "{}", script.name());
    }
    assert_eq!(both(&mut conn, &q, &other).await, before, "a refused token wrote something");
    // And the canonical current token still works in each of them.
    for script in [Script::Progress, Script::Extend, Script::Complete] {
        let (ks, args) = call_of(script, &q, &held);
        call(&mut c, script, &ks, &args).await.unwrap_or_else(|e| panic!("{}: {e:?}", script.name()));
    }
}

#[tokio::test]
async fn every_script_refuses_keys_of_another_slot_or_an_empty_tag() {
    let server = server();
    let mut c = client(&server).await;
    let (q, other) = (keys("q"), keys("other"));
    let held = populated(&mut c, &q, 41).await;
    populated(&mut c, &other, 42).await;
    let mut conn = c.connection().clone();
    let before = both(&mut conn, &q, &other).await;
    for &script in Protocol::EchoMqV1.scripts() {
        let (ks, args) = call_of(script, &q, &held);
        for i in 0..ks.len() {
            // Key i moved into queue `other`'s slot (when there is another key to differ from),
            // then into the empty tag `{}`.
            let mut moves = vec![ks[i].replacen("{q}", "{}", 1)];
            if ks.len() > 1 {
                moves.push(ks[i].replacen("{q}", "{other}", 1));
            }
            for foreign in moves {
                let mut moved = ks.clone();
                moved[i] = foreign.clone();
                let got = code(call(&mut c, script, &moved, &args).await);
                assert_eq!(got, ErrorCode::Arg, "{} with KEYS[{}] = {foreign}", script.name(), i + 1);
            }
        }
        // All keys (and the prefix) in the empty tag: refused too, not a slot of its own.
        let empty: Vec<String> = ks.iter().map(|k| k.replacen("{q}", "{}", 1)).collect();
        let mut empty_args = args.clone();
        if matches!(script, Script::Claim | Script::Reap | Script::Promote | Script::Clean) {
            empty_args[0] = b"emq:{}:job:".to_vec();
        }
        assert_eq!(code(call(&mut c, script, &empty, &empty_args).await), ErrorCode::Arg, "{} in {{}}", script.name());
    }
    assert_eq!(both(&mut conn, &q, &other).await, before, "a refused slot wrote something");
}

#[tokio::test]
async fn reap_drops_orphans_so_they_never_block_the_real_expired_leases() {
    let server = server();
    let mut c = client(&server).await;
    let q = keys("q");
    let mut conn = c.connection().clone();
    let mut ids = JobIdGen::new(43);
    // A real lease that will expire, behind `limit` orphans with earlier deadlines: two without
    // a row, one whose row is completed.
    let real = ids.next_id();
    c.enqueue(&q, &real, b"real", None).await.unwrap();
    c.claim(&q, 5, 1).await.unwrap();
    let (ghost1, ghost2, done) = (ids.next_id(), ids.next_id(), ids.next_id());
    c.enqueue(&q, &done, b"done", None).await.unwrap();
    let t = c.claim(&q, 600_000, 1).await.unwrap()[0].token;
    c.complete(&q, &done, t).await.unwrap();
    for orphan in [&ghost1, &ghost2, &done] {
        redis::cmd("ZADD").arg(&q.active).arg(1).arg(orphan.as_str()).exec_async(&mut conn).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    let limit = 3;
    assert_eq!(c.reap(&q, limit, 0).await.unwrap(), 0, "orphans are not counted");
    for orphan in [&ghost1, &ghost2, &done] {
        assert_eq!(score(&mut conn, &q.active, orphan.as_str()).await, None, "orphan {orphan} still in active");
    }
    assert!(row(&mut conn, &q.job_key(&ghost1)).await.is_empty(), "reap invented a row");
    assert_eq!(row(&mut conn, &q.job_key(&done)).await["state"], b"completed", "reap revived a finished job");
    assert_eq!(c.reap(&q, limit, 0).await.unwrap(), 1, "the real expired lease is reaped on the next call");
    assert_eq!(row(&mut conn, &q.job_key(&real)).await["state"], b"pending");
}

#[tokio::test]
async fn promote_drops_orphans_so_they_never_block_due_jobs() {
    let server = server();
    let mut c = client(&server).await;
    let q = keys("q");
    let mut conn = c.connection().clone();
    let mut ids = JobIdGen::new(44);
    let due = ids.next_id();
    c.enqueue_delayed(&q, &due, b"due", 0).await.unwrap();
    let (ghost, pending) = (ids.next_id(), ids.next_id());
    c.enqueue(&q, &pending, b"p", None).await.unwrap();
    for orphan in [&ghost, &pending] {
        redis::cmd("ZADD").arg(&q.delayed).arg(0).arg(orphan.as_str()).exec_async(&mut conn).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert_eq!(c.promote(&q, 2).await.unwrap(), 0);
    assert_eq!(score(&mut conn, &q.delayed, ghost.as_str()).await, None);
    assert_eq!(score(&mut conn, &q.delayed, pending.as_str()).await, None);
    assert_eq!(score(&mut conn, &q.pending, pending.as_str()).await, Some(0.0), "the pending row keeps its place");
    assert!(row(&mut conn, &q.job_key(&ghost)).await.is_empty());
    assert_eq!(c.promote(&q, 2).await.unwrap(), 1);
    assert_eq!(row(&mut conn, &q.job_key(&due)).await["state"], b"pending");
}

#[tokio::test]
async fn reap_fails_a_poison_job_whose_last_attempt_stalled() {
    let server = server();
    let mut c = client(&server).await;
    let q = keys("q");
    let mut conn = c.connection().clone();
    let id = JobIdGen::new(45).next_id();
    c.enqueue(&q, &id, b"poison", None).await.unwrap();
    let max_attempts = 2;
    for attempt in 1..=max_attempts {
        assert_eq!(c.claim(&q, 5, 1).await.unwrap()[0].token, u64::from(attempt));
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(c.reap(&q, 10, max_attempts).await.unwrap(), 1, "attempt {attempt}: counted as reaped");
    }
    let r = row(&mut conn, &q.job_key(&id)).await;
    assert_eq!(r["state"], b"failed");
    assert_eq!(r["last_error"], b"stalled");
    assert_eq!(r["attempts"], b"2");
    assert!(score(&mut conn, &q.failed, id.as_str()).await.is_some());
    assert_eq!(score(&mut conn, &q.active, id.as_str()).await, None);
    assert_eq!(score(&mut conn, &q.pending, id.as_str()).await, None);
    assert!(c.claim(&q, 5, 1).await.unwrap().is_empty(), "a failed poison job is never claimed again");

    // max_attempts 0 (or no failed key) keeps v1's behaviour: back to pending every time.
    let again = JobIdGen::new(46).next_id();
    c.enqueue(&q, &again, b"x", None).await.unwrap();
    for _ in 0..3 {
        c.claim(&q, 5, 1).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(c.reap(&q, 10, 0).await.unwrap(), 1);
    }
    assert_eq!(row(&mut conn, &q.job_key(&again)).await["state"], b"pending");
}

#[tokio::test]
async fn reap_refuses_a_half_given_poison_rule_without_writing() {
    let server = server();
    let mut c = client(&server).await;
    let q = keys("q");
    c.enqueue(&q, &JobIdGen::new(47).next_id(), b"x", None).await.unwrap();
    c.claim(&q, 1, 1).await.unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    let mut conn = c.connection().clone();
    let before = snapshot(&mut conn, &q).await;
    let prefix = q.job_prefix.as_bytes();
    let two = [q.active.as_str(), q.pending.as_str()];
    let three = [q.active.as_str(), q.pending.as_str(), q.failed.as_str()];
    let wrong_third = [q.active.as_str(), q.pending.as_str(), q.completed.as_str()];
    for (ks, args) in [
        (&two[..], vec![prefix, b"10", b"3"]),
        (&three[..], vec![prefix, b"10"]),
        (&three[..], vec![prefix, b"10", b"-1"]),
        (&three[..], vec![prefix, b"10", b"x"]),
        (&wrong_third[..], vec![prefix, b"10", b"3"]),
    ] {
        assert_eq!(code(raw(&mut c, Script::Reap, ks, &args).await), ErrorCode::Arg, "{ks:?} {args:?}");
    }
    assert_eq!(snapshot(&mut conn, &q).await, before);
}
