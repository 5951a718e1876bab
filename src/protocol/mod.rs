//! The EchoMQ v1.1 protocol client (PROTOCOL.md): one typed function per verb, and BullMQ's
//! scripts as its clients call them.

pub mod bullmq;
pub mod bullmq_data;
pub mod release;
pub mod verbs;

pub use verbs::{enqueue_reply, Claimed, CompleteReply, EnqueueFrames, EnqueueReply, FailArgs, FailReply};
