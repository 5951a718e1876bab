//! The script registry: reads one protocol's scripts from a directory (EchoMQ's ten from `lua/`,
//! BullMQ's ten from `.tools/bullmq/current/commands/`; overridable so users can benchmark their
//! own edited scripts), loads them with `SCRIPT LOAD`, calls them with `EVALSHA`, and on
//! `NOSCRIPT` (server restarted, `SCRIPT FLUSH`) reloads and retries once.

use super::error::{CallError, RegistryError};
use super::request::Request;
use super::wire::Wire;
use crate::lua::{builtin, Protocol, Script};
use redis::Value;
use std::path::{Path, PathBuf};

/// The default script directory, relative to the working directory.
pub const DEFAULT_LUA_DIR: &str = "lua";

/// One script's source, its SHA1 (the `EVALSHA` handle, lowercase hex, 40 chars), and the
/// framed `EVALSHA <sha>` every call of it starts with.
#[derive(Debug, Clone)]
struct Loaded {
    source: String,
    sha: String,
    head: Request,
}

/// One protocol's scripts of one directory, indexed by [`Script::index`] (the other
/// protocol's slots empty).
#[derive(Debug, Clone)]
pub struct ScriptRegistry {
    dir: PathBuf,
    protocol: Protocol,
    scripts: Vec<Option<Loaded>>,
}

impl ScriptRegistry {
    /// Reads EchoMQ's scripts, `<dir>/<name>.lua` (v1.1's nine, or v1.2's ten with `clean`),
    /// and computes their SHA1s.
    ///
    /// Errors: as [`for_protocol`](Self::for_protocol).
    pub fn from_dir(dir: &Path) -> Result<ScriptRegistry, RegistryError> {
        ScriptRegistry::for_protocol(Protocol::EchoMqV1, dir)
    }

    /// Reads `<dir>/<file_name>` for every script of `protocol` ([`Script::file_name`]) and
    /// computes its SHA1. An optional script ([`Script::is_optional`]) the directory lacks is
    /// left out.
    ///
    /// Errors: [`RegistryError::Read`] naming the first file that is missing or unreadable,
    /// [`RegistryError::Empty`] for one that holds nothing but white space.
    pub fn for_protocol(protocol: Protocol, dir: &Path) -> Result<ScriptRegistry, RegistryError> {
        ScriptRegistry::of_sources(protocol, dir, |script| {
            let path = dir.join(script.file_name());
            if script.is_optional() && !path.exists() {
                return Ok(None);
            }
            std::fs::read_to_string(&path).map(Some).map_err(|source| RegistryError::Read { path, source })
        })
    }

    /// The scripts a run uses when no `--lua-dir` is given: EchoMQ's nine as built into the
    /// binary ([`builtin::ECHOMQ`], directory [`builtin::BUILTIN`]); BullMQ's from the release
    /// `scripts/setup` fetched ([`Protocol::default_dir`]).
    ///
    /// Errors: EchoMQ's scripts not built in ([`RegistryError::NotEmbedded`]), BullMQ's not
    /// fetched ([`RegistryError::NotFetched`]), else as
    /// [`for_protocol`](Self::for_protocol).
    pub fn default_for(protocol: Protocol) -> Result<ScriptRegistry, RegistryError> {
        match protocol {
            Protocol::EchoMqV1 if builtin::ECHOMQ.is_empty() => Err(RegistryError::NotEmbedded),
            Protocol::EchoMqV1 => ScriptRegistry::of_sources(protocol, Path::new(builtin::BUILTIN), |script| {
                let name = script.file_name();
                let found = builtin::ECHOMQ.iter().find(|(file, _)| *file == name);
                Ok(Some(found.map(|(_, source)| source.to_string()).unwrap_or_default()))
            }),
            Protocol::BullMq => {
                let dir = Path::new(protocol.default_dir());
                if !dir.is_dir() {
                    return Err(RegistryError::NotFetched { dir: dir.to_path_buf() });
                }
                ScriptRegistry::for_protocol(protocol, dir)
            }
        }
    }

    /// True when the scripts are the ones built into the binary.
    pub fn is_builtin(&self) -> bool {
        self.dir == Path::new(builtin::BUILTIN)
    }

    /// A registry of `protocol`'s scripts, each source given by `source` (`None` for an
    /// optional script the directory lacks), recorded as read from `dir`.
    fn of_sources(
        protocol: Protocol,
        dir: &Path,
        source: impl Fn(Script) -> Result<Option<String>, RegistryError>,
    ) -> Result<ScriptRegistry, RegistryError> {
        let mut scripts = vec![None; Script::COUNT];
        for &script in protocol.scripts() {
            let Some(source) = source(script)? else { continue };
            if source.trim().is_empty() {
                return Err(RegistryError::Empty { path: dir.join(script.file_name()) });
            }
            let sha = redis::Script::new(&source).get_hash().to_string();
            let head = Request::from_args(&["EVALSHA", &sha]);
            scripts[script.index()] = Some(Loaded { source, sha, head });
        }
        Ok(ScriptRegistry { dir: dir.to_path_buf(), protocol, scripts })
    }

    /// The directory the scripts were read from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The protocol whose scripts these are.
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// The scripts the registry holds, in index order: the protocol's, less an optional one
    /// its directory lacks ([`Script::is_optional`]).
    pub fn scripts(&self) -> impl Iterator<Item = Script> + '_ {
        self.protocol.scripts().iter().copied().filter(|s| self.holds(*s))
    }

    /// True when the registry holds `script`: false for another protocol's, and for an
    /// optional one its directory lacks (EchoMQ v1.1's scripts have no `clean`).
    pub fn holds(&self, script: Script) -> bool {
        self.scripts[script.index()].is_some()
    }

    fn loaded(&self, script: Script) -> &Loaded {
        match &self.scripts[script.index()] {
            Some(loaded) => loaded,
            // A call of another protocol's script, or of an optional one the directory lacks
            // (refused when the plan is resolved), is the driver's bug, never the user's input.
            None => panic!("{} is not a {} script of {}", script.name(), self.protocol.name(), self.dir.display()),
        }
    }

    /// The SHA1 of `script`'s source (lowercase hex). Panics for a script of another protocol.
    pub fn sha(&self, script: Script) -> &str {
        &self.loaded(script).sha
    }

    /// The Lua source of `script`. Panics for a script of another protocol.
    pub fn source(&self, script: Script) -> &str {
        &self.loaded(script).source
    }

    /// `SCRIPT LOAD`s every script. Call it before pipelining: a script invoked inside a
    /// pipeline gets no NOSCRIPT fallback from the server.
    ///
    /// Errors: the first failed load, classified as a [`CallError`]; a server that answers
    /// with another SHA than ours is a [`CallError::Reply`].
    pub async fn load_all<W: Wire>(&self, conn: &mut W) -> Result<(), CallError> {
        for script in self.scripts() {
            // A compile error names the file: the server's "user_script:55" does not.
            self.load(conn, script).await.map_err(|err| match err {
                CallError::Server(msg) => {
                    let path = self.dir.join(script.file_name());
                    CallError::Server(format!("{}: {msg}", path.display()))
                }
                other => other,
            })?;
        }
        Ok(())
    }

    /// The `SCRIPT LOAD <source>` command of `script`.
    pub fn load_request(&self, script: Script) -> Request {
        Request::from_args(&["SCRIPT", "LOAD", self.source(script)])
    }

    /// Checks a `SCRIPT LOAD` reply of `script` against the SHA1 we computed.
    ///
    /// Errors: [`CallError::Reply`] for another SHA or a reply that is not a string.
    pub fn check_loaded(&self, script: Script, reply: &Value) -> Result<(), CallError> {
        let expected = self.sha(script);
        let sha = match reply {
            Value::BulkString(bytes) => std::str::from_utf8(bytes).ok(),
            Value::SimpleString(text) => Some(text.as_str()),
            _ => None,
        };
        if sha != Some(expected) {
            return Err(CallError::Reply(format!(
                "SCRIPT LOAD of {} returned {reply:?}, expected {expected}",
                script.name()
            )));
        }
        Ok(())
    }

    async fn load<W: Wire>(&self, conn: &mut W, script: Script) -> Result<(), CallError> {
        let reply = conn.send(&self.load_request(script)).await?;
        self.check_loaded(script, &reply)
    }

    /// A new `EVALSHA <sha> <numkeys>` request for `script`; the caller appends keys and args.
    pub fn evalsha(&self, script: Script, numkeys: usize) -> Request {
        let mut request = Request::new();
        self.evalsha_into(&mut request, script, numkeys);
        request
    }

    /// Like [`evalsha`](Self::evalsha) into a reused request: cleared first, it keeps its
    /// buffers and starts from the script's pre-framed `EVALSHA <sha>`, so a lane builds every
    /// call without allocating or re-framing the SHA.
    pub fn evalsha_into(&self, request: &mut Request, script: Script, numkeys: usize) {
        request.clear();
        self.push_evalsha(request, script, numkeys);
    }

    /// Appends `EVALSHA <sha> <numkeys>` of `script` to `request` (an empty one: the verbs'
    /// framing functions start from it).
    #[inline]
    pub fn push_evalsha(&self, request: &mut Request, script: Script, numkeys: usize) {
        /// `numkeys` 0..=9 framed in advance (every verb's): no digit formatting per call.
        const SMALL: [&[u8]; 10] = [
            b"$1\r\n0\r\n",
            b"$1\r\n1\r\n",
            b"$1\r\n2\r\n",
            b"$1\r\n3\r\n",
            b"$1\r\n4\r\n",
            b"$1\r\n5\r\n",
            b"$1\r\n6\r\n",
            b"$1\r\n7\r\n",
            b"$1\r\n8\r\n",
            b"$1\r\n9\r\n",
        ];
        let (head, count) = self.loaded(script).head.framed();
        request.push_framed(head, count);
        match SMALL.get(numkeys) {
            Some(framed) => request.push_framed(framed, 1),
            None => {
                request.arg(numkeys);
            }
        }
    }

    /// Sends `request` (built by [`evalsha`](Self::evalsha)); on NOSCRIPT loads `script` and
    /// sends it once more.
    ///
    /// Errors: the call's [`CallError`]; an error reply is never retried except NOSCRIPT.
    pub async fn run<W: Wire>(&self, conn: &mut W, script: Script, request: &Request) -> Result<Value, CallError> {
        self.run_as(conn, script, request, false).await
    }

    /// [`run`](Self::run), after `ASKING` on the same connection when `asking` (a cluster ASK
    /// redirect), the resend after a NOSCRIPT reload included.
    ///
    /// Errors: as [`run`](Self::run).
    pub async fn run_as<W: Wire>(
        &self,
        conn: &mut W,
        script: Script,
        request: &Request,
        asking: bool,
    ) -> Result<Value, CallError> {
        let write = script.changes_state();
        match send(conn, request, asking, write).await {
            Err(CallError::NoScript(_)) => {
                self.load(conn, script).await?;
                send(conn, request, asking, write).await
            }
            other => other,
        }
    }
}

/// One send of `request`, after `ASKING` when `asking`; as a state-changing call when `write`
/// ([`Wire::send_write`]: followed by the connection's durability `WAIT`, if any). An ASK
/// redirect only ever answers a script call, so `asking` sends it as one.
async fn send<W: Wire>(conn: &mut W, request: &Request, asking: bool, write: bool) -> Result<Value, CallError> {
    match (asking, write) {
        (true, _) => conn.send_asking(request).await,
        (false, true) => conn.send_write(request).await,
        (false, false) => conn.send(request).await,
    }
}
