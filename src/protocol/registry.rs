//! The script registry: reads the nine scripts from a directory (default `lua/`, overridable so
//! users can benchmark their own edited scripts), loads them with `SCRIPT LOAD`, calls them with
//! `EVALSHA`, and on `NOSCRIPT` (server restarted, `SCRIPT FLUSH`) reloads and retries once.

use super::error::{CallError, RegistryError};
use super::script::Script;
use redis::aio::ConnectionLike;
use redis::{Cmd, Value};
use std::path::{Path, PathBuf};

/// The default script directory, relative to the working directory.
pub const DEFAULT_LUA_DIR: &str = "lua";

/// One script's source and its SHA1 (the `EVALSHA` handle, lowercase hex, 40 chars).
#[derive(Debug, Clone)]
struct Loaded {
    source: String,
    sha: String,
}

/// The nine scripts of one directory, indexed by [`Script::index`].
#[derive(Debug, Clone)]
pub struct ScriptRegistry {
    dir: PathBuf,
    scripts: Vec<Loaded>,
}

impl ScriptRegistry {
    /// Reads `<dir>/<name>.lua` for every [`Script`] and computes its SHA1.
    ///
    /// Errors: [`RegistryError::Read`] naming the first file that is missing or unreadable.
    pub fn from_dir(dir: &Path) -> Result<ScriptRegistry, RegistryError> {
        let mut scripts = Vec::with_capacity(Script::COUNT);
        for script in Script::ALL {
            let path = dir.join(format!("{}.lua", script.name()));
            let source = std::fs::read_to_string(&path).map_err(|source| RegistryError::Read { path, source })?;
            let sha = redis::Script::new(&source).get_hash().to_string();
            scripts.push(Loaded { source, sha });
        }
        Ok(ScriptRegistry { dir: dir.to_path_buf(), scripts })
    }

    /// The directory the scripts were read from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The SHA1 of `script`'s source (lowercase hex).
    pub fn sha(&self, script: Script) -> &str {
        &self.scripts[script.index()].sha
    }

    /// The Lua source of `script`.
    pub fn source(&self, script: Script) -> &str {
        &self.scripts[script.index()].source
    }

    /// `SCRIPT LOAD`s every script. Call it before pipelining: a script invoked inside a
    /// pipeline gets no NOSCRIPT fallback from the server.
    ///
    /// Errors: the first failed load, classified as a [`CallError`]; a server that answers
    /// with another SHA than ours is a [`CallError::Reply`].
    pub async fn load_all<C: ConnectionLike>(&self, conn: &mut C) -> Result<(), CallError> {
        for script in Script::ALL {
            self.load(conn, script).await?;
        }
        Ok(())
    }

    async fn load<C: ConnectionLike>(&self, conn: &mut C, script: Script) -> Result<(), CallError> {
        let loaded = &self.scripts[script.index()];
        let sha: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(&loaded.source)
            .query_async(conn)
            .await
            .map_err(|e| CallError::from_redis(&e))?;
        if sha != loaded.sha {
            return Err(CallError::Reply(format!(
                "SCRIPT LOAD of {} returned {sha}, expected {}",
                script.name(),
                loaded.sha
            )));
        }
        Ok(())
    }

    /// Starts an `EVALSHA <sha> <numkeys>` command for `script`; the caller appends keys and args.
    pub fn evalsha(&self, script: Script, numkeys: usize) -> Cmd {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(self.sha(script)).arg(numkeys);
        cmd
    }

    /// Sends `cmd` (built by [`evalsha`](Self::evalsha)); on NOSCRIPT loads `script` and
    /// sends it once more.
    ///
    /// Errors: the call's [`CallError`]; an error reply is never retried except NOSCRIPT.
    pub async fn run<C: ConnectionLike>(&self, conn: &mut C, script: Script, cmd: &Cmd) -> Result<Value, CallError> {
        match send(conn, cmd).await {
            Ok(value) => Ok(value),
            Err(err) if CallError::is_noscript(&err) => {
                self.load(conn, script).await?;
                send(conn, cmd).await.map_err(|e| CallError::from_redis(&e))
            }
            Err(err) => Err(CallError::from_redis(&err)),
        }
    }
}

/// Sends one command; an error reply (which redis-rs hands back as a value) becomes an `Err`.
async fn send<C: ConnectionLike>(conn: &mut C, cmd: &Cmd) -> Result<Value, redis::RedisError> {
    match conn.req_packed_command(cmd).await? {
        Value::ServerError(err) => Err(err.into()),
        value => Ok(value),
    }
}
