//! The pipe transport (our own connection loop) against a real server: pipelined replies reach
//! the right requests in order with their own read times, error replies keep their codes,
//! NOSCRIPT is recovered, and a lost, restarted or silent server turns into unknown outcomes
//! followed by a working connection again.

mod support;

use emq_bench::keyspace::JobIdGen;
use emq_bench::lua::ErrorCode;
use emq_bench::net::{ConnectOptions, Transport};
use emq_bench::queue::EnqueueReply;
use emq_bench::resp::pipe::take_times;
use emq_bench::resp::{CallError, PipeConn, ScriptClient, ScriptRegistry};
use emq_bench::server::{EmbeddedServer, ServerOptions};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::*;

/// Runs `test` on a `LocalSet`, where the pipe's driver task lives.
async fn local<F: Future>(test: F) -> F::Output {
    tokio::task::LocalSet::new().run_until(test).await
}

fn opts(response_timeout: Duration) -> ConnectOptions {
    ConnectOptions { response_timeout, transport: Transport::Pipe, ..ConnectOptions::default() }
}

async fn pipe(url: &str, timeout: Duration) -> ScriptClient<PipeConn> {
    let registry = Arc::new(ScriptRegistry::from_dir(&lua_dir()).unwrap());
    ScriptClient::open(&connector(url), opts(timeout), registry).await.unwrap()
}

/// Retries `enqueue` of fresh ids until one is accepted, or panics after `within`.
async fn until_accepted(c: &mut ScriptClient<PipeConn>, ids: &mut JobIdGen, within: Duration) -> Vec<ErrorCode> {
    let q = keys("q");
    let deadline = Instant::now() + within;
    let mut errors = Vec::new();
    loop {
        match c.enqueue(&q, &ids.next_id(), b"x", None).await {
            Ok(EnqueueReply::Enqueued) => return errors,
            Ok(other) => panic!("a fresh id came back {other:?}"),
            Err(err) => errors.push(err.code()),
        }
        assert!(Instant::now() < deadline, "no enqueue accepted within {within:?}; errors {errors:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn pipelined_replies_reach_their_own_requests_in_order() {
    let server = support::server();
    local(async {
        let c = pipe(&server.url(), Duration::from_secs(5)).await;
        let q = keys("q");
        let mut ids = JobIdGen::new(1);
        let fresh: Vec<_> = (0..600).map(|_| ids.next_id()).collect();
        // 600 requests in flight on one connection (more than the 256 replies its driver hands
        // out per poll): every other one a duplicate of the one before it, so the replies
        // alternate 1, 0 and a mixed-up delivery would show.
        let calls = fresh.iter().enumerate().map(|(i, id)| {
            let (mut c, q) = (c.clone(), q.clone());
            let id = if i % 2 == 1 { fresh[i - 1] } else { *id };
            async move {
                let sent = Instant::now();
                let reply = c.enqueue(&q, &id, b"payload", None).await;
                (reply, sent, take_times())
            }
        });
        let results = futures_join_all(calls).await;
        for (i, (reply, queued, times)) in results.into_iter().enumerate() {
            let expected = if i % 2 == 0 { EnqueueReply::Enqueued } else { EnqueueReply::Duplicate };
            assert_eq!(reply.unwrap(), expected, "request {i}");
            let times = times.expect("the pipe hands over each request's send and read times");
            assert!(times.sent >= queued, "request {i} written before it was queued");
            assert!(times.read >= times.sent, "request {i} read before it was written");
        }
        let mut c = c.clone();
        let claimed = c.claim(&q, 1000, 1000).await.unwrap();
        assert_eq!(claimed.len(), 300);
        assert!(claimed.iter().all(|job| job.token == 1 && job.payload == b"payload"));
    })
    .await;
}

#[tokio::test]
async fn error_replies_keep_their_code_and_noscript_is_recovered() {
    let server = support::server();
    local(async {
        let mut c = pipe(&server.url(), Duration::from_secs(5)).await;
        let q = keys("q");
        let id = JobIdGen::new(2).next_id();
        let err = c.complete(&q, &id, 1).await.unwrap_err();
        assert_eq!(err.code(), ErrorCode::NoJob, "{err}");
        let mut admin = support::client(&server).await.connection().clone();
        redis::cmd("SCRIPT").arg("FLUSH").exec_async(&mut admin).await.unwrap();
        assert_eq!(c.enqueue(&q, &id, b"x", None).await.unwrap(), EnqueueReply::Enqueued);
    })
    .await;
}

#[tokio::test]
async fn a_restarted_server_gives_unknown_outcomes_then_a_working_connection() {
    let first = support::server();
    let port = first.port();
    local(async {
        let mut c = pipe(&first.url(), Duration::from_secs(5)).await;
        let mut ids = JobIdGen::new(3);
        assert!(until_accepted(&mut c, &mut ids, Duration::from_secs(1)).await.is_empty());
        first.stop();
        let q = keys("q");
        let err = c.enqueue(&q, &ids.next_id(), b"x", None).await.unwrap_err();
        assert!(err.code().is_unknown_outcome(), "{err}");
        // The same port again, with an empty script cache: the driver reconnects with
        // backoff and loads every script before it takes requests.
        let options = ServerOptions { port: Some(port), ..ServerOptions::default() };
        let second = EmbeddedServer::start(&options).unwrap();
        assert_eq!(second.port(), port);
        let errors = until_accepted(&mut c, &mut ids, Duration::from_secs(5)).await;
        assert!(errors.iter().all(|code| code.is_unknown_outcome()), "{errors:?}");
        drop(second);
    })
    .await;
}

#[tokio::test]
async fn a_lane_retrying_at_once_waits_for_the_reconnect_instead_of_spinning() {
    let first = support::server();
    let port = first.port();
    local(async {
        let mut c = pipe(&first.url(), Duration::from_secs(2)).await;
        let mut ids = JobIdGen::new(5);
        first.stop();
        // Restarted from this thread (a server dies with the thread that started it), by a
        // task that runs while the loop below waits.
        let restart = tokio::task::spawn_local(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            EmbeddedServer::start(&ServerOptions { port: Some(port), ..ServerOptions::default() }).unwrap()
        });
        // No sleep between tries: a call made while the connection is down must wait for the
        // driver (which runs on this same thread) to reconnect, not fail at once forever.
        let q = keys("q");
        let (mut errors, started) = (0u32, Instant::now());
        loop {
            match c.enqueue(&q, &ids.next_id(), b"x", None).await {
                Ok(_) => break,
                Err(err) => {
                    assert!(err.code().is_unknown_outcome(), "{err}");
                    errors += 1;
                }
            }
            assert!(started.elapsed() < Duration::from_secs(5), "never reconnected ({errors} errors)");
        }
        assert!(errors <= 2, "{errors} failed calls: the lane spun instead of waiting");
        drop(restart.await.unwrap());
    })
    .await;
}

#[tokio::test]
async fn a_silent_server_times_out_and_the_connection_comes_back() {
    let server = support::server();
    let pid = server.pid().to_string();
    let signal = |name: &str| {
        let status = std::process::Command::new("kill").args([name, &pid]).status().unwrap();
        assert!(status.success());
    };
    local(async {
        let mut c = pipe(&server.url(), Duration::from_millis(300)).await;
        let mut ids = JobIdGen::new(4);
        signal("-STOP");
        let started = Instant::now();
        let err = c.enqueue(&keys("q"), &ids.next_id(), b"x", None).await.unwrap_err();
        let waited = started.elapsed();
        signal("-CONT");
        assert_eq!(err, CallError::Timeout);
        assert!(waited >= Duration::from_millis(300) && waited < Duration::from_secs(2), "{waited:?}");
        let errors = until_accepted(&mut c, &mut ids, Duration::from_secs(5)).await;
        assert!(errors.iter().all(|code| code.is_unknown_outcome()), "{errors:?}");
    })
    .await;
}

#[tokio::test]
async fn unix_socket_urls_are_refused_with_a_clear_error() {
    local(async {
        let url = "redis+unix:///tmp/emq-bench-none.sock";
        let err = emq_bench::net::Endpoint::resolve(url, &Default::default(), |_| None).err();
        let err = err.expect("refused").to_string();
        assert!(err.contains("scheme redis+unix") && err.contains("rediss://"), "{err}");
    })
    .await;
}

/// Runs every future as a local task (all in flight together on the one connection) and
/// collects their outputs in order.
async fn futures_join_all<F>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    let handles: Vec<_> = futures.into_iter().map(|f| tokio::task::spawn_local(f)).collect();
    let mut out = Vec::with_capacity(handles.len());
    for handle in handles {
        out.push(handle.await.unwrap());
    }
    out
}

/// Issue 10 item 10: a port that answers the handshake with something other than RESP (an
/// HTTP server), or closes the connection at once, is named as not a Redis/Valkey server
/// with what it replied, not with the RESP parser's complaint.
#[tokio::test]
async fn a_port_that_does_not_speak_resp_is_named_not_a_server() {
    local(async {
        for (reply, answer) in [
            (&b"HTTP/1.1 400 Bad Request\r\n\r\n"[..], r#"it replied "HTTP/1.1 400 Bad Request\r\n\r\n""#.to_string()),
            (&[b'<'; 100][..], format!("it replied \"{}\"...", "<".repeat(64))),
            // A TLS alert record, as a TLS port may answer plain TCP.
            (
                &[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x50][..],
                r#"it replied "\x15\x03\x03\x00\x02\x02P" (if the port speaks TLS, use rediss:// or --tls)"#
                    .to_string(),
            ),
            (
                b"",
                "it closed the connection without a reply (if the port speaks TLS, use rediss:// or --tls)".to_string(),
            ),
        ] {
            let port = not_redis(reply);
            let registry = Arc::new(ScriptRegistry::from_dir(&lua_dir()).unwrap());
            let url = format!("redis://127.0.0.1:{port}");
            let err = ScriptClient::<PipeConn>::open(&connector(&url), opts(Duration::from_secs(5)), registry)
                .await
                .err()
                .expect("refused");
            assert_eq!(err.to_string(), format!("not a Redis/Valkey server at 127.0.0.1:{port}: {answer}"));
        }
    })
    .await;
}

/// A lane on a new pipe connection after one round trip on it: the driver has run, nothing is
/// waiting, and it waits on the socket.
async fn idle_lane(url: &str, timeout: Duration) -> <PipeConn as emq_bench::resp::Wire>::Lane {
    use emq_bench::resp::{lane, ReplyLane, Request};
    let mut lane = pipe(url, timeout).await.lane();
    lane.queue(&Request::from_args(&["PING"]));
    lane.flush();
    assert!(lane::next(&mut lane).await.result.is_ok());
    lane
}

#[tokio::test]
async fn a_lane_batch_goes_out_at_its_flush_and_comes_back_in_order() {
    use emq_bench::resp::{lane, ReplyLane, Request};
    let server = support::server();
    local(async {
        let mut lane = idle_lane(&server.url(), Duration::from_secs(10)).await;
        // A lane queues without waking the connection's driver: nothing of this batch is
        // written until the flush, which writes it from this task.
        let big: Vec<u8> = (0..4 << 20).map(|i: u32| (i % 251) as u8).collect();
        lane.queue(&Request::from_args(&[&b"ECHO"[..], &big[..]]));
        lane.queue(&Request::from_args(&["ECHO", "two"]));
        lane.queue(&Request::from_args(&["ECHO", "three"]));
        lane.flush();
        let expected: [&[u8]; 3] = [&big, b"two", b"three"];
        for (i, want) in expected.into_iter().enumerate() {
            let reply = tokio::time::timeout(Duration::from_secs(10), lane::next(&mut lane))
                .await
                .unwrap_or_else(|_| panic!("reply {i} never came: the batch was not written"));
            match reply.result {
                Ok(redis::Value::BulkString(got)) => assert!(got == want, "reply {i} is another request's"),
                other => panic!("reply {i}: {:?}", other.map(|_| "another type")),
            }
            assert!(reply.times.is_some(), "reply {i} was written, so it has its times");
        }
    })
    .await;
}

#[tokio::test]
async fn a_silent_server_times_out_a_lanes_flushed_batch_too() {
    use emq_bench::resp::{lane, ReplyLane, Request};
    let server = support::server();
    local(async {
        let mut lane = idle_lane(&server.url(), Duration::from_millis(300)).await;
        // Idle past the response timeout (the connection's timer fires with nothing waiting),
        // then a request written by the flush, not by the driver, which must still time it out.
        tokio::time::sleep(Duration::from_millis(400)).await;
        server.freeze(true);
        let started = Instant::now();
        lane.queue(&Request::from_args(&["PING"]));
        lane.flush();
        let reply = tokio::time::timeout(Duration::from_secs(5), lane::next(&mut lane)).await;
        let waited = started.elapsed();
        server.freeze(false);
        let reply = reply.expect("no timeout within 5 s: the flushed request was never watched");
        assert_eq!(reply.result.unwrap_err(), CallError::Timeout);
        assert!(waited >= Duration::from_millis(300), "{waited:?}");
    })
    .await;
}

/// `[target] wait` on the pipe: a script call followed by `WAIT 1` is acknowledged once a
/// replica has the write, and is an unknown outcome (`wait_short`, the write still made on the
/// primary) when no replica answers within the WAIT's timeout.
#[tokio::test]
async fn a_call_counts_only_when_its_wait_reports_the_replicas_asked_for() {
    use emq_bench::net::{Control, Durability};
    local(async {
        let primary = server();
        let wait = Durability::Wait { replicas: 1, timeout: Duration::from_millis(50) };
        let registry = Arc::new(ScriptRegistry::from_dir(&lua_dir()).unwrap());
        let options = ConnectOptions { durability: wait, ..opts(Duration::from_secs(5)) };
        let mut c: ScriptClient<PipeConn> =
            ScriptClient::open(&connector(&primary.url()), options, registry).await.unwrap();
        let mut control = Control::connect(&connector(&primary.url()), ConnectOptions::default()).await.unwrap();
        let q = keys("q");
        let mut ids = JobIdGen::new(1);
        // No replica: WAIT answers 0 after its timeout; the enqueue ran, so its outcome is unknown.
        let alone = ids.next_id();
        let began = Instant::now();
        let err = c.enqueue(&q, &alone, b"x", None).await.expect_err("no replica acknowledged it");
        assert!(matches!(err, CallError::WaitShort { acked: 0, replicas: 1, timeout_ms: 50 }), "{err:?}");
        assert_eq!(err.code(), ErrorCode::WaitShort);
        assert!(err.code().is_unknown_outcome());
        assert!(began.elapsed() >= Duration::from_millis(50), "the latency includes the WAIT");
        assert!(!row(&mut control, &q.job_key(&alone)).await.is_empty(), "the primary made the write");

        // With a replica attached, the same call is acknowledged, and a refusal is the call's
        // own reply.
        let replica = server();
        let mut to_replica = Control::connect(&connector(&replica.url()), ConnectOptions::default()).await.unwrap();
        let _: () =
            redis::cmd("REPLICAOF").arg("127.0.0.1").arg(primary.port()).query_async(&mut to_replica).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let info: String = redis::cmd("INFO").arg("replication").query_async(&mut to_replica).await.unwrap();
            if info.lines().any(|l| l.trim() == "master_link_status:up") {
                break;
            }
            assert!(Instant::now() < deadline, "the replica never synced: {info}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let acknowledged = ids.next_id();
        assert_eq!(c.enqueue(&q, &acknowledged, b"x", None).await.unwrap(), EnqueueReply::Enqueued);
        let again = c.enqueue(&q, &acknowledged, b"x", None).await.expect("a refusal is the call's own reply");
        assert_ne!(again, EnqueueReply::Enqueued, "a second enqueue of one id is a duplicate");
        assert!(!row(&mut to_replica, &q.job_key(&acknowledged)).await.is_empty(), "the replica has the write");
    })
    .await;
}
