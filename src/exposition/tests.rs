use super::*;
use crate::lua::{ErrorCode, Script};
use crate::metrics::{record_us, ScriptTotals};
use std::io::{Read, Write};

/// A plain HTTP/1.0 GET: status and body.
fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    write!(conn, "GET {path} HTTP/1.0\r\n\r\n").unwrap();
    let mut text = String::new();
    conn.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    (head.split_whitespace().nth(1).unwrap().parse().unwrap(), body.to_string())
}

fn totals() -> Cumulative {
    let mut enqueue = ScriptTotals::new(Script::Enqueue);
    enqueue.ok = 3;
    enqueue.errors[ErrorCode::Fence.index()] = 2;
    for us in [12, 12, 900] {
        record_us(&mut enqueue.latency, us);
    }
    let mut jobs = [0; crate::metrics::JobCounter::COUNT];
    jobs[crate::metrics::JobCounter::Enqueued.index()] = 3;
    Cumulative::of([&enqueue], jobs)
}

#[test]
fn a_scrape_serves_the_posted_totals_as_counters_and_cumulative_buckets() {
    let endpoint = MetricsEndpoint::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    assert_ne!(endpoint.addr().port(), 0, "the port bound, not the one asked for");
    let board = endpoint.board();
    board.set_info(RunInfo {
        scenario: "smoke".into(),
        seed: 7,
        target: crate::scenario::redact_url("redis://u:secret@h:1/0"),
        protocol: "echomq-v1".into(),
    });
    board.finish(totals(), None);
    let (status, body) = get(endpoint.addr(), "/metrics");
    assert_eq!(status, 200);
    for line in [
        r#"emq_calls_total{script="enqueue",outcome="ok"} 3"#,
        r#"emq_calls_total{script="enqueue",outcome="error"} 2"#,
        r#"emq_errors_total{script="enqueue",code="EMQFENCE"} 2"#,
        r#"emq_latency_seconds_count{script="enqueue"} 3"#,
        r#"emq_latency_seconds_bucket{le="0.00001",script="enqueue"} 0"#,
        r#"emq_latency_seconds_bucket{le="0.000015",script="enqueue"} 2"#,
        r#"emq_latency_seconds_bucket{le="0.001",script="enqueue"} 3"#,
        r#"emq_latency_seconds_bucket{le="+Inf",script="enqueue"} 3"#,
        r#"emq_jobs_total{counter="enqueued"} 3"#,
        "emq_run_finished 1",
        "# EOF",
    ] {
        assert!(body.lines().any(|l| l == line), "no line {line} in:\n{body}");
    }
    let info = body.lines().find(|l| l.starts_with("emq_run_info{")).expect("emq_run_info");
    assert!(info.contains(r#"seed="7""#) && info.contains("***") && !info.contains("secret"), "{info}");
    assert_eq!(get(endpoint.addr(), "/").0, 404);
}

#[test]
fn a_taken_port_is_an_error_naming_the_flag_and_the_address() {
    let first = MetricsEndpoint::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let err = MetricsEndpoint::bind(first.addr()).err().expect("the port is taken").to_string();
    assert!(err.contains("--metrics-addr") && err.contains(&first.addr().to_string()), "{err}");
}

#[test]
fn the_end_posts_the_depths_after_the_drain_over_the_last_seconds() {
    let endpoint = MetricsEndpoint::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let board = endpoint.board();
    let busy = Depths { pending: 52, delayed: 5, active: 10, completed: 790, failed: 3 };
    let tick = Tick { elapsed_s: 9.0, depths: Some(busy), ..Tick::default() };
    board.post(tick, None);
    assert!(get(endpoint.addr(), "/metrics").1.contains(r#"emq_queue_jobs{state="pending"} 52"#));
    let drained = Depths { pending: 0, delayed: 0, active: 0, completed: 854, failed: 6 };
    board.finish(totals(), Some(drained));
    let body = get(endpoint.addr(), "/metrics").1;
    for line in [r#"emq_queue_jobs{state="pending"} 0.0"#, r#"emq_queue_jobs{state="completed"} 854.0"#] {
        assert!(body.lines().any(|l| l == line), "no line {line} in:\n{body}");
    }
}
