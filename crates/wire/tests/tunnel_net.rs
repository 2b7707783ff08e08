//! The tunnel halves end to end against a real PostgreSQL: psql results through the tunnel
//! equal the direct ones, refused peers never reach PostgreSQL, authentication is never
//! compressed, bad link bytes close only their connection, and a shutdown drains.
#![cfg(feature = "net")]

mod common;
mod net_support;

use net_support::{psql, socket_upstream, Tunnel};
use pgtest::Cluster;
use wire::net::Endpoint;

/// A script with results big enough to be compressed, a COPY both ways and an error-free end.
const SCRIPT: &str = "\
CREATE TABLE t (id int PRIMARY KEY, name text, at timestamptz, amount numeric);
INSERT INTO t SELECT i, 'customer ' || (i % 97) || ' of region ' || (i % 13), \
  timestamptz '2024-01-01 00:00:00+00' + i * interval '17 minutes', (i * 7 % 1000) / 3.0 \
  FROM generate_series(1, 20000) i;
SELECT count(*), sum(amount), md5(string_agg(name, ',' ORDER BY id)) FROM t;
SELECT id, name, at, amount FROM t WHERE id % 50 = 0 ORDER BY id;
COPY (SELECT * FROM t ORDER BY id) TO STDOUT;
SELECT 'end of script';
DROP TABLE t;
";

fn smoke(method: &str) {
    let cluster = Cluster::start().expect("cluster");
    let direct = psql(&cluster, None, SCRIPT, None);
    let upstream = Endpoint::parse(
        cluster.socket_dir().to_str().expect("utf-8 path"),
        cluster.port(),
    )
    .expect("endpoint");
    let tunnel = Tunnel::start(upstream, method);
    let through = psql(&cluster, Some(&tunnel.client_port()), SCRIPT, None);
    let reports = [tunnel.server_reports.clone(), tunnel.client_reports.clone()];
    let (client, server) = tunnel.stop();
    let ended: Vec<_> = reports
        .iter()
        .flat_map(|r| net_support::connections(r))
        .collect();
    assert_eq!(ended.len(), 2);
    assert!(
        ended.iter().all(|c| c.error.is_none()),
        "a clean session ends without errors: {ended:?}"
    );
    assert!(direct.contains("end of script"));
    assert_eq!(through, direct, "psql output through the tunnel ({method})");
    let b2f = server.backend_to_frontend;
    eprintln!(
        "{method}: server b2f {b2f:?}, client f2b {:?}",
        client.frontend_to_backend
    );
    assert!(b2f.chunks > 0, "results were compressed");
    assert!(
        b2f.link_bytes * 2 < b2f.raw_bytes,
        "the link carried {} bytes for {} raw",
        b2f.link_bytes,
        b2f.raw_bytes
    );
    assert_eq!(client.connections_total, 1);
    assert_eq!(server.connections_total, 1);
    assert_eq!(client.backend_to_frontend.raw_bytes, b2f.raw_bytes);
    assert_eq!(
        client.frontend_to_backend.raw_bytes,
        server.frontend_to_backend.raw_bytes
    );
    assert_eq!(
        client.frontend_to_backend.link_bytes,
        server.frontend_to_backend.link_bytes
    );
}

#[test]
fn psql_through_the_tunnel_zstd() {
    smoke("zstd:1");
}

#[test]
fn psql_through_the_tunnel_lz4() {
    smoke("lz4");
}

use std::sync::Arc;
use std::time::Duration;

use net_support::{connections_in_log, raw_client_config};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use wire::link::frame::{parse_header, CHUNK, READY, VERBATIM};
use wire::link::{parse_spec, Hello, Reply};
use wire::net::Report;
use wire::Direction;

/// `psql -X -At -c sql` to `host` and `port` (the tunnel's client half), not yet run.
fn psql_command(cluster: &Cluster, host: &str, port: &str, sql: &str) -> std::process::Command {
    let mut cmd = cluster.command("psql");
    cmd.args(["-X", "-At", "-h", host, "-p", port, "-c", sql]);
    cmd
}

/// Reads until the peer closes or fails; returns the bytes that arrived.
async fn read_to_close<R: tokio::io::AsyncRead + Unpin>(r: &mut R) -> Vec<u8> {
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(Duration::from_secs(15), r.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return all,
            Ok(Ok(n)) => all.extend_from_slice(&buf[..n]),
            Err(_) => panic!("the server half kept the connection open"),
        }
    }
}

/// Connects with TLS (`config`), sends a link Hello and a StartupMessage; true if an Accept
/// came back and then the session reached ReadyForQuery (the Ready frame).
async fn try_link(addr: &str, config: Arc<rustls::ClientConfig>) -> bool {
    let tcp = TcpStream::connect(addr).await.expect("tcp");
    let connector = tokio_rustls::TlsConnector::from(config);
    let name = rustls_pki_types::ServerName::try_from("localhost").expect("name");
    let Ok(mut tls) = connector.connect(name, tcp).await else {
        return false;
    };
    let mut out = Vec::new();
    let zstd = parse_spec("zstd:1").expect("spec");
    Hello::new(zstd, zstd).encode(&mut out).expect("hello");
    let startup = common::startup(0, &[("user", "postgres"), ("database", "postgres")]);
    out.extend_from_slice(&frame(VERBATIM, &startup));
    // With TLS 1.3 the client finishes its handshake first; the refusal shows on write or read.
    if tls.write_all(&out).await.is_err() || tls.flush().await.is_err() {
        return false;
    }
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Ok(Some((Reply::Accept(_), used))) = Reply::decode(&got) {
            let mut rest = &got[used..];
            while let Ok(Some(h)) = parse_header(Direction::BackendToFrontend, 0, rest) {
                if h.frame_type == READY {
                    return true;
                }
                match rest.get(h.frame_len()..) {
                    Some(r) => rest = r,
                    None => break,
                }
            }
        }
        match tokio::time::timeout(Duration::from_secs(15), tls.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return false,
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Err(_) => panic!("the server half kept the connection open"),
        }
    }
}

#[test]
fn peers_without_valid_credentials_never_reach_postgresql() {
    let cluster = Cluster::builder()
        .guc("log_connections", "on")
        .start()
        .expect("cluster");
    let tunnel = Tunnel::start(socket_upstream(&cluster), "zstd:1");
    let other = tempfile::tempdir().expect("tempdir");
    let other_keys = net_support::keys(other.path());
    let before = connections_in_log(&cluster);
    let ca = tunnel.keys.join("ca.pem");
    let addr = tunnel.server_addr.clone();
    tunnel.runtime.block_on(async {
        // Plain TCP speaking PostgreSQL.
        let mut tcp = TcpStream::connect(&addr).await.expect("tcp");
        let startup = common::startup(0, &[("user", "postgres"), ("database", "postgres")]);
        let _ = tcp.write_all(&startup).await;
        let answer = read_to_close(&mut tcp).await;
        assert_ne!(
            answer.first(),
            Some(&b'R'),
            "plain TCP got an authentication request: {answer:?}"
        );
        // TLS without a client certificate.
        assert!(!try_link(&addr, raw_client_config(&ca, None)).await);
        // A client certificate from another CA.
        let foreign = raw_client_config(
            &ca,
            Some((
                &other_keys.join("client.pem"),
                &other_keys.join("client-key.pem"),
            )),
        );
        assert!(!try_link(&addr, foreign).await);
        // The test's own credentials work, so the three refusals above are the checks'.
        let good = raw_client_config(
            &ca,
            Some((
                &tunnel.keys.join("client.pem"),
                &tunnel.keys.join("client-key.pem"),
            )),
        );
        assert!(
            try_link(&addr, good).await,
            "a valid client certificate is accepted"
        );
    });
    let refused: Vec<String> = tunnel
        .server_reports
        .lock()
        .expect("lock")
        .iter()
        .filter_map(|r| match r {
            Report::Refused { reason, .. } => Some(reason.clone()),
            _ => None,
        })
        .collect();
    let after = connections_in_log(&cluster);
    let (_, server) = tunnel.stop();
    eprintln!("refusals: {refused:#?}");
    assert_eq!(server.refused_peers, 3, "{refused:?}");
    assert_eq!(server.connections_total, 1);
    assert_eq!(
        after,
        before + 1,
        "only the connection with a valid certificate reached PostgreSQL"
    );
}

#[test]
fn authentication_is_never_compressed() {
    let cluster = Cluster::builder()
        .listen_tcp(true)
        .guc("password_encryption", "scram-sha-256")
        .start()
        .expect("cluster");
    cluster
        .psql("ALTER USER postgres PASSWORD 'tunnel-secret'")
        .expect("password");
    let hba = cluster.data_dir().join("pg_hba.conf");
    let old = std::fs::read_to_string(&hba).expect("pg_hba.conf");
    std::fs::write(
        &hba,
        format!("host all all 127.0.0.1/32 scram-sha-256\n{old}"),
    )
    .expect("pg_hba.conf");
    cluster
        .query_one("SELECT pg_reload_conf()")
        .expect("reload");
    std::thread::sleep(Duration::from_millis(500));
    let upstream = Endpoint::Tcp(format!("127.0.0.1:{}", cluster.port()));
    let tunnel = Tunnel::start(upstream, "zstd:1");
    let port = tunnel.client_port();
    let sql = "SELECT 'a query long enough to be compressed on the way to the server', \
               string_agg(md5(i::text), ' ') FROM generate_series(1, 3000) i;\n";
    let out = psql(&cluster, Some(&port), sql, Some("tunnel-secret"));
    assert!(out.starts_with("a query long enough"));
    // Without the password the same connection is refused by PostgreSQL: SCRAM really ran.
    let mut cmd = cluster.command("psql");
    cmd.args(["-X", "-w", "-h", "127.0.0.1", "-p", &port, "-c", "SELECT 1"]);
    assert!(pgtest::run::run_with(&mut cmd, None, Duration::from_secs(30)).is_err());
    let frames = tunnel.frames.lock().expect("lock").clone();
    tunnel.stop();
    let before: Vec<_> = frames.iter().filter(|f| f.before_ready).collect();
    assert!(
        before
            .iter()
            .all(|f| f.frame_type == VERBATIM || f.frame_type == READY),
        "a frame before the session was ready is not verbatim: {before:?}"
    );
    // Startup, SASLInitialResponse and SASLResponse of the successful session at least.
    let f2b_auth = before
        .iter()
        .filter(|f| f.direction == Direction::FrontendToBackend)
        .count();
    assert!(f2b_auth >= 3, "{before:?}");
    for d in [Direction::FrontendToBackend, Direction::BackendToFrontend] {
        assert!(
            frames
                .iter()
                .any(|f| f.direction == d && !f.before_ready && f.frame_type == CHUNK),
            "{d}: nothing was compressed after authentication, so the check above proves little"
        );
    }
}

/// Reads link frames until the Ready frame; returns what followed it.
async fn until_ready<R: tokio::io::AsyncRead + Unpin>(r: &mut R) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        while let Ok(Some(h)) = parse_header(Direction::BackendToFrontend, 0, &buf) {
            if buf.len() < h.frame_len() {
                break;
            }
            let ty = h.frame_type;
            buf.drain(..h.frame_len());
            if ty == READY {
                return buf;
            }
        }
        let n = r.read(&mut chunk).await.expect("read");
        assert!(n > 0, "the link closed before the session was ready");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// A valid link connection (client certificate, Hello, Accept) to the server half.
async fn valid_link(
    tunnel_keys: &std::path::Path,
    addr: &str,
) -> tokio_rustls::client::TlsStream<TcpStream> {
    let config = raw_client_config(
        &tunnel_keys.join("ca.pem"),
        Some((
            &tunnel_keys.join("client.pem"),
            &tunnel_keys.join("client-key.pem"),
        )),
    );
    let tcp = TcpStream::connect(addr).await.expect("tcp");
    let name = rustls_pki_types::ServerName::try_from("localhost").expect("name");
    let mut tls = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .expect("tls");
    let zstd = parse_spec("zstd:1").expect("spec");
    let mut out = Vec::new();
    Hello::new(zstd, zstd).encode(&mut out).expect("hello");
    tls.write_all(&out).await.expect("hello");
    let mut buf = vec![0u8; 1024];
    let n = tls.read(&mut buf).await.expect("accept");
    assert!(matches!(
        Reply::decode(&buf[..n]),
        Ok(Some((Reply::Accept(_), _)))
    ));
    tls
}

fn frame(ty: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![ty];
    f.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    f.extend_from_slice(payload);
    f
}

#[test]
fn bomb_and_garbage_close_only_their_connection() {
    let cluster = Cluster::start().expect("cluster");
    let tunnel = Tunnel::start(socket_upstream(&cluster), "zstd:1");
    let sql = "SELECT pg_sleep(3);\nSELECT count(*), md5(string_agg(i::text, ',')) FROM generate_series(1, 50000) i;\n";
    let direct = psql(&cluster, None, sql, None);
    let port = tunnel.client_port();
    let normal = std::thread::scope(|s| {
        let normal = s.spawn(|| psql(&cluster, Some(&port), sql, None));
        std::thread::sleep(Duration::from_millis(500));
        tunnel.runtime.block_on(async {
            // Random bytes right after a valid handshake.
            let mut tls = valid_link(&tunnel.keys, &tunnel.server_addr).await;
            let mut x: u32 = 0x9e37_79b9;
            let mut junk: Vec<u8> = (0..4096)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect();
            junk[0] = 0xa7; // not a frame type, whatever the generator says
            let _ = tls.write_all(&junk).await;
            read_to_close(&mut tls).await;

            // A chunk that claims 1000 bytes and inflates to a megabyte, once the session
            // is ready (before that any chunk is refused anyway).
            let mut tls = valid_link(&tunnel.keys, &tunnel.server_addr).await;
            let startup = common::startup(0, &[("user", "postgres"), ("database", "postgres")]);
            tls.write_all(&frame(VERBATIM, &startup))
                .await
                .expect("startup");
            until_ready(&mut tls).await;
            let bomb = zstd::encode_all(&vec![0u8; 1 << 20][..], 19).expect("zstd");
            let mut payload = 1000u32.to_be_bytes().to_vec();
            payload.extend_from_slice(&bomb);
            let _ = tls.write_all(&frame(CHUNK, &payload)).await;
            read_to_close(&mut tls).await;
        });
        normal.join().expect("psql thread")
    });
    assert_eq!(normal, direct, "the normal connection carried on");
    let conns = tunnel.server_connections();
    let (_, server) = tunnel.stop();
    let errors: Vec<_> = conns.iter().filter_map(|c| c.error.clone()).collect();
    eprintln!("errors: {errors:#?}");
    assert_eq!(server.decompression_errors, 2, "{errors:?}");
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors.iter().any(|e| e.contains("unknown frame type")),
        "{errors:?}"
    );
    assert!(
        errors.iter().any(|e| e.contains("link chunk")),
        "{errors:?}"
    );
    assert_eq!(server.connections_total, 3);
}

#[test]
fn shutdown_lets_a_running_query_finish() {
    let cluster = Cluster::start().expect("cluster");
    let tunnel = Tunnel::start(socket_upstream(&cluster), "lz4");
    let port = tunnel.client_port();
    let out = std::thread::scope(|s| {
        let q = s.spawn(|| {
            psql(
                &cluster,
                Some(&port),
                "SELECT pg_sleep(3), 'drained';\n",
                None,
            )
        });
        tunnel.wait_open(1);
        let (client, server) = tunnel.stop();
        assert_eq!(client.connections_total, 1);
        assert_eq!(client.connections_open, 0);
        assert_eq!(server.connections_open, 0);
        q.join().expect("psql thread")
    });
    assert_eq!(out.trim(), "|drained");
}

#[test]
fn application_tls_and_an_unreachable_server_half() {
    let cluster = Cluster::start().expect("cluster");
    let mut tunnel = Tunnel::start_with(
        socket_upstream(&cluster),
        "zstd:1",
        true,
        Endpoint::Tcp("127.0.0.1:0".into()),
    );
    let port = tunnel.client_port();
    let mut cmd = psql_command(&cluster, "127.0.0.1", &port, "SELECT 'over tls'");
    cmd.env("PGSSLMODE", "require");
    let out = pgtest::run::run_with(&mut cmd, None, Duration::from_secs(30)).expect("psql");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "over tls");
    // Without the server half the application gets a FATAL error that says why.
    tunnel.stop_server();
    let tunnel_reports = tunnel.client_reports.clone();
    let mut cmd = psql_command(&cluster, "127.0.0.1", &port, "SELECT 1");
    let err =
        pgtest::run::run_with(&mut cmd, None, Duration::from_secs(30)).expect_err("no server half");
    assert!(err.to_string().contains("pgcompress tunnel"), "{err}");
    let (client, _) = tunnel.stop();
    // libpq may retry (without TLS, or once more): every attempt after the first failed.
    assert!(client.connections_total >= 2);
    let failed = net_support::connections(&tunnel_reports)
        .iter()
        .filter(|c| c.error.is_some())
        .count() as u64;
    assert_eq!(failed, client.connections_total - 1);
}

#[test]
fn cancel_request_is_carried_to_postgresql() {
    let cluster = Cluster::start().expect("cluster");
    let tunnel = Tunnel::start(socket_upstream(&cluster), "zstd:1");
    let port = tunnel.client_port();
    let mut cmd = psql_command(&cluster, "127.0.0.1", &port, "SELECT pg_sleep(30)");
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    pgtest::run::as_server_user(&mut cmd).expect("server user");
    let child = cmd.spawn().expect("psql");
    cluster
        .wait_until("pg_sleep to run", Duration::from_secs(20), || {
            Ok(cluster.query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(30)' \
                 AND state = 'active'",
            )? == "1")
        })
        .expect("the query runs");
    // psql's SIGINT handler sends a CancelRequest to the host and port it connected to.
    let sent = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(sent.success());
    let out = child.wait_with_output().expect("psql");
    // PostgreSQL's own message is the evidence that the CancelRequest reached it (the query
    // did not run out its 30 s), whatever the machine's speed.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("canceling statement due to user request"),
        "{stderr}"
    );
    assert!(!out.status.success());
    let (client, server) = tunnel.stop();
    // The session and the cancel, each on its own link connection.
    assert_eq!(client.connections_total, 2);
    assert_eq!(server.connections_total, 2);
}

#[test]
fn applications_connect_on_a_unix_socket() {
    let cluster = Cluster::start().expect("cluster");
    let dir = tempfile::tempdir().expect("tempdir");
    pgtest::run::chown_to_server_user(dir.path()).expect("chown");
    let sockdir = dir.path().to_str().expect("utf-8");
    let listen = Endpoint::parse(sockdir, 6543).expect("endpoint");
    let tunnel = Tunnel::start_with(socket_upstream(&cluster), "lz4", false, listen);
    assert_eq!(
        tunnel.client_addr,
        dir.path().join(".s.PGSQL.6543").display().to_string()
    );
    // A probe that connects and leaves is no error.
    drop(std::os::unix::net::UnixStream::connect(&tunnel.client_addr).expect("probe"));
    let mut cmd = psql_command(&cluster, sockdir, "6543", "SELECT 'via the socket'");
    let out = pgtest::run::run_with(&mut cmd, None, Duration::from_secs(30)).expect("psql");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "via the socket"
    );
    let reports = tunnel.client_reports.clone();
    let (client, _) = tunnel.stop();
    assert_eq!(client.connections_total, 2);
    let ended = net_support::connections(&reports);
    assert!(ended.iter().all(|c| c.error.is_none()), "{ended:?}");
    assert!(
        !dir.path().join(".s.PGSQL.6543").exists(),
        "the socket file is removed at exit"
    );
}

#[test]
fn a_second_signal_ends_the_drain_at_once() {
    let cluster = Cluster::start().expect("cluster");
    let tunnel = Tunnel::start(socket_upstream(&cluster), "zstd:1");
    let port = tunnel.client_port();
    let result = std::thread::scope(|s| {
        let q = s.spawn(|| {
            let mut cmd = psql_command(&cluster, "127.0.0.1", &port, "SELECT pg_sleep(30)");
            pgtest::run::run_with(&mut cmd, None, Duration::from_secs(60))
        });
        tunnel.wait_open(1);
        tunnel.client_shutdown.trigger();
        tunnel.server_shutdown.trigger();
        // The first signal's drain has begun on both halves, with the session open.
        let draining = |r: &Report| matches!(r, Report::Draining { open, .. } if *open >= 1);
        net_support::wait_report(&tunnel.client_reports, "client half draining", draining);
        net_support::wait_report(&tunnel.server_reports, "server half draining", draining);
        tunnel.client_shutdown.trigger_now();
        tunnel.server_shutdown.trigger_now();
        // The halves return while pg_sleep(30) still runs: the query below is cut off rather
        // than finished, which a drain left to its 30 s would have let it do.
        let (client, _) = tunnel.stop();
        assert_eq!(client.connections_open, 0);
        q.join().expect("psql thread")
    });
    assert!(result.is_err(), "the query was cut off: {result:?}");
}

#[test]
fn an_unreachable_postgresql_is_reported_to_the_application() {
    let cluster = Cluster::start().expect("cluster");
    let gone = tempfile::tempdir().expect("tempdir");
    let upstream = Endpoint::Unix(gone.path().join(".s.PGSQL.5432"));
    let tunnel = Tunnel::start(upstream, "zstd:1");
    let port = tunnel.client_port();
    let mut cmd = psql_command(&cluster, "127.0.0.1", &port, "SELECT 1");
    cmd.env("PGSSLMODE", "disable");
    let err = pgtest::run::run_with(&mut cmd, None, Duration::from_secs(30))
        .expect_err("no PostgreSQL behind the server half");
    assert!(
        err.to_string().contains("pgcompress tunnel server"),
        "{err}"
    );
    let conns = tunnel.server_connections();
    tunnel.stop();
    assert!(conns.iter().all(|c| c.error.is_some()), "{conns:?}");
}

/// Reads backend messages from `s` up to ReadyForQuery; returns (type, whole message) pairs.
fn messages_until_ready(s: &mut (impl std::io::Read + ?Sized)) -> Vec<(u8, Vec<u8>)> {
    let mut out = Vec::new();
    loop {
        let mut header = [0u8; 5];
        s.read_exact(&mut header).expect("message header");
        let len = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
        assert!((4..1 << 20).contains(&len), "length {len}");
        let mut msg = header.to_vec();
        msg.resize(1 + len, 0);
        s.read_exact(&mut msg[5..]).expect("message body");
        out.push((header[0], msg));
        if header[0] == b'Z' {
            return out;
        }
    }
}

#[test]
fn protocol_3_2_and_pq_options_are_negotiated_by_postgresql() {
    let cluster = Cluster::start().expect("cluster");
    // Protocol 3.2 with a `_pq_.` option: PostgreSQL 15 answers NegotiateProtocolVersion
    // (3.0, the option unrecognised) and goes on; the tunnel must not interfere.
    let packet = common::startup(
        2,
        &[
            ("user", pgtest::SUPERUSER),
            ("database", "postgres"),
            ("_pq_.pgcompress_probe", "on"),
        ],
    );
    let session = |s: &mut dyn ReadWrite| {
        s.write_all(&packet).expect("startup");
        let msgs = messages_until_ready(s);
        // Terminate.
        s.write_all(&[b'X', 0, 0, 0, 4]).expect("terminate");
        msgs
    };
    let sock = cluster
        .socket_dir()
        .join(format!(".s.PGSQL.{}", cluster.port()));
    let direct = session(&mut std::os::unix::net::UnixStream::connect(sock).expect("direct"));
    let tunnel = Tunnel::start(socket_upstream(&cluster), "zstd:1");
    let through = session(
        &mut std::net::TcpStream::connect(format!("127.0.0.1:{}", tunnel.client_port()))
            .expect("through the tunnel"),
    );
    tunnel.stop();
    let kinds = |m: &[(u8, Vec<u8>)]| m.iter().map(|(t, _)| *t).collect::<Vec<_>>();
    assert_eq!(kinds(&through), kinds(&direct));
    let negotiate = |m: &[(u8, Vec<u8>)]| {
        m.iter()
            .find(|(t, _)| *t == b'v')
            .map(|(_, b)| b.clone())
            .expect("NegotiateProtocolVersion")
    };
    let v = negotiate(&through);
    assert_eq!(
        v,
        negotiate(&direct),
        "the same NegotiateProtocolVersion both ways"
    );
    // PostgreSQL 15 sends PG_PROTOCOL_LATEST, 3.0, as the whole protocol code.
    assert_eq!(
        &v[5..9],
        &(3u32 << 16).to_be_bytes(),
        "PostgreSQL 15 offers 3.0"
    );
    assert!(v.windows(21).any(|w| w == b"_pq_.pgcompress_probe"));
    // BackendKeyData passes through unchanged in form (its values are per session).
    let key = |m: &[(u8, Vec<u8>)]| m.iter().find(|(t, _)| *t == b'K').map(|(_, b)| b.len());
    assert_eq!(key(&through), key(&direct));
}

/// A socket both ways.
trait ReadWrite: std::io::Read + std::io::Write {}
impl<T: std::io::Read + std::io::Write> ReadWrite for T {}
