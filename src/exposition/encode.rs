//! The board as metric families: one prometheus-client [`Collector`] encoding a copy of the
//! board per scrape (precomputed buckets through `encode_histogram`; no metric object is kept
//! per series, so nothing is updated per request).

use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;

use super::{Board, State};
use crate::lua::ErrorCode;
use crate::metrics::cumulative::{Buckets, ScriptCumulative, BOUNDS_US};

/// Encodes the board's figures at each scrape.
#[derive(Debug)]
pub(super) struct Families(pub(super) Arc<Board>);

type Fmt = Result<(), std::fmt::Error>;

impl Collector for Families {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Fmt {
        let state = self.0.snapshot();
        run(&state, &mut encoder)?;
        scripts(&state, &mut encoder)?;
        gauges(&state, &mut encoder)?;
        violations(&state, &mut encoder)?;
        server(&state, &mut encoder)
    }
}

/// One counter or gauge sample with its labels.
fn sample<const N: usize>(family: &mut MetricEncoder, labels: [(&str, &str); N], value: Value) -> Fmt {
    let mut m = family.encode_family(&labels)?;
    match value {
        Value::Counter(v) => m.encode_counter::<NoLabelSet, _, u64>(&v, None),
        Value::Gauge(v) => m.encode_gauge(&v),
    }
}

/// A sample's value by type.
enum Value {
    Counter(u64),
    Gauge(f64),
}

/// `emq_run_info`, `emq_run_elapsed_seconds`, `emq_run_finished`.
fn run(state: &State, e: &mut DescriptorEncoder) -> Fmt {
    if let Some(info) = &state.info {
        let mut f =
            e.encode_descriptor("emq_run_info", "The run being watched (always 1).", None, MetricType::Gauge)?;
        let seed = info.seed.to_string();
        let labels = [
            ("scenario", info.scenario.as_str()),
            ("seed", seed.as_str()),
            ("target", info.target.as_str()),
            ("protocol", info.protocol.as_str()),
            ("version", env!("CARGO_PKG_VERSION")),
        ];
        sample(&mut f, labels, Value::Gauge(1.0))?;
    }
    if let Some(tick) = &state.tick {
        let mut f =
            e.encode_descriptor("emq_run_elapsed_seconds", "Time since the run start.", None, MetricType::Gauge)?;
        f.encode_gauge(&tick.elapsed_s)?;
    }
    let mut f = e.encode_descriptor(
        "emq_run_finished",
        "1 once the run ended: the counters are then the final ones summary.json holds.",
        None,
        MetricType::Gauge,
    )?;
    f.encode_gauge(&(u64::from(state.finished)))
}

/// Per script: calls by outcome, errors by code, late sends, and the three histograms.
fn scripts(state: &State, e: &mut DescriptorEncoder) -> Fmt {
    let Some(totals) = &state.totals else { return Ok(()) };
    let all = &totals.scripts;
    let mut f = e.encode_descriptor(
        "emq_calls",
        "Script calls in the measured part of the run (warmup excluded), by outcome (ok, error).",
        None,
        MetricType::Counter,
    )?;
    for s in all {
        let error: u64 = s.errors.iter().sum();
        sample(&mut f, [("script", s.script.name()), ("outcome", "ok")], Value::Counter(s.ok))?;
        sample(&mut f, [("script", s.script.name()), ("outcome", "error")], Value::Counter(error))?;
    }
    let mut f = e.encode_descriptor(
        "emq_errors",
        "Failed script calls by error code (EMQFENCE, EMQSTATE, timeout, ...).",
        None,
        MetricType::Counter,
    )?;
    for s in all {
        for code in ErrorCode::ALL {
            let n = s.errors[code.index()];
            if n > 0 {
                sample(&mut f, [("script", s.script.name()), ("code", code.name())], Value::Counter(n))?;
            }
        }
    }
    let mut f =
        e.encode_descriptor("emq_late_sends", "Open-loop sends later than intended.", None, MetricType::Counter)?;
    for s in all {
        sample(&mut f, [("script", s.script.name())], Value::Counter(s.late))?;
    }
    type Of = fn(&ScriptCumulative) -> &Buckets;
    let histograms: [(&str, &str, Of); 3] = [
        ("emq_latency_seconds", "Ok calls, from the intended send (coordinated-omission free).", |s| &s.latency),
        ("emq_service_time_seconds", "Ok calls, from the actual send.", |s| &s.service),
        ("emq_send_lag_seconds", "Open-loop sends, from the intended to the actual send.", |s| &s.send_lag),
    ];
    for (name, help, of) in histograms {
        let mut f = e.encode_descriptor(name, help, None, MetricType::Histogram)?;
        for s in all {
            let b = of(s);
            if b.count == 0 {
                continue;
            }
            let labels = [("script", s.script.name())];
            BucketsMetric(b).encode(f.encode_family(&labels)?)?;
        }
    }
    let mut f = e.encode_descriptor(
        "emq_jobs",
        "Job counters since the run start (warmup included), as summary.json's jobs.",
        None,
        MetricType::Counter,
    )?;
    for counter in crate::metrics::JobCounter::ALL {
        sample(&mut f, [("counter", counter.name())], Value::Counter(totals.jobs[counter.index()]))?;
    }
    Ok(())
}

/// Precomputed buckets as a classic histogram (seconds).
#[derive(Debug)]
struct BucketsMetric<'a>(&'a Buckets);

impl EncodeMetric for BucketsMetric<'_> {
    fn encode(&self, mut encoder: MetricEncoder) -> Fmt {
        let b = self.0;
        let bounds = BOUNDS_US.iter().map(|&us| us as f64 / 1e6).chain([f64::INFINITY]);
        let buckets: Vec<(f64, u64)> = bounds.zip(b.counts.iter().copied()).collect();
        encoder.encode_histogram::<NoLabelSet>(b.sum_us / 1e6, b.count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// Queue depths, rates, faults.
fn gauges(state: &State, e: &mut DescriptorEncoder) -> Fmt {
    let Some(tick) = &state.tick else { return Ok(()) };
    if let Some(d) = &tick.depths {
        let mut f = e.encode_descriptor(
            "emq_queue_jobs",
            "Jobs in the run's queues by state, summed over its queues (queue.csv).",
            None,
            MetricType::Gauge,
        )?;
        let states = [
            ("pending", d.pending),
            ("delayed", d.delayed),
            ("active", d.active),
            ("completed", d.completed),
            ("failed", d.failed),
        ];
        for (name, n) in states {
            sample(&mut f, [("state", name)], Value::Gauge(n as f64))?;
        }
    }
    if let Some(rate) = tick.requested_rate {
        let mut f = e.encode_descriptor(
            "emq_rate_requested_jobs_per_second",
            "The open-loop rate the plan asks for now.",
            None,
            MetricType::Gauge,
        )?;
        f.encode_gauge(&rate)?;
    }
    let mut f = e.encode_descriptor(
        "emq_rate_achieved_jobs_per_second",
        "Jobs enqueued per second over the last second.",
        None,
        MetricType::Gauge,
    )?;
    f.encode_gauge(&tick.achieved_rate)?;
    let mut f = e.encode_descriptor(
        "emq_fault_active",
        "1 while the plan schedules a fault of this kind, else 0.",
        None,
        MetricType::Gauge,
    )?;
    for (kind, active) in &tick.faults {
        sample(&mut f, [("kind", kind.name())], Value::Gauge(if *active { 1.0 } else { 0.0 }))?;
    }
    Ok(())
}

/// `emq_violations_total{invariant}`: what the live check found so far, every invariant listed
/// (0 when clean), while the check runs.
fn violations(state: &State, e: &mut DescriptorEncoder) -> Fmt {
    let Some(findings) = &state.violations else { return Ok(()) };
    let mut f = e.encode_descriptor(
        "emq_violations",
        "Invariant violations the live check found so far (jobs checked a few seconds after their history closed).",
        None,
        MetricType::Counter,
    )?;
    for (invariant, n) in findings.counts() {
        sample(&mut f, [("invariant", invariant.id())], Value::Counter(n))?;
    }
    Ok(())
}

/// The probe's last round, per node (server.csv's figures).
fn server(state: &State, e: &mut DescriptorEncoder) -> Fmt {
    let Some(rows) = &state.server else { return Ok(()) };
    let rows = rows.borrow().clone();
    if rows.is_empty() {
        return Ok(());
    }
    type Figure = fn(&crate::probe::Figures) -> f64;
    type Parts<'a> = &'a [(&'a str, Figure)];
    // Name, help, the label that tells the parts apart (none for a single part), the parts.
    let families: [(&str, &str, &str, Parts); 4] = [
        (
            "emq_server_cpu_cores",
            "Server CPU over the last second, in cores (1 = one core busy), by mode.",
            "mode",
            &[("user", |f| f.cpu_user_pct / 100.0), ("sys", |f| f.cpu_sys_pct / 100.0)],
        ),
        (
            "emq_server_memory_bytes",
            "Server memory (INFO used_memory, used_memory_rss, used_memory_lua), by kind.",
            "kind",
            &[
                ("used", |f| f.level.used_memory as f64),
                ("rss", |f| f.level.used_memory_rss as f64),
                ("lua", |f| f.level.used_memory_lua as f64),
            ],
        ),
        (
            "emq_server_connected_clients",
            "Server connected_clients.",
            "",
            &[("", |f| f.level.connected_clients as f64)],
        ),
        ("emq_server_commands_per_second", "Server commands processed per second.", "", &[("", |f| f.ops_per_sec)]),
    ];
    for (name, help, key, parts) in families {
        let mut f = e.encode_descriptor(name, help, None, MetricType::Gauge)?;
        for row in &rows {
            let Some(figures) = &row.figures else { continue };
            for (part, value) in parts.iter() {
                let v = Value::Gauge(value(figures));
                match key {
                    "" => sample(&mut f, [("node", row.node.as_str())], v)?,
                    key => sample(&mut f, [("node", row.node.as_str()), (key, part)], v)?,
                }
            }
        }
    }
    Ok(())
}
