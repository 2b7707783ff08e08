//! The tunnel halves end to end against a real PostgreSQL: psql results through the tunnel
//! equal the direct ones, refused peers never reach PostgreSQL, authentication is never
//! compressed, bad link bytes close only their connection, and a shutdown drains.
#![cfg(feature = "net")]

mod common;
mod net_support;

use net_support::{psql, Tunnel};
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
    let (client, server) = tunnel.stop();
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
}

#[test]
fn psql_through_the_tunnel_zstd() {
    smoke("zstd:1");
}

#[test]
fn psql_through_the_tunnel_lz4() {
    smoke("lz4");
}
