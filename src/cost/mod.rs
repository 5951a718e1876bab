//! What each script costs the server per call: every script driven in a phase of
//! its own, with the state it needs prepared, and the server's `INFO commandstats` delta of
//! `EVALSHA` (`usec` / `calls`) read around the phase.
//!
//! Why phases: `commandstats` has one line for `EVALSHA`, whatever the script, so a mixed load
//! cannot tell the scripts apart; and a client-side latency of a script that runs for
//! microseconds is mostly network, client and timer, inside whose noise a large script change
//! hides.
//!
//! Each phase runs in blocks (of [`block_size`] calls), each block measured on its own; with two
//! script sets (two clients, one connection each) the blocks take turns A B B A A B ..., so the
//! two sets run in the same seconds on the same queues, and a drift of the machine's speed
//! (on a shared VM, a script's cost can move by more than any change worth finding from one
//! second to the next) hits both members of a pair alike. In a block, [`LANES`] calls are in flight on the
//! block's connection (the server runs one call at a time either way; in flight only keeps it
//! busy). The phases:
//! 1. `enqueue` N jobs (256-byte payloads) into one queue;
//! 2. `claim` them one per call (lease 10 min, each call a holder of its own), then `extend`
//!    and `progress` each held lease once, then `complete` half of them and `fail` the other
//!    half (for good, 1 attempt);
//! 3. `enqueue_delayed` N jobs due in 1 ms into a second queue, then `promote` them
//!    [`BATCH`] per call until none is left;
//! 4. N jobs claimed with a 1 ms lease in a third queue (not measured), then `reap` [`BATCH`]
//!    per call until none is left;
//! 5. where every set has it (EchoMQ v1.2), `clean` of phase 2's completed half, [`BATCH`] per
//!    call.
//!
//! A block whose `EVALSHA` call count moved by other than the calls it made means another
//! client ran scripts meanwhile: the measurement is refused ([`CostError::Disturbed`]).

use crate::echomq::FinishedSet;
use crate::keyspace::{JobIdGen, QueueKeys, QueueName};
use crate::lua::Script;
use crate::net::info::info;
use crate::net::Control;
use crate::payload::PayloadPool;
use crate::queue::{FailArgs, Holder};
use crate::resp::{CallError, PipeConn, ScriptClient};
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
/// Fewest `promote` / `reap` / `clean` calls in a block: a block of one or two calls is a
/// millisecond or two of server time, which one preemption of the server doubles, so the
/// pairs of such blocks spread too far to decide on.
const MIN_DRAIN_CALLS: usize = 4;
/// Payload bytes of every job.
const PAYLOAD: usize = 256;

/// One block of one script's calls, measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScriptCost {
    /// The script.
    pub script: Script,
    /// Which script set (client) ran the block: 0 for the first.
    pub arm: usize,
    /// `EVALSHA` calls the block made (and the server counted).
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
    /// The server counted other `EVALSHA` calls than the block made.
    #[error("{phase}: the server counted {counted} EVALSHA calls, the phase made {made}: another client runs scripts on this server, so its cost cannot be told apart")]
    Disturbed {
        /// The phase.
        phase: &'static str,
        /// Calls the server counted.
        counted: u64,
        /// Calls the phase made.
        made: u64,
    },
    /// `INFO` could not be read.
    #[error("INFO: {why}")]
    Info {
        /// Why.
        why: String,
    },
}

/// Server counters read around a block.
#[derive(Debug, Clone, Copy, Default)]
struct Counters {
    calls: u64,
    usec: u64,
    cpu_secs: f64,
}

/// One INFO (the run's own reader, [`info`]): EVALSHA's calls and µs, the server's CPU seconds.
async fn counters(control: &Control) -> Result<Counters, CostError> {
    let snap = info(&mut control.clone()).await.map_err(|e| CostError::Info { why: e.to_string() })?;
    let evalsha = snap.commandstats.get("evalsha").cloned().unwrap_or_default();
    Ok(Counters { calls: evalsha.calls, usec: evalsha.usec, cpu_secs: snap.used_cpu_s })
}

/// The cost of a block from the counters around it; `made` is the calls the block made.
fn cost_of(script: Script, arm: usize, made: u64, before: Counters, after: Counters) -> Result<ScriptCost, CostError> {
    let counted = after.calls.saturating_sub(before.calls);
    if counted != made || made == 0 {
        return Err(CostError::Disturbed { phase: script.name(), counted, made });
    }
    let calls = made as f64;
    Ok(ScriptCost {
        script,
        arm,
        calls: made,
        us_per_call: after.usec.saturating_sub(before.usec) as f64 / calls,
        cpu_us_per_call: (after.cpu_secs - before.cpu_secs).max(0.0) * 1e6 / calls,
    })
}

/// Calls per block for `calls` calls per phase: 40 blocks of a phase of `calls` (20 of the half
/// phases complete and fail, so 10 pairs: a sign test at α = 0.01 needs 7), at least 50 calls.
pub fn block_size(calls: u32) -> usize {
    (calls as usize / 40).max(50)
}

/// The arm of block `j` of a phase with `arms` arms: A B, B A, A B, ... (ABBA), so a steady
/// trend within the phase (the queue growing) weighs on both arms alike.
fn arm_of(j: usize, arms: usize) -> usize {
    let (pair, pos) = (j / arms, j % arms);
    if pair % 2 == 0 {
        pos
    } else {
        arms - 1 - pos
    }
}

/// What every phase needs: the clients (one per arm), the control connection that reads the
/// counters, the block size, whether the arms' order is mirrored, and where the blocks' costs
/// go.
struct Phases<'a> {
    clients: &'a [ScriptClient<PipeConn>],
    control: &'a Control,
    block: usize,
    mirrored: bool,
    costs: Vec<ScriptCost>,
}

impl Phases<'_> {
    /// The arm of block `j` of a phase: [`arm_of`], or with `mirrored` its mirror (B A A B ...).
    fn arm(&self, j: usize) -> usize {
        let (arms, arm) = (self.clients.len(), arm_of(j, self.clients.len()));
        if self.mirrored {
            arms - 1 - arm
        } else {
            arm
        }
    }

    /// Runs `call` once per item, in blocks whose arms take turns, each block measured as
    /// `script`; the results in item order.
    async fn blocks<T, R, F, Fut>(&mut self, script: Script, items: Vec<T>, call: F) -> Result<Vec<R>, CostError>
    where
        T: 'static,
        R: 'static,
        F: Fn(ScriptClient<PipeConn>, T) -> Fut + Clone + 'static,
        Fut: std::future::Future<Output = Result<R, CallError>> + 'static,
    {
        let mut out = Vec::with_capacity(items.len());
        let mut items = items.into_iter().peekable();
        let mut j = 0;
        while items.peek().is_some() {
            let chunk: Vec<T> = items.by_ref().take(self.block).collect();
            let (arm, made) = (self.arm(j), chunk.len() as u64);
            let before = counters(self.control).await?;
            let results = each(&self.clients[arm], chunk, call.clone())
                .await
                .map_err(|source| CostError::Call { phase: script.name(), source })?;
            let after = counters(self.control).await?;
            self.costs.push(cost_of(script, arm, made, before, after)?);
            out.extend(results);
            j += 1;
        }
        Ok(out)
    }

    /// Calls `promote`, `reap` or `clean` ([`BATCH`] jobs each) until `jobs` moved, in blocks of
    /// `block / BATCH` calls (at least [`MIN_DRAIN_CALLS`]) whose arms take turns. A call that
    /// moves nothing before then is [`CostError::Unexpected`].
    async fn drain(&mut self, keys: &QueueKeys, script: Script, jobs: u32) -> Result<(), CostError> {
        let per_block = (self.block / BATCH as usize).max(MIN_DRAIN_CALLS) as u64;
        let mut moved = 0u64;
        let mut j = 0;
        while moved < u64::from(jobs) {
            let arm = self.arm(j);
            let mut c = self.clients[arm].clone();
            let before = counters(self.control).await?;
            let mut made = 0;
            while made < per_block && moved < u64::from(jobs) {
                let n = match script {
                    Script::Promote => c.promote(keys, BATCH).await,
                    Script::Clean => c.clean(keys, FinishedSet::Completed, 0, BATCH).await.map(|ids| ids.len() as u64),
                    _ => c.reap(keys, BATCH, 3).await,
                }
                .map_err(|source| CostError::Call { phase: script.name(), source })?;
                made += 1;
                if n == 0 {
                    return Err(CostError::Unexpected {
                        phase: script.name(),
                        what: format!("{moved} of {jobs} jobs were due"),
                    });
                }
                moved += n;
            }
            let after = counters(self.control).await?;
            self.costs.push(cost_of(script, arm, made, before, after)?);
            j += 1;
        }
        Ok(())
    }
}

/// Runs `call` once per item of `items`, [`LANES`] at a time on clones of `client`, and
/// returns the results in item order. Must run inside a `LocalSet` (the pipe's driver is local).
async fn each<T, R, F, Fut>(client: &ScriptClient<PipeConn>, items: Vec<T>, call: F) -> Result<Vec<R>, CallError>
where
    T: 'static,
    R: 'static,
    F: Fn(ScriptClient<PipeConn>, T) -> Fut + Clone + 'static,
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

/// Measures every script once with each client of `clients` (one per script set, all
/// connected to the server `control` reads, their scripts loaded): `calls` calls per phase
/// (promote and reap: `calls` jobs, [`BATCH`] per call), in blocks of `block` calls; `seed`
/// sets the ids and payloads; `tag` keeps the queues of two measurements on one server apart
/// (`cost-<tag>-a`, ...); `mirrored` starts every phase with the last arm (B A A B ...), so
/// rounds that alternate it put each arm at each position of a phase equally often: a cost that
/// changes in steps along a phase (a hash table's resize, a set's last jobs) then weighs on
/// both arms alike instead of on the same arm every round. The blocks' costs, in the order they
/// ran.
///
/// Errors: [`CostError`].
pub async fn measure(
    clients: &[ScriptClient<PipeConn>],
    control: &Control,
    calls: u32,
    block: usize,
    seed: u64,
    tag: &str,
    mirrored: bool,
) -> Result<Vec<ScriptCost>, CostError> {
    let queue = |suffix: &str| {
        QueueName::new(&format!("cost-{tag}-{suffix}")).map(QueueKeys::new).map(Rc::new).expect("a valid queue name")
    };
    let (main, delayed, reaped) = (queue("a"), queue("b"), queue("c"));
    let pool = Rc::new(PayloadPool::new(seed));
    let mut ids = JobIdGen::new(seed);
    let mut mint = |n: u32| (0..n).map(|_| ids.next_id()).collect::<Vec<_>>();
    let mut phases = Phases { clients, control, block, mirrored, costs: Vec::new() };
    let enqueue = |keys: Rc<QueueKeys>, pool: Rc<PayloadPool>, delay: Option<u64>| {
        move |mut c: ScriptClient<PipeConn>, id| {
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
    // Each claim call is made as a holder of its own, and its fenced calls present it, as the
    // load's consumers do (scripts that predate holders ignore the argument).
    let claim = |keys: Rc<QueueKeys>, lease_ms: u64| {
        move |mut c: ScriptClient<PipeConn>, n: u32| {
            let keys = keys.clone();
            async move { c.claim_as(&keys, lease_ms, 1, Holder::from_u64(u64::from(n) + 1)).await }
        }
    };

    // enqueue, then claim / extend / progress / complete / fail on the same jobs.
    phases.blocks(Script::Enqueue, mint(calls), enqueue(main.clone(), pool.clone(), None)).await?;
    let claimed = phases.blocks(Script::Claim, (0..calls).collect(), claim(main.clone(), 600_000)).await?;
    let held: Vec<_> = claimed.into_iter().flatten().map(|job| (job.id, job.token)).collect();
    if held.len() != calls as usize {
        return Err(CostError::Unexpected {
            phase: "claim",
            what: format!("{} of {calls} claims got a job", held.len()),
        });
    }
    let keys = main.clone();
    phases
        .blocks(Script::Extend, held.clone(), move |mut c, (id, token)| {
            let keys = keys.clone();
            async move { c.extend(&keys, &id, token, 600_000).await }
        })
        .await?;
    let keys = main.clone();
    phases
        .blocks(Script::Progress, held.clone(), move |mut c, (id, token)| {
            let keys = keys.clone();
            async move { c.progress(&keys, &id, token, b"50%").await }
        })
        .await?;
    let (to_complete, to_fail) = held.split_at(held.len() / 2);
    // complete and fail share the held jobs: blocks of half the size give them as many blocks
    // (and pairs) per round as the other phases.
    phases.block = (block / 2).max(1);
    let keys = main.clone();
    phases
        .blocks(Script::Complete, to_complete.to_vec(), move |mut c, (id, token)| {
            let keys = keys.clone();
            async move { c.complete(&keys, &id, token).await }
        })
        .await?;
    let keys = main.clone();
    phases
        .blocks(Script::Fail, to_fail.to_vec(), move |mut c, (id, token)| {
            let keys = keys.clone();
            let args = FailArgs { error: "cost", max_attempts: 1, backoff_ms: 0, priority: 0 };
            async move { c.fail(&keys, &id, token, args).await }
        })
        .await?;

    phases.block = block;

    // enqueue_delayed, then promote once they are due.
    phases.blocks(Script::EnqueueDelayed, mint(calls), enqueue(delayed.clone(), pool.clone(), Some(1))).await?;
    tokio::time::sleep(Duration::from_millis(20)).await;
    phases.drain(&delayed, Script::Promote, calls).await?;

    // Leases of 1 ms, expired before reap runs (setup on the first client, not measured).
    let setup = |source| CostError::Call { phase: "reap setup", source };
    each(&clients[0], mint(calls), enqueue(reaped.clone(), pool.clone(), None)).await.map_err(setup)?;
    let claimed = each(&clients[0], (0..calls).collect(), claim(reaped.clone(), 1)).await.map_err(setup)?;
    if claimed.iter().map(Vec::len).sum::<usize>() != calls as usize {
        return Err(CostError::Unexpected { phase: "reap", what: "the setup's claims got too few jobs".into() });
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    phases.drain(&reaped, Script::Reap, calls).await?;

    // clean (EchoMQ v1.2) of the completed half, where every arm's scripts have it: last, so
    // the phases before it meet the server as they did before it existed.
    if clients.iter().all(|c| c.registry().holds(Script::Clean)) {
        phases.drain(&main, Script::Clean, to_complete.len() as u32).await?;
    }
    Ok(phases.costs)
}
