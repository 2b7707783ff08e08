//! `--method auto` through a real PostgreSQL (issue 17, point 2): random bytes end up verbatim within a
//! bounded overhead, text COPY is compressed, and what arrives is byte for byte what a direct
//! connection gives.

mod tunnel_support;

use std::io::Write;
use std::path::Path;

use pgtest::Cluster;
use tunnel_support::{client, psql, run_ok, sha256_file, Finished, Keys, Tunnel, Upstream, Via};

/// Random bytes COPYed each way: well past the first probe (8 MiB after the fallback).
const RANDOM_BYTES: usize = 40 << 20;
/// Link bytes a direction may spend above 1% of its raw bytes: the handshake, the zstd window
/// compressed before the fallback and one probe window, with their frame headers.
const RANDOM_SLACK: u64 = 256 * 1024;

/// A binary COPY file of `rows` rows `(id int4, b bytea)` of 8 KiB random bytes each.
fn write_random_copy(path: &Path, total: usize) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).expect("create"));
    f.write_all(b"PGCOPY\n\xff\r\n\0").expect("write");
    f.write_all(&[0; 8]).expect("write");
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut value = vec![0u8; 8192];
    for id in 0..total / value.len() {
        for b in value.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = (x >> 32) as u8;
        }
        f.write_all(&2i16.to_be_bytes()).expect("write");
        f.write_all(&4i32.to_be_bytes()).expect("write");
        f.write_all(&(id as i32).to_be_bytes()).expect("write");
        f.write_all(&(value.len() as i32).to_be_bytes())
            .expect("write");
        f.write_all(&value).expect("write");
    }
    f.write_all(&(-1i16).to_be_bytes()).expect("write");
    f.flush().expect("flush");
}

/// Shop-like rows: timestamps, ids, prices, a status, a city and a few words.
const TEXT_ROWS: &str = r#"
SELECT setseed(0.3);
CREATE TABLE orders AS
SELECT g AS id,
       timestamptz '2024-01-01 00:00:00+00' + g * interval '17 seconds' AS placed,
       1 + floor(power(random(), 3) * 50000)::int AS customer,
       (floor(random() * 300) + 0.99)::numeric(12,2) AS amount,
       (ARRAY['new', 'paid', 'packed', 'shipped', 'delivered', 'returned'])[1 + floor(random() * 6)::int] AS status,
       (ARRAY['Amsterdam', 'Berlin', 'Chicago', 'Dublin', 'Lisbon', 'Oslo', 'Porto', 'Vienna'])[1 + floor(random() * 8)::int] AS city,
       (ARRAY['leave at door', 'call on arrival', 'gift wrap please', 'fragile, handle with care',
              'deliver before noon', 'second floor, ring twice', 'invoice to company'])[1 + floor(random() * 7)::int] AS note
  FROM generate_series(1, 300000) g;
CREATE TABLE orders_in (LIKE orders);
"#;

fn copy(cluster: &Cluster, via: Via, sql: &str) {
    run_ok(client(cluster, "psql", via).args(["-X", "-v", "ON_ERROR_STOP=1", "-c", sql]));
}

fn report(what: &str, fin: &Finished) {
    for (name, d) in [
        ("frontend->backend", fin.client.frontend_to_backend),
        ("backend->frontend", fin.client.backend_to_frontend),
    ] {
        eprintln!(
            "{what}, {name} through auto: {} raw, {} on the link ({:.3} of raw)",
            d.raw_bytes,
            d.link_bytes,
            d.link_bytes as f64 / d.raw_bytes.max(1) as f64
        );
    }
}

#[test]
fn auto_sends_random_bytes_verbatim_and_compresses_text() {
    let cluster = Cluster::start().expect("cluster");
    cluster.psql(TEXT_ROWS).expect("text rows");
    cluster
        .psql("CREATE TABLE rnd (id int, b bytea); CREATE TABLE rnd_in (LIKE rnd);")
        .expect("tables");
    let keys = Keys::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let random = dir.path().join("random.copy");
    write_random_copy(&random, RANDOM_BYTES);
    let out = |name: &str| dir.path().join(name);

    // Random bytes: COPY FROM (the client half's direction) and COPY TO (the server half's).
    let tunnel = Tunnel::start(&keys, &cluster, Upstream::Socket, "auto");
    let via = Via::Tunnel(&tunnel);
    copy(
        &cluster,
        via,
        &format!(
            "\\copy rnd FROM '{}' WITH (FORMAT binary)",
            random.display()
        ),
    );
    let to = |via: Via, table: &str, file: &Path, format: &str| {
        copy(
            &cluster,
            via,
            &format!(
                "\\copy (SELECT * FROM {table} ORDER BY id) TO '{}' WITH (FORMAT {format})",
                file.display()
            ),
        )
    };
    to(via, "rnd", &out("rnd-tunnel.copy"), "binary");
    let fin = tunnel.finish();
    report("random bytea", &fin);
    to(Via::Direct, "rnd", &out("rnd-direct.copy"), "binary");
    assert_eq!(sha256_file(&random), sha256_file(&out("rnd-direct.copy")));
    assert_eq!(
        sha256_file(&out("rnd-tunnel.copy")),
        sha256_file(&out("rnd-direct.copy")),
        "COPY TO of random bytes through auto differs from direct"
    );
    for d in [
        fin.client.frontend_to_backend,
        fin.client.backend_to_frontend,
    ] {
        assert!(d.raw_bytes > RANDOM_BYTES as u64, "{fin:?}");
        assert!(
            d.link_bytes <= d.raw_bytes + d.raw_bytes / 100 + RANDOM_SLACK,
            "random bytes through auto: {} on the link for {} raw",
            d.link_bytes,
            d.raw_bytes
        );
        // It did try: some chunks were compressed before the fallback.
        assert!(d.chunks > 0, "{fin:?}");
    }

    // Text: COPY TO and COPY FROM compress to at most half.
    let tunnel = Tunnel::start(&keys, &cluster, Upstream::Socket, "auto");
    let via = Via::Tunnel(&tunnel);
    to(via, "orders", &out("orders-tunnel.copy"), "text");
    copy(
        &cluster,
        via,
        &format!(
            "\\copy orders_in FROM '{}'",
            out("orders-tunnel.copy").display()
        ),
    );
    let fin = tunnel.finish();
    report("text COPY", &fin);
    to(Via::Direct, "orders", &out("orders-direct.copy"), "text");
    to(Via::Direct, "orders_in", &out("orders-back.copy"), "text");
    let direct = sha256_file(&out("orders-direct.copy"));
    assert_eq!(sha256_file(&out("orders-tunnel.copy")), direct);
    assert_eq!(sha256_file(&out("orders-back.copy")), direct);
    for d in [
        fin.client.frontend_to_backend,
        fin.client.backend_to_frontend,
    ] {
        assert!(d.raw_bytes > 20_000_000, "{fin:?}");
        assert!(
            d.link_bytes * 2 <= d.raw_bytes,
            "text COPY through auto: {} on the link for {} raw",
            d.link_bytes,
            d.raw_bytes
        );
    }
    assert_eq!(
        psql(&cluster, Via::Direct, "SELECT count(*) FROM orders_in"),
        "300000"
    );
}
