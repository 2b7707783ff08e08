//! Tunnel operations against a real PostgreSQL: `--max-connections` on each half refuses
//! the connection past it with a clear message and counts it.
#![cfg(feature = "net")]

mod common;
mod net_support;

use std::time::Duration;

use net_support::{psql, Tunnel};
use pgtest::Cluster;
use wire::net::{Endpoint, Report, StatsSnapshot};

fn socket_upstream(cluster: &Cluster) -> Endpoint {
    Endpoint::parse(
        cluster.socket_dir().to_str().expect("utf-8 path"),
        cluster.port(),
    )
    .expect("endpoint")
}

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

/// psql's error when connecting through the tunnel must fail.
fn refused_psql(cluster: &Cluster, port: &str) -> String {
    let mut cmd = cluster.command("psql");
    cmd.args(["-X", "-At", "-h", "127.0.0.1", "-p", port, "-c", "SELECT 1"]);
    pgtest::run::run_with(&mut cmd, None, Duration::from_secs(30))
        .expect_err("a connection past the limit")
        .to_string()
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
        let err = refused_psql(&cluster, &port);
        assert!(
            err.contains("pgcompress tunnel client: too many connections (2)"),
            "{err}"
        );
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
    assert_eq!(refused, 1);
    // Once the two are gone a new session is served again.
    assert_eq!(
        psql(&cluster, Some(&port), "SELECT 'again';\n", None).trim(),
        "again"
    );
    // The stats file (rewritten every second) counts the refusal too.
    let file = StatsSnapshot::read(&tunnel.client_stats_path()).expect("stats file");
    assert_eq!(file.refused_connections, 1);
    let (client, server) = tunnel.stop();
    assert_eq!(client.refused_connections, 1);
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
        let err = refused_psql(&cluster, &port);
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
