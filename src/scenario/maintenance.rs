//! `[maintenance]`: the background `reap` and `promote` loops (docs/protocol.md "The scripts").

use serde::{Deserialize, Serialize};

use super::units::{Count, HumanDuration};

/// The raw `[maintenance]` table; every key is optional.
///
/// ```toml
/// [maintenance]
/// reap = "100ms"     # run `reap` (expired leases -> pending) this often, per queue; > 0, <= 1h
/// promote = "100ms"  # run `promote` (due delayed jobs -> pending) this often, per queue; > 0, <= 1h
/// limit = 1000       # the `limit` ARGV of both scripts: ids moved per call, 1..=100000
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Maintenance {
    /// Interval between `reap` calls on each queue.
    pub reap: HumanDuration,
    /// Interval between `promote` calls on each queue.
    pub promote: HumanDuration,
    /// Most ids one `reap` or `promote` call moves.
    pub limit: Count,
}

impl Default for Maintenance {
    fn default() -> Self {
        Self {
            reap: HumanDuration::from_duration(std::time::Duration::from_millis(100)),
            promote: HumanDuration::from_duration(std::time::Duration::from_millis(100)),
            limit: Count::from(1000),
        }
    }
}
