//! The HTTP side: a tiny_http server on a thread of its own answering `GET /metrics`.

use std::net::SocketAddr;
use std::sync::Arc;

use prometheus_client::registry::Registry;

use super::encode::Families;
use super::Board;

/// The content type of prometheus-client's text encoding (OpenMetrics 1.0, ending in `# EOF`).
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Why the endpoint could not listen.
#[derive(Debug, thiserror::Error)]
#[error("--metrics-addr {addr}: cannot listen there ({reason}); give a free HOST:PORT (port 0 picks one)")]
pub struct MetricsEndpointError {
    /// The address asked for.
    pub addr: SocketAddr,
    /// The system's reason (address in use, not this host's, ...).
    pub reason: String,
}

/// A listening metrics endpoint and its [`Board`]; dropping it stops the server thread (a
/// scrape in flight completes first).
pub struct MetricsEndpoint {
    server: Arc<tiny_http::Server>,
    addr: SocketAddr,
    board: Arc<Board>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MetricsEndpoint {
    /// Listens on `addr` and serves the board at `/metrics` from a new thread.
    ///
    /// Errors: the address cannot be bound (in use, not an address of this host).
    pub fn bind(addr: SocketAddr) -> Result<MetricsEndpoint, MetricsEndpointError> {
        let server = tiny_http::Server::http(addr).map_err(|e| MetricsEndpointError { addr, reason: e.to_string() })?;
        let server = Arc::new(server);
        let bound = server.server_addr().to_ip().unwrap_or(addr);
        let board = Arc::new(Board::default());
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Families(board.clone())));
        let serving = server.clone();
        let thread = std::thread::Builder::new()
            .name("emq-metrics".into())
            .spawn(move || serve(&serving, &registry))
            .map_err(|e| MetricsEndpointError { addr, reason: format!("cannot start its thread: {e}") })?;
        Ok(MetricsEndpoint { server, addr: bound, board, thread: Some(thread) })
    }

    /// The address actually bound (port 0 resolved).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The board the run posts to.
    pub fn board(&self) -> Arc<Board> {
        self.board.clone()
    }
}

impl Drop for MetricsEndpoint {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Answers requests until the server is unblocked: `/metrics` (any query string) gets the
/// encoded board, anything else a 404.
fn serve(server: &tiny_http::Server, registry: &Registry) {
    let content_type =
        tiny_http::Header::from_bytes(&b"Content-Type"[..], CONTENT_TYPE.as_bytes()).expect("a valid header");
    for request in server.incoming_requests() {
        let path = request.url().split('?').next().unwrap_or_default();
        // A client that hung up is no concern of the run's.
        let _ = if path == "/metrics" {
            let mut body = String::new();
            match prometheus_client::encoding::text::encode(&mut body, registry) {
                Ok(()) => request.respond(tiny_http::Response::from_string(body).with_header(content_type.clone())),
                Err(_) => request.respond(tiny_http::Response::empty(500)),
            }
        } else {
            request.respond(tiny_http::Response::from_string("emq-bench serves /metrics only\n").with_status_code(404))
        };
    }
}
