//! BullMQ 2.26.0's scripts as emq-bench calls them (`bullmq`), against a real
//! valkey-server, and the cross-check with BullMQ's official Python client (issue 12 item 5).
//! Needs `scripts/setup` (the scripts) and, for the cross-check, `.tools/bullmq-venv`.

mod support;

use emq_bench::bullmq::data::encode_data;
use emq_bench::bullmq::{
    add_reply, client_ms, AddOpts, AddReply, Backoff, BullClaimed, BullKeys, FailStep, Holder, HolderMint, RetryPolicy,
};
use emq_bench::keyspace::{JobId, JobIdGen, QueueName};
use emq_bench::lua::{ErrorCode, Protocol, Script};
use emq_bench::payload::{verify, PayloadCheck, PayloadPool};
use emq_bench::resp::{lane, CallError, ScriptClient, ScriptRegistry};
use emq_bench::server::EmbeddedServer;
use redis::AsyncCommands;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A client of `server` with BullMQ's ten scripts loaded from `.tools/bullmq/current/commands`.
async fn bull_client(server: &EmbeddedServer) -> ScriptClient {
    let dir = root().join(".tools/bullmq/current/commands");
    let registry = ScriptRegistry::for_protocol(Protocol::BullMq, &dir)
        .unwrap_or_else(|e| panic!("{e} (run scripts/setup: it installs BullMQ's scripts)"));
    ScriptClient::connect(&server.url(), Default::default(), Arc::new(registry)).await.unwrap()
}

fn bull_keys(name: &str) -> BullKeys {
    BullKeys::new(QueueName::new(name).unwrap())
}

fn payload_of(pool: &PayloadPool, id: &JobId, size: usize) -> Vec<u8> {
    let mut out = Vec::new();
    pool.build(id, size, &mut out);
    out
}

async fn field(c: &mut ScriptClient, key: &str, name: &str) -> Option<String> {
    c.connection().hget(key, name).await.unwrap()
}

async fn list(c: &mut ScriptClient, key: &str) -> Vec<String> {
    c.connection().lrange(key, 0, -1).await.unwrap()
}

async fn zscore(c: &mut ScriptClient, key: &str, member: &JobId) -> Option<f64> {
    c.connection().zscore(key, member.as_str()).await.unwrap()
}

fn code(result: Result<impl std::fmt::Debug, CallError>) -> ErrorCode {
    match result {
        Err(CallError::Emq { code, message }) => {
            assert!(message.is_empty(), "BullMQ refusals carry no message: {message:?}");
            code
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn each_add_shape_lands_where_bullmq_puts_it() {
    let server = support::server();
    let mut c = bull_client(&server).await;
    let q = bull_keys("adds");
    let pool = PayloadPool::new(1);
    let mut ids = JobIdGen::new(1);

    let std_id = ids.next_id();
    let payload = payload_of(&pool, &std_id, 100);
    let opts = AddOpts { attempts: 3, backoff: Backoff::Exponential(250), ..Default::default() };
    assert_eq!(c.add_job(&q, &std_id, &payload, &opts).await.unwrap(), AddReply::Accepted);
    assert_eq!(list(&mut c, &q.wait).await, [std_id.as_str()]);
    let key = q.job_key(&std_id);
    let mut data = Vec::new();
    encode_data(&payload, &mut data);
    assert_eq!(field(&mut c, &key, "data").await.unwrap().as_bytes(), &data[..]);
    assert_eq!(field(&mut c, &key, "name").await.as_deref(), Some("emq"));
    let stored: serde_json::Value = serde_json::from_str(&field(&mut c, &key, "opts").await.unwrap()).unwrap();
    assert_eq!(
        stored,
        serde_json::json!({"jobId": std_id.as_str(), "attempts": 3, "delay": 0,
                           "backoff": {"type": "exponential", "delay": 250}})
    );
    let ts: u64 = field(&mut c, &key, "timestamp").await.unwrap().parse().unwrap();
    assert!(ts.abs_diff(client_ms()) < 5_000, "timestamp is the client's ms");

    let delayed_id = ids.next_id();
    let before = client_ms();
    let opts = AddOpts { delay_ms: 60_000, attempts: 1, ..Default::default() };
    c.add_job(&q, &delayed_id, &payload_of(&pool, &delayed_id, 20), &opts).await.unwrap();
    let ts: u64 = field(&mut c, &q.job_key(&delayed_id), "timestamp").await.unwrap().parse().unwrap();
    assert!(ts >= before);
    assert_eq!(zscore(&mut c, &q.delayed, &delayed_id).await, Some(((ts + 60_000) * 0x1000) as f64));
    assert_eq!(field(&mut c, &q.job_key(&delayed_id), "delay").await.as_deref(), Some("60000"));

    let prio_id = ids.next_id();
    let opts = AddOpts { priority: 7, attempts: 1, ..Default::default() };
    c.add_job(&q, &prio_id, &payload_of(&pool, &prio_id, 20), &opts).await.unwrap();
    assert_eq!(zscore(&mut c, &q.prioritized, &prio_id).await, Some((7u64 * (1 << 32) + 1) as f64));
    assert_eq!(field(&mut c, &q.job_key(&prio_id), "priority").await.as_deref(), Some("7"));

    // The queued form sends the same call (the producers' window).
    let queued_id = ids.next_id();
    // (The control connection queues a call as a local task.)
    let local = tokio::task::LocalSet::new();
    let queued_payload = payload_of(&pool, &queued_id, 20);
    let reply = local
        .run_until(async {
            let mut lane = c.lane();
            let script = c.queue_add_job(&mut lane, &q, &queued_id, &queued_payload, &AddOpts::default());
            assert_eq!(script, Script::AddStandardJob);
            let reply = lane::next(&mut lane).await;
            assert!(reply.times.is_some_and(|t| t.read >= t.sent), "{:?}", reply.times);
            add_reply(script, &queued_id, &reply.result.unwrap())
        })
        .await;
    assert_eq!(reply.unwrap(), AddReply::Accepted);
    assert_eq!(list(&mut c, &q.wait).await, [queued_id.as_str(), std_id.as_str()]);
}

#[tokio::test]
async fn a_duplicate_id_is_accepted_unchanged_and_only_the_event_stream_tells() {
    let server = support::server();
    let mut c = bull_client(&server).await;
    let q = bull_keys("dups");
    let pool = PayloadPool::new(2);
    let id = JobIdGen::new(2).next_id();
    let payload = payload_of(&pool, &id, 64);
    assert_eq!(c.add_job(&q, &id, &payload, &AddOpts::default()).await.unwrap(), AddReply::Accepted);
    let row: Vec<(String, String)> = c.connection().hgetall(q.job_key(&id)).await.unwrap();
    // Another payload, another script (delayed): the reply is the same id, nothing changes.
    let opts = AddOpts { delay_ms: 5_000, ..Default::default() };
    assert_eq!(c.add_job(&q, &id, b"other bytes entirely", &opts).await.unwrap(), AddReply::Accepted);
    let local = tokio::task::LocalSet::new();
    let reply = local
        .run_until(async {
            let mut lane = c.lane();
            let script = c.queue_add_job(&mut lane, &q, &id, b"third", &AddOpts::default());
            add_reply(script, &id, &lane::next(&mut lane).await.result.unwrap())
        })
        .await;
    assert_eq!(reply.unwrap(), AddReply::Accepted);
    let after: Vec<(String, String)> = c.connection().hgetall(q.job_key(&id)).await.unwrap();
    assert_eq!(after, row);
    assert_eq!(list(&mut c, &q.wait).await, [id.as_str()]);
    assert_eq!(c.connection().zcard::<_, u64>(&q.delayed).await.unwrap(), 0);
    let events: Vec<(String, Vec<(String, String)>)> =
        redis::cmd("XRANGE").arg(&q.events).arg("-").arg("+").query_async(c.connection()).await.unwrap();
    let named = |name: &str| events.iter().filter(|(_, f)| f.contains(&("event".into(), name.into()))).count();
    assert_eq!((named("added"), named("waiting"), named("duplicated")), (1, 1, 2));
    assert_eq!(AddReply::Accepted.as_enqueue(true), emq_bench::queue::EnqueueReply::Duplicate);
}

#[tokio::test]
async fn claims_come_lifo_head_then_wait_then_by_priority() {
    let server = support::server();
    let mut c = bull_client(&server).await;
    let q = bull_keys("order");
    let pool = PayloadPool::new(3);
    let mut ids = JobIdGen::new(3);
    let mut tokens = HolderMint::new(0, 9);
    let [fifo, lifo, low, high] = [(), (), (), ()].map(|_| ids.next_id());
    let add = [
        (fifo, AddOpts::default()),
        (low, AddOpts { priority: 5, ..Default::default() }),
        (high, AddOpts { priority: 1, ..Default::default() }),
        (lifo, AddOpts { lifo: true, ..Default::default() }),
    ];
    for (id, opts) in &add {
        c.add_job(&q, id, &payload_of(&pool, id, 50), opts).await.unwrap();
    }
    let mut order = Vec::new();
    while let Some(job) = c.move_to_active(&q, tokens.mint(), 5_000).await.unwrap() {
        assert_eq!(verify(&job.id, &job.payload), PayloadCheck::Intact, "payload decoded from data");
        assert_eq!((job.ats, job.atm, job.deferred_failure), (1, 0, false));
        let lock: String = c.connection().get(q.lock_key(&job.id)).await.unwrap();
        assert_eq!(lock, job.lock.as_str());
        order.push((job.id, job.priority));
    }
    assert_eq!(order, [(lifo, 0), (fifo, 0), (high, 1), (low, 5)]);
    assert_eq!(list(&mut c, &q.active).await.len(), 4);
}

/// Adds one job and claims it with `lock_ms`.
async fn one_claimed(c: &mut ScriptClient, q: &BullKeys, seed: u64, opts: &AddOpts, lock_ms: u64) -> BullClaimed {
    let id = JobIdGen::new(seed).next_id();
    c.add_job(q, &id, &payload_of(&PayloadPool::new(seed), &id, 40), opts).await.unwrap();
    let job = c.move_to_active(q, HolderMint::new(0, seed as u16).mint(), lock_ms).await.unwrap().unwrap();
    assert_eq!(job.id, id);
    job
}

#[tokio::test]
async fn complete_takes_the_claims_token_and_refuses_stale_ones() {
    let server = support::server();
    let mut c = bull_client(&server).await;
    let q = bull_keys("complete");
    let job = one_claimed(&mut c, &q, 4, &AddOpts::default(), 5_000).await;
    let other = BullClaimed { lock: Holder::from_u64(0xdead), ..job.clone() };
    assert_eq!(code(c.move_to_completed(&q, &other, 1).await), ErrorCode::LockMismatch);
    assert_eq!(code(c.move_to_failed_final(&q, &other, 1, "x").await), ErrorCode::LockMismatch);
    c.move_to_completed(&q, &job, 1).await.unwrap();
    assert!(zscore(&mut c, &q.completed, &job.id).await.is_some());
    let key = q.job_key(&job.id);
    assert_eq!(field(&mut c, &key, "returnvalue").await.as_deref(), Some(r#"{"by":"emq-bench"}"#));
    assert_eq!(field(&mut c, &key, "atm").await.as_deref(), Some("1"));
    assert!(!c.connection().exists::<_, bool>(q.lock_key(&job.id)).await.unwrap());
    // A retried completion (the first reply lost) finds the lock released.
    assert_eq!(code(c.move_to_completed(&q, &job, 1).await), ErrorCode::LockMissing);

    // A zombie: its lock expired and another claim took the job.
    let zombie = one_claimed(&mut c, &q, 5, &AddOpts { attempts: 3, ..Default::default() }, 50).await;
    tokio::time::sleep(Duration::from_millis(120)).await;
    assert_eq!(code(c.move_to_completed(&q, &zombie, 3).await), ErrorCode::LockMissing);
    let policy = RetryPolicy { max_attempts: 3, ..Default::default() };
    assert_eq!(code(c.move_to_failed(&q, &zombie, &policy, "late").await), ErrorCode::LockMissing);
    assert_eq!(code(c.extend_lock(&q, &zombie.id, &zombie.lock, 1_000).await), ErrorCode::NotExtended);
    // Only the stalled check gives it back; then a new claim holds it and the zombie mismatches.
    c.move_stalled_jobs_to_wait(&q, 1, 1).await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert_eq!(c.move_stalled_jobs_to_wait(&q, 1, 1).await.unwrap().moved, [zombie.id]);
    let again = c.move_to_active(&q, Holder::from_u64(77), 5_000).await.unwrap().unwrap();
    assert_eq!((again.id, again.ats), (zombie.id, 2));
    assert_eq!(code(c.move_to_completed(&q, &zombie, 3).await), ErrorCode::LockMismatch);
    assert_eq!(code(c.retry_job(&q, &zombie, false, "late").await), ErrorCode::LockMismatch);
    assert_eq!(code(c.move_to_delayed(&q, &zombie, 10, "late").await), ErrorCode::LockMismatch);
    c.move_to_completed(&q, &again, 3).await.unwrap();
    let missing = BullClaimed { id: JobIdGen::new(99).next_id(), ..again.clone() };
    assert_eq!(code(c.move_to_completed(&q, &missing, 3).await), ErrorCode::Missing);
}

#[tokio::test]
async fn failures_retry_back_off_and_fail_where_bullmq_puts_them() {
    let server = support::server();
    let mut c = bull_client(&server).await;
    let q = bull_keys("fail");
    let mut tokens = HolderMint::new(0, 1);

    // attempts 3, no backoff: retryJob to wait; the next failure again; the third is final.
    let policy = RetryPolicy { max_attempts: 3, backoff: Backoff::None, lifo: false };
    let job = one_claimed(&mut c, &q, 6, &AddOpts { attempts: 3, ..Default::default() }, 5_000).await;
    assert_eq!(c.move_to_failed(&q, &job, &policy, "boom").await.unwrap(), FailStep::Retry);
    let key = q.job_key(&job.id);
    assert_eq!(list(&mut c, &q.wait).await, [job.id.as_str()]);
    assert_eq!(field(&mut c, &key, "atm").await.as_deref(), Some("1"));
    assert_eq!(field(&mut c, &key, "failedReason").await.as_deref(), Some("boom"));
    let job = c.move_to_active(&q, tokens.mint(), 5_000).await.unwrap().unwrap();
    assert_eq!((job.ats, job.atm), (2, 1));
    assert_eq!(c.move_to_failed(&q, &job, &policy, "boom").await.unwrap(), FailStep::Retry);
    let job = c.move_to_active(&q, tokens.mint(), 5_000).await.unwrap().unwrap();
    assert_eq!(c.move_to_failed(&q, &job, &policy, "boom 3").await.unwrap(), FailStep::Fail);
    assert!(zscore(&mut c, &q.failed, &job.id).await.is_some());
    assert_eq!(field(&mut c, &key, "failedReason").await.as_deref(), Some(r#""boom 3""#));
    assert_eq!(field(&mut c, &key, "atm").await.as_deref(), Some("3"));
    assert!(field(&mut c, &key, "finishedOn").await.is_some());

    // Fixed backoff: moveToDelayed at (timestamp + delay) × 0x1000.
    let fixed = RetryPolicy { max_attempts: 2, backoff: Backoff::Fixed(60_000), lifo: false };
    let job =
        one_claimed(&mut c, &q, 7, &AddOpts { attempts: 2, backoff: fixed.backoff, ..Default::default() }, 5_000).await;
    let before = client_ms();
    assert_eq!(c.move_to_failed(&q, &job, &fixed, "later").await.unwrap(), FailStep::Delay(60_000));
    let after = client_ms();
    let score = zscore(&mut c, &q.delayed, &job.id).await.unwrap() as u64;
    assert!((before + 60_000) * 0x1000 <= score && score < (after + 60_001) * 0x1000, "{score}");
    assert_eq!(field(&mut c, &q.job_key(&job.id), "delay").await.as_deref(), Some("60000"));

    // Exponential: the second failure (atm 1) waits 2 × delay.
    let exp = RetryPolicy { max_attempts: 4, backoff: Backoff::Exponential(30_000), lifo: false };
    let job =
        one_claimed(&mut c, &q, 8, &AddOpts { attempts: 4, backoff: exp.backoff, ..Default::default() }, 5_000).await;
    c.retry_job(&q, &job, false, "first").await.unwrap();
    let job = c.move_to_active(&q, tokens.mint(), 5_000).await.unwrap().unwrap();
    assert_eq!(job.atm, 1);
    let before = client_ms();
    assert_eq!(c.move_to_failed(&q, &job, &exp, "second").await.unwrap(), FailStep::Delay(60_000));
    let score = zscore(&mut c, &q.delayed, &job.id).await.unwrap() as u64;
    assert!(score >= (before + 60_000) * 0x1000 && score < (client_ms() + 60_001) * 0x1000);

    // No attempt left: straight to failed.
    let one = RetryPolicy { max_attempts: 1, backoff: Backoff::Fixed(1_000), lifo: false };
    let job = one_claimed(&mut c, &q, 10, &AddOpts { attempts: 1, ..Default::default() }, 5_000).await;
    assert_eq!(c.move_to_failed(&q, &job, &one, "once").await.unwrap(), FailStep::Fail);
    assert!(zscore(&mut c, &q.failed, &job.id).await.is_some());
}

#[tokio::test]
async fn extend_moves_the_locks_ttl_and_progress_is_stored_unfenced() {
    let server = support::server();
    let mut c = bull_client(&server).await;
    let q = bull_keys("extend");
    let job = one_claimed(&mut c, &q, 11, &AddOpts::default(), 1_000).await;
    let pttl = |c: &mut ScriptClient| {
        let key = q.lock_key(&job.id);
        let conn = c.connection().clone();
        async move {
            let mut conn = conn;
            conn.pttl::<_, i64>(key).await.unwrap()
        }
    };
    let ttl = pttl(&mut c).await;
    assert!(0 < ttl && ttl <= 1_000, "{ttl}");
    c.extend_lock(&q, &job.id, &job.lock, 60_000).await.unwrap();
    let ttl = pttl(&mut c).await;
    assert!(59_000 < ttl && ttl <= 60_000, "{ttl}");
    let wrong = Holder::from_u64(1);
    assert_eq!(code(c.extend_lock(&q, &job.id, &wrong, 10).await), ErrorCode::NotExtended);
    assert!(pttl(&mut c).await > 59_000, "a refused extend leaves the lock");

    c.update_progress(&q, &job.id, b"42").await.unwrap();
    assert_eq!(field(&mut c, &q.job_key(&job.id), "progress").await.as_deref(), Some("42"));
    let nobody = JobIdGen::new(12).next_id();
    assert_eq!(code(c.update_progress(&q, &nobody, b"1").await), ErrorCode::Missing);
}

#[tokio::test]
async fn a_job_whose_lock_expired_is_moved_back_and_failed_past_max_stalled() {
    let server = support::server();
    let mut c = bull_client(&server).await;
    let q = bull_keys("stalls");
    let policy = RetryPolicy { max_attempts: 5, ..Default::default() };
    let job = one_claimed(&mut c, &q, 13, &AddOpts { attempts: 5, ..Default::default() }, 5_000).await;
    // A live lock is never moved back, however many checks run.
    for _ in 0..3 {
        assert!(c.move_stalled_jobs_to_wait(&q, 1, 1).await.unwrap().moved.is_empty());
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    c.connection().del::<_, ()>(q.lock_key(&job.id)).await.unwrap(); // the lock expires now
    assert_eq!(c.move_stalled_jobs_to_wait(&q, 1, 1).await.unwrap().moved, [job.id]);
    let key = q.job_key(&job.id);
    assert_eq!(list(&mut c, &q.wait).await, [job.id.as_str()]);
    assert_eq!(field(&mut c, &key, "stc").await.as_deref(), Some("1"));
    assert_eq!(field(&mut c, &key, "atm").await, None, "a stall is no attempt made");

    // Stalled a second time with maxStalledCount 1: flagged, and the next claim fails it.
    let job = c.move_to_active(&q, Holder::from_u64(2), 50).await.unwrap().unwrap();
    assert!(!job.deferred_failure);
    tokio::time::sleep(Duration::from_millis(3)).await;
    assert!(c.move_stalled_jobs_to_wait(&q, 1, 1).await.unwrap().moved.is_empty(), "this call only marks");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(c.move_stalled_jobs_to_wait(&q, 1, 1).await.unwrap().moved, [job.id]);
    assert_eq!(field(&mut c, &key, "defa").await.as_deref(), Some("job stalled more than allowable limit"));
    let job = c.move_to_active(&q, Holder::from_u64(3), 5_000).await.unwrap().unwrap();
    assert!(job.deferred_failure);
    assert_eq!((job.ats, job.atm), (3, 0));
    assert_eq!(job.fail_step(policy.max_attempts, policy.backoff), FailStep::Fail);
    let step = c.move_to_failed(&q, &job, &policy, "job stalled more than allowable limit").await.unwrap();
    assert_eq!(step, FailStep::Fail);
    assert!(zscore(&mut c, &q.failed, &job.id).await.is_some());
    assert_eq!(field(&mut c, &key, "defa").await, None);
}

/// Runs a step of `tests/bullmq/cross_client.py` in `.tools/bullmq-venv` and parses its JSON.
fn official(args: &[&str]) -> serde_json::Value {
    let python = root().join(".tools/bullmq-venv/bin/python");
    assert!(
        python.is_file(),
        "no {}: the cross-check needs the official client (scripts/setup creates the venv; by hand: \
         python3 -m venv .tools/bullmq-venv && .tools/bullmq-venv/bin/pip install bullmq==2.26.0)",
        python.display()
    );
    let out = std::process::Command::new(&python)
        .arg(root().join("tests/bullmq/cross_client.py"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cross_client.py {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    serde_json::from_str(stdout.lines().last().unwrap_or_default()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bullmqs_official_client_processes_our_jobs_and_we_process_its_jobs() {
    use base64::Engine;
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    let server = support::server();
    let mut c = bull_client(&server).await;
    let q = bull_keys("cross");
    let pool = PayloadPool::new(14);
    let mut ids = JobIdGen::new(14);
    let dir = tempfile::tempdir().unwrap();

    // Ours → theirs: every add shape, one job retried by the official worker on our backoff.
    let ours: Vec<(JobId, Vec<u8>, AddOpts)> = [
        AddOpts { attempts: 2, backoff: Backoff::Fixed(50), ..Default::default() },
        AddOpts { attempts: 1, ..Default::default() },
        AddOpts { attempts: 1, priority: 3, ..Default::default() },
        AddOpts { attempts: 1, delay_ms: 100, ..Default::default() },
        AddOpts { attempts: 1, lifo: true, ..Default::default() },
    ]
    .into_iter()
    .enumerate()
    .map(|(i, opts)| {
        let id = ids.next_id();
        (id, payload_of(&pool, &id, 20 + 300 * i), opts)
    })
    .collect();
    for (id, payload, opts) in &ours {
        c.add_job(&q, id, payload, opts).await.unwrap();
    }
    let spec = serde_json::json!({
        "jobs": ours.iter().map(|(id, p, _)| (id.as_str().to_string(), b64(p).into())).collect::<serde_json::Map<_, _>>(),
        "fail_once": [ours[0].0.as_str()],
    });
    let spec_file = dir.path().join("ours.json");
    std::fs::write(&spec_file, spec.to_string()).unwrap();
    let url = server.url();
    let worked = official(&["work", &url, &q.bull_name, spec_file.to_str().unwrap()]);
    let seen = worked["seen"].as_array().unwrap();
    assert_eq!(seen.len(), ours.len() + 1, "{worked}");
    assert!(seen.iter().all(|s| s[1] == true), "the official worker decoded every payload: {worked}");
    let retried: Vec<_> = seen.iter().filter(|s| s[0] == ours[0].0.as_str()).map(|s| (&s[2], &s[3])).collect();
    assert_eq!(retried, [(&0.into(), &1.into()), (&1.into(), &2.into())], "attempts as we packed them");
    assert_eq!(worked["counts"]["completed"], ours.len());

    // Theirs → ours: Queue.add with the base64 of a valid payload and an emq-bench id.
    let theirs: Vec<(JobId, Vec<u8>)> = (0..4)
        .map(|i| {
            let id = ids.next_id();
            (id, payload_of(&pool, &id, 24 + 1000 * i))
        })
        .collect();
    let spec = serde_json::json!({
        "jobs": theirs.iter().map(|(id, p)| (id.as_str().to_string(), b64(p).into())).collect::<serde_json::Map<_, _>>(),
    });
    let spec_file = dir.path().join("theirs.json");
    std::fs::write(&spec_file, spec.to_string()).unwrap();
    let added = official(&["add", &url, &q.bull_name, spec_file.to_str().unwrap()]);
    let want: Vec<&str> = theirs.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(added["ids"], serde_json::json!(want));
    let mut tokens = HolderMint::new(0, 2);
    for (id, payload) in &theirs {
        let job = c.move_to_active(&q, tokens.mint(), 5_000).await.unwrap().expect("their job is ready");
        assert_eq!(job.id, *id, "FIFO");
        assert_eq!(job.payload, *payload);
        assert_eq!(verify(&job.id, &job.payload), PayloadCheck::Intact);
        c.move_to_completed(&q, &job, 2).await.unwrap();
    }
    let counts = official(&["counts", &url, &q.bull_name]);
    assert_eq!(
        counts,
        serde_json::json!({"wait": 0, "paused": 0, "active": 0, "prioritized": 0, "delayed": 0,
                           "completed": ours.len() + theirs.len(), "failed": 0})
    );
}

/// The load threads' transport (the pipe) carries the same calls: a window of queued adds,
/// then claims, a refusal and completions.
#[tokio::test]
async fn the_pipe_transport_carries_the_calls() {
    use emq_bench::net::{ConnectOptions, Transport};
    use emq_bench::resp::PipeConn;
    let server = support::server();
    let registry = Arc::new(
        ScriptRegistry::for_protocol(Protocol::BullMq, &root().join(".tools/bullmq/current/commands")).unwrap(),
    );
    let opts = ConnectOptions { transport: Transport::Pipe, ..ConnectOptions::default() };
    let connector = support::connector(&server.url());
    tokio::task::LocalSet::new()
        .run_until(async {
            let mut c: ScriptClient<PipeConn> = ScriptClient::open(&connector, opts, registry).await.unwrap();
            let q = bull_keys("piped");
            let pool = PayloadPool::new(15);
            let mut ids = JobIdGen::new(15);
            let jobs: Vec<(JobId, Vec<u8>)> = (0..20)
                .map(|i| {
                    let id = ids.next_id();
                    (id, payload_of(&pool, &id, 20 + 97 * i))
                })
                .collect();
            let mut lane = c.lane();
            let window: Vec<_> =
                jobs.iter().map(|(id, p)| (c.queue_add_job(&mut lane, &q, id, p, &AddOpts::default()), id)).collect();
            for (script, id) in window {
                let reply = lane::next(&mut lane).await.result.unwrap();
                assert_eq!(add_reply(script, id, &reply).unwrap(), AddReply::Accepted);
            }
            let mut tokens = HolderMint::new(0, 4);
            for (id, payload) in &jobs {
                let job = c.move_to_active(&q, tokens.mint(), 5_000).await.unwrap().unwrap();
                assert_eq!((&job.id, &job.payload), (id, payload));
                let stale = BullClaimed { lock: Holder::from_u64(5), ..job.clone() };
                assert_eq!(code(c.move_to_completed(&q, &stale, 1).await), ErrorCode::LockMismatch);
                c.move_to_completed(&q, &job, 1).await.unwrap();
            }
            assert_eq!(c.move_to_active(&q, tokens.mint(), 5_000).await.unwrap(), None);
        })
        .await;
}
