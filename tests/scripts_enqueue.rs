//! `enqueue` and `enqueue_delayed` against a real server: the seed's exact behaviour.

mod support;

use emq_bench::keyspace::JobIdGen;
use emq_bench::lua::{ErrorCode, Script};
use emq_bench::queue::EnqueueReply;
use emq_bench::resp::CallError;
use support::*;

fn emq(result: Result<redis::Value, CallError>) -> ErrorCode {
    match result {
        Err(CallError::Emq { code, .. }) => code,
        other => panic!("expected an EMQ error, got {other:?}"),
    }
}

#[tokio::test]
async fn enqueue_births_exactly_three_fields_and_a_pending_member() {
    let server = server();
    let mut c = client(&server).await;
    let q = keys("orders");
    let id = JobIdGen::new(1).next_id();
    let payload = b"\x00\xffbytes verbatim\r\n";
    assert_eq!(c.enqueue(&q, &id, payload, None).await.unwrap(), EnqueueReply::Enqueued);
    let mut conn = c.connection().clone();
    let row = row(&mut conn, &q.job_key(&id)).await;
    assert_eq!(row.len(), 3, "born with exactly three fields: {row:?}");
    assert_eq!(row["state"], b"pending");
    assert_eq!(row["attempts"], b"0");
    assert_eq!(row["payload"], payload);
    assert_eq!(score(&mut conn, &q.pending, id.as_str()).await, Some(0.0));
}

#[tokio::test]
async fn enqueue_priority_is_the_pending_score() {
    let server = server();
    let mut c = client(&server).await;
    let q = keys("orders");
    let id = JobIdGen::new(2).next_id();
    c.enqueue(&q, &id, b"p", Some(7)).await.unwrap();
    let mut conn = c.connection().clone();
    assert_eq!(score(&mut conn, &q.pending, id.as_str()).await, Some(7.0));
}

#[tokio::test]
async fn duplicate_enqueue_returns_0_and_leaves_the_row_byte_identical() {
    let server = server();
    let mut c = client(&server).await;
    let q = keys("orders");
    let id = JobIdGen::new(3).next_id();
    c.enqueue(&q, &id, b"first", Some(3)).await.unwrap();
    let mut conn = c.connection().clone();
    let before = snapshot(&mut conn, &q).await;
    assert_eq!(c.enqueue(&q, &id, b"second payload", Some(9)).await.unwrap(), EnqueueReply::Duplicate);
    assert_eq!(c.enqueue_delayed(&q, &id, b"third", 10).await.unwrap(), EnqueueReply::Duplicate);
    assert_eq!(snapshot(&mut conn, &q).await, before);
}

#[tokio::test]
async fn non_job_ids_get_emqkind_and_write_nothing() {
    let server = server();
    let mut c = client(&server).await;
    let q = keys("orders");
    let key = format!("{}task1", q.job_prefix);
    for script in [Script::Enqueue, Script::EnqueueDelayed] {
        let set = if script == Script::Enqueue { &q.pending } else { &q.delayed };
        let code = emq(raw(&mut c, script, &[&key, set], &[b"task1", b"payload", b"0"]).await);
        assert_eq!(code, ErrorCode::Kind);
    }
    let mut conn = c.connection().clone();
    assert!(snapshot(&mut conn, &q).await.is_empty());
}

#[tokio::test]
async fn malformed_arguments_get_emqarg_and_write_nothing() {
    let server = server();
    let mut c = client(&server).await;
    let q = keys("orders");
    let id = JobIdGen::new(4).next_id();
    let key = q.job_key(&id);
    let idb = id.as_bytes();
    for priority in [&b"-1"[..], b"1.5", b"high"] {
        assert_eq!(
            emq(raw(&mut c, Script::Enqueue, &[&key, &q.pending], &[idb, b"p", priority]).await),
            ErrorCode::Arg
        );
    }
    assert_eq!(emq(raw(&mut c, Script::Enqueue, &[&key, &q.pending], &[idb]).await), ErrorCode::Arg);
    for delay in [&b"-5"[..], b"soon"] {
        assert_eq!(
            emq(raw(&mut c, Script::EnqueueDelayed, &[&key, &q.delayed], &[idb, b"p", delay]).await),
            ErrorCode::Arg
        );
    }
    assert_eq!(emq(raw(&mut c, Script::EnqueueDelayed, &[&key, &q.delayed], &[idb, b"p"]).await), ErrorCode::Arg);
    let mut conn = c.connection().clone();
    assert!(snapshot(&mut conn, &q).await.is_empty());
}

#[tokio::test]
async fn enqueue_delayed_is_due_after_the_delay_in_server_time() {
    let server = server();
    let mut c = client(&server).await;
    let q = keys("orders");
    let id = JobIdGen::new(5).next_id();
    let mut conn = c.connection().clone();
    let before = server_ms(&mut conn).await;
    assert_eq!(c.enqueue_delayed(&q, &id, b"later", 60_000).await.unwrap(), EnqueueReply::Enqueued);
    let after = server_ms(&mut conn).await;
    let row = row(&mut conn, &q.job_key(&id)).await;
    assert_eq!(row.len(), 3);
    assert_eq!(row["state"], b"delayed");
    assert_eq!(row["attempts"], b"0");
    assert_eq!(row["payload"], b"later");
    let due = score(&mut conn, &q.delayed, id.as_str()).await.unwrap() as u64;
    assert!(due >= before + 60_000 && due <= after + 60_000, "due {due} not in [{before}+60s, {after}+60s]");
    assert_eq!(score(&mut conn, &q.pending, id.as_str()).await, None);
}
