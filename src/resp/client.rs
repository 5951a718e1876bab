//! The script client: one connection plus the script registry, and nothing of any protocol.
//! Each protocol adds its verbs to it, one per file (`echomq/`, `bullmq/`), each a typed
//! function that frames its `EVALSHA` into the client's scratch request and sends it through
//! [`ScriptClient::call`] (NOSCRIPT reload, ASKING) or queues it on a lane.

use super::error::CallError;
use super::lane::ReplyLane;
use super::registry::ScriptRegistry;
use super::request::Request;
use super::wire::Wire;
use crate::lua::Script;
use crate::net::{ConnectOptions, Connector, Control, Endpoint, TargetFlags};
use redis::Value;
use std::sync::Arc;

/// A connection and the scripts it calls, over either transport ([`Wire`]): the control
/// connection [`Control`] (the default type) or the load threads' [`PipeConn`](super::pipe::PipeConn).
///
/// Cheap to clone: clones share the socket and the registry, so each load task holds its own
/// handle and keeps its own requests in flight. Each clone has its own scratch command, which
/// every verb rebuilds in place ([`Request`]): no allocation per request once it has grown.
pub struct ScriptClient<W: Wire = Control> {
    conn: W,
    registry: Arc<ScriptRegistry>,
    scratch: Request,
    /// Send the next call after `ASKING` (a cluster ASK redirect), once.
    asking: bool,
}

impl<W: Wire> Clone for ScriptClient<W> {
    fn clone(&self) -> Self {
        ScriptClient {
            conn: self.conn.clone(),
            registry: self.registry.clone(),
            scratch: Request::new(),
            asking: false,
        }
    }
}

impl ScriptClient {
    /// Connects to `url` (no flags; a password may come from `$EMQ_PASSWORD`) with the control
    /// connection and `SCRIPT LOAD`s every script of `registry`.
    ///
    /// Errors: a bad URL or TLS setting, the connect failure or the first failed load.
    pub async fn connect(
        url: &str,
        opts: ConnectOptions,
        registry: Arc<ScriptRegistry>,
    ) -> Result<ScriptClient, CallError> {
        let bad = |e: crate::net::NetError| CallError::Connection(e.to_string());
        let target = Endpoint::resolve(url, &TargetFlags::default(), |name| std::env::var(name).ok()).map_err(bad)?;
        let connector = Connector::new(target).map_err(bad)?;
        ScriptClient::open(&connector, opts, registry).await
    }

    /// The underlying connection, for plain commands (INFO, SCAN, ...).
    pub fn connection(&mut self) -> &mut Control {
        &mut self.conn
    }
}

impl<W: Wire> ScriptClient<W> {
    /// Connects through `connector` over transport `W` and `SCRIPT LOAD`s every script of
    /// `registry`.
    ///
    /// Errors: the connect failure or the first failed load.
    pub async fn open(
        connector: &Connector,
        opts: ConnectOptions,
        registry: Arc<ScriptRegistry>,
    ) -> Result<ScriptClient<W>, CallError> {
        let conn = W::open(connector, opts, registry.clone()).await?;
        Ok(ScriptClient::from_connection(conn, registry))
    }

    /// Wraps an open connection without loading anything (calls still survive NOSCRIPT).
    pub fn from_connection(conn: W, registry: Arc<ScriptRegistry>) -> ScriptClient<W> {
        ScriptClient { conn, registry, scratch: Request::new(), asking: false }
    }

    /// The registry the client calls.
    pub fn registry(&self) -> &ScriptRegistry {
        &self.registry
    }

    /// Starts `EVALSHA <sha of script> <numkeys>` in the client's scratch command; the verb
    /// appends keys and arguments, then [`call`](Self::call)s.
    pub(crate) fn evalsha(&mut self, script: Script, numkeys: usize) -> &mut Request {
        self.registry.evalsha_into(&mut self.scratch, script, numkeys);
        &mut self.scratch
    }

    /// The scratch command, emptied: a verb frames into it, then [`call`](Self::call)s.
    pub(crate) fn scratch(&mut self) -> (&mut Request, &ScriptRegistry) {
        self.scratch.clear();
        (&mut self.scratch, &self.registry)
    }

    /// A new lane on the client's connection ([`Wire::lane`]): the producers' queued calls.
    pub fn lane(&self) -> W::Lane {
        self.conn.lane()
    }

    /// Sends the next call after `ASKING`, as a cluster ASK redirect requires (once).
    pub fn ask_next(&mut self) {
        self.asking = true;
    }

    /// Queues the scratch command built by [`evalsha`](Self::evalsha) on `lane` without
    /// waiting (see [`Wire::lane`]: no NOSCRIPT reload, no ASKING).
    pub(crate) fn queue_scratch(&self, lane: &mut W::Lane) {
        lane.queue(&self.scratch);
    }

    /// Sends a plain command (CLUSTER SLOTS) on the client's connection and returns its reply.
    pub(crate) async fn command(&mut self, request: &Request) -> Result<Value, CallError> {
        self.conn.send(request).await
    }

    /// Sends the scratch command built by [`evalsha`](Self::evalsha), reloading once on NOSCRIPT.
    pub(crate) async fn call(&mut self, script: Script) -> Result<Value, CallError> {
        let asking = std::mem::take(&mut self.asking);
        self.registry.run_as(&mut self.conn, script, &self.scratch, asking).await
    }
}

/// Reads an integer reply, or says which verb got which shape instead.
pub(crate) fn int_reply(script: Script, value: &Value) -> Result<i64, CallError> {
    match value {
        Value::Int(n) => Ok(*n),
        other => Err(CallError::Reply(format!("{} replied {other:?}, expected an integer", script.name()))),
    }
}
