//! How connections are opened: timeouts, the load's transport, the client name, and when a
//! state-changing call counts as acknowledged ([`Durability`]).

use std::time::Duration;

/// Which transport the load threads use (`--transport`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Transport {
    /// Our own connection loop (`PipeConn`), TCP or TLS: the least client CPU per request.
    #[default]
    Pipe,
    /// redis-rs' multiplexed connection: the reference path, at more client CPU per request.
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
    /// When a state-changing call counts as acknowledged: by the primary alone, or after
    /// `WAIT` on the same connection. Only the pipe transport's load connections act on it.
    pub durability: Durability,
}

/// When a state-changing call counts as acknowledged (`[target] wait`).
///
/// Valkey replicates asynchronously: a primary that acknowledged a write and dies before its
/// replicas received it loses the write in a failover. `WAIT n timeout` after the write
/// returns how many replicas have acknowledged everything the connection wrote so far, so a
/// call followed by a `WAIT` that answers at least `replicas` survives the failover of its
/// primary to any of them (best effort, not consensus: a replica may still lose it itself).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Durability {
    /// Acknowledged by the primary's reply alone (the default).
    #[default]
    Primary,
    /// Acknowledged only when the `WAIT` sent right after the call reports at least
    /// `replicas`; otherwise the call's outcome is unknown (it ran on the primary, and may be
    /// lost).
    Wait {
        /// Replicas that must acknowledge (1..=16, checked where the scenario is resolved).
        replicas: u32,
        /// `WAIT`'s own timeout (1 ms..=60 s; never 0, which waits forever).
        timeout: Duration,
    },
}

impl Durability {
    /// How long one call's `WAIT` may hold its connection (zero without one): the reply
    /// timeout of a load connection is this much longer, so a `WAIT` waiting out its own
    /// timeout is never taken for a silent server.
    pub fn hold(self) -> Duration {
        match self {
            Durability::Primary => Duration::ZERO,
            Durability::Wait { timeout, .. } => timeout,
        }
    }

    /// The `WAIT` request's RESP bytes (`*3 WAIT <replicas> <timeout ms>`), encoded once per
    /// connection and copied after every state-changing call; `None` for [`Durability::Primary`].
    pub fn wait_request(self) -> Option<Vec<u8>> {
        let Durability::Wait { replicas, timeout } = self else { return None };
        let (n, ms) = (replicas.to_string(), timeout.as_millis().to_string());
        Some(format!("*3\r\n$4\r\nWAIT\r\n${}\r\n{n}\r\n${}\r\n{ms}\r\n", n.len(), ms.len()).into_bytes())
    }
}

/// `acknowledged by the primary alone` or `acknowledged after WAIT 1 replica(s), 100 ms`: the
/// mode as the run's header line names it.
impl std::fmt::Display for Durability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Durability::Primary => f.write_str("acknowledged by the primary alone"),
            Durability::Wait { replicas, timeout } => {
                write!(f, "acknowledged after WAIT {replicas} replica(s), {} ms", timeout.as_millis())
            }
        }
    }
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            connect_timeout: Duration::from_secs(2),
            response_timeout: Duration::from_secs(5),
            transport: Transport::Pipe,
            client_name: None,
            refuse_when_unreachable: false,
            durability: Durability::Primary,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_request_is_one_resp_command_and_the_mode_names_itself() {
        let wait = Durability::Wait { replicas: 1, timeout: Duration::from_millis(100) };
        assert_eq!(wait.wait_request().unwrap(), b"*3\r\n$4\r\nWAIT\r\n$1\r\n1\r\n$3\r\n100\r\n");
        assert_eq!(wait.to_string(), "acknowledged after WAIT 1 replica(s), 100 ms");
        assert_eq!(wait.hold(), Duration::from_millis(100));
        assert_eq!(Durability::Primary.wait_request(), None);
        assert_eq!(Durability::Primary.to_string(), "acknowledged by the primary alone");
        assert_eq!(Durability::Primary.hold(), Duration::ZERO);
    }
}
