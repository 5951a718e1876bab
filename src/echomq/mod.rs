//! EchoMQ v1.1 (PROTOCOL.md): one file per verb (STYLE.md habit 7), each a method on the
//! [`ScriptClient`](crate::resp::ScriptClient) that builds its `EVALSHA`, sends it through the
//! registry and turns the reply into a typed value (PROTOCOL.md "Scripts" gives each shape),
//! and beside them [`EchoOps`], which drives the verbs behind the load's seam
//! ([`QueueOps`](crate::queue::QueueOps)).

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
