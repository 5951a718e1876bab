//! The RESP transport every protocol's verbs run over: a command framed in place
//! ([`Request`]), the two connections that carry it ([`Wire`]: our pipelined [`PipeConn`] and
//! the redis-rs control connection), the producers' lanes of queued calls ([`ReplyLane`]), the
//! script registry (`SCRIPT LOAD`, `EVALSHA`, the reload after NOSCRIPT), the typed call errors
//! ([`CallError`]), the pipelined script client each protocol adds its verbs to
//! ([`ScriptClient`]) and the cluster routes a load thread's calls follow ([`Routes`]).
//!
//! Protocol-neutral: scripts are named by their catalog entry ([`crate::lua::Script`]), and
//! nothing here knows a queue's keys or a job's id.

pub mod client;
pub mod error;
pub mod lane;
pub mod pipe;
pub mod registry;
pub mod request;
pub mod routes;
pub mod wire;

pub use client::ScriptClient;
pub use error::{CallError, Redirect, RedirectKind, RegistryError};
pub use lane::{Laned, ReplyLane};
pub use pipe::PipeConn;
pub use registry::ScriptRegistry;
pub use request::Request;
pub use routes::Routes;
pub use wire::Wire;
