//! The resolved target: the URL and the flags (`--user`, `--pass`, `$EMQ_PASSWORD`, `--tls`,
//! `--cacert`, ...) turned once into one typed value. Nothing parses the URL again.

use super::tls::TlsSettings;
use super::NetError;
use std::fmt;
use std::path::PathBuf;

/// The environment variable a password is read from when neither `--pass` nor the URL gives
/// one, so it never has to sit on a command line or in a scenario file.
pub const PASSWORD_ENV: &str = "EMQ_PASSWORD";

/// The two ways a target turns a connection away for its credentials, each with what the user
/// can do about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthRefusal {
    /// `NOAUTH`: the target wants a password and none was given.
    Missing,
    /// `WRONGPASS` (or AUTH refused at connect): the user name and password do not match.
    Wrong,
}

impl AuthRefusal {
    /// The refusal an error's message reports: the server's reply code as a word of it
    /// (`NOAUTH`, `WRONGPASS`), or redis-rs' `AuthenticationFailed` for an AUTH refused at
    /// connect. The code is all the server sends, so the message is where it is found.
    pub fn in_message(text: &str) -> Option<AuthRefusal> {
        text.split(|c: char| !c.is_ascii_alphanumeric()).find_map(|word| match word {
            "NOAUTH" => Some(AuthRefusal::Missing),
            "WRONGPASS" | "AuthenticationFailed" => Some(AuthRefusal::Wrong),
            _ => None,
        })
    }

    /// What to do, naming the flags and variable a password comes from (never a password).
    pub fn hint(self) -> String {
        match self {
            AuthRefusal::Missing => {
                format!("the target wants a password: set ${PASSWORD_ENV} (or give --pass; --user too for an ACL user)")
            }
            AuthRefusal::Wrong => format!(
                "the target refused the user and password given: check --user and the password (from --pass, \
                 else the URL, else ${PASSWORD_ENV})"
            ),
        }
    }
}

/// A password: kept out of `Debug`, `Display` and every serialisation.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps `text`.
    pub fn new(text: impl Into<String>) -> Secret {
        Secret(text.into())
    }

    /// The password itself, for AUTH only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// The target options a user can give besides the URL (CLI flags or `[target]` keys); `None`
/// and `false` mean "not given". The CLI's values win over the scenario's (see [`merge`](Self::merge)).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TargetFlags {
    /// ACL user name (`--user`); overrides the URL's.
    pub user: Option<String>,
    /// Password (`--pass`); overrides the URL's. Prefer `$EMQ_PASSWORD`.
    pub pass: Option<Secret>,
    /// TLS settings given as flags (`--tls`, `--cacert`, ...); `rediss://` turns TLS on too.
    pub tls: TlsSettings,
}

impl TargetFlags {
    /// The options as the CLI flags and the scenario's `[target]` keys name them (`user`,
    /// `tls`, `cacert`, `cert`, `key`, `sni`, `tls_skip_verify`), with no password: the one
    /// place those names meet the TLS settings' own. A password comes only from `--pass` (the
    /// CLI sets [`pass`](Self::pass) after this), never from a scenario file.
    pub fn new(
        user: Option<String>,
        tls: bool,
        cacert: Option<PathBuf>,
        cert: Option<PathBuf>,
        key: Option<PathBuf>,
        sni: Option<String>,
        tls_skip_verify: bool,
    ) -> TargetFlags {
        TargetFlags {
            user,
            pass: None,
            tls: TlsSettings {
                enabled: tls,
                ca_file: cacert,
                cert_file: cert,
                key_file: key,
                sni,
                skip_verify: tls_skip_verify,
            },
        }
    }

    /// `self` with every option it leaves unset taken from `fallback` (CLI over scenario).
    pub fn merge(&self, fallback: &TargetFlags) -> TargetFlags {
        TargetFlags {
            user: self.user.clone().or_else(|| fallback.user.clone()),
            pass: self.pass.clone().or_else(|| fallback.pass.clone()),
            tls: self.tls.merge(&fallback.tls),
        }
    }
}

/// One Valkey endpoint to load: where, who, which database, and how (TLS or not).
///
/// Built by [`Endpoint::resolve`]; [`Endpoint::display`] is the only form that is ever printed
/// or written (the password masked).
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    /// Host name or address (IPv6 without brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// ACL user (`None`: the default user).
    pub user: Option<String>,
    /// Password (`None`: no AUTH).
    pub password: Option<Secret>,
    /// Database number (`SELECT`; 0 on a cluster).
    pub db: i64,
    /// TLS settings, `None` for plain TCP.
    pub tls: Option<TlsSettings>,
}

impl Endpoint {
    /// Resolves `url` (`redis://` or `rediss://`, also `valkey://`/`valkeys://`:
    /// `[user[:password]@]host[:port][/db]`, port 6379 by default, percent-encoded user and
    /// password) with `flags`: `--user`/`--pass` override the URL's, the password falls back
    /// to `$EMQ_PASSWORD` (`env` looks it up), and `--tls` or any TLS flag turns TLS on for a
    /// `redis://` URL.
    ///
    /// Errors: [`NetError::BadUrl`] naming what is wrong (the password masked).
    pub fn resolve(url: &str, flags: &TargetFlags, env: impl Fn(&str) -> Option<String>) -> Result<Endpoint, NetError> {
        // Without a scheme, `host:port` reads as a relative URL or as the scheme `host:`: the
        // message then offers the URL with `redis://` put in front, the password masked as the
        // URL would mask it.
        let schemeless = !url.contains("://");
        let shown = redact_url(url);
        let bad = |reason: &str| NetError::BadUrl { url: shown.clone(), reason: reason.to_string() };
        if schemeless {
            return Err(bad(&if shown.contains(char::is_whitespace) || shown.is_empty() {
                "no scheme (expected redis://host:port, or rediss://host:port for TLS)".to_string()
            } else {
                format!("no scheme: did you mean redis://{shown}? (rediss://{shown} for TLS)")
            }));
        }
        let parsed = url::Url::parse(url).map_err(|e| bad(&e.to_string()))?;
        let tls_scheme = match parsed.scheme() {
            "redis" | "valkey" => false,
            "rediss" | "valkeys" => true,
            other => return Err(bad(&format!("scheme {other}:// (expected redis:// or rediss://)"))),
        };
        let host = match parsed.host() {
            Some(url::Host::Ipv6(addr)) => addr.to_string(),
            Some(host) => host.to_string(),
            None => return Err(bad("no host")),
        };
        let decode = |s: &str| percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned();
        let url_user = Some(decode(parsed.username())).filter(|u| !u.is_empty());
        let url_pass = parsed.password().map(decode).map(Secret::new);
        let db = match parsed.path().trim_matches('/') {
            "" => 0,
            path => path
                .parse::<i64>()
                .ok()
                .filter(|db| *db >= 0)
                .ok_or_else(|| bad("the path must be a database number"))?,
        };
        let password = flags.pass.clone().or(url_pass).or_else(|| env(PASSWORD_ENV).map(Secret::new));
        let tls = (tls_scheme || flags.tls.wanted()).then(|| flags.tls.clone());
        Ok(Endpoint {
            host,
            port: parsed.port().unwrap_or(6379),
            user: flags.user.clone().or(url_user),
            password,
            db,
            tls,
        })
    }

    /// `rediss://user:***@host:port/db`: the target as it may be printed or stored.
    pub fn display(&self) -> String {
        let scheme = if self.tls.is_some() { "rediss" } else { "redis" };
        let auth = match (&self.user, &self.password) {
            (Some(user), Some(_)) => format!("{user}:***@"),
            (Some(user), None) => format!("{user}@"),
            (None, Some(_)) => ":***@".to_string(),
            (None, None) => String::new(),
        };
        let host = if self.host.contains(':') { format!("[{}]", self.host) } else { self.host.clone() };
        format!("{scheme}://{auth}{host}:{}/{}", self.port, self.db)
    }

    /// The same target at another endpoint (a cluster node), with the same auth and TLS.
    pub fn at(&self, host: &str, port: u16) -> Endpoint {
        Endpoint { host: host.to_string(), port, ..self.clone() }
    }
}

/// Replaces the password of `scheme://user:password@host...` with `***` (for a URL that did
/// not parse, which cannot become a [`Endpoint`]); also of `user:password@host...` given
/// without its scheme.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        let masked = redact_url(&format!("redis://{url}"));
        return masked.strip_prefix("redis://").map_or(masked.clone(), str::to_owned);
    };
    // The userinfo ends at the last `@` (a password may hold `/`, `?`, `#` or `@`; a host, port
    // or db number holds none of them).
    match rest.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _password)) => format!("{scheme}://{user}:***@{host}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    /// The flags' and keys' names map each to its own setting, and a password is never set.
    #[test]
    fn each_target_option_lands_in_its_own_setting() {
        let path = |name: &str| Some(PathBuf::from(name));
        let flags =
            TargetFlags::new(Some("u".into()), true, path("ca"), path("crt"), path("k"), Some("sni".into()), true);
        let want = TlsSettings {
            enabled: true,
            ca_file: path("ca"),
            cert_file: path("crt"),
            key_file: path("k"),
            sni: Some("sni".into()),
            skip_verify: true,
        };
        assert_eq!(flags, TargetFlags { user: Some("u".into()), pass: None, tls: want });
    }

    #[test]
    fn urls_resolve_once_into_a_typed_target() {
        let t = Endpoint::resolve("redis://127.0.0.1:7000/2", &TargetFlags::default(), no_env).unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.db, t.user.clone(), t.password.clone()),
            ("127.0.0.1", 7000, 2, None, None)
        );
        assert!(t.tls.is_none());
        let t = Endpoint::resolve("rediss://bench:p%40ss@[::1]", &TargetFlags::default(), no_env).unwrap();
        assert_eq!((t.host.as_str(), t.port, t.user.as_deref()), ("::1", 6379, Some("bench")));
        assert_eq!(t.password.as_ref().unwrap().expose(), "p@ss");
        assert!(t.tls.is_some());
        assert_eq!(t.display(), "rediss://bench:***@[::1]:6379/0");
        assert!(!format!("{t:?}").contains("p@ss"), "Debug shows the password");
    }

    #[test]
    fn flags_override_the_url_and_the_password_falls_back_to_the_environment() {
        let flags = TargetFlags { user: Some("ops".into()), pass: Some(Secret::new("flag")), ..Default::default() };
        let t = Endpoint::resolve("redis://u:url@h:1", &flags, no_env).unwrap();
        assert_eq!((t.user.as_deref(), t.password.unwrap().expose()), (Some("ops"), "flag"));
        let env = |name: &str| (name == PASSWORD_ENV).then(|| "from-env".to_string());
        let t = Endpoint::resolve("redis://h", &TargetFlags::default(), env).unwrap();
        assert_eq!(t.password.unwrap().expose(), "from-env");
        let t = Endpoint::resolve("redis://:url@h", &TargetFlags::default(), env).unwrap();
        assert_eq!(t.password.unwrap().expose(), "url", "the URL's password wins over the environment");
        let tls = TargetFlags { tls: TlsSettings { enabled: true, ..Default::default() }, ..Default::default() };
        assert!(Endpoint::resolve("redis://h", &tls, no_env).unwrap().tls.is_some(), "--tls on a redis:// URL");
    }

    #[test]
    fn bad_urls_are_named_with_the_password_masked() {
        for (url, why) in [
            ("http://h", "scheme http"),
            ("redis://:secret@h/x", "database number"),
            ("redis://:secret@h/-1", "database number"),
            ("not a url", "no scheme"),
            ("127.0.0.1:7601", "did you mean redis://127.0.0.1:7601? (rediss://127.0.0.1:7601 for TLS)"),
            ("localhost:7601", "did you mean redis://localhost:7601?"),
            ("u:secret@h:1", "did you mean redis://u:***@h:1?"),
        ] {
            let err = Endpoint::resolve(url, &TargetFlags::default(), no_env).unwrap_err().to_string();
            assert!(err.contains(why), "{url}: {err}");
            assert!(!err.contains("secret"), "{err}");
        }
    }

    #[test]
    fn auth_refusals_are_read_from_the_message() {
        let missing = "cannot prepare the target: server error: built-in/enqueue.lua: NOAUTH Authentication required.";
        assert_eq!(AuthRefusal::in_message(missing), Some(AuthRefusal::Missing));
        let wrong = "target: server error: redis://:***@h:1/0: Password authentication failed - AuthenticationFailed";
        assert_eq!(AuthRefusal::in_message(wrong), Some(AuthRefusal::Wrong));
        assert_eq!(AuthRefusal::in_message("WRONGPASS invalid username-password pair"), Some(AuthRefusal::Wrong));
        assert_eq!(AuthRefusal::in_message("NOAUTHX NOPERM"), None);
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(redact_url("redis://:pw@h:1/2"), "redis://:***@h:1/2");
        assert_eq!(redact_url("rediss://u:pw@h"), "rediss://u:***@h");
        assert_eq!(redact_url("redis://h:6379"), "redis://h:6379");
        assert_eq!(redact_url("redis://user@h"), "redis://user@h");
        assert_eq!(redact_url("redis://u:pa/ss@h:1/0"), "redis://u:***@h:1/0", "a / in the password");
        assert_eq!(redact_url("redis://u:p@ss@h"), "redis://u:***@h", "an @ in the password");
        assert_eq!(redact_url("u:pw@h:1"), "u:***@h:1", "no scheme");
        assert_eq!(redact_url("h:1"), "h:1");
    }
}
