//! `logical recv` against a PostgreSQL 15 that requires TLS (`ssl = on`, only `hostssl` lines in
//! pg_hba.conf for TCP): every sslmode that can reach it receives the same changes as the
//! server's own test_decoding; certificates that do not verify under verify-ca or verify-full
//! are refused with one line and exit status 2; channel_binding=require logs in with
//! SCRAM-SHA-256-PLUS over TLS and refuses every login that is not bound; a client certificate
//! logs in where pg_hba.conf says `cert`.

mod error_support;
mod logical_support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use error_support::refused;
use logical::conn::{ConnConfig, Connection, CopyEvent, Env, StartOptions};
use logical::{CopyMessage, Decoder, Lsn, Message, Options, Streaming};
use logical_support::{assert_same, ours, pgcompress, test_decoding};
use pgtest::Cluster;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SanType,
};

const PASSWORD: &str = "tls pw";

/// Certificates made for one test: a CA that signed the server's certificate (names
/// `localhost` and 127.0.0.1) and a client certificate for `certu`, and an unrelated CA.
struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn s(&self, name: &str) -> String {
        self.path(name).to_string_lossy().into_owned()
    }
}

/// A CA whose key is P-384, so that what it signs carries ecdsa-with-SHA384 and channel
/// binding hashes with SHA-384 (the SHA-256 and SHA-1 cases are swapped in below).
fn ca(name: &str) -> (rcgen::Certificate, KeyPair) {
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384).expect("CA key");
    let mut p = CertificateParams::new(Vec::new()).expect("CA params");
    p.distinguished_name.push(DnType::CommonName, name);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    (p.self_signed(&key).expect("CA certificate"), key)
}

fn write(path: &Path, text: &str, mode: u32) {
    std::fs::write(path, text).expect("write");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// Makes the certificates, puts the server's into its data directory, turns ssl on and
/// replaces pg_hba.conf: TCP only through `hostssl`, the Unix socket as below.
fn setup(cluster: &Cluster) -> Pki {
    let pki = Pki {
        dir: tempfile::tempdir().expect("tempdir"),
    };
    let (ca_cert, ca_key) = ca("pgcompress test CA");
    let (other_cert, _) = ca("unrelated CA");

    let server_key = KeyPair::generate().expect("server key");
    let mut p = CertificateParams::new(vec!["localhost".to_owned()]).expect("server params");
    p.subject_alt_names
        .push(SanType::IpAddress("127.0.0.1".parse().expect("ip")));
    p.distinguished_name.push(DnType::CommonName, "localhost");
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let server = p
        .signed_by(&server_key, &ca_cert, &ca_key)
        .expect("server certificate");

    let client_key = KeyPair::generate().expect("client key");
    let mut p = CertificateParams::new(Vec::new()).expect("client params");
    p.distinguished_name.push(DnType::CommonName, "certu");
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let client = p
        .signed_by(&client_key, &ca_cert, &ca_key)
        .expect("client certificate");

    write(&pki.path("ca.crt"), &ca_cert.pem(), 0o644);
    write(&pki.path("other-ca.crt"), &other_cert.pem(), 0o644);
    write(&pki.path("client.crt"), &client.pem(), 0o644);
    write(&pki.path("client.key"), &client_key.serialize_pem(), 0o600);
    write(&pki.path("open.key"), &client_key.serialize_pem(), 0o644);

    let data = cluster.data_dir();
    for (name, text, mode) in [
        ("server.crt", server.pem(), 0o644),
        ("server.key", server_key.serialize_pem(), 0o600),
        ("client-ca.crt", ca_cert.pem(), 0o644),
    ] {
        let path = data.join(name);
        write(&path, &text, mode);
        pgtest::run::chown_to_server_user(&path).expect("chown");
    }
    cluster
        .psql(&format!(
            "SET password_encryption = 'scram-sha-256';
             CREATE ROLE repl LOGIN REPLICATION PASSWORD '{PASSWORD}';
             CREATE ROLE certu LOGIN REPLICATION;
             SET password_encryption = 'md5';
             CREATE ROLE md5u LOGIN REPLICATION PASSWORD '{PASSWORD}';
             ALTER SYSTEM SET ssl_ca_file = 'client-ca.crt';"
        ))
        .expect("roles");
    let hba = "\
local all repl scram-sha-256
local all all trust
hostssl replication repl 127.0.0.0/8 scram-sha-256
hostssl all repl 127.0.0.0/8 scram-sha-256
hostssl all md5u 127.0.0.0/8 md5
hostssl replication certu 127.0.0.0/8 cert
hostssl all certu 127.0.0.0/8 cert
";
    let hba_path = data.join("pg_hba.conf");
    std::fs::write(&hba_path, hba).expect("write pg_hba.conf");
    cluster.set_guc_and_reload("ssl", "on").expect("ssl on");
    assert_eq!(cluster.query_one("SHOW ssl").expect("show ssl"), "on");
    pki
}

fn tls_cluster() -> (Cluster, Pki) {
    let cluster = Cluster::builder()
        .guc("wal_level", "logical")
        .guc("max_wal_senders", "20")
        .guc("max_replication_slots", "20")
        .guc("timezone", "UTC")
        .listen_tcp(true)
        // A second loopback address that the server certificate does not name.
        .guc("listen_addresses", "127.0.0.1,127.0.0.2")
        .start()
        .expect("start cluster");
    let pki = setup(&cluster);
    (cluster, pki)
}

fn conninfo(cluster: &Cluster, host: &str, user: &str, extra: &str) -> String {
    format!(
        "host={host} port={} user={user} dbname=postgres password='{PASSWORD}' {extra}",
        cluster.tcp_port().expect("tcp port")
    )
}

/// `logical recv` with `conninfo` and HOME in `home` (so that libpq's default files are
/// not this machine's).
fn recv(home: &Path, conninfo: &str, slot: &str, out: &Path, stop: &str) -> Output {
    pgcompress()
        .env("HOME", home)
        .env_remove("PGSSLMODE")
        .env_remove("PGSSLROOTCERT")
        .env_remove("PGCHANNELBINDING")
        .args(["logical", "recv", "--dbname", conninfo, "--slot", slot])
        .args(["--publication", "p", "-o"])
        .arg(out)
        .args(["--stop-at-lsn", stop, "--idle-exit", "60"])
        .output()
        .expect("run pgcompress")
}

#[test]
fn every_sslmode_receives_what_test_decoding_sees() {
    let (cluster, pki) = tls_cluster();
    cluster
        .psql(
            "CREATE TABLE t (id int PRIMARY KEY, v text);
             CREATE PUBLICATION p FOR TABLE t;
             SELECT pg_create_logical_replication_slot('td', 'test_decoding');",
        )
        .expect("schema");
    let nowhere = pki.s("no-such-root.crt");
    let ca = pki.s("ca.crt");
    let modes = [
        (
            "allow",
            "127.0.0.1",
            format!("sslmode=allow sslrootcert={nowhere}"),
        ),
        (
            "prefer",
            "127.0.0.1",
            format!("sslmode=prefer sslrootcert={nowhere}"),
        ),
        (
            "require",
            "127.0.0.1",
            format!("sslmode=require sslrootcert={nowhere}"),
        ),
        // require with a root certificate file that exists checks the chain, as libpq.
        (
            "require_root",
            "127.0.0.1",
            format!("sslmode=require sslrootcert={ca}"),
        ),
        // verify-ca checks the chain but not the name: 127.0.0.2 is not in the certificate.
        (
            "verify_ca",
            "127.0.0.2",
            format!("sslmode=verify-ca sslrootcert={ca}"),
        ),
        (
            "verify_full",
            "localhost",
            format!("sslmode=verify-full sslrootcert={ca}"),
        ),
        (
            "verify_full_ip",
            "127.0.0.1",
            format!("sslmode=verify-full sslrootcert={ca}"),
        ),
    ];
    for (name, _, _) in &modes {
        cluster
            .psql(&format!(
                "SELECT pg_create_logical_replication_slot('s_{name}', 'pgoutput');"
            ))
            .expect("slot");
    }
    cluster
        .psql(
            "INSERT INTO t SELECT g, 'row ' || g FROM generate_series(1, 500) g;
             UPDATE t SET v = 'odd' WHERE id % 2 = 1;
             BEGIN; DELETE FROM t WHERE id > 450; INSERT INTO t VALUES (1000, 'x'); COMMIT;
             BEGIN; INSERT INTO t VALUES (2000, 'rolled back'); ROLLBACK;",
        )
        .expect("workload");
    let stop = cluster.current_wal_lsn().expect("lsn");
    let theirs = test_decoding(&cluster, "td");
    assert_eq!(theirs.len(), 500 + 250 + 50 + 1, "test_decoding changes");
    for (name, host, tls) in &modes {
        let out = pki.path(&format!("{name}.jsonl"));
        let o = recv(
            pki.dir.path(),
            &conninfo(&cluster, host, "repl", tls),
            &format!("s_{name}"),
            &out,
            &stop,
        );
        assert!(
            o.status.success(),
            "{name}: {}\n{}",
            String::from_utf8_lossy(&o.stderr),
            cluster.log_tail(10)
        );
        let mine: Vec<_> = ours(&out).into_iter().map(|(c, _)| c).collect();
        assert_same(&mine, &theirs);
        eprintln!("{name}: {} changes equal test_decoding's", mine.len());
    }
}

#[test]
fn bad_certificates_and_unbound_logins_are_refused_with_one_line() {
    let (cluster, pki) = tls_cluster();
    cluster
        .psql(
            "CREATE TABLE t (id int); CREATE PUBLICATION p FOR TABLE t;
             SELECT pg_create_logical_replication_slot('s', 'pgoutput');",
        )
        .expect("schema");
    let stop = cluster.current_wal_lsn().expect("lsn");
    let home = pki.dir.path();
    let out = pki.path("never.jsonl");
    let (ca, other) = (pki.s("ca.crt"), pki.s("other-ca.crt"));
    let socket = cluster.socket_dir().to_string_lossy().into_owned();
    let cases = [
        // The server's own refusal of a connection without TLS.
        (
            "127.0.0.1",
            "repl",
            "sslmode=disable".to_owned(),
            "no encryption",
        ),
        (
            "127.0.0.1",
            "repl",
            format!("sslmode=verify-ca sslrootcert={other}"),
            "server certificate for 127.0.0.1 does not verify against",
        ),
        (
            "localhost",
            "repl",
            format!("sslmode=verify-full sslrootcert={other}"),
            "server certificate for localhost does not verify against",
        ),
        (
            "127.0.0.1",
            "repl",
            format!("sslmode=require sslrootcert={other}"),
            "does not verify against",
        ),
        (
            "127.0.0.2",
            "repl",
            format!("sslmode=verify-full sslrootcert={ca}"),
            "not valid for host name 127.0.0.2",
        ),
        (
            "127.0.0.1",
            "repl",
            format!("sslmode=verify-full sslrootcert={}", pki.s("missing.crt")),
            "does not exist",
        ),
        // prefer falls back to no TLS after the failed handshake, which the server refuses:
        // both reasons in one line.
        (
            "127.0.0.1",
            "repl",
            format!("sslmode=prefer sslrootcert={other}"),
            "no encryption",
        ),
        (
            "127.0.0.1",
            "md5u",
            "sslmode=require channel_binding=require".to_owned(),
            "channel_binding=require, but the server asks for an md5 password",
        ),
        // Unix sockets never use TLS.
        (
            socket.as_str(),
            "repl",
            "sslmode=require channel_binding=require".to_owned(),
            "channel_binding=require, but the connection does not use TLS",
        ),
        (
            socket.as_str(),
            "postgres",
            "channel_binding=require".to_owned(),
            "without channel binding",
        ),
        // The server asks for a client certificate where pg_hba.conf says cert.
        (
            "127.0.0.1",
            "certu",
            format!("sslmode=verify-full sslrootcert={ca}"),
            "certificate",
        ),
        (
            "127.0.0.1",
            "certu",
            format!(
                "sslmode=verify-full sslrootcert={ca} sslcert={} sslkey={}",
                pki.s("client.crt"),
                pki.s("open.key")
            ),
            "has group or world access",
        ),
    ];
    for (host, user, tls, want) in &cases {
        let info = conninfo(&cluster, host, user, tls);
        let err = refused(&recv(home, &info, "s", &out, &stop));
        assert!(err.contains(want), "{tls}: want {want:?} in: {err}");
        eprintln!("{tls}: {}", err.trim_end());
    }
    // The same settings from the environment.
    let o = pgcompress()
        .env("HOME", home)
        .env("PGSSLMODE", "verify-ca")
        .env("PGSSLROOTCERT", &other)
        .args(["logical", "recv", "--slot", "s", "--publication", "p", "-o"])
        .arg(&out)
        .arg("--dbname")
        .arg(conninfo(&cluster, "127.0.0.1", "repl", ""))
        .output()
        .expect("run pgcompress");
    let err = refused(&o);
    assert!(err.contains("does not verify against"), "{err}");
    assert!(!out.exists(), "a refused run wrote output");
}

/// The connection itself: TLS and channel binding as each setting says.
#[test]
fn channel_binding_and_client_certificates() {
    let (cluster, pki) = tls_cluster();
    let env = Env {
        home: Some(pki.s("home")),
        ..Env::default()
    };
    let ca = pki.s("ca.crt");
    let connect = |host: &str, user: &str, tls: &str| {
        let config = ConnConfig::parse(&conninfo(&cluster, host, user, tls), &env)
            .unwrap_or_else(|e| panic!("{tls}: {e}"));
        Connection::connect(&config)
    };
    for (tls, bound) in [
        ("sslmode=require channel_binding=require".to_owned(), true),
        ("sslmode=prefer".to_owned(), true),
        ("sslmode=allow".to_owned(), true),
        (format!("sslmode=verify-full sslrootcert={ca}"), true),
        ("sslmode=require channel_binding=disable".to_owned(), false),
    ] {
        let mut conn = connect("localhost", "repl", &tls).unwrap_or_else(|e| panic!("{tls}: {e}"));
        assert!(conn.is_tls(), "{tls}");
        assert_eq!(conn.is_channel_bound(), bound, "{tls}");
        let cert = conn.server_certificate().expect("TLS");
        let hash = logical::conn::tls::tls_server_end_point(cert).expect("hash");
        assert_eq!(hash.len(), 48, "the P-384 CA signs with SHA-384");
        let sys = conn.identify_system().expect("IDENTIFY_SYSTEM");
        assert_eq!(sys.dbname.as_deref(), Some("postgres"));
        // The server's view of this session.
        let ssl = conn
            .simple_query("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
            .expect("pg_stat_ssl");
        assert_eq!(ssl, vec![vec![Some("t".to_owned())]], "{tls}");
    }
    // A client certificate whose CN is the role, where pg_hba.conf says cert.
    let mut conn = connect(
        "127.0.0.1",
        "certu",
        &format!(
            "sslmode=verify-full sslrootcert={ca} sslcert={} sslkey={}",
            pki.s("client.crt"),
            pki.s("client.key")
        ),
    )
    .expect("client certificate login");
    let cn = conn
        .simple_query("SELECT client_dn FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        .expect("pg_stat_ssl");
    assert_eq!(cn, vec![vec![Some("/CN=certu".to_owned())]]);
    // The same from libpq's default place, ~/.postgresql/postgresql.crt and .key.
    let dot = pki.path("home/.postgresql");
    std::fs::create_dir_all(&dot).expect("mkdir");
    std::fs::copy(pki.path("client.crt"), dot.join("postgresql.crt")).expect("copy");
    write(
        &dot.join("postgresql.key"),
        &std::fs::read_to_string(pki.path("client.key")).expect("key"),
        0o600,
    );
    connect("127.0.0.1", "certu", "sslmode=require").expect("default client certificate");
    // And the root certificate from ~/.postgresql/root.crt, which also makes require check
    // the chain.
    std::fs::copy(pki.path("ca.crt"), dot.join("root.crt")).expect("copy");
    connect("localhost", "repl", "sslmode=verify-full").expect("default root certificate");
    std::fs::copy(pki.path("other-ca.crt"), dot.join("root.crt")).expect("copy");
    let e = connect("127.0.0.1", "repl", "sslmode=require")
        .err()
        .expect("require with an unrelated root.crt");
    assert!(e.to_string().contains("does not verify against"), "{e}");
    std::fs::remove_file(dot.join("root.crt")).expect("rm");

    // The binding hash follows the server certificate's signature: SHA-384 so far; now
    // certificates signed with ECDSA SHA-256, RSA SHA-256 and RSA SHA-1 (bound with SHA-256),
    // each checked by the server itself.
    let data = cluster.data_dir();
    let key = KeyPair::generate().expect("key");
    let p256 = CertificateParams::new(vec!["localhost".to_owned()])
        .expect("params")
        .self_signed(&key)
        .expect("P-256 certificate");
    let mut swaps = vec![("ecdsa-sha256", p256.pem(), key.serialize_pem(), 32)];
    for digest in ["sha256", "sha1"] {
        let (crt, key) = (pki.path("rsa.crt"), pki.path("rsa.key"));
        let o = std::process::Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-subj",
                "/CN=localhost",
            ])
            .args(["-days", "2", &format!("-{digest}"), "-keyout"])
            .arg(&key)
            .arg("-out")
            .arg(&crt)
            .output()
            .expect("openssl (scripts/setup.sh installs it)");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        swaps.push((
            if digest == "sha1" {
                "rsa-sha1"
            } else {
                "rsa-sha256"
            },
            std::fs::read_to_string(&crt).expect("crt"),
            std::fs::read_to_string(&key).expect("key"),
            32,
        ));
    }
    for (what, crt, key, hash_len) in swaps {
        write(&data.join("server.crt"), &crt, 0o644);
        write(&data.join("server.key"), &key, 0o600);
        // Any reload will do: the postmaster reads the certificate files again.
        cluster.set_guc_and_reload("ssl", "on").expect("reload");
        let conn = connect(
            "localhost",
            "repl",
            "sslmode=require channel_binding=require",
        )
        .unwrap_or_else(|e| panic!("{what}: {e}\n{}", cluster.log_tail(5)));
        let der = conn.server_certificate().expect("TLS").to_vec();
        let file_der = std::process::Command::new("openssl")
            .args(["x509", "-outform", "DER"])
            .stdin(std::fs::File::open(data.join("server.crt")).expect("crt"))
            .output()
            .expect("openssl x509")
            .stdout;
        assert_eq!(
            der, file_der,
            "{what}: the server shows the new certificate"
        );
        assert!(conn.is_channel_bound(), "{what}");
        assert_eq!(
            logical::conn::tls::tls_server_end_point(&der)
                .expect("hash")
                .len(),
            hash_len,
            "{what}"
        );
        eprintln!("{what}: bound with a {hash_len}-byte tls-server-end-point hash");
    }

    // Read timeouts of a millisecond while a large transaction streams over TLS: a timeout
    // that cuts a TLS record leaves it whole for the next read, so every change arrives.
    cluster
        .psql(
            "CREATE TABLE big (id int PRIMARY KEY, v text); CREATE PUBLICATION p FOR TABLE big;
             SELECT pg_create_logical_replication_slot('s_big', 'pgoutput');
             INSERT INTO big SELECT g, repeat(md5(g::text), 8) FROM generate_series(1, 20000) g;",
        )
        .expect("big transaction");
    let mut conn = connect("localhost", "repl", "sslmode=require").expect("connect");
    conn.start_replication(&StartOptions {
        slot: "s_big".into(),
        start: Lsn::INVALID,
        proto_version: 3,
        publications: vec!["p".into()],
        streaming: false,
        messages: false,
    })
    .expect("START_REPLICATION");
    let mut dec = Decoder::new(Options {
        proto_version: 3,
        streaming: Streaming::Off,
    })
    .expect("decoder");
    let (mut inserts, mut timeouts) = (0, 0u64);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let event = conn
            .recv_copy(std::time::Duration::from_millis(1))
            .expect("recv over TLS");
        let Some(CopyEvent::Data(d)) = event else {
            timeouts += 1;
            assert!(
                std::time::Instant::now() < deadline,
                "no commit after {inserts} inserts"
            );
            continue;
        };
        if let CopyMessage::XLogData(x) = CopyMessage::decode(&d).expect("copy message") {
            match dec.decode(x.payload).expect("pgoutput") {
                Message::Insert(_) => inserts += 1,
                Message::Commit(_) => break,
                _ => {}
            }
        }
    }
    assert_eq!(inserts, 20_000);
    eprintln!("20000 inserts over TLS through {timeouts} read timeouts of 1 ms");
}

/// `hostaddr` is where to connect and `host` the name the certificate must carry, as in libpq:
/// the server's certificate names localhost and 127.0.0.1, not 127.0.0.2.
#[test]
fn hostaddr_is_where_verify_full_connects_and_host_what_it_checks() {
    let (cluster, pki) = tls_cluster();
    let env = Env {
        home: Some(pki.s("home")),
        ..Env::default()
    };
    let ca = pki.s("ca.crt");
    let connect = |hosts: &str| {
        let config = ConnConfig::parse(
            &conninfo(
                &cluster,
                "",
                "repl",
                &format!("{hosts} sslmode=verify-full sslrootcert={ca}"),
            )
            .replacen("host= ", "", 1),
            &env,
        )
        .unwrap_or_else(|e| panic!("{hosts}: {e}"));
        Connection::connect(&config)
    };
    // The name verifies though the address would not.
    let mut conn = connect("host=localhost hostaddr=127.0.0.2").expect("by name, at .2");
    let addr = conn
        .simple_query("SELECT inet_server_addr()")
        .expect("server address");
    assert_eq!(addr, vec![vec![Some("127.0.0.2".to_owned())]]);
    // The address would verify, the name does not.
    let e = connect("host=not-the-server.invalid hostaddr=127.0.0.1")
        .err()
        .expect("a name the certificate does not carry");
    assert!(e.to_string().contains("not-the-server.invalid"), "{e}");
    // No name at all: nothing to check the certificate against.
    let e = connect("hostaddr=127.0.0.1")
        .err()
        .expect("verify-full without host");
    assert!(e.to_string().contains("host="), "{e}");
}

/// psql (libpq) on `conninfo`, HOME in `home`: what it printed, or its error.
fn libpq(cluster: &Cluster, home: &Path, conninfo: &str) -> Result<String, String> {
    let mut cmd = std::process::Command::new(cluster.install().bin("psql"));
    cmd.env("HOME", home)
        .env_remove("PGSSLMODE")
        .env_remove("PGSSLROOTCERT")
        .args(["-X", "-At", "-d", conninfo, "-c"])
        .arg("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()");
    match pgtest::run::run_as_current_user(&mut cmd, None, std::time::Duration::from_secs(60)) {
        Ok(o) => Ok(String::from_utf8_lossy(&o.stdout).into_owned()),
        Err(pgtest::Error::Command { stderr, .. }) => Err(stderr),
        Err(e) => panic!("psql: {e}"),
    }
}

/// Puts a certificate and key in the server's data directory and has it read them.
fn serve_certificate(cluster: &Cluster, crt: &str, key: &str) {
    let data = cluster.data_dir();
    write(&data.join("server.crt"), crt, 0o644);
    write(&data.join("server.key"), key, 0o600);
    // Any reload will do: the postmaster reads the certificate files again.
    cluster.set_guc_and_reload("ssl", "on").expect("reload");
}

/// The server set up exactly as PostgreSQL's documentation shows ("Creating Certificates"):
/// one self-signed certificate made by `openssl req -x509` (a CA certificate, for the name
/// dbhost.yourdomain.com in its CN and nowhere else), which the client is given as its root.
/// psql connects with every mode that verifies, and so does `logical recv`, receiving what
/// test_decoding sees; both refuse a host name the certificate does not carry, a root that is
/// not the server's, and the same certificate once it has expired.
#[test]
fn a_self_signed_server_certificate_given_as_root_is_trusted_as_libpq_trusts_it() {
    let (cluster, pki) = tls_cluster();
    let o = std::process::Command::new("openssl")
        .current_dir(pki.dir.path())
        .args(["req", "-new", "-x509", "-days", "365", "-nodes", "-text"])
        .args(["-out", "server.crt", "-keyout", "server.key"])
        .args(["-subj", "/CN=dbhost.yourdomain.com"])
        .output()
        .expect("openssl (scripts/setup.sh installs it)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let read = |name: &str| std::fs::read_to_string(pki.path(name)).expect("read");
    serve_certificate(&cluster, &read("server.crt"), &read("server.key"));

    let mut sql = String::from(
        "CREATE TABLE t (id int PRIMARY KEY, v text);
         CREATE PUBLICATION p FOR TABLE t;
         SELECT pg_create_logical_replication_slot('td', 'test_decoding');",
    );
    let port = cluster.tcp_port().expect("tcp port");
    let root = pki.s("server.crt");
    let info = |hosts: &str, tls: &str| {
        format!("{hosts} port={port} user=repl dbname=postgres password='{PASSWORD}' {tls}")
    };
    let by_name = "host=dbhost.yourdomain.com hostaddr=127.0.0.1";
    let modes = [
        (
            "verify_full",
            by_name,
            format!("sslmode=verify-full sslrootcert={root}"),
        ),
        (
            "verify_ca",
            "host=127.0.0.1",
            format!("sslmode=verify-ca sslrootcert={root}"),
        ),
        (
            "require_root",
            "host=127.0.0.1",
            format!("sslmode=require sslrootcert={root}"),
        ),
    ];
    for (name, _, _) in &modes {
        sql.push_str(&format!(
            "SELECT pg_create_logical_replication_slot('s_{name}', 'pgoutput');"
        ));
    }
    cluster.psql(&sql).expect("schema");
    cluster
        .psql(
            "INSERT INTO t SELECT g, 'row ' || g FROM generate_series(1, 200) g;
             UPDATE t SET v = 'even' WHERE id % 2 = 0;
             DELETE FROM t WHERE id > 150;",
        )
        .expect("workload");
    let stop = cluster.current_wal_lsn().expect("lsn");
    let theirs = test_decoding(&cluster, "td");
    assert_eq!(theirs.len(), 200 + 100 + 50, "test_decoding changes");
    let home = pki.dir.path();
    for (name, hosts, tls) in &modes {
        let conninfo = info(hosts, tls);
        assert_eq!(libpq(&cluster, home, &conninfo), Ok("t\n".into()), "{name}");
        let out = pki.path(&format!("{name}.jsonl"));
        let o = recv(home, &conninfo, &format!("s_{name}"), &out, &stop);
        assert!(
            o.status.success(),
            "{name}: psql connects, logical recv: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let mine: Vec<_> = ours(&out).into_iter().map(|(c, _)| c).collect();
        assert_same(&mine, &theirs);
        eprintln!(
            "{name}: psql connects; {} changes equal test_decoding's",
            mine.len()
        );
    }

    // What libpq refuses, refused too: another name, another root, and (below) an expired
    // certificate.
    let out = pki.path("never.jsonl");
    let refusals = [
        (
            "host=localhost hostaddr=127.0.0.1",
            format!("sslmode=verify-full sslrootcert={root}"),
            "not valid for host name localhost",
        ),
        (
            by_name,
            format!("sslmode=verify-full sslrootcert={}", pki.s("other-ca.crt")),
            "neither signed by a certificate there nor",
        ),
    ];
    for (hosts, tls, want) in &refusals {
        let conninfo = info(hosts, tls);
        let theirs = libpq(&cluster, home, &conninfo).expect_err("psql connected");
        let err = refused(&recv(home, &conninfo, "s_verify_ca", &out, &stop));
        assert!(err.contains(want), "{hosts} {tls}: want {want:?} in: {err}");
        eprintln!("{hosts} {tls}: psql: {theirs}; ours: {}", err.trim_end());
    }
    let key = KeyPair::generate().expect("key");
    let mut p = CertificateParams::new(Vec::new()).expect("params");
    p.distinguished_name
        .push(DnType::CommonName, "dbhost.yourdomain.com");
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.not_before = rcgen::date_time_ymd(2020, 1, 1);
    p.not_after = rcgen::date_time_ymd(2021, 1, 1);
    let expired = p.self_signed(&key).expect("expired certificate");
    write(&pki.path("expired.crt"), &expired.pem(), 0o644);
    serve_certificate(&cluster, &expired.pem(), &key.serialize_pem());
    for (hosts, mode) in [(by_name, "verify-full"), ("host=127.0.0.1", "verify-ca")] {
        let conninfo = info(
            hosts,
            &format!("sslmode={mode} sslrootcert={}", pki.s("expired.crt")),
        );
        // libpq says only "certificate verify failed".
        let theirs = libpq(&cluster, home, &conninfo).expect_err("psql connected");
        let err = refused(&recv(home, &conninfo, "s_verify_ca", &out, &stop));
        assert!(
            err.contains("outside its validity dates (certificate expired"),
            "{mode}: {err}"
        );
        eprintln!(
            "{mode}, expired: psql: {}; ours: {}",
            theirs.trim_end(),
            err.trim_end()
        );
    }
    assert!(!out.exists(), "a refused run wrote output");
}
