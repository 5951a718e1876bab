//! The load driver: producers, consumers and maintenance over pipelined connections, paced
//! open or closed loop, each request timed on its own.

pub mod calls;
pub mod consumer;
pub mod context;
pub mod coordinator;
pub mod maintenance;
pub mod pacer;
pub mod producer;
pub mod schedule;
pub mod stop;
pub mod thread;
