//! docs/protocol.md v1.2 against a real server, rule by rule: the holder a claim records, the
//! fence that compares holders where both sides have one, the safe retry that names its holder,
//! the `clean` retention verb, and a v1.2 client against v1.1's scripts. Every refusal is shown
//! to write nothing with a DUMP of the queue before and after.

mod support;

use emq_bench::echomq::{Fence, FinishedSet};
use emq_bench::keyspace::{JobId, JobIdGen, QueueKeys};
use emq_bench::lua::{ErrorCode, Script};
use emq_bench::queue::{CompleteReply, FailArgs, FailReply, Holder};
use emq_bench::resp::{CallError, ScriptClient, ScriptRegistry};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use support::*;

fn code<T: std::fmt::Debug>(result: Result<T, CallError>) -> ErrorCode {
    match result {
        Err(CallError::Emq { code, .. }) => code,
        other => panic!("expected an EMQ error, got {other:?}"),
    }
}

fn holder(n: u64) -> Holder {
    Holder::from_u64(n)
}

const LEASE: u64 = 600_000;

/// Enqueues one job into `q` and claims it as `h` (or without a holder): its id and fence.
async fn held(c: &mut ScriptClient, q: &QueueKeys, ids: &mut JobIdGen, h: Option<Holder>) -> (JobId, Fence) {
    let id = ids.next_id();
    c.enqueue(q, &id, b"payload", None).await.unwrap();
    let fence = match h {
        Some(h) => c.claim_as(q, LEASE, 1, h).await.unwrap().remove(0).token,
        None => Fence::from(c.claim(q, LEASE, 1).await.unwrap().remove(0).token),
    };
    (id, fence)
}

/// The raw KEYS and ARGV of each fenced verb for `id` with `token`, its holder last when given.
fn fenced_call(
    script: Script,
    q: &QueueKeys,
    id: &JobId,
    token: &[u8],
    h: Option<&[u8]>,
) -> (Vec<String>, Vec<Vec<u8>>) {
    let job = q.job_key(id);
    let idb = id.as_bytes().to_vec();
    let (keys, mut args) = match script {
        Script::Complete => (vec![job, q.active.clone(), q.completed.clone()], vec![idb, token.to_vec()]),
        Script::Fail => (
            vec![job, q.active.clone(), q.pending.clone(), q.delayed.clone(), q.failed.clone()],
            vec![idb, token.to_vec(), b"e".to_vec(), b"3".to_vec(), b"0".to_vec(), b"0".to_vec()],
        ),
        Script::Extend => (vec![job, q.active.clone()], vec![idb, token.to_vec(), b"1000".to_vec()]),
        Script::Progress => (vec![job], vec![idb, token.to_vec(), b"50%".to_vec()]),
        other => panic!("{} is not fenced", other.name()),
    };
    if let Some(h) = h {
        args.push(h.to_vec());
    }
    (keys, args)
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

const FENCED: [Script; 4] = [Script::Complete, Script::Fail, Script::Extend, Script::Progress];

/// Holders the protocol refuses: empty, longer than 64 bytes, or a byte outside
/// `[A-Za-z0-9_.:-]`.
fn bad_holders() -> Vec<Vec<u8>> {
    let mut bad: Vec<Vec<u8>> = [&b""[..], b"a b", b"a/b", b"a\x00b", b"h\xc3\xa9", b"a+b", b"{q}", b"a\r\nb"]
        .iter()
        .map(|b| b.to_vec())
        .collect();
    bad.push(vec![b'a'; 65]);
    bad
}

#[tokio::test]
async fn a_claim_records_its_holder_and_a_claim_without_one_deletes_it() {
    let server = server();
    let mut c = client(&server).await;
    let q = keys("q");
    let mut conn = c.connection().clone();
    let mut ids = JobIdGen::new(120);
    let (id, fence) = held(&mut c, &q, &mut ids, Some(holder(7))).await;
    assert_eq!(fence, Fence { token: 1, holder: Some(holder(7)) });
    assert_eq!(row(&mut conn, &q.job_key(&id)).await["holder"], holder(7).as_bytes());
    // Back to pending by an expired lease: reap leaves the holder; a claim without one deletes it.
    c.extend(&q, &id, fence, 1).await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(c.reap(&q, 10, 0).await.unwrap(), 1);
    assert_eq!(row(&mut conn, &q.job_key(&id)).await["holder"], holder(7).as_bytes(), "reap left the holder");
    let again = c.claim(&q, LEASE, 1).await.unwrap();
    assert_eq!(again[0].token, 2);
    let fields = row(&mut conn, &q.job_key(&id)).await;
    assert!(!fields.contains_key("holder"), "a claim without a holder keeps a stale one: {fields:?}");
    // The largest holder: 64 bytes of every allowed kind of byte.
    let fresh = ids.next_id();
    c.enqueue(&q, &fresh, b"p", None).await.unwrap();
    let longest = [b"AZaz09_.:-".repeat(6), b"abcd".to_vec()].concat();
    assert_eq!(longest.len(), 64);
    let (ks, args) = (
        vec![q.pending.clone(), q.active.clone()],
        vec![q.job_prefix.as_bytes().to_vec(), b"1000".to_vec(), b"1".to_vec(), longest.clone()],
    );
    let reply = call(&mut c, Script::Claim, &ks, &args).await.unwrap();
    assert!(matches!(&reply, redis::Value::Array(entries) if entries.len() == 1), "claim replied {reply:?}");
    assert_eq!(row(&mut conn, &q.job_key(&fresh)).await["holder"], longest);
}

#[tokio::test]
async fn a_malformed_holder_is_refused_by_every_verb_before_any_write() {
    let server = server();
    let mut c = client(&server).await;
    let q = keys("q");
    let mut conn = c.connection().clone();
    let mut ids = JobIdGen::new(121);
    let (id, _) = held(&mut c, &q, &mut ids, Some(holder(1))).await;
    c.enqueue(&q, &ids.next_id(), b"pending", None).await.unwrap();
    let before = snapshot(&mut conn, &q).await;
    let prefix = q.job_prefix.as_bytes().to_vec();
    for bad in bad_holders() {
        let claim = call(
            &mut c,
            Script::Claim,
            &[q.pending.clone(), q.active.clone()],
            &[prefix.clone(), b"1000".to_vec(), b"1".to_vec(), bad.clone()],
        )
        .await;
        assert_eq!(code(claim), ErrorCode::Arg, "claim with holder {:?}", String::from_utf8_lossy(&bad));
        for script in FENCED {
            let (ks, args) = fenced_call(script, &q, &id, b"1", Some(&bad));
            let got = code(call(&mut c, script, &ks, &args).await);
            assert_eq!(got, ErrorCode::Arg, "{} with holder {:?}", script.name(), String::from_utf8_lossy(&bad));
        }
    }
    assert_eq!(snapshot(&mut conn, &q).await, before, "a refused holder wrote something");
}

#[tokio::test]
async fn the_fence_refuses_another_holder_with_the_current_token_and_writes_nothing() {
    let server = server();
    let mut c = client(&server).await;
    let q = keys("q");
    let mut conn = c.connection().clone();
    let mut ids = JobIdGen::new(122);
    let (id, fence) = held(&mut c, &q, &mut ids, Some(holder(1))).await;
    let before = snapshot(&mut conn, &q).await;
    let stranger = holder(2);
    for script in FENCED {
        let (ks, args) = fenced_call(script, &q, &id, b"1", Some(stranger.as_bytes()));
        assert_eq!(
            code(call(&mut c, script, &ks, &args).await),
            ErrorCode::Fence,
            "{} as another holder",
            script.name()
        );
    }
    assert_eq!(snapshot(&mut conn, &q).await, before, "a call of another holder wrote something");
    // The token is tested first: a stale token with the right holder is EMQFENCE as in v1.1.
    let (ks, args) = fenced_call(Script::Extend, &q, &id, b"2", Some(holder(1).as_bytes()));
    assert_eq!(code(call(&mut c, Script::Extend, &ks, &args).await), ErrorCode::Fence);
    // The holder of record passes every verb; a call without a holder is fenced by the token alone.
    c.progress(&q, &id, fence, b"half").await.unwrap();
    c.extend(&q, &id, fence, LEASE).await.unwrap();
    c.progress(&q, &id, 1, b"token alone").await.unwrap();
    assert_eq!(c.complete(&q, &id, fence).await.unwrap(), CompleteReply::Completed);
    let fields = row(&mut conn, &q.job_key(&id)).await;
    assert_eq!(fields["state"], b"completed");
    assert_eq!(fields["holder"], holder(1).as_bytes(), "a finished row carries the holder of its last claim");
    // A row without a holder (claimed by a v1.1 client) is fenced by the token alone, whatever
    // holder the call presents.
    let (bare, _) = held(&mut c, &q, &mut ids, None).await;
    let any = Fence { token: 1, holder: Some(holder(99)) };
    c.extend(&q, &bare, any, LEASE).await.unwrap();
    assert_eq!(c.complete(&q, &bare, any).await.unwrap(), CompleteReply::Completed);
}

#[tokio::test]
async fn fail_compares_holders_and_a_retry_keeps_the_holder_until_the_next_claim() {
    let server = server();
    let mut c = client(&server).await;
    let q = keys("q");
    let mut conn = c.connection().clone();
    let mut ids = JobIdGen::new(123);
    let (id, fence) = held(&mut c, &q, &mut ids, Some(holder(5))).await;
    let args = FailArgs { error: "boom", max_attempts: 3, backoff_ms: 0, priority: 0 };
    let stranger = Fence { token: 1, holder: Some(holder(6)) };
    assert_eq!(code(c.fail(&q, &id, stranger, args).await), ErrorCode::Fence);
    assert_eq!(c.fail(&q, &id, fence, args).await.unwrap(), FailReply::Retry);
    assert_eq!(row(&mut conn, &q.job_key(&id)).await["holder"], holder(5).as_bytes(), "a retry leaves the holder");
    let next = c.claim_as(&q, LEASE, 1, holder(8)).await.unwrap().remove(0);
    assert_eq!(next.token, Fence { token: 2, holder: Some(holder(8)) });
    assert_eq!(row(&mut conn, &q.job_key(&id)).await["holder"], holder(8).as_bytes(), "the next claim replaces it");
}

/// A failover that rolls a claim back: the promoted replica holds the job as it was before the
/// claim (pending, attempts 0, no holder), so the next claim hands out token 1 again.
async fn roll_back_claim(conn: &mut emq_bench::net::Control, q: &QueueKeys, id: &JobId) {
    let key = q.job_key(id);
    redis::pipe()
        .atomic()
        .hset(&key, "state", "pending")
        .hset(&key, "attempts", "0")
        .hdel(&key, "holder")
        .zrem(&q.active, id.as_str())
        .zadd(&q.pending, id.as_str(), 0)
        .exec_async(conn)
        .await
        .unwrap();
}

#[tokio::test]
async fn after_a_rolled_back_claim_the_stale_holder_is_fenced_off_and_the_holder_of_record_completes() {
    let server = server();
    let mut c = client(&server).await;
    let q = keys("q");
    let mut conn = c.connection().clone();
    let mut ids = JobIdGen::new(124);
    let (id, first) = held(&mut c, &q, &mut ids, Some(holder(10))).await;
    roll_back_claim(&mut conn, &q, &id).await;
    let second = c.claim_as(&q, LEASE, 1, holder(11)).await.unwrap().remove(0).token;
    assert_eq!(second.token, first.token, "the rollback reissues the token");
    let before = snapshot(&mut conn, &q).await;
    assert_eq!(code(c.complete(&q, &id, first).await), ErrorCode::Fence, "the stale worker's complete");
    assert_eq!(snapshot(&mut conn, &q).await, before);
    assert_eq!(c.complete(&q, &id, second).await.unwrap(), CompleteReply::Completed);
    // The safe retry names its holder: the same holder (or none) gets 0, another EMQFENCE.
    assert_eq!(c.complete(&q, &id, second).await.unwrap(), CompleteReply::AlreadyCompleted);
    assert_eq!(c.complete(&q, &id, second.token).await.unwrap(), CompleteReply::AlreadyCompleted);
    let before = snapshot(&mut conn, &q).await;
    assert_eq!(code(c.complete(&q, &id, first).await), ErrorCode::Fence, "the stale worker's retry");
    assert_eq!(snapshot(&mut conn, &q).await, before);
}

/// The v1.1 scripts kept as the baseline.
fn v11_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/echomq-v1.1-lua")
}

#[tokio::test]
async fn a_v12_client_works_against_v11_scripts_which_ignore_the_holder() {
    let server = server();
    let registry = ScriptRegistry::from_dir(&v11_dir()).unwrap();
    assert!(!registry.holds(Script::Clean), "v1.1 has no clean");
    assert_eq!(registry.scripts().count(), 9);
    let mut c = ScriptClient::connect(&server.url(), Default::default(), Arc::new(registry)).await.unwrap();
    let q = keys("q");
    let mut conn = c.connection().clone();
    let mut ids = JobIdGen::new(125);
    let (id, fence) = held(&mut c, &q, &mut ids, Some(holder(3))).await;
    assert!(!row(&mut conn, &q.job_key(&id)).await.contains_key("holder"), "v1.1 stores no holder");
    c.extend(&q, &id, fence, LEASE).await.unwrap();
    c.progress(&q, &id, fence, b"x").await.unwrap();
    // v1.1's known limit: after a rollback the stale worker's complete passes the fence.
    roll_back_claim(&mut conn, &q, &id).await;
    let second = c.claim_as(&q, LEASE, 1, holder(4)).await.unwrap().remove(0).token;
    assert_eq!(c.complete(&q, &id, fence).await.unwrap(), CompleteReply::Completed, "v1.1 accepts the stale call");
    assert_eq!(c.complete(&q, &id, second).await.unwrap(), CompleteReply::AlreadyCompleted);
}

/// Puts `id` into `set` with `score` and a row in `state` (or none).
async fn finished(
    conn: &mut emq_bench::net::Control,
    q: &QueueKeys,
    set: &str,
    id: &JobId,
    score: u64,
    state: Option<&str>,
) {
    if let Some(state) = state {
        redis::cmd("HSET")
            .arg(q.job_key(id))
            .arg("state")
            .arg(state)
            .arg("attempts")
            .arg("1")
            .arg("payload")
            .arg("p")
            .exec_async(conn)
            .await
            .unwrap();
    }
    redis::cmd("ZADD").arg(set).arg(score).arg(id.as_str()).exec_async(conn).await.unwrap();
}

async fn clean_raw(
    c: &mut ScriptClient,
    key: &str,
    prefix: &[u8],
    age: &[u8],
    limit: &[u8],
) -> Result<redis::Value, CallError> {
    raw(c, Script::Clean, &[key], &[prefix, age, limit]).await
}

#[tokio::test]
async fn clean_removes_the_oldest_due_members_and_deletes_only_rows_in_the_sets_state() {
    let server = server();
    let mut c = client(&server).await;
    let (q, other) = (keys("q"), keys("other"));
    let mut conn = c.connection().clone();
    let mut ids = JobIdGen::new(126);
    let now = server_ms(&mut conn).await;
    let old: Vec<JobId> = (0..4).map(|_| ids.next_id()).collect();
    let (ghost, stray, young) = (ids.next_id(), ids.next_id(), ids.next_id());
    for (i, id) in old.iter().enumerate() {
        finished(&mut conn, &q, &q.completed, id, now - 100_000 + i as u64, Some("completed")).await;
    }
    // Orphans among the oldest: a member with no row, and one whose row is active again.
    finished(&mut conn, &q, &q.completed, &ghost, now - 200_000, None).await;
    finished(&mut conn, &q, &q.completed, &stray, now - 150_000, Some("active")).await;
    finished(&mut conn, &q, &q.completed, &young, now + 60_000, Some("completed")).await;
    let other_id = ids.next_id();
    finished(&mut conn, &other, &other.completed, &other_id, now - 100_000, Some("completed")).await;

    // limit 3 takes the three oldest: both orphans (uncounted) and the oldest real one.
    let removed = c.clean(&q, FinishedSet::Completed, 1_000, 3).await.unwrap();
    assert_eq!(removed, vec![old[0]]);
    assert_eq!(score(&mut conn, &q.completed, ghost.as_str()).await, None);
    assert_eq!(score(&mut conn, &q.completed, stray.as_str()).await, None, "the stray member leaves the set");
    assert_eq!(row(&mut conn, &q.job_key(&stray)).await["state"], b"active", "its row stays: the evidence");
    assert!(row(&mut conn, &q.job_key(&old[0])).await.is_empty(), "the cleaned row is deleted");
    // The rest that is due, oldest first; the young one stays, and so does the other queue.
    assert_eq!(c.clean(&q, FinishedSet::Completed, 1_000, 100).await.unwrap(), old[1..].to_vec());
    assert_eq!(c.clean(&q, FinishedSet::Completed, 1_000, 100).await.unwrap(), Vec::<JobId>::new());
    assert!(score(&mut conn, &q.completed, young.as_str()).await.is_some());
    assert_eq!(row(&mut conn, &q.job_key(&young)).await["state"], b"completed");
    assert_eq!(row(&mut conn, &other.job_key(&other_id)).await["state"], b"completed");
    // age 0 takes what finished up to now: the young one is in the future, so it stays.
    assert_eq!(c.clean(&q, FinishedSet::Completed, 0, 100).await.unwrap(), Vec::<JobId>::new());

    // The failed set: its rows must say failed.
    let (f1, f2) = (ids.next_id(), ids.next_id());
    finished(&mut conn, &q, &q.failed, &f1, now - 5_000, Some("failed")).await;
    finished(&mut conn, &q, &q.failed, &f2, now - 4_000, Some("completed")).await;
    assert_eq!(c.clean(&q, FinishedSet::Failed, 0, 10).await.unwrap(), vec![f1]);
    assert_eq!(row(&mut conn, &q.job_key(&f2)).await["state"], b"completed", "a row in another state stays");
}

#[tokio::test]
async fn clean_refuses_bad_keys_and_arguments_before_any_write() {
    let server = server();
    let mut c = client(&server).await;
    let (q, other) = (keys("q"), keys("other"));
    let mut conn = c.connection().clone();
    let mut ids = JobIdGen::new(127);
    let now = server_ms(&mut conn).await;
    let id = ids.next_id();
    finished(&mut conn, &q, &q.completed, &id, now - 10_000, Some("completed")).await;
    let before = snapshot(&mut conn, &q).await;
    let prefix = q.job_prefix.as_bytes();
    for key in
        [&q.pending, &q.active, &q.delayed, &q.job_key(&id), &"emq:{}:completed".to_string(), &"completed".to_string()]
    {
        assert_eq!(code(clean_raw(&mut c, key, prefix, b"0", b"10").await), ErrorCode::Arg, "clean of {key}");
    }
    assert_eq!(
        code(raw(&mut c, Script::Clean, &[&q.completed, &q.failed], &[prefix, b"0", b"10"]).await),
        ErrorCode::Arg,
        "two keys"
    );
    assert_eq!(
        code(clean_raw(&mut c, &q.completed, other.job_prefix.as_bytes(), b"0", b"10").await),
        ErrorCode::Arg,
        "another slot's prefix"
    );
    for age in [&b""[..], b"-1", b"01", b"1.0", b"1e3", b" 1", b"x", b"9007199254740992"] {
        let got = code(clean_raw(&mut c, &q.completed, prefix, age, b"10").await);
        assert_eq!(got, ErrorCode::Arg, "age_ms {:?}", String::from_utf8_lossy(age));
    }
    for limit in [&b""[..], b"0", b"-1", b"01", b"2.5", b"1e2", b"x", b"9007199254740992"] {
        let got = code(clean_raw(&mut c, &q.completed, prefix, b"0", limit).await);
        assert_eq!(got, ErrorCode::Arg, "limit {:?}", String::from_utf8_lossy(limit));
    }
    assert_eq!(snapshot(&mut conn, &q).await, before, "a refused clean wrote something");
    assert_eq!(code(c.clean(&q, FinishedSet::Completed, 0, 0).await), ErrorCode::Arg);
    assert_eq!(c.clean(&q, FinishedSet::Completed, 0, 1).await.unwrap(), vec![id]);
}

#[tokio::test]
async fn a_claim_calls_holders_are_unique_across_threads_and_shards() {
    use emq_bench::queue::HolderMint;
    use std::collections::HashSet;
    let mut seen = HashSet::new();
    for shard in [0u16, 1, 7] {
        for thread in [0u16, 1, 2] {
            let mut mint = HolderMint::new(shard, thread);
            for _ in 0..1000 {
                let h = mint.mint();
                assert!(h.as_bytes().iter().all(|b| b.is_ascii_hexdigit()), "{h}");
                assert!(seen.insert(h), "holder {h} minted twice");
            }
        }
    }
}

#[tokio::test]
async fn a_runs_finished_rows_carry_the_holder_of_their_last_claim_unique_per_claim() {
    use emq_bench::cli::RunArgs;
    use emq_bench::cmd::run::run;
    use emq_bench::cmd::CommandOutcome;
    use std::collections::HashMap;
    let server = server();
    let dir = tempfile::tempdir().unwrap();
    // Two consumer threads with claims of two jobs, failures that retry: rows claimed more
    // than once, by either thread.
    let scenario = "name = \"holders\"\nseed = 9\njobs = 300\ndrain = \"20s\"\n\
        [producers]\ncount = 1\npipeline = 4\nmax_attempts = 3\n\
        [consumers]\ncount = 2\npipeline = 2\nbatch = 2\nfail = 0.3\n";
    std::fs::write(dir.path().join("s.toml"), scenario).unwrap();
    let args = RunArgs {
        url: Some(server.url()),
        keep: true,
        threads: 2,
        ..run_args(&dir.path().join("s.toml"), &dir.path().join("out"))
    };
    let result = run(args, std::future::pending()).await.unwrap();
    assert_eq!(result.outcome, CommandOutcome::Success, "{:?}", result.failures);
    let mut conn = client(&server).await.connection().clone();
    let job_keys: Vec<String> = redis::AsyncCommands::keys(&mut conn, "emq:{*}:job:*").await.unwrap();
    assert_eq!(job_keys.len(), 300);
    // A claim of two jobs gives both the same holder; no holder is on rows of two claims that
    // could not have been one call (more than `batch` rows).
    let mut rows_of: HashMap<Vec<u8>, usize> = HashMap::new();
    for key in &job_keys {
        let fields = row(&mut conn, key).await;
        let holder = fields.get("holder").unwrap_or_else(|| panic!("{key} has no holder: {fields:?}")).clone();
        assert!(holder.len() == 16 && holder.iter().all(u8::is_ascii_hexdigit), "{key}: {holder:?}");
        *rows_of.entry(holder).or_default() += 1;
    }
    assert!(rows_of.values().all(|&n| n <= 2), "a holder on more rows than one claim takes: {rows_of:?}");
    assert!(rows_of.len() >= 150, "{} holders for 300 jobs claimed two at most per call", rows_of.len());
}
