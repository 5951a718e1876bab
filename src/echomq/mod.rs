//! EchoMQ v1.2 (docs/protocol.md): one file per verb, so each verb's framing and reply shape
//! read on their own, each a method on the [`ScriptClient`](crate::resp::ScriptClient) that
//! builds its `EVALSHA`, sends it through the registry and turns the reply into a typed value
//! (docs/protocol.md "The scripts" gives each shape), and beside them [`EchoOps`], which drives
//! the verbs behind the load's seam ([`QueueOps`](crate::queue::QueueOps)).

mod claim;
mod complete;
mod enqueue;
mod extend;
mod fail;
mod fence;
mod maintenance;
mod ops;
mod progress;

pub use enqueue::{enqueue_reply, EnqueueFrames};
pub use fence::Fence;
pub use maintenance::FinishedSet;
pub use ops::EchoOps;
