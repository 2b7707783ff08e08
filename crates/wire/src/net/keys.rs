//! `pgcompress tunnel keys`: a CA and a server and a client certificate for a quick start.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

use super::error::NetError;

/// The files [`write_keys`] creates in its directory.
pub const KEY_FILES: [&str; 6] = [
    "ca.pem",
    "ca-key.pem",
    "server.pem",
    "server-key.pem",
    "client.pem",
    "client-key.pem",
];

/// What to generate.
#[derive(Debug, Clone)]
pub struct KeysConfig {
    /// Directory to write into (created if missing).
    pub dir: PathBuf,
    /// Validity of every certificate, in days from now.
    pub days: u32,
    /// Extra names for the server certificate besides localhost, 127.0.0.1 and ::1.
    pub server_names: Vec<String>,
    /// Overwrite existing files.
    pub force: bool,
}

fn gen_err(what: &str) -> impl Fn(rcgen::Error) -> NetError + '_ {
    move |e| NetError::Config(format!("generating {what}: {e}"))
}

fn params(names: Vec<String>, common_name: &str, days: u32) -> Result<CertificateParams, NetError> {
    let mut p = CertificateParams::new(names).map_err(gen_err(common_name))?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    p.distinguished_name = dn;
    let now = time::OffsetDateTime::now_utc();
    // A little slack for clocks that disagree by a few minutes.
    p.not_before = now - time::Duration::hours(1);
    p.not_after = now + time::Duration::days(i64::from(days));
    Ok(p)
}

/// Writes `ca.pem`, `ca-key.pem`, `server.pem`, `server-key.pem`, `client.pem` and
/// `client-key.pem` into the directory. Refuses to overwrite unless `force`. Returns the paths
/// written.
pub fn write_keys(config: &KeysConfig) -> Result<Vec<PathBuf>, NetError> {
    let dir = &config.dir;
    if config.days == 0 {
        return Err(NetError::Config("--days must be at least 1".to_owned()));
    }
    std::fs::create_dir_all(dir).map_err(|source| NetError::File {
        path: dir.clone(),
        source,
    })?;
    let paths: Vec<PathBuf> = KEY_FILES.iter().map(|f| dir.join(f)).collect();
    if !config.force {
        if let Some(p) = paths.iter().find(|p| p.exists()) {
            return Err(NetError::Config(format!(
                "{} exists; pass --force to overwrite",
                p.display()
            )));
        }
    }
    let ca_key = KeyPair::generate().map_err(gen_err("CA key"))?;
    let mut ca = params(Vec::new(), "pgcompress tunnel CA", config.days)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key).map_err(gen_err("CA certificate"))?;

    let mut names = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ];
    names.extend(config.server_names.iter().cloned());
    let server_key = KeyPair::generate().map_err(gen_err("server key"))?;
    let mut server = params(names, "pgcompress tunnel server", config.days)?;
    server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let server_cert = server
        .signed_by(&server_key, &ca_cert, &ca_key)
        .map_err(gen_err("server certificate"))?;

    let client_key = KeyPair::generate().map_err(gen_err("client key"))?;
    let mut client = params(Vec::new(), "pgcompress tunnel client", config.days)?;
    client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let client_cert = client
        .signed_by(&client_key, &ca_cert, &ca_key)
        .map_err(gen_err("client certificate"))?;

    let contents = [
        (ca_cert.pem(), false),
        (ca_key.serialize_pem(), true),
        (server_cert.pem(), false),
        (server_key.serialize_pem(), true),
        (client_cert.pem(), false),
        (client_key.serialize_pem(), true),
    ];
    for (path, (text, secret)) in paths.iter().zip(contents) {
        write_file(path, text.as_bytes(), secret)?;
    }
    Ok(paths)
}

fn write_file(path: &Path, bytes: &[u8], secret: bool) -> Result<(), NetError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let err = |source| NetError::File {
        path: path.to_path_buf(),
        source,
    };
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(if secret { 0o600 } else { 0o644 })
        .open(path)
        .map_err(err)?;
    f.write_all(bytes).map_err(err)?;
    Ok(())
}
