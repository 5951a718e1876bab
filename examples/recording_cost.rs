//! Micro-benchmark (issue 5): what histogram recording and history recording add per request
//! on the hot path, in ns. Run it with `scripts/bench-recording` (a release build); the target
//! is ≤ 50 ns per request for both together. Not a test: a timing, printed.

use emq_bench::history::{HistoryBuf, Kind, Outcome};
use emq_bench::lua::Script;
use emq_bench::metrics::{Recorder, Reporter};
use std::hint::black_box;
use std::time::{Duration, Instant};

fn main() {
    const N: u64 = 10_000_000;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let start = Instant::now();
        let (reporter, sink) = Reporter::new(start, Duration::ZERO);
        let reporter = tokio::spawn(reporter.run());
        let mut recorder = Recorder::new(&sink);
        drop(sink);
        let mut history = HistoryBuf::new(start);
        let sent = Instant::now();
        // Latencies vary like real ones (so the histogram touches many buckets); the clock is
        // read once per 64 requests, as a pipelined read batch would.
        let t0 = Instant::now();
        let mut now = t0;
        for i in 0..N {
            if i % 64 == 0 {
                now = Instant::now();
            }
            let latency = 50 + (i * 7919) % 5000;
            recorder.maybe_flush(now);
            recorder.record_ok(Script::Enqueue, black_box(latency), black_box(latency / 2));
        }
        let histogram_ns = t0.elapsed().as_nanos() as f64 / N as f64;
        // An open-loop send also records its lag behind the intended time (issue 11).
        let t2 = Instant::now();
        for i in 0..N {
            recorder.record_lag(Script::Enqueue, black_box(i % 97));
        }
        let lag_ns = t2.elapsed().as_nanos() as f64 / N as f64;
        let t1 = Instant::now();
        for i in 0..N {
            // The service time (µs) is the one the histograms were given: computed once.
            history.push(
                black_box(i as u32),
                Kind::Complete,
                Outcome::Ok,
                1,
                Some(i as u32 % 64),
                sent,
                black_box(i % 5000),
            );
        }
        let history_ns = t1.elapsed().as_nanos() as f64 / N as f64;
        println!("histogram recording: {histogram_ns:.1} ns/request");
        println!("history recording:   {history_ns:.1} ns/request ({} bytes for {N} events)", history.len());
        println!("together:            {:.1} ns/request (target <= 50)", histogram_ns + history_ns);
        println!("open-loop send lag:  {lag_ns:.1} ns/request more (a third histogram)");
        drop(recorder);
        let _ = reporter.await;
    });
}
