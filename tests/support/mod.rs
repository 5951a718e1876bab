//! Test support: a real `valkey-server` on a free loopback port per test, and helpers to look
//! at its state. Never a mock of the server.
#![allow(dead_code)]

use emq_bench::protocol::{CallError, EchoClient, QueueKeys, QueueName, Script, ScriptRegistry};
use emq_bench::server::{EmbeddedServer, ServerOptions};
use redis::aio::ConnectionManager;
use redis::{AsyncCommands, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// The project's `lua/` directory.
pub fn lua_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("lua")
}

/// Starts a fresh server (dropped, and so stopped, at the end of the test).
pub fn server() -> EmbeddedServer {
    EmbeddedServer::start(&ServerOptions::default()).expect("start valkey-server (run scripts/setup)")
}

/// A client of `server` with every script of `lua/` loaded.
pub async fn client(server: &EmbeddedServer) -> EchoClient {
    let registry = Arc::new(ScriptRegistry::from_dir(&lua_dir()).unwrap());
    EchoClient::connect(&server.url(), Default::default(), registry).await.unwrap()
}

/// The keys of queue `name`.
pub fn keys(name: &str) -> QueueKeys {
    QueueKeys::new(QueueName::new(name).unwrap())
}

/// Calls `script` with raw KEYS and ARGV, bypassing the host-side gates (to reach the Lua ones).
pub async fn raw(client: &mut EchoClient, script: Script, keys: &[&str], args: &[&[u8]]) -> Result<Value, CallError> {
    let registry = client.registry().clone();
    let mut cmd = registry.evalsha(script, keys.len());
    for key in keys {
        cmd.arg(*key);
    }
    for arg in args {
        cmd.arg(*arg);
    }
    registry.run(client.connection(), script, &cmd).await
}

/// The row at `key`, field → value.
pub async fn row(conn: &mut ConnectionManager, key: &str) -> BTreeMap<String, Vec<u8>> {
    conn.hgetall(key).await.unwrap()
}

/// The score of `member` in `zset`, if it is a member.
pub async fn score(conn: &mut ConnectionManager, zset: &str, member: &str) -> Option<f64> {
    conn.zscore(zset, member).await.unwrap()
}

/// A `DUMP` of every key of queue `keys` (sorted by key), to prove a call changed nothing.
pub async fn snapshot(conn: &mut ConnectionManager, keys: &QueueKeys) -> Vec<(String, Vec<u8>)> {
    let mut names: Vec<String> = conn.keys(keys.scan_pattern()).await.unwrap();
    names.sort();
    let mut out = Vec::new();
    for name in names {
        let dump: Vec<u8> = redis::cmd("DUMP").arg(&name).query_async(conn).await.unwrap();
        out.push((name, dump));
    }
    out
}

/// The server's clock in ms (the scripts' time source).
pub async fn server_ms(conn: &mut ConnectionManager) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query_async(conn).await.unwrap();
    s * 1000 + us / 1000
}
