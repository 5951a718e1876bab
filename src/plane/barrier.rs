//! The fleet's start barrier, kept on the target itself: no coordinator process, no new
//! network protocol. One Lua script over two keys with the group's own hash tag
//! (`emq-fleet:{G}:arrived`, a hash of shard index → configuration hash, and
//! `emq-fleet:{G}:t0`): each shard registers its index (again and again while it waits, which
//! counts a restarted index once), a shard whose configuration differs is refused, and the
//! shard whose arrival completes the group sets `t0` = the server's `TIME` + a margin. Every
//! shard measures its clock's offset to the server's and starts when its own clock says `t0`.
//! The keys expire: while the group gathers, `timeout` + 5 s after the last arrival; once
//! started, a minute after `t0`. An arrival counts while its shard refreshes it (every poll):
//! a shard killed at the barrier stops counting within 2 s, and one that leaves removes it.

use super::{Plane, PlaneError};
use crate::net::Control;
use crate::resp::CallError;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long after `t0` the barrier's keys live: a shard restarted later finds no barrier and
/// waits for a group that never gathers again (its timeout names the indices missing).
pub const KEEP_AFTER_START: Duration = Duration::from_secs(60);
/// Between two arrivals of a waiting shard.
const POLL: Duration = Duration::from_millis(100);

/// KEYS: arrived, t0. ARGV: index, shards, configuration hash, margin ms, gathering TTL ms,
/// TTL after t0 ms, freshness ms. Each arrival is stored as `<configuration>|<server ms>` and
/// refreshed at every poll; the group is complete when `shards` entries of one configuration
/// are fresh (a shard killed while it waited stops refreshing and stops counting). Replies
/// `{'started', t0_ms}`, `{'waiting', indices...}` (the fresh ones), `{'mismatch', index}` (a
/// fresh shard of another configuration) or `{'late', t0_ms}` (the group started without this
/// shard, or it is a previous fleet's of another configuration).
const ARRIVE: &str = r"
local t0 = redis.call('GET', KEYS[2])
local mine = redis.call('HGET', KEYS[1], ARGV[1])
local function config_of(entry) return string.match(entry, '^([^|]*)') end
if t0 then
  if mine and config_of(mine) == ARGV[3] then return {'started', t0} end
  return {'late', t0}
end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local fresh_after = now - tonumber(ARGV[7])
local arrived = redis.call('HGETALL', KEYS[1])
local fresh = {}
for i = 1, #arrived, 2 do
  local config, at = string.match(arrived[i + 1], '^([^|]*)|(%d+)$')
  if arrived[i] ~= ARGV[1] and at and tonumber(at) >= fresh_after then
    if config ~= ARGV[3] then return {'mismatch', arrived[i]} end
    table.insert(fresh, arrived[i])
  end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3] .. '|' .. now)
table.insert(fresh, ARGV[1])
if #fresh >= tonumber(ARGV[2]) then
  local at = now + tonumber(ARGV[4])
  redis.call('SET', KEYS[2], tostring(at), 'PX', tonumber(ARGV[4]) + tonumber(ARGV[6]))
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[4]) + tonumber(ARGV[6]))
  return {'started', tostring(at)}
end
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return {'waiting', unpack(fresh)}
";

/// Removes this shard's arrival when it leaves without a start (a timeout, a stop), unless the
/// group has started. KEYS: arrived, t0. ARGV: index.
const LEAVE: &str = r"
if redis.call('EXISTS', KEYS[2]) == 0 then redis.call('HDEL', KEYS[1], ARGV[1]) end
return 0
";

/// An arrival not refreshed for this long is a shard that left (killed, stopped): it no
/// longer counts.
const FRESH: Duration = Duration::from_secs(2);

/// One shard's place at the barrier.
#[derive(Debug, Clone)]
pub struct ShardArrival {
    /// The group (`--group`): the keys' hash tag.
    pub group: String,
    /// This shard's index.
    pub index: u32,
    /// The group's size.
    pub shards: u32,
    /// A hash of what every shard must agree on (the scenario, the shard count, the binary's
    /// version).
    pub config: String,
    /// `t0` is this long after the last arrival: time for every shard to see it and connect.
    pub margin: Duration,
    /// How long to wait for the group to gather.
    pub timeout: Duration,
}

/// The clock's offset to the server's, from the `TIME` call with the shortest round trip.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClockOffset {
    /// Server clock minus local clock, ms (positive: the server is ahead).
    pub offset_ms: f64,
    /// Half that call's round trip, ms: the offset is known within ± this.
    pub uncertainty_ms: f64,
}

/// The group gathered: when to start.
#[derive(Debug, Clone, Copy)]
pub struct Start {
    /// The agreed start, ms since the Unix epoch on the server's clock.
    pub t0_ms: u64,
    /// This process's clock against the server's.
    pub clock: ClockOffset,
    /// How long this shard waited at the barrier.
    pub waited: Duration,
}

impl Start {
    /// `t0` on this process's clock.
    pub fn local_t0(&self) -> SystemTime {
        let local_ms = self.t0_ms as f64 - self.clock.offset_ms;
        UNIX_EPOCH + Duration::from_secs_f64(local_ms.max(0.0) / 1000.0)
    }
}

/// Why a shard cannot start. Each is a usage error (exit 2): the fleet was started wrongly.
#[derive(Debug, thiserror::Error)]
pub enum BarrierError {
    /// Not every shard arrived in time.
    #[error(
        "fleet {group}: shard(s) {missing} of {shards} did not arrive within --barrier-timeout {timeout}: \
         start every index 0..{shards} with the same scenario and --shards"
    )]
    Missing {
        /// The group.
        group: String,
        /// The indices that never arrived, comma-separated.
        missing: String,
        /// The group's size.
        shards: u32,
        /// The timeout, as given.
        timeout: String,
    },
    /// A shard registered another configuration.
    #[error(
        "fleet {group}: shard {index} runs another configuration (scenario, --shards, flags or emq-bench \
         version differ): every shard must run the same"
    )]
    Mismatch {
        /// The group.
        group: String,
        /// The index whose configuration differs.
        index: String,
    },
    /// The group started without this shard (a restarted shard, or a previous fleet's keys).
    #[error(
        "fleet {group}: started {ago_s:.1} s ago without this shard (a shard restarted after the start cannot \
         join, nor can a fleet of another configuration under the same group: use another --group, or wait \
         {left_s} s for the old barrier to expire)"
    )]
    Late {
        /// The group.
        group: String,
        /// How long ago it started, s.
        ago_s: f64,
        /// When its keys expire, s from now.
        left_s: u64,
    },
    /// A command failed.
    #[error(transparent)]
    Plane(#[from] PlaneError),
}

fn unix_ms(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

/// Measures `conn`'s server clock against this process's: five `TIME` calls, the one with the
/// shortest round trip kept (NTP's rule: its midpoint is the best estimate).
///
/// Errors: a failed call.
pub async fn clock_offset(conn: &Control) -> Result<ClockOffset, CallError> {
    let mut best: Option<ClockOffset> = None;
    for _ in 0..5 {
        let mut conn = conn.clone();
        let before = SystemTime::now();
        let (secs, micros): (u64, u64) =
            redis::cmd("TIME").query_async(&mut conn).await.map_err(|e| CallError::from_redis(&e))?;
        let after = SystemTime::now();
        let server_ms = secs as f64 * 1000.0 + micros as f64 / 1000.0;
        let (a, b) = (unix_ms(before), unix_ms(after));
        let sample = ClockOffset { offset_ms: server_ms - (a + b) / 2.0, uncertainty_ms: (b - a).max(0.0) / 2.0 };
        if best.is_none_or(|best| sample.uncertainty_ms < best.uncertainty_ms) {
            best = Some(sample);
        }
    }
    Ok(best.expect("five samples"))
}

/// The barrier's keys for `group`.
pub fn keys(group: &str) -> [String; 2] {
    [format!("emq-fleet:{{{group}}}:arrived"), format!("emq-fleet:{{{group}}}:t0")]
}

/// The set of shards of the fleet started at `t0_ms` whose producers are done
/// (`emq-fleet:{G}:produced:<t0>`: a later fleet of the same group starts from an empty one).
fn produced_key(group: &str, t0_ms: u64) -> String {
    format!("emq-fleet:{{{group}}}:produced:{t0_ms}")
}

/// How long the set of shards done producing outlives its last entry, on top of the drain:
/// time for every consumer shard to read it.
const PRODUCED_KEPT: Duration = Duration::from_secs(60);

/// Says that shard `index`'s producers are done (every reply in): a `shared` fleet's
/// consumers on other shards drain only once every producing shard has said so. Saying it
/// again (a retry) counts once. The set expires `drain` + a minute after the last entry.
///
/// Errors: a failed call.
pub async fn producers_done(
    plane: &Plane,
    group: &str,
    t0_ms: u64,
    index: u32,
    drain: Duration,
) -> Result<(), CallError> {
    let key = produced_key(group, t0_ms);
    let mut conn = plane.conn_for_key(&key);
    let ttl_ms = (drain + PRODUCED_KEPT).as_millis() as u64;
    redis::pipe()
        .cmd("SADD")
        .arg(&key)
        .arg(index)
        .ignore()
        .cmd("PEXPIRE")
        .arg(&key)
        .arg(ttl_ms)
        .ignore()
        .exec_async(&mut conn)
        .await
        .map_err(|e| CallError::from_redis(&e))
}

/// How many shards of the fleet started at `t0_ms` have said their producers are done.
///
/// Errors: a failed call.
pub async fn shards_done_producing(plane: &Plane, group: &str, t0_ms: u64) -> Result<u32, CallError> {
    let key = produced_key(group, t0_ms);
    let mut conn = plane.conn_for_key(&key);
    redis::cmd("SCARD").arg(&key).query_async(&mut conn).await.map_err(|e| CallError::from_redis(&e))
}

/// The group's `t0` when it has started (ms on the server's clock), else `None`: a shard
/// checks it before it deletes anything (`--force`), so a shard arriving late never destroys
/// the keys of the fleet that started without it.
///
/// Errors: a failed call.
pub async fn started(plane: &Plane, group: &str) -> Result<Option<u64>, CallError> {
    let [arrived, t0] = keys(group);
    let mut conn = plane.conn_for_key(&arrived);
    let at: Option<String> =
        redis::cmd("GET").arg(&t0).query_async(&mut conn).await.map_err(|e| CallError::from_redis(&e))?;
    Ok(at.and_then(|v| v.parse().ok()))
}

/// Waits at the barrier until the group has gathered (or `stop` resolves: `Ok(None)`), tells
/// `say` who it waits for every 5 s, and returns when to start. A shard that leaves without a
/// start (a timeout, a stop, a refusal) removes its arrival, so it does not count for a group
/// that gathers later.
///
/// Errors: [`BarrierError`]: missing shards after the timeout, a mismatched configuration, a
/// group that started without this shard, a failed call.
pub async fn wait(
    plane: &Plane,
    me: &ShardArrival,
    stop: impl std::future::Future<Output = ()>,
    say: impl Fn(&str),
) -> Result<Option<Start>, BarrierError> {
    let [arrived, t0] = keys(&me.group);
    let conn = plane.conn_for_key(&arrived);
    let outcome = gather(&conn, me, [&arrived, &t0], stop, say).await;
    if !matches!(outcome, Ok(Some(_))) {
        let mut c = conn.clone();
        let _: Result<i64, _> =
            redis::cmd("EVAL").arg(LEAVE).arg(2).arg(&arrived).arg(&t0).arg(me.index).query_async(&mut c).await;
    }
    outcome
}

async fn gather(
    conn: &Control,
    me: &ShardArrival,
    [arrived, t0]: [&str; 2],
    stop: impl std::future::Future<Output = ()>,
    say: impl Fn(&str),
) -> Result<Option<Start>, BarrierError> {
    let began = std::time::Instant::now();
    let mut told = began;
    tokio::pin!(stop);
    loop {
        let mut c = conn.clone();
        let reply: Vec<String> = redis::cmd("EVAL")
            .arg(ARRIVE)
            .arg(2)
            .arg(arrived)
            .arg(t0)
            .arg(me.index)
            .arg(me.shards)
            .arg(&me.config)
            .arg(me.margin.as_millis() as u64)
            .arg(me.timeout.as_millis() as u64 + 5_000)
            .arg(KEEP_AFTER_START.as_millis() as u64)
            .arg(FRESH.as_millis() as u64)
            .query_async(&mut c)
            .await
            .map_err(|e| PlaneError::Call(CallError::from_redis(&e)))?;
        let t0_of = |reply: &[String]| reply.get(1).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        match reply.first().map(String::as_str) {
            Some("started") => {
                let t0_ms = t0_of(&reply);
                // Measured now, just before the start: the clock's drift over a long wait at the
                // barrier does not move this shard's start.
                let clock = clock_offset(conn).await.map_err(PlaneError::Call)?;
                let server_now = unix_ms(SystemTime::now()) + clock.offset_ms;
                // A start already past (beyond the clock's uncertainty) began without this shard.
                if (t0_ms as f64) + clock.uncertainty_ms + 50.0 < server_now {
                    return Err(late(me, t0_ms, server_now));
                }
                return Ok(Some(Start { t0_ms, clock, waited: began.elapsed() }));
            }
            Some("late") => {
                let server_now =
                    unix_ms(SystemTime::now()) + clock_offset(conn).await.map_err(PlaneError::Call)?.offset_ms;
                return Err(late(me, t0_of(&reply), server_now));
            }
            Some("mismatch") => {
                let index = reply.get(1).cloned().unwrap_or_default();
                return Err(BarrierError::Mismatch { group: me.group.clone(), index });
            }
            _ => {}
        }
        let here: Vec<u32> = reply.iter().skip(1).filter_map(|i| i.parse().ok()).collect();
        let missing: Vec<String> = (0..me.shards).filter(|i| !here.contains(i)).map(|i| i.to_string()).collect();
        if began.elapsed() >= me.timeout {
            return Err(BarrierError::Missing {
                group: me.group.clone(),
                missing: missing.join(", "),
                shards: me.shards,
                timeout: humantime::format_duration(me.timeout).to_string(),
            });
        }
        if told.elapsed() >= Duration::from_secs(5) {
            told = std::time::Instant::now();
            say(&format!(
                "fleet {}: shard {} waits for shard(s) {} ({} of {} here)",
                me.group,
                me.index,
                missing.join(", "),
                here.len(),
                me.shards
            ));
        }
        tokio::select! {
            _ = tokio::time::sleep(POLL) => {}
            _ = &mut stop => return Ok(None),
        }
    }
}

fn late(me: &ShardArrival, t0_ms: u64, server_now: f64) -> BarrierError {
    let ago_s = (server_now - t0_ms as f64) / 1000.0;
    let left_s = (KEEP_AFTER_START.as_secs_f64() - ago_s).max(0.0).ceil() as u64;
    BarrierError::Late { group: me.group.clone(), ago_s, left_s }
}
