//! One file per verb (STYLE.md habit 7): each builds its `EVALSHA`, sends it through the
//! registry and turns the reply into a typed value (PROTOCOL.md "Scripts" gives each shape).

mod claim;
mod complete;
mod enqueue;
mod extend;
mod fail;
mod maintenance;
mod progress;

pub use claim::Claimed;
pub use complete::CompleteReply;
pub use enqueue::{enqueue_reply, EnqueueFrames, EnqueueReply};
pub use fail::{FailArgs, FailReply};
