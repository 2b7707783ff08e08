//! Tunnel operations against a real PostgreSQL: `--max-connections` on each half refuses
//! the connection past it with a clear message and counts it; the Prometheus endpoint of each
//! half shows the same counters as its stats file.
#![cfg(feature = "net")]

mod common;
mod net_support;

use std::time::Duration;

use net_support::{http, psql, refused_psql, sample, socket_upstream, Tunnel};
use pgtest::Cluster;
use wire::net::{Endpoint, Half, Report, StatsSnapshot};

/// Holds `n` sessions open through the tunnel (each sleeping 4 s), runs `third` while they
/// are, and returns the sessions' outputs.
fn with_sessions_open(
    cluster: &Cluster,
    tunnel: &Tunnel,
    n: u64,
    third: impl FnOnce(),
) -> Vec<String> {
    let port = tunnel.client_port();
    std::thread::scope(|s| {
        let sessions: Vec<_> = (0..n)
            .map(|i| {
                let port = port.clone();
                s.spawn(move || {
                    psql(
                        cluster,
                        Some(&port),
                        &format!("SELECT pg_sleep(4), 'session {i}';\n"),
                        None,
                    )
                })
            })
            .collect();
        tunnel.wait_open(n);
        third();
        sessions
            .into_iter()
            .map(|h| h.join().expect("psql thread"))
            .collect()
    })
}

/// Sends a StartupMessage to `addr` and returns the fields of the ErrorResponse that comes
/// back, each as its code letter followed by its text.
fn refusal_fields(addr: &str) -> Vec<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut body = 196608u32.to_be_bytes().to_vec();
    body.extend_from_slice(b"user\0postgres\0\0");
    let mut packet = ((body.len() + 4) as u32).to_be_bytes().to_vec();
    packet.extend_from_slice(&body);
    s.write_all(&packet).expect("startup");
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).expect("answer");
    assert_eq!(answer.first(), Some(&b'E'), "{answer:?}");
    let len = u32::from_be_bytes(answer[1..5].try_into().expect("length")) as usize;
    assert_eq!(answer.len(), 1 + len, "one message, then the close");
    answer[5..]
        .split(|&b| b == 0)
        .filter(|f| !f.is_empty())
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .collect()
}

#[test]
fn the_client_half_refuses_the_connection_past_its_limit() {
    let cluster = Cluster::start().expect("cluster");
    let tunnel = Tunnel::start_limited(
        socket_upstream(&cluster),
        "zstd:1",
        false,
        Endpoint::Tcp("127.0.0.1:0".into()),
        (2, 1000),
    );
    let port = tunnel.client_port();
    let outs = with_sessions_open(&cluster, &tunnel, 2, || {
        let err = refused_psql(&cluster, &format!("host=127.0.0.1 port={port}"));
        assert!(
            err.contains("pgcompress tunnel client: too many connections (2)"),
            "{err}"
        );
        // On the wire: a FATAL ErrorResponse with SQLSTATE 53300 after the startup packet.
        let fields = refusal_fields(&tunnel.client_addr);
        assert!(fields.contains(&"SFATAL".to_owned()), "{fields:?}");
        assert!(fields.contains(&"C53300".to_owned()), "{fields:?}");
    });
    assert_eq!(outs[0].trim(), "|session 0");
    assert_eq!(outs[1].trim(), "|session 1");
    let refused = tunnel
        .client_reports
        .lock()
        .expect("lock")
        .iter()
        .filter(|r| matches!(r, Report::TooManyConnections { limit: 2, .. }))
        .count();
    assert_eq!(refused, 2);
    // Once the two are gone a new session is served again.
    assert_eq!(
        psql(&cluster, Some(&port), "SELECT 'again';\n", None).trim(),
        "again"
    );
    // The stats file (rewritten every second) counts the refusal too.
    let file = StatsSnapshot::read(&tunnel.client_stats_path()).expect("stats file");
    assert_eq!(file.refused_connections, 2);
    let (client, server) = tunnel.stop();
    assert_eq!(client.refused_connections, 2);
    assert_eq!(client.connections_total, 3);
    assert_eq!(server.refused_connections, 0);
    assert_eq!(server.connections_total, 3);
}

#[test]
fn the_server_half_refuses_the_link_past_its_limit() {
    let cluster = Cluster::start().expect("cluster");
    let tunnel = Tunnel::start_limited(
        socket_upstream(&cluster),
        "lz4",
        false,
        Endpoint::Tcp("127.0.0.1:0".into()),
        (1000, 1),
    );
    let port = tunnel.client_port();
    let outs = with_sessions_open(&cluster, &tunnel, 1, || {
        let err = refused_psql(&cluster, &format!("host=127.0.0.1 port={port}"));
        assert!(
            err.contains("pgcompress tunnel server: too many connections (1)"),
            "{err}"
        );
    });
    assert_eq!(outs[0].trim(), "|session 0");
    let file = StatsSnapshot::read(&tunnel.server_stats_path()).expect("stats file");
    assert_eq!(file.refused_connections, 1);
    let (client, server) = tunnel.stop();
    assert_eq!(server.refused_connections, 1);
    assert_eq!(server.connections_total, 1);
    // The client half served the application, whose link was refused.
    assert_eq!(client.refused_connections, 0);
    assert_eq!(client.connections_total, 2);
}

/// A COPY out and a COPY in, then a pause that keeps the session open.
const COPY_SCRIPT: &str = "\
CREATE TABLE m (id int, note text);
COPY (SELECT i, 'row ' || i || ' of the metrics test, ' || repeat('abc', i % 20) \
  FROM generate_series(1, 50000) i) TO STDOUT;
COPY m FROM STDIN;
1\tfirst row copied in through the tunnel
2\tsecond row copied in through the tunnel
3\tthird row copied in through the tunnel
\\.
SELECT count(*) FROM m;
SELECT pg_sleep(2);
DROP TABLE m;
";

#[test]
fn the_prometheus_endpoint_shows_the_stats_file_counters() {
    let cluster = Cluster::start().expect("cluster");
    let tunnel = Tunnel::start(socket_upstream(&cluster), "zstd:1");
    let port = tunnel.client_port();
    let halves = [
        (
            Half::Client,
            tunnel.metrics_addr(Half::Client),
            tunnel.client_stats_path(),
        ),
        (
            Half::Server,
            tunnel.metrics_addr(Half::Server),
            tunnel.server_stats_path(),
        ),
    ];
    // Only GET /metrics is served.
    for (method, path) in [("GET", "/"), ("GET", "/metric"), ("POST", "/metrics")] {
        let (status, _) = http(&halves[0].1, method, path);
        assert!(status.contains(" 404 "), "{method} {path}: {status}");
    }
    let out = std::thread::scope(|s| {
        let copy = s.spawn(|| psql(&cluster, Some(&port), COPY_SCRIPT, None));
        tunnel.wait_open(1);
        // During the session: one open connection on each half.
        for (half, addr, _) in &halves {
            let (status, body) = http(addr, "GET", "/metrics");
            assert!(status.contains(" 200 "), "{status}");
            let labels = format!("{{half=\"{half}\"}}");
            assert_eq!(
                sample(
                    &body,
                    &format!("pgcompress_tunnel_connections_open{labels}")
                ),
                1
            );
            assert_eq!(
                sample(
                    &body,
                    &format!("pgcompress_tunnel_connections_total{labels}")
                ),
                1
            );
        }
        copy.join().expect("psql thread")
    });
    assert!(out.contains("\n3\n"), "{out}");
    // The stats files are rewritten every second: once they show the connection closed,
    // nothing moves any more and both views must agree exactly.
    for (half, addr, path) in &halves {
        let file = loop {
            let f = StatsSnapshot::read(path).expect("stats file");
            if f.connections_open == 0 && f.connections_total == 1 {
                std::thread::sleep(Duration::from_millis(1100));
                break StatsSnapshot::read(path).expect("stats file");
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        let (_, body) = http(addr, "GET", "/metrics");
        let h = format!("half=\"{half}\"");
        assert_eq!(
            sample(&body, &format!("pgcompress_tunnel_connections_open{{{h}}}")),
            0
        );
        assert_eq!(
            sample(
                &body,
                &format!("pgcompress_tunnel_method_info{{{h},method=\"zstd:1\"}}")
            ),
            1
        );
        assert_eq!(
            sample(
                &body,
                &format!("pgcompress_tunnel_decompression_errors_total{{{h}}}")
            ),
            0
        );
        for (dir, d) in [
            ("frontend_to_backend", file.frontend_to_backend),
            ("backend_to_frontend", file.backend_to_frontend),
        ] {
            let labels = format!("{{{h},direction=\"{dir}\"}}");
            let raw = sample(&body, &format!("pgcompress_tunnel_raw_bytes_total{labels}"));
            let link = sample(
                &body,
                &format!("pgcompress_tunnel_link_bytes_total{labels}"),
            );
            let chunks = sample(&body, &format!("pgcompress_tunnel_chunks_total{labels}"));
            assert!(raw > 0 && link > 0 && chunks > 0, "{half} {dir}: {body}");
            assert_eq!(
                (raw, link, chunks),
                (d.raw_bytes, d.link_bytes, d.chunks),
                "{half} {dir}"
            );
        }
    }
    let (client, server) = tunnel.stop();
    // Link bytes written by one half are read by the other.
    assert_eq!(
        client.frontend_to_backend.link_bytes,
        server.frontend_to_backend.link_bytes
    );
    assert_eq!(
        client.backend_to_frontend.link_bytes,
        server.backend_to_frontend.link_bytes
    );
}

#[test]
fn both_halves_count_the_same_method_switches_for_each_direction() {
    let cluster = Cluster::start().expect("cluster");
    let tunnel = Tunnel::start(socket_upstream(&cluster), "auto");
    let port = tunnel.client_port();
    // Megabytes of text backend->frontend: auto leaves none for a compressing method at its
    // first bulk burst, and frames the switch as a Method frame the client half decodes.
    let out = psql(
        &cluster,
        Some(&port),
        "COPY (SELECT g, 'row ' || g || ' of a table of text', now()::date \
         FROM generate_series(1, 200000) g) TO STDOUT;",
        None,
    );
    assert_eq!(out.lines().count(), 200_000);
    let (client, server) = tunnel.stop();
    let b2f = (
        client.backend_to_frontend.method_switches,
        server.backend_to_frontend.method_switches,
    );
    let f2b = (
        client.frontend_to_backend.method_switches,
        server.frontend_to_backend.method_switches,
    );
    assert!(b2f.1 >= 1, "auto switched backend->frontend: {b2f:?}");
    assert_eq!(b2f.0, b2f.1, "backend->frontend (client, server)");
    assert_eq!(f2b.0, f2b.1, "frontend->backend (client, server)");
}
