//! Bulk transfers through `pgcompress tunnel`: COPY FROM and COPY TO of a table of
//! at least 100 MB of realistic rows, with the bytes on the link against the bytes PostgreSQL sent, and a
//! single 300 MB value selected and inserted.

mod tunnel_support;

use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use pgtest::run::run_as_current_user;

use pgtest::Cluster;
use tunnel_support::{client, psql, run_ok, sha256_file, Keys, Tunnel, Upstream, Via, METHODS};

/// Rows of orders with timestamps, ids, prices, a status, a city and a note of words drawn from a
/// vocabulary with a skewed (Zipf-like) frequency, as text is; customers come back (a few order often)
/// and prices end in .99, as shop data does. Seeded, so every run writes the same rows.
const GENERATE: &str = r#"
SELECT setseed(0.15);
CREATE TABLE orders (id bigint PRIMARY KEY, placed timestamptz, customer int, amount numeric(12,2),
                     quantity int, status text, city text, note text);
INSERT INTO orders
SELECT g,
       timestamptz '2024-01-01 00:00:00+00' + g * interval '13 seconds' + floor(random() * 600) * interval '1 second',
       1 + floor(power(random(), 3) * 250000)::int,
       (floor(random() * random() * 300) + 0.99)::numeric(12,2),
       1 + floor(random() * random() * 20)::int,
       (ARRAY['new', 'paid', 'packed', 'shipped', 'delivered', 'returned', 'cancelled'])[1 + floor(random() * 7)::int],
       (ARRAY['Amsterdam', 'Berlin', 'Chicago', 'Dublin', 'Lisbon', 'Lyon', 'Madrid', 'Montreal', 'Osaka',
              'Oslo', 'Porto', 'Prague', 'Seattle', 'Sydney', 'Toronto', 'Vienna'])[1 + floor(random() * 16)::int],
       (SELECT string_agg(w[1 + floor(random() * random() * array_length(w, 1))::int], ' ')
          FROM (SELECT ARRAY['the', 'order', 'was', 'to', 'and', 'a', 'customer', 'please', 'deliver', 'before',
                  'after', 'noon', 'call', 'on', 'arrival', 'leave', 'at', 'door', 'with', 'neighbour', 'gift',
                  'wrap', 'fragile', 'handle', 'care', 'box', 'damaged', 'refund', 'requested', 'replacement',
                  'sent', 'again', 'address', 'changed', 'second', 'floor', 'back', 'entrance', 'ring', 'bell',
                  'twice', 'invoice', 'company', 'name', 'tax', 'number', 'missing', 'item', 'colour', 'size',
                  'large', 'small', 'medium', 'blue', 'green', 'red', 'black', 'white', 'express', 'standard',
                  'shipping', 'weekend', 'monday', 'friday', 'morning', 'evening', 'office', 'reception',
                  'warehouse', 'pickup', 'point', 'locker', 'code', 'signature', 'required', 'not', 'home',
                  'until', 'thanks', 'loyal', 'discount', 'applied', 'coupon', 'expired', 'price', 'match',
                  'promise', 'late', 'early', 'partial', 'split', 'parcel', 'tracking', 'updated', 'lost',
                  'found', 'returned', 'sender', 'label', 'printed', 'wrong', 'right', 'checked', 'quality']
                  AS w) words,
               generate_series(1, 4 + (g % 11)))
  FROM generate_series(1, 930000) g;
"#;

/// The 100 MB of the issue: the COPY text of the table must be at least this long.
const MIN_COPY_BYTES: u64 = 100_000_000;

#[test]
fn copy_to_and_from_100mb() {
    let cluster = Cluster::start().expect("cluster");
    cluster.psql(GENERATE).expect("generate rows");
    cluster
        .psql("CREATE TABLE orders_in (LIKE orders INCLUDING ALL);")
        .expect("target table");
    let keys = Keys::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let copy_out = |via: Via, table: &str, name: &str| {
        let file = dir.path().join(name);
        let started = Instant::now();
        let sql = format!(
            "\\copy (SELECT * FROM {table} ORDER BY id) TO '{}'",
            file.display()
        );
        run_ok(client(&cluster, "psql", via).args(["-X", "-v", "ON_ERROR_STOP=1", "-c", &sql]));
        (sha256_file(&file), file, started.elapsed())
    };
    let (direct_sha, direct_file, took) = copy_out(Via::Direct, "orders", "direct.copy");
    let size = std::fs::metadata(&direct_file).expect("size").len();
    eprintln!(
        "COPY TO direct: {size} bytes of COPY text in {:.2} s",
        took.as_secs_f64()
    );
    assert!(
        size >= MIN_COPY_BYTES,
        "the table's COPY text is only {size} bytes"
    );
    for method in METHODS {
        let tunnel = Tunnel::start(&keys, &cluster, Upstream::Socket, method);
        let via = Via::Tunnel(&tunnel);
        let (sha, file, took_to) = copy_out(via, "orders", "tunnel.copy");
        assert_eq!(
            sha, direct_sha,
            "COPY TO through {method} differs from direct"
        );
        std::fs::remove_file(file).expect("remove");

        psql(&cluster, Via::Direct, "TRUNCATE orders_in");
        let started = Instant::now();
        let sql = format!("\\copy orders_in FROM '{}'", direct_file.display());
        run_ok(client(&cluster, "psql", via).args(["-X", "-v", "ON_ERROR_STOP=1", "-c", &sql]));
        let took_from = started.elapsed();
        let fin = tunnel.finish();
        let (sha, file, _) = copy_out(Via::Direct, "orders_in", "back.copy");
        assert_eq!(
            sha, direct_sha,
            "COPY FROM through {method}: the table differs"
        );
        std::fs::remove_file(file).expect("remove");

        let to = fin.client.backend_to_frontend;
        let from = fin.client.frontend_to_backend;
        eprintln!(
            "COPY TO through {method}: {} bytes from PostgreSQL (a direct connection carries these), {} on the \
             link ({:.2}x), {:.2} s",
            to.raw_bytes,
            to.link_bytes,
            to.raw_bytes as f64 / to.link_bytes.max(1) as f64,
            took_to.as_secs_f64()
        );
        eprintln!(
            "COPY FROM through {method}: {} bytes to PostgreSQL, {} on the link ({:.2}x), {:.2} s",
            from.raw_bytes,
            from.link_bytes,
            from.raw_bytes as f64 / from.link_bytes.max(1) as f64,
            took_from.as_secs_f64()
        );
        // The server half saw the same PostgreSQL bytes as the client half.
        assert_eq!(
            fin.server.backend_to_frontend.raw_bytes, to.raw_bytes,
            "{fin:?}"
        );
        assert_eq!(
            fin.server.frontend_to_backend.raw_bytes, from.raw_bytes,
            "{fin:?}"
        );
        // PostgreSQL's bytes are the COPY text plus a 5-byte header per row and a little more.
        assert!(to.raw_bytes > size && from.raw_bytes > size, "{fin:?}");
        if method == "zstd:1" {
            assert!(
                to.link_bytes * 3 <= to.raw_bytes,
                "COPY TO through zstd:1 put {} bytes on the link for {} raw: more than a third",
                to.link_bytes,
                to.raw_bytes
            );
            assert!(
                from.link_bytes * 3 <= from.raw_bytes,
                "COPY FROM through zstd:1 put {} bytes on the link for {} raw: more than a third",
                from.link_bytes,
                from.raw_bytes
            );
        }
    }
}

/// One value of this many bytes (a text of md5 hex digits, 3.2 MB repeated).
const BIG_VALUE_BYTES: u64 = 32 * 100_000 * 94;

/// Memory: psql holds the whole 300 MB result (and the server a few copies of the value while it builds
/// and parses it), so this test needs about 2 GB of RAM at its peak; the test process itself streams.
#[test]
fn a_300mb_value_selected_and_inserted() {
    let cluster = Cluster::start().expect("cluster");
    cluster
        .psql(
            "CREATE TABLE big (id int, v text);
             INSERT INTO big SELECT 1, repeat(string_agg(md5(g::text), '' ORDER BY g), 94)
               FROM generate_series(1, 100000) g;",
        )
        .expect("the big value");
    assert_eq!(
        cluster
            .query_one("SELECT length(v) FROM big")
            .expect("length"),
        BIG_VALUE_BYTES.to_string()
    );
    let keys = Keys::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let select = |via: Via, name: &str| {
        let file = dir.path().join(name);
        let started = Instant::now();
        let mut cmd = client(&cluster, "psql", via);
        cmd.args([
            "-X",
            "-At",
            "-v",
            "ON_ERROR_STOP=1",
            "-c",
            "SELECT v FROM big WHERE id = 1",
            "-o",
        ])
        .arg(&file);
        run_ok(&mut cmd);
        (file, started.elapsed())
    };
    let (direct_file, took) = select(Via::Direct, "direct.out");
    eprintln!(
        "300 MB value selected direct in {:.2} s",
        took.as_secs_f64()
    );
    assert_eq!(
        std::fs::metadata(&direct_file).expect("size").len(),
        BIG_VALUE_BYTES + 1
    );
    let direct_sha = sha256_file(&direct_file);
    // The value back in through COPY FROM: psql sends the 300 MB line in CopyData pieces and the server
    // assembles one row of it.
    let copy_file = dir.path().join("insert.copy");
    write_wrapped(&copy_file, b"2\t", &direct_file, b"\n");
    for method in METHODS {
        let tunnel = Tunnel::start(&keys, &cluster, Upstream::Socket, method);
        let via = Via::Tunnel(&tunnel);
        let (file, took_select) = select(via, "tunnel.out");
        assert_eq!(
            sha256_file(&file),
            direct_sha,
            "the value selected through {method} differs"
        );
        std::fs::remove_file(file).expect("remove");
        let started = Instant::now();
        let sql = format!("\\copy big FROM '{}'", copy_file.display());
        run_ok(client(&cluster, "psql", via).args([
            "-X",
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
            "-c",
            &sql,
        ]));
        let took_insert = started.elapsed();
        let fin = tunnel.finish();
        check_inserted(&cluster, method);
        eprintln!(
            "300 MB value through {method}: select {:.2} s ({} bytes raw, {} on the link), COPY FROM {:.2} s \
             ({} bytes raw, {} on the link)",
            took_select.as_secs_f64(),
            fin.client.backend_to_frontend.raw_bytes,
            fin.client.backend_to_frontend.link_bytes,
            took_insert.as_secs_f64(),
            fin.client.frontend_to_backend.raw_bytes,
            fin.client.frontend_to_backend.link_bytes,
        );
        assert!(
            fin.client.backend_to_frontend.raw_bytes > BIG_VALUE_BYTES,
            "{fin:?}"
        );
        assert!(
            fin.client.frontend_to_backend.raw_bytes > BIG_VALUE_BYTES,
            "{fin:?}"
        );
    }
}

/// Writes `prefix`, the first [`BIG_VALUE_BYTES`] of `value_file` and `suffix` into `path`, streaming.
fn write_wrapped(path: &Path, prefix: &[u8], value_file: &Path, suffix: &[u8]) {
    let mut out = std::fs::File::create(path).expect("create");
    out.write_all(prefix).expect("write");
    let mut value = std::fs::File::open(value_file)
        .expect("open")
        .take(BIG_VALUE_BYTES);
    std::io::copy(&mut value, &mut out).expect("copy value");
    out.write_all(suffix).expect("write");
}

/// Row 2 of `big` holds the same value as row 1; then it is deleted for the next run.
fn check_inserted(cluster: &Cluster, method: &str) {
    assert_eq!(
        psql(
            cluster,
            Via::Direct,
            "SELECT count(*), bool_and(v = (SELECT v FROM big WHERE id = 1)) FROM big WHERE id = 2"
        ),
        "1|t",
        "the value inserted through {method} differs"
    );
    psql(cluster, Via::Direct, "DELETE FROM big WHERE id = 2");
}

/// An INSERT whose text holds the value as a literal: one Query message (a compressible type) of 1 MB,
/// then of 300 MB. Memory as above.
#[test]
fn a_300mb_query_message() {
    let cluster = Cluster::start().expect("cluster");
    cluster
        .psql(
            "CREATE TABLE big (id int, v text); INSERT INTO big SELECT 1, repeat(md5('x'), 32768);",
        )
        .expect("a 1 MB value");
    let keys = Keys::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let value = cluster.query_one("SELECT v FROM big").expect("value");
    let script = dir.path().join("insert.sql");
    for method in METHODS {
        std::fs::write(&script, format!("INSERT INTO big VALUES (2, '{value}');\n"))
            .expect("write");
        let tunnel = Tunnel::start(&keys, &cluster, Upstream::Socket, method);
        let mut cmd = client(&cluster, "psql", Via::Tunnel(&tunnel));
        cmd.args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-f"])
            .arg(&script);
        run_as_current_user(&mut cmd, None, Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("1 MB Query through {method}: {e}"));
        drop(tunnel);
        check_inserted(&cluster, method);
    }
    cluster
        .psql(
            "UPDATE big SET v = (SELECT repeat(string_agg(md5(g::text), '' ORDER BY g), 94)
                                   FROM generate_series(1, 100000) g);",
        )
        .expect("the 300 MB value");
    let out = dir.path().join("value.out");
    let mut cmd = client(&cluster, "psql", Via::Direct);
    cmd.args(["-X", "-At", "-c", "SELECT v FROM big WHERE id = 1", "-o"])
        .arg(&out);
    run_ok(&mut cmd);
    write_wrapped(&script, b"INSERT INTO big VALUES (2, '", &out, b"');\n");
    std::fs::remove_file(&out).expect("remove");
    for method in METHODS {
        let tunnel = Tunnel::start(&keys, &cluster, Upstream::Socket, method);
        let started = Instant::now();
        let mut cmd = client(&cluster, "psql", Via::Tunnel(&tunnel));
        cmd.args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-f"])
            .arg(&script);
        run_ok(&mut cmd);
        let took = started.elapsed();
        let fin = tunnel.finish();
        check_inserted(&cluster, method);
        eprintln!(
            "300 MB Query through {method}: {:.2} s ({} bytes raw, {} on the link)",
            took.as_secs_f64(),
            fin.client.frontend_to_backend.raw_bytes,
            fin.client.frontend_to_backend.link_bytes
        );
    }
}
