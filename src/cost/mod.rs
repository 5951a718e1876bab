//! What each script costs the server per call (issue 14): every script driven in a phase of
//! its own, with the state it needs prepared, and the server's `INFO commandstats` delta of
//! `EVALSHA` (`usec` / `calls`) read around the phase.
//!
//! Why phases: `commandstats` has one line for `EVALSHA`, whatever the script, so a mixed load
//! cannot tell the scripts apart; and a client-side latency of a ~10 µs script is mostly
//! network, client and timer, inside whose noise a +33 % script change hides.
//!
//! The phases, on one connection with [`LANES`] calls in flight (the server runs one call at a
//! time either way; in flight only keeps it busy):
//! 1. `enqueue` N jobs (256-byte payloads) into one queue;
//! 2. `claim` them one per call (lease 10 min), then `extend` and `progress` each held lease
//!    once, then `complete` half of them and `fail` the other half (for good, 1 attempt);
//! 3. `enqueue_delayed` N jobs due in 1 ms into a second queue, then `promote` them
//!    [`BATCH`] per call until none is left;
//! 4. N jobs claimed with a 1 ms lease in a third queue (not measured), then `reap` [`BATCH`]
//!    per call until none is left.
//!
//! A phase whose `EVALSHA` call count moved by other than the calls it made means another
//! client ran scripts meanwhile: the measurement is refused ([`CostError::Disturbed`]).

use crate::load::payload::PayloadPool;
use crate::protocol::{CallError, EchoClient, FailArgs, JobIdGen, PipeConn, QueueKeys, QueueName, Script};
use crate::target::Control;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;

/// Calls in flight during a phase.
pub const LANES: usize = 32;
/// Jobs per `promote` / `reap` call.
pub const BATCH: u32 = 100;
/// Fewest and most calls per phase a measurement accepts.
pub const MIN_CALLS: u32 = 100;
/// See [`MIN_CALLS`].
pub const MAX_CALLS: u32 = 1_000_000;
/// Payload bytes of every job.
const PAYLOAD: usize = 256;

/// One script's cost in one measurement.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScriptCost {
    /// The script.
    pub script: Script,
    /// `EVALSHA` calls the phase made (and the server counted).
    pub calls: u64,
    /// Server time inside the script per call, µs (`commandstats` usec delta / calls delta).
    pub us_per_call: f64,
    /// Server CPU per call, µs (`INFO cpu` user + sys delta / calls): the script plus the
    /// server's reading, parsing and replying.
    pub cpu_us_per_call: f64,
}

/// Why a measurement failed.
#[derive(Debug, thiserror::Error)]
pub enum CostError {
    /// A call failed (a script error, a lost connection).
    #[error("{phase}: {source}")]
    Call {
        /// The phase.
        phase: &'static str,
        /// What failed.
        #[source]
        source: CallError,
    },
    /// A script replied what its phase did not expect (e.g. claim gave no job).
    #[error("{phase}: {what}")]
    Unexpected {
        /// The phase.
        phase: &'static str,
        /// What was wrong.
        what: String,
    },
    /// The server counted other `EVALSHA` calls than the phase made.
    #[error("{phase}: the server counted {counted} EVALSHA calls, the phase made {made}: another client runs scripts on this server, so its cost cannot be told apart")]
    Disturbed {
        /// The phase.
        phase: &'static str,
        /// Calls the server counted.
        counted: u64,
        /// Calls the phase made.
        made: u64,
    },
    /// `INFO` could not be read or parsed.
    #[error("INFO {section}: {why}")]
    Info {
        /// The section.
        section: &'static str,
        /// Why.
        why: String,
    },
}

/// Server counters read around a phase.
#[derive(Debug, Clone, Copy, Default)]
struct Counters {
    calls: u64,
    usec: u64,
    cpu_secs: f64,
}

async fn counters(control: &Control) -> Result<Counters, CostError> {
    let mut conn = control.clone();
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn)
        .await
        .map_err(|e| CostError::Info { section: "commandstats", why: e.to_string() })?;
    let cpu: String = redis::cmd("INFO")
        .arg("cpu")
        .query_async(&mut conn)
        .await
        .map_err(|e| CostError::Info { section: "cpu", why: e.to_string() })?;
    let mut found = Counters::default();
    if let Some(line) = stats.lines().find_map(|l| l.strip_prefix("cmdstat_evalsha:")) {
        for field in line.trim().split(',') {
            match field.split_once('=') {
                Some(("calls", v)) => found.calls = v.parse().unwrap_or(0),
                Some(("usec", v)) => found.usec = v.parse().unwrap_or(0),
                _ => {}
            }
        }
    }
    for line in cpu.lines() {
        if let Some(v) = line.strip_prefix("used_cpu_user:").or_else(|| line.strip_prefix("used_cpu_sys:")) {
            found.cpu_secs +=
                v.trim().parse::<f64>().map_err(|e| CostError::Info { section: "cpu", why: e.to_string() })?;
        }
    }
    Ok(found)
}

/// One phase's measurement: the counters before, the calls made, the counters after.
async fn measured<F, Fut>(control: &Control, script: Script, phase: F) -> Result<ScriptCost, CostError>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<u64, CostError>>,
{
    let before = counters(control).await?;
    let made = phase().await?;
    let after = counters(control).await?;
    let counted = after.calls.saturating_sub(before.calls);
    if counted != made || made == 0 {
        return Err(CostError::Disturbed { phase: script.name(), counted, made });
    }
    let calls = made as f64;
    Ok(ScriptCost {
        script,
        calls: made,
        us_per_call: after.usec.saturating_sub(before.usec) as f64 / calls,
        cpu_us_per_call: (after.cpu_secs - before.cpu_secs).max(0.0) * 1e6 / calls,
    })
}

/// Runs `call` once per item of `items`, [`LANES`] at a time on clones of `client`, and
/// returns how many calls were made. Must run inside a `LocalSet` (the pipe's driver is local).
async fn each<T, R, F, Fut>(client: &EchoClient<PipeConn>, items: Vec<T>, call: F) -> Result<Vec<R>, CallError>
where
    T: 'static,
    R: 'static,
    F: Fn(EchoClient<PipeConn>, T) -> Fut + Clone + 'static,
    Fut: std::future::Future<Output = Result<R, CallError>> + 'static,
{
    let work = Rc::new(RefCell::new(items.into_iter().enumerate().collect::<VecDeque<_>>()));
    let mut lanes = Vec::with_capacity(LANES);
    for _ in 0..LANES {
        let (work, client, call) = (work.clone(), client.clone(), call.clone());
        lanes.push(tokio::task::spawn_local(async move {
            let mut out = Vec::new();
            loop {
                let next = work.borrow_mut().pop_front();
                let Some((at, item)) = next else { return Ok::<_, CallError>(out) };
                out.push((at, call(client.clone(), item).await?));
            }
        }));
    }
    let mut all = Vec::new();
    for lane in lanes {
        all.extend(lane.await.expect("cost lane panicked")?);
    }
    all.sort_unstable_by_key(|(at, _)| *at);
    Ok(all.into_iter().map(|(_, r)| r).collect())
}

/// Measures every script once: `calls` calls per phase (promote and reap: `calls` jobs,
/// [`BATCH`] per call). `client` must be connected to the server `control` reads, with the
/// scripts to measure loaded; `seed` sets the ids and payloads; `tag` keeps the queues of two
/// measurements on one server apart (`cost-<tag>-a`, ...).
///
/// Errors: [`CostError`].
pub async fn measure(
    client: &EchoClient<PipeConn>,
    control: &Control,
    calls: u32,
    seed: u64,
    tag: &str,
) -> Result<Vec<ScriptCost>, CostError> {
    let queue = |suffix: &str| {
        QueueName::new(&format!("cost-{tag}-{suffix}")).map(QueueKeys::new).map(Rc::new).expect("a valid queue name")
    };
    let (main, delayed, reaped) = (queue("a"), queue("b"), queue("c"));
    let pool = Rc::new(PayloadPool::new(seed));
    let mut ids = JobIdGen::new(seed);
    let mut mint = |n: u32| (0..n).map(|_| ids.next_id()).collect::<Vec<_>>();
    let fail_call = |phase: &'static str| move |source| CostError::Call { phase, source };
    let mut costs = Vec::with_capacity(Script::ALL.len());

    // enqueue, then claim / extend / progress / complete / fail on the same jobs.
    let jobs = mint(calls);
    let enqueue = |keys: Rc<QueueKeys>, pool: Rc<PayloadPool>, delay: Option<u64>| {
        move |mut c: EchoClient<PipeConn>, id| {
            let (keys, pool) = (keys.clone(), pool.clone());
            async move {
                let mut payload = Vec::with_capacity(PAYLOAD);
                pool.build(&id, PAYLOAD, &mut payload);
                match delay {
                    None => c.enqueue(&keys, &id, &payload, None).await,
                    Some(ms) => c.enqueue_delayed(&keys, &id, &payload, ms).await,
                }
            }
        }
    };
    costs.push(
        measured(control, Script::Enqueue, || async {
            each(client, jobs, enqueue(main.clone(), pool.clone(), None)).await.map_err(fail_call("enqueue"))?;
            Ok(u64::from(calls))
        })
        .await?,
    );
    let claim = |keys: Rc<QueueKeys>, lease_ms: u64| {
        move |mut c: EchoClient<PipeConn>, _: u32| {
            let keys = keys.clone();
            async move { c.claim(&keys, lease_ms, 1).await }
        }
    };
    let mut held = Vec::new();
    costs.push(
        measured(control, Script::Claim, || async {
            let claimed =
                each(client, (0..calls).collect(), claim(main.clone(), 600_000)).await.map_err(fail_call("claim"))?;
            held = claimed.into_iter().flatten().map(|job| (job.id, job.token)).collect();
            Ok(u64::from(calls))
        })
        .await?,
    );
    if held.len() != calls as usize {
        return Err(CostError::Unexpected {
            phase: "claim",
            what: format!("{} of {calls} claims got a job", held.len()),
        });
    }
    let keys = main.clone();
    costs.push(
        measured(control, Script::Extend, || async {
            let keys = keys.clone();
            each(client, held.clone(), move |mut c, (id, token)| {
                let keys = keys.clone();
                async move { c.extend(&keys, &id, token, 600_000).await }
            })
            .await
            .map_err(fail_call("extend"))?;
            Ok(held.len() as u64)
        })
        .await?,
    );
    let keys = main.clone();
    costs.push(
        measured(control, Script::Progress, || async {
            let keys = keys.clone();
            each(client, held.clone(), move |mut c, (id, token)| {
                let keys = keys.clone();
                async move { c.progress(&keys, &id, token, b"50%").await }
            })
            .await
            .map_err(fail_call("progress"))?;
            Ok(held.len() as u64)
        })
        .await?,
    );
    let (to_complete, to_fail) = held.split_at(held.len() / 2);
    let keys = main.clone();
    costs.push(
        measured(control, Script::Complete, || async {
            let keys = keys.clone();
            each(client, to_complete.to_vec(), move |mut c, (id, token)| {
                let keys = keys.clone();
                async move { c.complete(&keys, &id, token).await }
            })
            .await
            .map_err(fail_call("complete"))?;
            Ok(to_complete.len() as u64)
        })
        .await?,
    );
    let keys = main.clone();
    costs.push(
        measured(control, Script::Fail, || async {
            let keys = keys.clone();
            each(client, to_fail.to_vec(), move |mut c, (id, token)| {
                let keys = keys.clone();
                let args = FailArgs { error: "cost", max_attempts: 1, backoff_ms: 0, priority: 0 };
                async move { c.fail(&keys, &id, token, args).await }
            })
            .await
            .map_err(fail_call("fail"))?;
            Ok(to_fail.len() as u64)
        })
        .await?,
    );

    // enqueue_delayed, then promote once they are due.
    let jobs = mint(calls);
    costs.push(
        measured(control, Script::EnqueueDelayed, || async {
            each(client, jobs, enqueue(delayed.clone(), pool.clone(), Some(1)))
                .await
                .map_err(fail_call("enqueue_delayed"))?;
            Ok(u64::from(calls))
        })
        .await?,
    );
    tokio::time::sleep(Duration::from_millis(20)).await;
    costs.push(measured(control, Script::Promote, || drain(client, &delayed, Script::Promote, calls)).await?);

    // Leases of 1 ms, expired before reap runs (setup, not measured).
    each(client, mint(calls), enqueue(reaped.clone(), pool.clone(), None)).await.map_err(fail_call("reap setup"))?;
    let claimed =
        each(client, (0..calls).collect(), claim(reaped.clone(), 1)).await.map_err(fail_call("reap setup"))?;
    if claimed.iter().map(Vec::len).sum::<usize>() != calls as usize {
        return Err(CostError::Unexpected { phase: "reap", what: "the setup's claims got too few jobs".into() });
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    costs.push(measured(control, Script::Reap, || drain(client, &reaped, Script::Reap, calls)).await?);
    costs.sort_by_key(|cost| Script::ALL.iter().position(|s| *s == cost.script));
    Ok(costs)
}

/// Calls `promote` or `reap` ([`BATCH`] jobs each) on one connection until `jobs` moved; the
/// call count. A call that moves nothing before then is [`CostError::Unexpected`].
async fn drain(client: &EchoClient<PipeConn>, keys: &QueueKeys, script: Script, jobs: u32) -> Result<u64, CostError> {
    let mut c = client.clone();
    let (mut moved, mut calls) = (0u64, 0u64);
    while moved < u64::from(jobs) {
        let n = match script {
            Script::Promote => c.promote(keys, BATCH).await,
            _ => c.reap(keys, BATCH, 3).await,
        }
        .map_err(|source| CostError::Call { phase: script.name(), source })?;
        calls += 1;
        if n == 0 {
            return Err(CostError::Unexpected {
                phase: script.name(),
                what: format!("{moved} of {jobs} jobs were due"),
            });
        }
        moved += n;
    }
    Ok(calls)
}
