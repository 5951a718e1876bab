//! `[maintenance]`: the background `reap`, `promote` and `clean` loops (docs/protocol.md "The
//! scripts").

use serde::{Deserialize, Serialize};

use super::units::{Count, HumanDuration};

/// The raw `[maintenance]` table; every key is optional.
///
/// ```toml
/// [maintenance]
/// reap = "100ms"     # run `reap` (expired leases -> pending) this often, per queue; > 0, <= 1h
/// promote = "100ms"  # run `promote` (due delayed jobs -> pending) this often, per queue; > 0, <= 1h
/// limit = 1000       # the `limit` ARGV of the three scripts: ids per call, 1..=100000
/// clean = "1s"       # run `clean` (retention) this often on each queue's completed and failed
///                    # sets; off when absent; > 0, <= 1h; EchoMQ only
/// retain = "30s"     # the age `clean` removes finished jobs past; 0 ..= 7 days
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Maintenance {
    /// Interval between `reap` calls on each queue.
    pub reap: HumanDuration,
    /// Interval between `promote` calls on each queue.
    pub promote: HumanDuration,
    /// Most ids one `reap`, `promote` or `clean` call moves or removes.
    pub limit: Count,
    /// Interval between `clean` calls on each of a queue's finished sets; `None`: no retention
    /// (the deployment keeps every finished job).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clean: Option<HumanDuration>,
    /// How long a finished job is kept before `clean` may remove it (its `age_ms` ARGV).
    pub retain: HumanDuration,
}

impl Default for Maintenance {
    fn default() -> Self {
        Self {
            reap: HumanDuration::from_duration(std::time::Duration::from_millis(100)),
            promote: HumanDuration::from_duration(std::time::Duration::from_millis(100)),
            limit: Count::from(1000),
            clean: None,
            retain: HumanDuration::from_duration(std::time::Duration::from_secs(30)),
        }
    }
}
