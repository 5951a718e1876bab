//! TLS settings (memtier_benchmark's and valkey-benchmark's flags: `--tls`, `--cacert`,
//! `--cert`, `--key`, `--sni`, `--tls-skip-verify`) and the rustls client config built from
//! them once per run, shared by the load and the control connections.

use super::NetError;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_rustls::rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use tokio_rustls::rustls::crypto::{ring, verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use tokio_rustls::rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

/// How to speak TLS to the target. All fields optional; an unset one means the default.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TlsSettings {
    /// `--tls`: TLS on even for a `redis://` URL.
    pub enabled: bool,
    /// `--cacert FILE`: PEM file of the CA(s) that sign the server's certificate; default the
    /// system's roots.
    pub ca_file: Option<PathBuf>,
    /// `--cert FILE`: PEM client certificate (chain), for servers with `tls-auth-clients yes`.
    pub cert_file: Option<PathBuf>,
    /// `--key FILE`: PEM private key of `cert_file`.
    pub key_file: Option<PathBuf>,
    /// `--sni NAME`: the server name sent and verified, when it is not the URL's host.
    pub sni: Option<String>,
    /// `--tls-skip-verify`: accept any server certificate (still encrypted; not
    /// authenticated). For test deployments only.
    pub skip_verify: bool,
}

/// What a TLS handshake negotiated, for summary.json.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct TlsInfo {
    /// e.g. `TLSv1_3`.
    pub version: String,
    /// e.g. `TLS13_AES_256_GCM_SHA384`.
    pub cipher_suite: String,
}

impl TlsSettings {
    /// True when any TLS flag was given (each implies `--tls`).
    pub fn wanted(&self) -> bool {
        self.enabled
            || self.ca_file.is_some()
            || self.cert_file.is_some()
            || self.key_file.is_some()
            || self.sni.is_some()
            || self.skip_verify
    }

    /// `self` with every unset option taken from `fallback`.
    pub fn merge(&self, fallback: &TlsSettings) -> TlsSettings {
        TlsSettings {
            enabled: self.enabled || fallback.enabled,
            ca_file: self.ca_file.clone().or_else(|| fallback.ca_file.clone()),
            cert_file: self.cert_file.clone().or_else(|| fallback.cert_file.clone()),
            key_file: self.key_file.clone().or_else(|| fallback.key_file.clone()),
            sni: self.sni.clone().or_else(|| fallback.sni.clone()),
            skip_verify: self.skip_verify || fallback.skip_verify,
        }
    }

    /// The name to send as SNI and verify the certificate against: `--sni`, else `host`.
    ///
    /// Errors: [`NetError::Tls`] for a name that is neither a DNS name nor an address.
    pub fn server_name(&self, host: &str) -> Result<ServerName<'static>, NetError> {
        let name = self.sni.as_deref().unwrap_or(host);
        ServerName::try_from(name.to_string())
            .map_err(|e| NetError::Tls(format!("{name:?} is not a valid TLS server name: {e}")))
    }

    /// Builds the rustls client config: the CA file's roots (or the system's), the client
    /// certificate and key when given, or no verification with `skip_verify`.
    ///
    /// Errors: [`NetError::Tls`] naming the file that is missing, unreadable or holds no
    /// certificate / key, or a certificate given without its key.
    pub fn client_config(&self) -> Result<Arc<ClientConfig>, NetError> {
        let provider = Arc::new(ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| NetError::Tls(e.to_string()))?;
        let builder = if self.skip_verify {
            builder.dangerous().with_custom_certificate_verifier(Arc::new(NoVerification(provider)))
        } else {
            builder.with_root_certificates(self.roots()?)
        };
        let config = match (&self.cert_file, &self.key_file) {
            (Some(cert), Some(key)) => {
                let chain = certs(cert)?;
                let key = PrivateKeyDer::from_pem_file(key)
                    .map_err(|e| NetError::Tls(format!("--key {}: no private key read: {e}", key.display())))?;
                builder.with_client_auth_cert(chain, key).map_err(|e| NetError::Tls(format!("--cert/--key: {e}")))?
            }
            (None, None) => builder.with_no_client_auth(),
            _ => return Err(NetError::Tls("--cert and --key go together".into())),
        };
        Ok(Arc::new(config))
    }

    fn roots(&self) -> Result<RootCertStore, NetError> {
        let mut roots = RootCertStore::empty();
        match &self.ca_file {
            Some(file) => {
                for cert in certs(file)? {
                    roots.add(cert).map_err(|e| NetError::Tls(format!("--cacert {}: {e}", file.display())))?;
                }
            }
            None => {
                // The system's roots; certificates it cannot parse are skipped, as browsers do.
                let found = rustls_native_certs::load_native_certs();
                roots.add_parsable_certificates(found.certs);
                if roots.is_empty() {
                    return Err(NetError::Tls(
                        "no system CA certificates found: pass --cacert FILE (or --tls-skip-verify)".into(),
                    ));
                }
            }
        }
        Ok(roots)
    }
}

/// Every certificate of the PEM file `path`.
fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, NetError> {
    let what = |e: &dyn std::fmt::Display| NetError::Tls(format!("{}: {e}", path.display()));
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(path).map_err(|e| what(&e))?.collect::<Result<_, _>>().map_err(|e| what(&e))?;
    if certs.is_empty() {
        return Err(what(&"no PEM certificate in the file"));
    }
    Ok(certs)
}

/// `--tls-skip-verify`: any certificate is accepted, but the handshake signatures are still
/// checked, so the session is at least bound to the key the server presented.
#[derive(Debug)]
struct NoVerification(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, tokio_rustls::rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, tokio_rustls::rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, tokio_rustls::rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
