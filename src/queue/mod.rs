//! The queue-protocol seam: what the load driver asks of a protocol ([`QueueOps`], built per
//! thread through [`Driver`]), the verbs and maintenance chores it asks for by what they do
//! ([`Verb`], [`Chore`]), and the typed replies both protocols answer with. EchoMQ
//! (`echomq/`) and BullMQ (`bullmq/`) implement it beside their verbs; load drives it and
//! picks the implementation once per thread.

mod chore;
mod holder;
mod ops;
mod replies;

pub use chore::{Chore, FinishedSet};
pub use holder::{Holder, HolderMint};
pub use ops::{needs_redo, Driver, QueueOps, Verb};
pub use replies::{Claimed, CompleteReply, EnqueueReply, FailArgs, FailReply};
