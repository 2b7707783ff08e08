//! What a DBA sees when something that is not a valid client half meets the server half: a
//! client half whose certificate comes from another CA, and psql pointed at the server half's
//! port. Each gets a message saying what was refused, not a TLS alert's name or nothing.
#![cfg(feature = "net")]

mod common;
mod net_support;

use std::time::Duration;

use net_support::{collector, keys, refused_psql, socket_upstream, Tunnel};
use pgtest::Cluster;
use wire::link::{parse_spec, TagSet, DEFAULT_THRESHOLD};
use wire::net::{run_client, ClientConfig, Endpoint, Half, Report, Shutdown};

#[test]
fn a_client_certificate_from_another_ca_is_reported_as_not_accepted() {
    let cluster = Cluster::start().expect("cluster");
    let tunnel = Tunnel::start(socket_upstream(&cluster), "zstd:1");
    let other = tempfile::tempdir().expect("tempdir");
    let other_keys = keys(&other.path().join("keys"));
    // Trusts the tunnel's CA (so the server half is accepted) but shows a certificate of
    // another CA.
    let (reporter, reports, rx) = collector(Half::Client);
    let shutdown = Shutdown::new();
    let task = tunnel.runtime.spawn(run_client(
        ClientConfig {
            listen: Endpoint::Tcp("127.0.0.1:0".into()),
            server: tunnel.server_addr.clone(),
            server_name: "localhost".into(),
            method: parse_spec("zstd:1").expect("method"),
            auto: false,
            ca: tunnel.keys.join("ca.pem"),
            cert: other_keys.join("client.pem"),
            key: other_keys.join("client-key.pem"),
            local_tls: None,
            compress_types: TagSet::default(),
            threshold: DEFAULT_THRESHOLD,
            stats_file: None,
            drain_timeout: Duration::from_secs(5),
            max_connections: 10,
            metrics: None,
        },
        shutdown.clone(),
        reporter,
    ));
    let addr = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("client half listening");
    let port = addr.rsplit_once(':').expect("port").1.to_owned();
    let err = refused_psql(
        &cluster,
        &format!("host=127.0.0.1 port={port} user=postgres dbname=postgres sslmode=disable"),
    );
    assert!(
        err.contains("certificate not accepted by the tunnel"),
        "psql said: {err}"
    );
    // The client half logs it too.
    net_support::wait_report(&reports, "the refused connection", |r| {
        matches!(r, Report::Connection(c)
            if c.error.as_deref().is_some_and(|e| e.contains("certificate not accepted by the tunnel")))
    });
    shutdown.trigger();
    tunnel
        .runtime
        .block_on(task)
        .expect("join")
        .expect("client half");
    tunnel.stop();
}

#[test]
fn psql_against_the_server_half_is_told_the_port_speaks_tls_only() {
    let cluster = Cluster::start().expect("cluster");
    let tunnel = Tunnel::start(socket_upstream(&cluster), "zstd:1");
    let (host, port) = tunnel.server_addr.rsplit_once(':').expect("port");
    // Without TLS, and with libpq's default sslmode=prefer (an SSLRequest first).
    for sslmode in ["disable", "prefer"] {
        let err = refused_psql(
            &cluster,
            &format!("host={host} port={port} user=postgres dbname=postgres sslmode={sslmode}"),
        );
        assert!(
            err.contains("this port speaks TLS only"),
            "sslmode={sslmode}: psql said: {err}"
        );
    }
    let (_, server) = tunnel.stop();
    assert_eq!(server.refused_peers, 2, "both counted as refused");
}
