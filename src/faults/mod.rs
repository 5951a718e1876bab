//! Faults: the record of the faults a run rode through (`record`: injected and seen, with
//! their spans), and the nemesis that injects the scenario's `[[faults]]` (`nemesis`, with
//! each kind's action in `kinds`, a cluster's in `cluster`, `lag` and `partition`, the
//! latter's iptables rules in `firewall`). The load driver depends on this module, never the
//! reverse.

mod cluster;
mod firewall;
mod kinds;
mod lag;
pub mod nemesis;
mod partition;
pub mod record;

pub use firewall::partition_refusal;
pub use nemesis::{load_client_name, Nemesis, Processes, Running};
pub use record::{FaultEffects, FaultSpan, FaultsSeen, SpanKind};
