//! The scripts a run calls, by identity: the catalog of EchoMQ's and BullMQ's scripts
//! ([`Script`]), whose scripts a run loads ([`Protocol`]), the outcome codes a call ends in
//! ([`ErrorCode`]) and EchoMQ's sources built into the binary. A leaf: the transport loads and
//! calls scripts by this identity, and each protocol's verbs name the scripts they run.

pub mod builtin;
mod script;

pub use script::{ErrorCode, Protocol, Script};
