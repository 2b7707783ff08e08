//! The server certificate check of the modes that verify (verify-ca, verify-full, and
//! require/prefer/allow with a root certificate file), with the trust rules of libpq, which
//! leaves them to OpenSSL (`fe-secure-openssl.c`, `fe-secure-common.c`):
//!
//! - The chain must lead to a certificate of `sslrootcert`, within its validity dates. A
//!   self-signed certificate that is itself in `sslrootcert` is trusted as it stands, CA or
//!   not, within its dates and if its extended key usage (when it has one) allows a server: that is how PostgreSQL's documentation sets up a server ("Creating Certificates":
//!   `openssl req -new -x509 ...`, the same `server.crt` given to the client as root). webpki
//!   refuses such a certificate as a CA used as an end entity, so it is recognised here first.
//! - verify-full: the host name against the subjectAltName entries of the host's type (DNS
//!   name or IP address); only when there is none of that type, against the Common Name. A
//!   name `*.example.com` stands for exactly one leftmost label. Letter case does not matter.
//!
//! The handshake signatures are verified in every mode, so the peer holds the key of the
//! certificate it shows: require (and prefer, allow) without a root certificate takes any
//! certificate, with the same signature checks, from the same verifier.

use std::net::IpAddr;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{
    verify_tls12_signature, verify_tls13_signature, CryptoProvider, WebPkiSupportedAlgorithms,
};
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use x509_cert::der::oid::db::rfc5912;
use x509_cert::der::Decode;
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::ext::pkix::{ExtendedKeyUsage, SubjectAltName};
use x509_cert::Certificate;

/// The server certificate check of an sslmode, and the handshake signature checks of all.
#[derive(Debug)]
pub(crate) struct LibpqVerifier {
    /// The chain check of a mode that verifies; none for one that takes any certificate.
    chain: Option<Arc<WebPkiServerVerifier>>,
    /// The certificates of `sslrootcert`, to recognise a self-signed one the server shows.
    roots: Vec<CertificateDer<'static>>,
    /// verify-full: the host name too.
    full: bool,
    /// The crypto provider's, for the handshake signatures.
    algorithms: WebPkiSupportedAlgorithms,
}

impl LibpqVerifier {
    /// A mode that verifies the chain; `full` adds the host name.
    pub(crate) fn new(
        chain: Arc<WebPkiServerVerifier>,
        roots: Vec<CertificateDer<'static>>,
        full: bool,
        provider: &CryptoProvider,
    ) -> LibpqVerifier {
        LibpqVerifier {
            chain: Some(chain),
            roots,
            full,
            algorithms: provider.signature_verification_algorithms,
        }
    }

    /// require (and prefer, allow) without a root certificate: any certificate, but the
    /// handshake must be signed by its key.
    pub(crate) fn any_certificate(provider: &CryptoProvider) -> LibpqVerifier {
        LibpqVerifier {
            chain: None,
            roots: Vec::new(),
            full: false,
            algorithms: provider.signature_verification_algorithms,
        }
    }
}

fn bad_encoding() -> rustls::Error {
    rustls::Error::InvalidCertificate(CertificateError::BadEncoding)
}

/// The dates of a certificate trusted as it stands (OpenSSL checks them on every certificate
/// of the chain, the trusted one included).
fn check_dates(cert: &Certificate, now: UnixTime) -> Result<(), rustls::Error> {
    let validity = cert.tbs_certificate().validity();
    let not_before = UnixTime::since_unix_epoch(validity.not_before.to_unix_duration());
    let not_after = UnixTime::since_unix_epoch(validity.not_after.to_unix_duration());
    if now < not_before {
        return Err(CertificateError::NotValidYetContext {
            time: now,
            not_before,
        }
        .into());
    }
    if now > not_after {
        return Err(CertificateError::ExpiredContext {
            time: now,
            not_after,
        }
        .into());
    }
    Ok(())
}

/// The purpose of a certificate trusted as it stands: an extended key usage, when there is
/// one, must allow a TLS server (OpenSSL checks the purpose of the certificate at depth 0).
fn check_purpose(cert: &Certificate) -> Result<(), rustls::Error> {
    match cert.tbs_certificate().get_extension::<ExtendedKeyUsage>() {
        Ok(None) => Ok(()),
        Ok(Some((_, eku)))
            if eku.0.iter().any(|o| {
                *o == rfc5912::ID_KP_SERVER_AUTH || *o == rfc5912::ANY_EXTENDED_KEY_USAGE
            }) =>
        {
            Ok(())
        }
        Ok(Some(_)) => Err(CertificateError::InvalidPurpose.into()),
        Err(_) => Err(bad_encoding()),
    }
}

/// Whether `pattern` (a name in the certificate) names `host`: equal but for letter case, or
/// `*.rest` where `host` is one label followed by `.rest`.
fn name_matches(pattern: &str, host: &str) -> bool {
    if pattern.eq_ignore_ascii_case(host) {
        return true;
    }
    let Some(rest) = pattern.strip_prefix('*') else {
        return false;
    };
    if !rest.starts_with('.') || rest.len() < 2 {
        return false;
    }
    match host.find('.') {
        Some(dot) => host[dot..].eq_ignore_ascii_case(rest),
        None => false,
    }
}

/// libpq's host name check: the subjectAltName entries of the host's type, else the CN.
fn check_name(cert: &Certificate, name: &ServerName<'_>) -> Result<(), rustls::Error> {
    let tbs = cert.tbs_certificate();
    let sans = match tbs.get_extension::<SubjectAltName>() {
        Ok(Some((_, san))) => san.0,
        Ok(None) => Vec::new(),
        Err(_) => return Err(bad_encoding()),
    };
    let mut presented = Vec::new();
    let mut of_host_type = false;
    let matched = match name {
        ServerName::DnsName(host) => sans.iter().any(|g| match g {
            GeneralName::DnsName(d) => {
                of_host_type = true;
                presented.push(d.to_string());
                name_matches(d.as_str(), host.as_ref())
            }
            _ => false,
        }),
        ServerName::IpAddress(ip) => {
            let want = IpAddr::from(*ip);
            sans.iter().any(|g| match g {
                GeneralName::IpAddress(o) => {
                    of_host_type = true;
                    let got = match o.as_bytes().len() {
                        4 => <[u8; 4]>::try_from(o.as_bytes()).ok().map(IpAddr::from),
                        16 => <[u8; 16]>::try_from(o.as_bytes()).ok().map(IpAddr::from),
                        _ => None,
                    };
                    presented.push(got.map_or_else(|| "?".to_owned(), |a| a.to_string()));
                    got == Some(want)
                }
                _ => false,
            })
        }
        _ => false,
    };
    if matched {
        return Ok(());
    }
    if !of_host_type {
        let host = match name {
            ServerName::DnsName(d) => d.as_ref().to_owned(),
            ServerName::IpAddress(ip) => IpAddr::from(*ip).to_string(),
            _ => String::new(),
        };
        if let Ok(Some(cn)) = tbs.subject().common_name() {
            let cn = cn.value();
            if name_matches(&cn, &host) {
                return Ok(());
            }
            presented.push(cn.into_owned());
        }
    }
    Err(CertificateError::NotValidForNameContext {
        expected: name.to_owned(),
        presented,
    }
    .into())
}

impl ServerCertVerifier for LibpqVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        let cert = Certificate::from_der(end_entity.as_ref()).map_err(|_| bad_encoding())?;
        let tbs = cert.tbs_certificate();
        let self_signed = tbs.subject() == tbs.issuer();
        if self_signed && self.roots.iter().any(|r| r.as_ref() == end_entity.as_ref()) {
            check_dates(&cert, now)?;
            check_purpose(&cert)?;
        } else {
            // webpki checks the chain before the name, so a name error means the chain
            // passed; the name is checked below, by libpq's rules.
            match chain.verify_server_cert(
                end_entity,
                intermediates,
                server_name,
                ocsp_response,
                now,
            ) {
                Ok(_)
                | Err(rustls::Error::InvalidCertificate(
                    CertificateError::NotValidForName
                    | CertificateError::NotValidForNameContext { .. },
                )) => {}
                // Self-signed and not in sslrootcert: no root of it vouches for this one
                // (webpki's own complaint, a CA used as an end entity, would mislead).
                Err(_) if self_signed => return Err(CertificateError::UnknownIssuer.into()),
                Err(e) => return Err(e),
            }
        }
        if self.full {
            check_name(&cert, server_name)?;
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_as_libpq_matches_them() {
        assert!(name_matches("db.example.com", "DB.Example.com"));
        assert!(name_matches("*.example.com", "db.example.com"));
        assert!(name_matches("*.Example.com", "db.example.COM"));
        // One label only, and not the bare domain.
        assert!(!name_matches("*.example.com", "a.db.example.com"));
        assert!(!name_matches("*.example.com", "example.com"));
        assert!(!name_matches("*.", "a."));
        assert!(!name_matches("*example.com", "db.example.com"));
        assert!(!name_matches("db.example.com", "db.example.co"));
    }

    fn cert(sans: Vec<rcgen::SanType>, cn: &str) -> Certificate {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::new(Vec::new()).unwrap();
        p.subject_alt_names = sans;
        p.distinguished_name.push(rcgen::DnType::CommonName, cn);
        let der = p.self_signed(&key).unwrap().der().to_vec();
        Certificate::from_der(&der).unwrap()
    }

    #[test]
    fn a_certificate_trusted_as_it_stands_must_allow_a_server() {
        let key = rcgen::KeyPair::generate().unwrap();
        let with = |usages: Vec<rcgen::ExtendedKeyUsagePurpose>| {
            let mut p = rcgen::CertificateParams::new(vec!["db".into()]).unwrap();
            p.extended_key_usages = usages;
            let der = p.self_signed(&key).unwrap().der().to_vec();
            check_purpose(&Certificate::from_der(&der).unwrap())
        };
        use rcgen::ExtendedKeyUsagePurpose::{Any, ClientAuth, ServerAuth};
        assert!(with(Vec::new()).is_ok());
        assert!(with(vec![ClientAuth, ServerAuth]).is_ok());
        assert!(with(vec![Any]).is_ok());
        assert_eq!(
            with(vec![ClientAuth]),
            Err(CertificateError::InvalidPurpose.into())
        );
    }

    fn dns(s: &str) -> ServerName<'static> {
        ServerName::try_from(s.to_owned()).unwrap()
    }

    #[test]
    fn the_common_name_counts_only_without_a_san_of_the_host_type() {
        let ip = |s: &str| rcgen::SanType::IpAddress(s.parse().unwrap());
        let san_dns = |s: &str| rcgen::SanType::DnsName(s.try_into().unwrap());
        // No SAN at all: the CN, for a name and for an address.
        let c = cert(Vec::new(), "dbhost.yourdomain.com");
        assert!(check_name(&c, &dns("dbhost.yourdomain.com")).is_ok());
        assert!(check_name(&c, &dns("other.yourdomain.com")).is_err());
        let c = cert(Vec::new(), "127.0.0.1");
        assert!(check_name(&c, &dns("127.0.0.1")).is_ok());
        // A DNS SAN hides the CN from a name, not from an address.
        let c = cert(vec![san_dns("a.example.com")], "127.0.0.1");
        assert!(check_name(&c, &dns("a.example.com")).is_ok());
        assert!(check_name(&c, &dns("127.0.0.1")).is_ok());
        let c = cert(vec![san_dns("a.example.com")], "b.example.com");
        let e = check_name(&c, &dns("b.example.com")).unwrap_err();
        assert!(format!("{e}").contains("a.example.com"), "{e}");
        // An IP SAN hides the CN from an address.
        let c = cert(vec![ip("127.0.0.2")], "127.0.0.1");
        assert!(check_name(&c, &dns("127.0.0.2")).is_ok());
        assert!(check_name(&c, &dns("127.0.0.1")).is_err());
        let c = cert(vec![ip("::1")], "x");
        assert!(check_name(&c, &dns("::1")).is_ok());
    }

    /// A server certificate paired with whatever key the test gives it.
    #[derive(Debug)]
    struct Shows(Arc<rustls::sign::CertifiedKey>);

    impl rustls::server::ResolvesServerCert for Shows {
        fn resolve(
            &self,
            _: rustls::server::ClientHello<'_>,
        ) -> Option<Arc<rustls::sign::CertifiedKey>> {
            Some(Arc::clone(&self.0))
        }
    }

    /// Runs a handshake in memory; the first error of either side.
    fn handshake(
        client: &mut rustls::ClientConnection,
        server: &mut rustls::ServerConnection,
    ) -> Result<(), rustls::Error> {
        for _ in 0..16 {
            let mut wire = Vec::new();
            while client.wants_write() {
                client.write_tls(&mut wire).unwrap();
            }
            server.read_tls(&mut wire.as_slice()).unwrap();
            server.process_new_packets()?;
            wire.clear();
            while server.wants_write() {
                server.write_tls(&mut wire).unwrap();
            }
            client.read_tls(&mut wire.as_slice()).unwrap();
            client.process_new_packets()?;
            if !client.is_handshaking() && !server.is_handshaking() {
                return Ok(());
            }
        }
        panic!("the handshake did not end");
    }

    /// The peer must hold the key of the certificate it shows, in TLS 1.2 and 1.3, whether the
    /// mode checks the chain (the certificate is the root) or takes any certificate (require
    /// without a root): a server signing with another key is refused.
    #[test]
    fn a_handshake_signed_by_another_key_is_refused() {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let own = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["db".into()])
            .unwrap()
            .self_signed(&own)
            .unwrap()
            .der()
            .clone();
        let other = rcgen::KeyPair::generate().unwrap();
        let mut store = rustls::RootCertStore::empty();
        store.add(cert.clone()).unwrap();
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(store), provider.clone())
            .build()
            .unwrap();
        let verifiers: [(&str, Arc<LibpqVerifier>); 2] = [
            (
                "verify-ca",
                Arc::new(LibpqVerifier::new(
                    webpki,
                    vec![cert.clone()],
                    false,
                    &provider,
                )),
            ),
            (
                "require",
                Arc::new(LibpqVerifier::any_certificate(&provider)),
            ),
        ];
        for (signer, honest) in [(&own, true), (&other, false)] {
            let key = provider
                .key_provider
                .load_private_key(rustls_pki_types::PrivateKeyDer::Pkcs8(
                    signer.serialize_der().into(),
                ))
                .unwrap();
            let shows = Arc::new(Shows(Arc::new(rustls::sign::CertifiedKey::new(
                vec![cert.clone()],
                key,
            ))));
            for version in [&rustls::version::TLS12, &rustls::version::TLS13] {
                let server = Arc::new(
                    rustls::ServerConfig::builder_with_provider(provider.clone())
                        .with_protocol_versions(&[version])
                        .unwrap()
                        .with_no_client_auth()
                        .with_cert_resolver(shows.clone()),
                );
                for (mode, verifier) in &verifiers {
                    let client = Arc::new(
                        rustls::ClientConfig::builder_with_provider(provider.clone())
                            .with_protocol_versions(&[version])
                            .unwrap()
                            .dangerous()
                            .with_custom_certificate_verifier(verifier.clone())
                            .with_no_client_auth(),
                    );
                    let mut c = rustls::ClientConnection::new(client, dns("db")).unwrap();
                    let mut s = rustls::ServerConnection::new(server.clone()).unwrap();
                    let what = format!("{mode}, {version:?}, honest signer: {honest}");
                    match handshake(&mut c, &mut s) {
                        Ok(()) => assert!(honest, "{what}: a forged signature passed"),
                        Err(e) => {
                            assert!(!honest, "{what}: {e}");
                            assert_eq!(
                                e,
                                rustls::Error::InvalidCertificate(CertificateError::BadSignature),
                                "{what}"
                            );
                        }
                    }
                }
            }
        }
    }
}
