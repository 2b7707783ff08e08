//! TLS configuration of the link (TLS 1.3, mutual certificates) and of the client half's
//! optional TLS towards applications. The `ring` provider is used explicitly, whatever other
//! providers the build links in.

use std::path::Path;
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::error::NetError;

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Reads every certificate of a PEM file; at least one is required.
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, NetError> {
    let bad = |e: &dyn std::fmt::Display| {
        NetError::Config(format!(
            "{}: not a PEM certificate file: {e}",
            path.display()
        ))
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| bad(&e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(&e))?;
    if certs.is_empty() {
        return Err(bad(&"no CERTIFICATE block"));
    }
    Ok(certs)
}

/// Reads the private key of a PEM file.
pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, NetError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| {
        NetError::Config(format!(
            "{}: not a PEM private key file: {e}",
            path.display()
        ))
    })
}

fn roots(ca: &Path) -> Result<Arc<RootCertStore>, NetError> {
    let mut store = RootCertStore::empty();
    for cert in load_certs(ca)? {
        store
            .add(cert)
            .map_err(|e| NetError::Config(format!("{}: unusable CA: {e}", ca.display())))?;
    }
    Ok(Arc::new(store))
}

fn tls_config_err(what: &str) -> impl Fn(rustls::Error) -> NetError + '_ {
    move |e| NetError::Config(format!("{what}: {e}"))
}

/// An error of a certificate and its key, in words: rustls names a key that is not the
/// certificate's only `KeyMismatch`.
fn cert_key_err<'a>(
    what: &'a str,
    cert: &'a Path,
    key: &'a Path,
) -> impl Fn(rustls::Error) -> NetError + 'a {
    move |e| match e {
        rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => {
            NetError::Config(format!(
                "{} does not match {}: give the {what}'s own private key",
                key.display(),
                cert.display()
            ))
        }
        e => NetError::Config(format!("{what} and key: {e}")),
    }
}

/// The server half's link TLS: TLS 1.3 only, a client certificate chaining to `ca` required.
pub fn link_server_config(
    ca: &Path,
    cert: &Path,
    key: &Path,
) -> Result<Arc<rustls::ServerConfig>, NetError> {
    let verifier = WebPkiClientVerifier::builder_with_provider(roots(ca)?, provider())
        .build()
        .map_err(|e| NetError::Config(format!("{}: {e}", ca.display())))?;
    let config = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(tls_config_err("TLS 1.3"))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(load_certs(cert)?, load_key(key)?)
        .map_err(cert_key_err("server certificate", cert, key))?;
    Ok(Arc::new(config))
}

/// The client half's link TLS: TLS 1.3 only, the server verified against `ca`, this half's
/// certificate presented.
pub fn link_client_config(
    ca: &Path,
    cert: &Path,
    key: &Path,
) -> Result<Arc<rustls::ClientConfig>, NetError> {
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(tls_config_err("TLS 1.3"))?
        .with_root_certificates(roots(ca)?)
        .with_client_auth_cert(load_certs(cert)?, load_key(key)?)
        .map_err(cert_key_err("client certificate", cert, key))?;
    Ok(Arc::new(config))
}

/// TLS the client half serves to applications that ask for it (sslmode=require): TLS 1.2 and
/// 1.3, no client certificate.
pub fn local_server_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, NetError> {
    let config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(tls_config_err("TLS versions"))?
        .with_no_client_auth()
        .with_single_cert(load_certs(cert)?, load_key(key)?)
        .map_err(cert_key_err("local certificate", cert, key))?;
    Ok(Arc::new(config))
}

/// The error of a read or write on the link during the client half's handshake. A TLS 1.3
/// server checks the client's certificate after the client finished its side, so a
/// certificate the server half refuses shows up here as a TLS alert; it is told as what it
/// means ("certificate not accepted by the tunnel") rather than as the alert's name.
pub(crate) fn link_handshake_error(what: &str, server: &str, e: std::io::Error) -> NetError {
    use rustls::AlertDescription as A;
    let alert = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .and_then(|r| match r {
            rustls::Error::AlertReceived(a) => Some(*a),
            _ => None,
        });
    match alert {
        Some(
            a @ (A::BadCertificate
            | A::UnknownCA
            | A::DecryptError
            | A::CertificateUnknown
            | A::CertificateRequired
            | A::CertificateExpired
            | A::CertificateRevoked
            | A::UnsupportedCertificate
            | A::AccessDenied),
        ) => NetError::Tls(format!(
            "certificate not accepted by the tunnel: the server half {server} refused this \
             client half's certificate (TLS alert {a:?}); --cert must be signed by the CA the \
             server half trusts (its --ca) and be valid now"
        )),
        _ => NetError::io(what, e),
    }
}
