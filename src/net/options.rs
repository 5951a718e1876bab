//! How connections are opened: timeouts, the load's transport, the client name.

use std::time::Duration;

/// Which transport the load threads use (`--transport`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Transport {
    /// Our own connection loop (`PipeConn`), TCP or TLS: the least client CPU per request.
    #[default]
    Pipe,
    /// redis-rs' multiplexed connection: the reference path, about twice the client CPU per request.
    RedisRs,
}

/// Connection settings. redis-rs times async calls out after 500 ms and leaves TCP_NODELAY off
/// by default; both are set here on purpose.
#[derive(Debug, Clone, Copy)]
pub struct ConnectOptions {
    /// Time to establish the TCP connection, ms resolution (redis-rs also bounds AUTH/SELECT
    /// by it; the pipe transport bounds its handshake, AUTH/SELECT/SCRIPT LOAD, by
    /// `response_timeout`).
    pub connect_timeout: Duration,
    /// Time to wait for one reply; past it the call is an unknown outcome.
    pub response_timeout: Duration,
    /// The load threads' transport (the control plane always uses redis-rs, [`Control`](super::Control)).
    pub transport: Transport,
    /// CLIENT SETNAME sent in the handshake (the load names its connections when a
    /// `kill-connections` fault must find them); `None` sends none, as a least-privilege user
    /// may not be allowed CLIENT.
    pub client_name: Option<&'static str>,
    /// Once a reconnect attempt has failed, refuse calls queued on the connection at once as
    /// unsent instead of holding them until the response timeout: a cluster's load routes
    /// them to the node that takes over, where a standalone server has no other node (its
    /// callers would only spin), so only cluster connections set it.
    pub refuse_when_unreachable: bool,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            connect_timeout: Duration::from_secs(2),
            response_timeout: Duration::from_secs(5),
            transport: Transport::Pipe,
            client_name: None,
            refuse_when_unreachable: false,
        }
    }
}
