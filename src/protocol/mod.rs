//! The EchoMQ v1.1 protocol client (PROTOCOL.md): gated keyspace builders, job-id minting, the
//! script registry (`SCRIPT LOAD`, `EVALSHA`, NOSCRIPT recovery) and one typed function per verb.

pub mod bullmq;
pub mod bullmq_data;
pub mod client;
pub mod error;
pub mod lane;
pub mod pipe;
pub mod registry;
pub mod release;
pub mod request;
pub mod verbs;
pub mod wire;

pub use crate::net::{ConnectOptions, Transport};
pub use client::EchoClient;
pub use error::{CallError, Redirect, RedirectKind, RegistryError};
pub use lane::{Laned, ReplyLane};
pub use pipe::PipeConn;
pub use registry::ScriptRegistry;
pub use request::Request;
pub use verbs::{enqueue_reply, Claimed, CompleteReply, EnqueueFrames, EnqueueReply, FailArgs, FailReply};
pub use wire::Wire;
