//! Finding a `valkey-server` binary. Order: `--server-bin`, env `EMQ_VALKEY_SERVER`,
//! `.tools/bin/valkey-server` (what `scripts/setup` installs), then `valkey-server` and
//! `redis-server` on PATH.

use super::ServerError;
use std::path::{Path, PathBuf};

/// The environment variable that names a server binary.
pub const SERVER_ENV: &str = "EMQ_VALKEY_SERVER";

/// Where `scripts/setup` links the server, relative to the project root.
pub const TOOLS_SERVER: &str = ".tools/bin/valkey-server";

/// Finds the server binary to start, trying each place in the documented order.
///
/// `explicit` is `--server-bin`. Errors: [`ServerError::NotFound`] listing every place tried
/// and how to get a server; an explicit path or env path that does not exist is also
/// `NotFound` (naming it), rather than silently falling through to another binary.
pub fn find_server_binary(explicit: Option<&Path>) -> Result<PathBuf, ServerError> {
    let mut tried = Vec::new();
    if let Some(path) = explicit {
        return existing(path).ok_or_else(|| not_found(vec![format!("--server-bin {}", path.display())]));
    }
    if let Some(path) = std::env::var_os(SERVER_ENV).filter(|v| !v.is_empty()) {
        let path = PathBuf::from(path);
        return existing(&path).ok_or_else(|| not_found(vec![format!("{SERVER_ENV}={}", path.display())]));
    }
    // The project's own install: first relative to the working directory, then to the source
    // tree this binary was built from (so tests and `cargo run` from anywhere find it).
    for root in [PathBuf::from("."), PathBuf::from(env!("CARGO_MANIFEST_DIR"))] {
        let path = root.join(TOOLS_SERVER);
        tried.push(path.display().to_string());
        if let Some(found) = existing(&path) {
            return Ok(found);
        }
    }
    for name in ["valkey-server", "redis-server"] {
        tried.push(format!("{name} on PATH"));
        if let Some(found) = on_path(name) {
            return Ok(found);
        }
    }
    Err(not_found(tried))
}

fn not_found(tried: Vec<String>) -> ServerError {
    ServerError::NotFound { tried }
}

fn existing(path: &Path) -> Option<PathBuf> {
    path.is_file().then(|| path.to_path_buf())
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_explicit_missing_binary_is_named_in_the_error() {
        let err = find_server_binary(Some(Path::new("/nonexistent/valkey-server"))).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("/nonexistent/valkey-server"), "{text}");
        assert!(text.contains("scripts/setup"), "{text}");
    }
}
