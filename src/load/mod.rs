//! The load driver: producers, consumers and maintenance over pipelined connections, paced
//! open or closed loop, each request timed on its own.

pub mod backend;
pub mod pacing;
pub mod payload;
