//! TLS on the replication connection as libpq sets it up (`libpq.sgml` "SSL Support",
//! `protocol.sgml` "SSL Session Encryption"): the SSLRequest and the server's one-byte answer,
//! a rustls client whose certificate check follows `sslmode`, and the channel-binding data of
//! SCRAM-SHA-256-PLUS (RFC 5929 `tls-server-end-point`).
//!
//! What each mode checks, as libpq does (the rules of the check: [`super::verify`]):
//! - verify-full: the chain up to a root of `sslrootcert`, and the host name.
//! - verify-ca: the chain only.
//! - require, prefer, allow: the chain only when the root certificate file exists (libpq's
//!   compatibility rule), otherwise nothing about the certificate. The handshake signatures
//!   are verified in every mode, so the peer holds the key of the certificate it shows.

use std::fmt;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::ServerCertVerifier;
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::{CertificateError, ClientConfig, RootCertStore};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use sha2::{Digest, Sha224, Sha256, Sha384, Sha512};
use x509_cert::der::oid::db::{rfc5912, rfc8410};
use x509_cert::der::oid::ObjectIdentifier;
use x509_cert::der::Decode;

use super::config::{RootCert, SslMode, TlsConfig};
use super::verify::LibpqVerifier;
use super::ConnError;

/// The request code of SSLRequest (`pqcomm.h` `NEGOTIATE_SSL_CODE`: 1234 << 16 | 5679).
pub const SSL_REQUEST_CODE: u32 = 80_877_103;
/// The server's answer when it will do TLS.
pub const ANSWER_TLS: u8 = b'S';
/// The server's answer when it will not.
pub const ANSWER_NO_TLS: u8 = b'N';

/// SSLRequest: Int32 length 8, Int32 request code.
pub fn ssl_request() -> [u8; 8] {
    let mut m = [0; 8];
    m[..4].copy_from_slice(&8u32.to_be_bytes());
    m[4..].copy_from_slice(&SSL_REQUEST_CODE.to_be_bytes());
    m
}

/// What the server said to SSLRequest: `Ok(true)` for TLS, `Ok(false)` for none, an error
/// for anything else (an ErrorResponse from a server that does not know the request, or not
/// PostgreSQL at all).
pub fn parse_answer(byte: u8) -> Result<bool, ConnError> {
    match byte {
        ANSWER_TLS => Ok(true),
        ANSWER_NO_TLS => Ok(false),
        other => Err(ConnError::Protocol(format!(
            "the server answered the TLS request with byte 0x{other:02x}, not 'S' or 'N' \
             (not a PostgreSQL server, or one too old for TLS)"
        ))),
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Where the trusted roots came from, for error messages.
#[derive(Debug, Clone)]
pub(crate) struct RootsFrom(String);

impl fmt::Display for RootsFrom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The trusted roots: as a store for webpki, as certificates, and where they came from.
type Roots = (RootCertStore, Vec<CertificateDer<'static>>, RootsFrom);

/// The roots to check the chain against, as a store and as the certificates themselves (a
/// self-signed one may be the server's own): `None` when the chain is not checked.
fn roots(tls: &TlsConfig) -> Result<Option<Roots>, ConnError> {
    let verify = matches!(tls.mode, SslMode::VerifyCa | SslMode::VerifyFull);
    let path = match &tls.root_cert {
        Some(RootCert::System) => {
            let found = rustls_native_certs::load_native_certs();
            let mut store = RootCertStore::empty();
            let (added, _) = store.add_parsable_certificates(found.certs.iter().cloned());
            if added == 0 {
                return Err(ConnError::Tls(
                    "sslrootcert=system: no trusted root certificate found on this system \
                     (install ca-certificates, or give sslrootcert=FILE)"
                        .into(),
                ));
            }
            return Ok(Some((
                store,
                found.certs,
                RootsFrom("the system's trusted roots".into()),
            )));
        }
        Some(RootCert::File(p)) => p,
        None if verify => {
            return Err(ConnError::Tls(format!(
                "sslmode={} needs the root certificate that signed the server's: give \
                 sslrootcert=FILE (no home directory for ~/.postgresql/root.crt)",
                tls.mode.as_str()
            )))
        }
        None => return Ok(None),
    };
    if !path.exists() {
        if verify {
            return Err(ConnError::Tls(format!(
                "root certificate file {} does not exist: give sslrootcert=FILE (the CA that \
                 signed the server's certificate), sslrootcert=system, or sslmode=require to \
                 skip the check",
                path.display()
            )));
        }
        return Ok(None);
    }
    let certs = load_certs(path, "root certificate")?;
    let mut store = RootCertStore::empty();
    for c in certs.iter().cloned() {
        store.add(c).map_err(|e| {
            ConnError::Tls(format!(
                "root certificate file {}: {e}: give a PEM file of CA certificates",
                path.display()
            ))
        })?;
    }
    Ok(Some((store, certs, RootsFrom(path.display().to_string()))))
}

fn load_certs(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>, ConnError> {
    let bad = |e: &dyn fmt::Display| {
        ConnError::Tls(format!(
            "{what} file {}: {e}: give a PEM file of certificates",
            path.display()
        ))
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| bad(&e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(&e))?;
    if certs.is_empty() {
        return Err(bad(&"no certificate in it"));
    }
    Ok(certs)
}

/// libpq's rule for the private key file: no group or world access when the current user
/// owns it, at most group read when root does.
fn check_key_permissions(path: &Path, meta: &fs::Metadata) -> Result<(), ConnError> {
    if !meta.is_file() {
        return Err(ConnError::Tls(format!(
            "private key file {} is not a regular file",
            path.display()
        )));
    }
    let mode = meta.mode();
    let euid = nix::unistd::geteuid().as_raw();
    let too_open = (meta.uid() == euid && mode & 0o077 != 0)
        || (meta.uid() == 0 && euid != 0 && mode & 0o037 != 0);
    if too_open {
        return Err(ConnError::Tls(format!(
            "private key file {} has group or world access (mode {:o}): chmod 0600 it \
             (or 0640 if root owns it)",
            path.display(),
            mode & 0o777
        )));
    }
    Ok(())
}

/// The client certificate and key, when the certificate file exists (a missing one is not
/// an error, as in libpq).
fn client_identity(
    tls: &TlsConfig,
) -> Result<Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>, ConnError> {
    let Some(cert) = tls.cert.as_deref().filter(|c| c.exists()) else {
        return Ok(None);
    };
    let certs = load_certs(cert, "client certificate")?;
    let key = tls.key.as_deref().ok_or_else(|| {
        ConnError::Tls(format!(
            "client certificate {} but no private key: give sslkey=FILE",
            cert.display()
        ))
    })?;
    let meta = fs::metadata(key).map_err(|e| {
        ConnError::Tls(format!(
            "client certificate {} but its private key file {}: {e}: give sslkey=FILE",
            cert.display(),
            key.display()
        ))
    })?;
    check_key_permissions(key, &meta)?;
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| {
        ConnError::Tls(format!(
            "private key file {}: {e}: give an unencrypted PEM key (PKCS#8, PKCS#1 or SEC1)",
            key.display()
        ))
    })?;
    Ok(Some((certs, key_der)))
}

/// The rustls client for `tls`, and what it trusts (for error messages).
pub(crate) fn client_config(
    tls: &TlsConfig,
) -> Result<(Arc<ClientConfig>, Option<RootsFrom>), ConnError> {
    let provider = provider();
    let roots = roots(tls)?;
    let from = roots.as_ref().map(|(_, _, f)| f.clone());
    let verifier: Arc<dyn ServerCertVerifier> = match roots {
        Some((store, certs, _)) => {
            let webpki =
                WebPkiServerVerifier::builder_with_provider(Arc::new(store), provider.clone())
                    .build()
                    .map_err(|e| {
                        ConnError::Tls(format!("building the certificate verifier: {e}"))
                    })?;
            let full = tls.mode == SslMode::VerifyFull;
            Arc::new(LibpqVerifier::new(webpki, certs, full, &provider))
        }
        None => Arc::new(LibpqVerifier::any_certificate(&provider)),
    };
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ConnError::Tls(format!("TLS versions: {e}")))?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let config = match client_identity(tls)? {
        Some((certs, key)) => builder.with_client_auth_cert(certs, key).map_err(|e| {
            ConnError::Tls(format!(
                "client certificate and key do not go together: {e}: check sslcert and sslkey"
            ))
        })?,
        None => builder.with_no_client_auth(),
    };
    Ok((Arc::new(config), from))
}

/// The name rustls checks the certificate against (and sends as SNI when it is a DNS name).
pub(crate) fn server_name(host: &str) -> Result<ServerName<'static>, ConnError> {
    ServerName::try_from(host.to_owned())
        .map_err(|e| ConnError::Tls(format!("host \"{host}\" cannot be a TLS server name: {e}")))
}

/// One line for a failed handshake: what did not verify and what to do about it.
pub(crate) fn handshake_error(
    e: &std::io::Error,
    host: &str,
    mode: SslMode,
    roots: Option<&RootsFrom>,
) -> ConnError {
    let inner = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>());
    let msg = match (inner, roots) {
        (
            Some(rustls::Error::InvalidCertificate(
                c @ (CertificateError::NotValidForName
                | CertificateError::NotValidForNameContext { .. }),
            )),
            _,
        ) => format!(
            "server certificate is not valid for host name {host} ({c}): connect by a name \
             the certificate lists, or use sslmode=verify-ca to check the chain only"
        ),
        (
            Some(rustls::Error::InvalidCertificate(
                c @ (CertificateError::Expired
                | CertificateError::ExpiredContext { .. }
                | CertificateError::NotValidYet
                | CertificateError::NotValidYetContext { .. }),
            )),
            _,
        ) => format!(
            "server certificate for {host} is outside its validity dates ({c}): renew the \
             server's certificate (or check this machine's clock)"
        ),
        (Some(rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer)), Some(from)) => {
            format!(
                "server certificate for {host} does not verify against {from}: neither signed \
                 by a certificate there nor, self-signed, one of them: give sslrootcert the CA \
                 that signed the server's certificate (or a self-signed one itself)"
            )
        }
        (Some(rustls::Error::InvalidCertificate(c)), Some(from)) => format!(
            "server certificate for {host} does not verify against {from} ({c}): give \
             sslrootcert the CA that signed the server's certificate"
        ),
        (Some(r), _) => format!(
            "handshake with {host} failed (sslmode={}): {r}",
            mode.as_str()
        ),
        (None, _) => format!(
            "handshake with {host} failed (sslmode={}): {e}",
            mode.as_str()
        ),
    };
    ConnError::Tls(msg)
}

/// ecdsa-with-SHA1 (RFC 5758), absent from the OID database's RFC 5912 module.
const ECDSA_WITH_SHA_1: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.4.1");

/// RFC 5929 `tls-server-end-point`: the hash of the server's certificate with the hash of its
/// signature algorithm, SHA-256 where that is MD5 or SHA-1 (PostgreSQL's
/// `be_tls_get_certificate_hash` does the same on its side).
pub fn tls_server_end_point(cert_der: &[u8]) -> Result<Vec<u8>, ConnError> {
    let cert = x509_cert::Certificate::from_der(cert_der).map_err(|e| {
        ConnError::Tls(format!(
            "the server's certificate does not parse ({e}); channel binding needs it: use \
             channel_binding=disable"
        ))
    })?;
    let oid = cert.signature_algorithm().oid;
    let hash = match oid {
        rfc5912::MD_5_WITH_RSA_ENCRYPTION
        | rfc5912::SHA_1_WITH_RSA_ENCRYPTION
        | rfc5912::DSA_WITH_SHA_1
        | ECDSA_WITH_SHA_1
        | rfc5912::SHA_256_WITH_RSA_ENCRYPTION
        | rfc5912::ECDSA_WITH_SHA_256
        | rfc5912::DSA_WITH_SHA_256 => Sha256::digest(cert_der).to_vec(),
        rfc5912::SHA_224_WITH_RSA_ENCRYPTION | rfc5912::ECDSA_WITH_SHA_224 => {
            Sha224::digest(cert_der).to_vec()
        }
        rfc5912::SHA_384_WITH_RSA_ENCRYPTION | rfc5912::ECDSA_WITH_SHA_384 => {
            Sha384::digest(cert_der).to_vec()
        }
        rfc5912::SHA_512_WITH_RSA_ENCRYPTION | rfc5912::ECDSA_WITH_SHA_512 => {
            Sha512::digest(cert_der).to_vec()
        }
        other => {
            let name = match other {
                rfc8410::ID_ED_25519 => "Ed25519".to_owned(),
                rfc8410::ID_ED_448 => "Ed448".to_owned(),
                rfc5912::ID_RSASSA_PSS => "RSASSA-PSS".to_owned(),
                o => o.to_string(),
            };
            return Err(ConnError::Tls(format!(
                "the server's certificate is signed with {name}, for which this client has \
                 no tls-server-end-point hash: use channel_binding=disable"
            )));
        }
    };
    Ok(hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssl_request_bytes_and_answers() {
        assert_eq!(ssl_request(), [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]);
        assert!(parse_answer(b'S').unwrap());
        assert!(!parse_answer(b'N').unwrap());
        for b in [b'E', b'R', 0, 0xff] {
            assert!(parse_answer(b).is_err(), "{b}");
        }
    }

    fn cert_with(alg: &'static rcgen::SignatureAlgorithm) -> Vec<u8> {
        let key = rcgen::KeyPair::generate_for(alg).unwrap();
        let params = rcgen::CertificateParams::new(vec!["localhost".into()]).unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn end_point_hash_follows_the_signature_algorithm() {
        let der = cert_with(&rcgen::PKCS_ECDSA_P256_SHA256);
        assert_eq!(
            tls_server_end_point(&der).unwrap(),
            Sha256::digest(&der).to_vec()
        );
        let der = cert_with(&rcgen::PKCS_ECDSA_P384_SHA384);
        assert_eq!(
            tls_server_end_point(&der).unwrap(),
            Sha384::digest(&der).to_vec()
        );
        let der = cert_with(&rcgen::PKCS_ED25519);
        let e = tls_server_end_point(&der).unwrap_err().to_string();
        assert!(
            e.contains("Ed25519") && e.contains("channel_binding=disable"),
            "{e}"
        );
        assert!(tls_server_end_point(b"not a certificate").is_err());
    }
}
