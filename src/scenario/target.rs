//! `[target]`: which Valkey the run drives.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The raw `[target]` table. Absent table, or no `url`, means an embedded
/// `valkey-server` that the harness starts itself.
///
/// ```toml
/// [target]
/// url = "redis://:secret@127.0.0.1:6379/0"   # redis:// (loopback); user, password, db allowed
/// # or, for the embedded server only, extra valkey-server options (name -> value):
/// server = { "io-threads" = "2", "appendonly" = "no" }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    /// `redis://[user[:password]@]host[:port][/db]` on a loopback address (no TLS: it is not
    /// built in); absent = embedded server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Extra `valkey-server` config options for the embedded server (each passed as
    /// `--name value`). Refused together with `url`, where it would be silently ignored.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub server: BTreeMap<String, String>,
}

impl Target {
    /// A copy with any password in `url` replaced by `***`, for writing into results.
    pub fn redacted(&self) -> Self {
        Self { url: self.url.as_deref().map(redact_url), server: self.server.clone() }
    }
}

/// Replaces the password of `scheme://user:password@host...` with `***`.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _password)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(redact_url("redis://:pw@h:1/2"), "redis://:***@h:1/2");
        assert_eq!(redact_url("rediss://u:pw@h"), "rediss://u:***@h");
        assert_eq!(redact_url("redis://h:6379"), "redis://h:6379");
        assert_eq!(redact_url("redis://user@h"), "redis://user@h");
    }
}
