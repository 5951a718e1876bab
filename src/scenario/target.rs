//! `[target]`: which Valkey the run drives.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The raw `[target]` table. Absent table, or no `url`, means an embedded
/// `valkey-server` that the harness starts itself.
///
/// ```toml
/// [target]
/// url = "rediss://valkey.example.com:6380/0"  # redis:// or rediss:// (TLS); user, db allowed
/// user = "bench"                # ACL user; the password comes from $EMQ_PASSWORD (or the url)
/// cacert = "ca.pem"             # TLS: CA file (default: the system's roots); paths as given
/// cert = "client.pem"           # TLS: client certificate, with key = "client.key"
/// sni = "valkey.example.com"    # TLS: server name to send and verify
/// tls_skip_verify = false       # TLS: accept any certificate (test deployments only)
/// # or, for the embedded server only, extra valkey-server options (name -> value):
/// server = { "io-threads" = "2", "appendonly" = "no" }
/// # and, instead of one server, an embedded cluster (primaries x replicas, on loopback):
/// cluster = { primaries = 3, replicas = 1, node_timeout = "2s" }
/// # with either: acknowledge a state-changing call only after WAIT reports this many replicas
/// wait = { replicas = 1, timeout = "100ms" }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetTable {
    /// `redis://` or `rediss://[user[:password]@]host[:port][/db]`; absent = embedded server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// ACL user name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// TLS even for a `redis://` url.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tls: bool,
    /// PEM CA file for TLS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cacert: Option<std::path::PathBuf>,
    /// PEM client certificate for TLS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert: Option<std::path::PathBuf>,
    /// PEM private key of `cert`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<std::path::PathBuf>,
    /// TLS server name (SNI) to send and verify.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sni: Option<String>,
    /// Accept any server certificate.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tls_skip_verify: bool,
    /// Extra `valkey-server` config options for the embedded server (each passed as
    /// `--name value`). Refused together with `url`, where it would be silently ignored.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub server: BTreeMap<String, String>,
    /// An embedded Valkey Cluster instead of one embedded server. Refused with `url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterTable>,
    /// Follow every state-changing call with `WAIT` ([`WaitTable`]); absent: a call is
    /// acknowledged by the primary alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<super::wait::WaitTable>,
}

/// `[target] cluster = { primaries = 3, replicas = 1, node_timeout = "2s" }`: the embedded
/// cluster's shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterTable {
    /// Primaries, each serving an even share of the slots (1..=16).
    pub primaries: u64,
    /// Replicas per primary (0..=4; default 0).
    #[serde(default)]
    pub replicas: u64,
    /// `cluster-node-timeout` (default 2 s): how long a silent node takes to be failed over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_timeout: Option<crate::scenario::HumanDuration>,
}

impl TargetTable {
    /// A copy with any password in `url` replaced by `***`, for writing into results.
    pub fn redacted(&self) -> Self {
        Self { url: self.url.as_deref().map(redact_url), ..self.clone() }
    }

    /// The authentication and TLS keys as the target seam takes them.
    pub fn flags(&self) -> crate::net::TargetFlags {
        let TargetTable { user, tls, cacert, cert, key, sni, tls_skip_verify, .. } = self;
        crate::net::TargetFlags::new(
            user.clone(),
            *tls,
            cacert.clone(),
            cert.clone(),
            key.clone(),
            sni.clone(),
            *tls_skip_verify,
        )
    }
}

pub use crate::net::redact_url;
