//! Raw [`Scenario`] -> [`Plan`]: every rule that serde's types cannot express.
//!
//! Each refusal is a [`ScenarioError::Invalid`] naming the file, the line of the
//! key when it can be found in the text, the dotted field, the value found and
//! what was expected.

use std::path::Path;
use std::time::Duration;

use bytesize::ByteSize;

use super::bounds::{
    MAX_ATTEMPTS, MAX_BATCH, MAX_JOBS, MAX_LIMIT, MAX_LIST, MAX_PAYLOAD_IN_FLIGHT, MAX_PROGRESS, MAX_QUEUES, MAX_RATE,
    MAX_RETAIN, MAX_RUN,
};
use super::bounds::{MAX_PRIMARIES, MAX_REPLICAS};
use super::consumers::{BackoffSpec, ExtendSpec};
use super::context::Ctx;
use super::error::ScenarioError;
use super::file::{Queues, Scenario};
use super::plan::{
    Backoff, ClusterShape, ConsumerPlan, MaintenancePlan, OpenLoop, Plan, ProducerPlan, Stop, TargetPlan,
};
use super::sampler::{DurationSampler, SizeSampler, MAX_DURATION};
use super::stages::Stages;
use super::MIN_PAYLOAD;

/// Resolves `raw` (parsed from `text`, read from `path`) into a [`Plan`].
pub(crate) fn resolve(raw: Scenario, text: &str, path: &Path) -> Result<Plan, ScenarioError> {
    let cx = Ctx { text, path };
    if !is_valid_name(&raw.name) {
        return Err(cx.err("name", format!("{:?}", raw.name), "1-64 bytes of [A-Za-z0-9_.-]"));
    }
    let warmup = cx.at_most("warmup", &raw.warmup, MAX_RUN)?;
    let stages = super::stages::stages(&cx, &raw.stages)?;
    let stop = match (&raw.duration, raw.jobs) {
        // The stages set the run's length: the load phase lasts exactly as long as they do.
        (Some(d), _) if stages.is_some() => {
            let expected = "no duration with [[stages]] (the run lasts the stages' summed durations)";
            return Err(cx.err("duration", format!("{:?}", d.as_str()), expected));
        }
        (_, Some(n)) if stages.is_some() => {
            return Err(cx.err("jobs", n, "no jobs with [[stages]] (the stages' rates and durations set the jobs)"));
        }
        (None, None) => match &stages {
            Some(s) if s.total() <= warmup => {
                let found = format!("{} in all", humantime::format_duration(s.total()));
                let expected = format!("stages lasting longer than warmup ({}) together", raw.warmup);
                return Err(cx.err("stages", found, expected));
            }
            Some(s) => Stop::Duration(s.total()),
            None => return Err(cx.err("duration + jobs", "neither set", "exactly one of them (or [[stages]])")),
        },
        (Some(_), Some(_)) => return Err(cx.err_at("jobs", "duration + jobs", "both set", "exactly one of them")),
        (Some(d), None) if d.get() <= warmup => {
            let expected = format!("a duration longer than warmup ({})", raw.warmup);
            return Err(cx.err("duration", format!("{d:?}", d = d.as_str()), expected));
        }
        (Some(d), None) => Stop::Duration(cx.at_most("duration", d, MAX_RUN)?),
        (None, Some(n)) => Stop::Jobs(u64::from(cx.count("jobs", n, 1, MAX_JOBS, "jobs to enqueue")?)),
    };
    let producers = producers(&cx, &raw, stages)?;
    // Consumers claim what producers enqueued: their payloads are the producers' sizes.
    let consumers = consumers(&cx, &raw, producers.payload.largest_drawn_bytes())?;
    let queues = queues(&cx, &raw.queues)?;
    let target = target(&cx, &raw)?;
    let durability = super::wait::durability(&cx, &raw.target)?;
    let faults = super::faults::faults(
        &cx,
        &raw.faults,
        &super::faults::Within {
            load_for: match stop {
                Stop::Duration(d) => Some(d),
                Stop::Jobs(_) => None,
            },
            target: match (&raw.target.url, &raw.target.cluster) {
                (Some(_), _) => super::faults::TargetShape::Url,
                (None, Some(_)) => super::faults::TargetShape::EmbeddedCluster,
                (None, None) => super::faults::TargetShape::EmbeddedServer,
            },
            queues: &queues,
        },
    )?;
    Ok(Plan {
        source: path.to_owned(),
        name: raw.name.clone(),
        description: raw.description.clone(),
        seed: raw.seed,
        stop,
        warmup,
        drain: cx.at_most("drain", &raw.drain, MAX_RUN)?,
        queues,
        protocol: raw.protocol,
        target,
        durability,
        producers,
        consumers,
        maintenance: maintenance(&cx, &raw)?,
        thresholds: super::thresholds::thresholds(&cx, &raw.thresholds)?,
        faults,
        scenario: raw,
        shard: None,
    })
}

/// docs/protocol.md: queue names are 1-64 bytes of `[A-Za-z0-9_.-]`.
pub fn is_valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
}

fn queues(cx: &Ctx, q: &Queues) -> Result<Vec<String>, ScenarioError> {
    match q {
        Queues::Name(n) if is_valid_name(n) => Ok(vec![n.clone()]),
        Queues::Name(n) => Err(cx.err("queues", format!("{n:?}"), "1-64 bytes of [A-Za-z0-9_.-]")),
        Queues::Count(n) if (1..=MAX_QUEUES).contains(n) => Ok((0..*n).map(|i| format!("bench-{i}")).collect()),
        Queues::Count(n) => Err(cx.err("queues", n, format!("a count in 1..={MAX_QUEUES}"))),
    }
}

fn target(cx: &Ctx, raw: &Scenario) -> Result<TargetPlan, ScenarioError> {
    let t = &raw.target;
    for (k, v) in &t.server {
        if k.is_empty() || k.contains(char::is_whitespace) || v.contains(['\n', '\r']) {
            let found = format!("{k:?} = {v:?}");
            return Err(cx.err("target.server", found, "option names without spaces, one-line values"));
        }
    }
    let Some(url) = &t.url else {
        if t.flags() != crate::net::TargetFlags::default() {
            let expected = "user and TLS keys only with a url (the embedded server has neither)";
            return Err(cx.err("target", "user or TLS keys without url", expected));
        }
        return Ok(TargetPlan::Embedded { options: t.server.clone(), cluster: cluster(cx, t)? });
    };
    if t.cluster.is_some() {
        let expected = "no cluster with a url (the harness starts a cluster only where it starts the servers)";
        return Err(cx.err("target.cluster", "a cluster", expected));
    }
    if !t.server.is_empty() {
        let expected = "no server options with a url (they apply to the embedded server only)";
        return Err(cx.err("target.server", "options", expected));
    }
    // Checked now, so a bad url fails before any server starts; resolved again (with the
    // flags and $EMQ_PASSWORD) when the run opens.
    if let Err(err) = crate::net::Endpoint::resolve(url, &t.flags(), |_| None) {
        let expected = "redis://[user[:password]@]host[:port][/db] or rediss://... (TLS)";
        return Err(cx.err("target.url", err.to_string(), expected));
    }
    Ok(TargetPlan::Url(url.clone()))
}

/// `target.cluster`, its bounds checked; the node timeout 2 s unless given.
fn cluster(cx: &Ctx, t: &crate::scenario::target::TargetTable) -> Result<Option<ClusterShape>, ScenarioError> {
    let Some(c) = &t.cluster else { return Ok(None) };
    if !(1..=MAX_PRIMARIES).contains(&c.primaries) {
        return Err(cx.err("target.cluster.primaries", c.primaries, format!("1..={MAX_PRIMARIES}")));
    }
    if c.replicas > MAX_REPLICAS {
        return Err(cx.err("target.cluster.replicas", c.replicas, format!("0..={MAX_REPLICAS}")));
    }
    let node_timeout = c.node_timeout.as_ref().map_or(std::time::Duration::from_secs(2), |d| d.get());
    if node_timeout < std::time::Duration::from_millis(100) {
        return Err(cx.err("target.cluster.node_timeout", format!("{node_timeout:?}"), "at least 100ms"));
    }
    Ok(Some(ClusterShape { primaries: c.primaries as usize, replicas: c.replicas as usize, node_timeout }))
}

/// `[producers]`; `stages` (resolved `[[stages]]`) selects the open loop instead of `rate`.
fn producers(cx: &Ctx, raw: &Scenario, stages: Option<Stages>) -> Result<ProducerPlan, ScenarioError> {
    let p = &raw.producers;
    let tasks = cx.tasks("producers", p.count, p.connections, p.pipeline)?;
    let open_loop = match (p.rate, p.arrival, stages) {
        (Some(r), _, Some(_)) => {
            let expected = "no producers.rate with [[stages]] (the stages set the rate)";
            return Err(cx.err("producers.rate", r, expected));
        }
        (None, _, Some(_)) if tasks.count == 0 => {
            return Err(cx.err("producers.count", 0, "at least 1 producer when [[stages]] are set"))
        }
        (None, a, Some(s)) => {
            Some(OpenLoop { rate_per_sec: s.mean_rate(), arrival: a.unwrap_or_default(), stages: Some(s) })
        }
        (r, a, None) => open_loop(cx, tasks, r, a)?,
    };
    let priority = cx.fraction("producers.priority", p.priority)?;
    if priority.get() > 0.0 && p.priorities.is_empty() {
        let expected = "a non-empty list of priorities when producers.priority > 0";
        return Err(cx.err_at("producers.priority", "producers.priorities", "[]", expected));
    }
    if p.priorities.len() > MAX_LIST {
        let found = format!("{} entries", p.priorities.len());
        return Err(cx.err("producers.priorities", found, format!("at most {MAX_LIST} priorities")));
    }
    let max_attempts = cx.count("producers.max_attempts", p.max_attempts, 1, MAX_ATTEMPTS, "claims per job")?;
    let payload = SizeSampler::new(&p.payload, MIN_PAYLOAD).map_err(|e| cx.problem("producers.payload", e))?;
    let largest = payload.largest_drawn_bytes();
    cx.in_flight(
        "producers.payload",
        "producers.count × producers.pipeline × largest payload",
        format!("{} × {} × {}", tasks.count, tasks.pipeline, ByteSize(largest)),
        tasks.lanes().saturating_mul(largest),
        MAX_PAYLOAD_IN_FLIGHT,
    )?;
    let late_after = p.late_after.get();
    if !(Duration::from_micros(10)..=Duration::from_secs(3600)).contains(&late_after) {
        let expected = "10µs..=1h: how far behind its intended time a send may leave";
        return Err(cx.err("producers.late_after", p.late_after.as_str(), expected));
    }
    Ok(ProducerPlan {
        count: tasks.count,
        connections: tasks.connections,
        pipeline: tasks.pipeline,
        open_loop,
        late_after,
        allow_shortfall: p.allow_shortfall,
        payload,
        delayed: cx.fraction("producers.delayed", p.delayed)?,
        delay: DurationSampler::new(&p.delay).map_err(|e| cx.problem("producers.delay", e))?,
        priority,
        priorities: p.priorities.clone(),
        duplicate: cx.fraction("producers.duplicate", p.duplicate)?,
        max_attempts,
    })
}

/// The open loop of a constant `producers.rate` (`None`: a closed loop), with its `arrival`.
fn open_loop(
    cx: &Ctx,
    tasks: super::context::Tasks,
    rate: Option<f64>,
    arrival: Option<super::producers::Arrival>,
) -> Result<Option<OpenLoop>, ScenarioError> {
    Ok(match (rate, arrival) {
        (None, Some(a)) => {
            let found = format!("{a:?} without producers.rate").to_lowercase();
            return Err(cx.err("producers.arrival", found, "arrival only together with rate or [[stages]]"));
        }
        (None, None) => None,
        (Some(r), _) if !(r.is_finite() && r > 0.0) => return Err(cx.err("producers.rate", r, "a rate in jobs/s > 0")),
        (Some(r), _) if r > MAX_RATE => {
            let expected = format!(
                "a rate of at most {MAX_RATE} jobs/s (the schedule's gap would be under 0.1 µs; nothing sends that fast)"
            );
            return Err(cx.err("producers.rate", r, expected));
        }
        (Some(_), _) if tasks.count == 0 => {
            return Err(cx.err("producers.count", 0, "at least 1 producer when rate is set"))
        }
        (Some(r), a) => Some(OpenLoop { rate_per_sec: r, arrival: a.unwrap_or_default(), stages: None }),
    })
}

/// Pairs a weighted backoff may list (as a weighted distribution: `scenario::bounds`).
const MAX_BACKOFF_CHOICES: usize = 1000;

/// `[consumers]`; `largest_payload` (bytes) is the producers' largest drawn, what a claim returns.
fn consumers(cx: &Ctx, raw: &Scenario, largest_payload: u64) -> Result<ConsumerPlan, ScenarioError> {
    let c = &raw.consumers;
    let tasks = cx.tasks("consumers", c.count, c.connections, c.pipeline)?;
    let batch = cx.count("consumers.batch", c.batch, 1, MAX_BATCH, "jobs per claim")?;
    cx.in_flight(
        "consumers.batch",
        "consumers.count × consumers.pipeline × consumers.batch × largest payload",
        format!("{} × {} × {batch} × {}", tasks.count, tasks.pipeline, ByteSize(largest_payload)),
        tasks.lanes().saturating_mul(u64::from(batch)).saturating_mul(largest_payload),
        MAX_PAYLOAD_IN_FLIGHT,
    )?;
    let lease = c.lease.get();
    if lease < Duration::from_millis(1) || lease > MAX_DURATION {
        let expected = format!("a lease of at least 1ms and at most {}", humantime::format_duration(MAX_DURATION));
        return Err(cx.err("consumers.lease", format!("{:?}", c.lease.as_str()), expected));
    }
    let (fail, stall) = (cx.fraction("consumers.fail", c.fail)?, cx.fraction("consumers.stall", c.stall)?);
    if fail.get() + stall.get() > 1.0 {
        let found = format!("{}", fail.get() + stall.get());
        return Err(cx.err_at("consumers.stall", "consumers.stall + consumers.fail", found, "at most 1"));
    }
    let backoff = match &c.backoff {
        None => Backoff::None,
        Some(BackoffSpec::Fixed(d)) => Backoff::Fixed(cx.at_most("consumers.backoff.fixed", d, MAX_DURATION)?),
        Some(BackoffSpec::Exponential { base, max }) if base.get().is_zero() || base.get() > max.get() => {
            let found = format!("base {base:?}, max {max:?}", base = base.as_str(), max = max.as_str());
            return Err(cx.err("consumers.backoff.exponential", found, "0 < base <= max"));
        }
        Some(BackoffSpec::Exponential { base, max }) => Backoff::Exponential {
            base: base.get(),
            max: cx.at_most("consumers.backoff.exponential.max", max, MAX_DURATION)?,
        },
        Some(BackoffSpec::Weighted(pairs)) => {
            let field = "consumers.backoff.weighted";
            if pairs.is_empty() || pairs.len() > MAX_BACKOFF_CHOICES {
                let expected = format!("1 to {MAX_BACKOFF_CHOICES} [delay, weight] pairs");
                return Err(cx.err(field, format!("{} pairs", pairs.len()), expected));
            }
            let mut choices = Vec::with_capacity(pairs.len());
            for (delay, weight) in pairs {
                if !(weight.is_finite() && *weight > 0.0) {
                    return Err(cx.err(field, format!("weight {weight}"), "weights > 0"));
                }
                choices.push((cx.at_most(field, delay, MAX_DURATION)?, *weight));
            }
            let total = choices.iter().map(|c| c.1).sum();
            Backoff::Weighted { choices: choices.into(), total }
        }
    };
    let extend_every = match &c.extend {
        ExtendSpec::Enabled(false) => None,
        ExtendSpec::Enabled(true) => Some(lease / 2),
        ExtendSpec::Every(d) if d.get().is_zero() || d.get() >= lease => {
            let expected = format!("an interval > 0 and shorter than the lease ({})", c.lease);
            return Err(cx.err("consumers.extend", format!("{:?}", d.as_str()), expected));
        }
        ExtendSpec::Every(d) => Some(d.get()),
    };
    let zombie_delay = match &c.zombie_delay {
        Some(d) => cx.at_most("consumers.zombie_delay", d, MAX_DURATION)?,
        None => lease * 2,
    };
    Ok(ConsumerPlan {
        count: tasks.count,
        connections: tasks.connections,
        pipeline: tasks.pipeline,
        batch,
        lease,
        work: DurationSampler::new(&c.work).map_err(|e| cx.problem("consumers.work", e))?,
        fail,
        backoff,
        stall,
        zombie: cx.fraction("consumers.zombie", c.zombie)?,
        zombie_delay,
        progress: cx.count("consumers.progress", c.progress, 0, MAX_PROGRESS, "progress calls per job")?,
        extend_every,
        poll: cx.at_most("consumers.poll", &c.poll, MAX_DURATION)?,
    })
}

fn maintenance(cx: &Ctx, raw: &Scenario) -> Result<MaintenancePlan, ScenarioError> {
    let m = &raw.maintenance;
    let intervals = [("maintenance.reap", Some(&m.reap)), ("maintenance.promote", Some(&m.promote))];
    let clean = ("maintenance.clean", m.clean.as_ref());
    for (field, d) in intervals.into_iter().chain([clean]).filter_map(|(f, d)| Some((f, d?))) {
        if d.get().is_zero() || d.get() > MAX_DURATION {
            let expected = format!("an interval > 0 and at most {}", humantime::format_duration(MAX_DURATION));
            return Err(cx.err(field, format!("{:?}", d.as_str()), expected));
        }
    }
    let limit = cx.count("maintenance.limit", m.limit, 1, MAX_LIMIT, "ids per call")?;
    if m.retain.get() > MAX_RETAIN {
        let expected = format!("a retention of at most {}", humantime::format_duration(MAX_RETAIN));
        return Err(cx.err("maintenance.retain", format!("{:?}", m.retain.as_str()), expected));
    }
    // BullMQ removes finished jobs only through each job's `removeOnComplete`/`removeOnFail`
    // options, inside `moveToFinished`: that deletes a row without telling the client which,
    // so the check could no longer tell a retired job from a lost one.
    if m.clean.is_some() && raw.protocol == crate::lua::Protocol::BullMq {
        return Err(cx.err(
            "maintenance.clean",
            "a retention interval with protocol = \"bullmq\"",
            "no `clean` for BullMQ: its scripts remove finished jobs only through removeOnComplete/removeOnFail, which name no job removed, so the check could not tell a retired job from a lost one",
        ));
    }
    Ok(MaintenancePlan {
        reap: m.reap.get(),
        promote: m.promote.get(),
        limit,
        clean: m.clean.as_ref().map(|d| d.get()),
        retain: m.retain.get(),
    })
}
