//! What names a queue and its jobs, for every protocol a run drives (docs/protocol.md, "The
//! keyspace"): checked queue names and job ids, the queue's keys, its depth places, and the
//! minting of job ids with the run's tag. BullMQ runs use the same names and ids (its keys are
//! built from them in `bullmq/`), and the control plane, the checker and the payloads read them,
//! so they sit below both protocols.

pub mod ids;
mod keys;

pub use ids::JobIdGen;
pub use keys::{Depth, JobId, KeyspaceError, QueueKeys, QueueName, DEPTH_SCRIPT, JOB_ID_LEN};
