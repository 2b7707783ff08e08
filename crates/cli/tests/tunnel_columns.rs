//! Column-coded chunks (link version 2) under concurrency: sixteen connections through one
//! `zstd:6` tunnel pair at once, eight loading a table with COPY FROM and eight reading it with
//! COPY TO, every one of them moving its rows column-coded. Every result is checked by hash
//! against a direct connection, both halves count the same column-coded chunks, no connection
//! ends in an error, and each half's resident memory grows by at most [`MAX_PER_CONNECTION`]
//! per connection while all sixteen run.

mod tunnel_support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use pgtest::Cluster;
use tunnel_support::{client, run_ok, sha256_file, Keys, Tunnel, Upstream, Via};

/// Connections of each kind.
const LOADERS: usize = 8;
const READERS: usize = 8;
/// The bound on a half's resident growth per connection while all run: the two zstd:6
/// contexts of a connection in the link's 128 KiB window, the column coding's chunk and coded
/// buffers and the output bounds come to well under this.
const MAX_PER_CONNECTION: u64 = 4 * 1024 * 1024;

/// Rows of shop orders (timestamps, ids, prices, a status, a city, a note of words): COPY text
/// with eight tab-separated fields per line. Seeded, so every run writes the same rows.
const GENERATE: &str = r#"
SELECT setseed(0.31);
CREATE TABLE orders (id bigint PRIMARY KEY, placed timestamptz, customer int, amount numeric(12,2),
                     quantity int, status text, city text, note text);
INSERT INTO orders
SELECT g,
       timestamptz '2024-01-01 00:00:00+00' + g * interval '13 seconds',
       1 + floor(power(random(), 3) * 250000)::int,
       (floor(random() * random() * 300) + 0.99)::numeric(12,2),
       1 + floor(random() * random() * 20)::int,
       (ARRAY['new', 'paid', 'packed', 'shipped', 'delivered', 'returned'])[1 + floor(random() * 6)::int],
       (ARRAY['Berlin', 'Dublin', 'Lisbon', 'Madrid', 'Osaka', 'Oslo', 'Porto', 'Vienna'])[1 + floor(random() * 8)::int],
       (SELECT string_agg(w[1 + floor(random() * array_length(w, 1))::int], ' ')
          FROM (SELECT ARRAY['please', 'deliver', 'before', 'noon', 'leave', 'at', 'door', 'gift', 'wrap',
                  'fragile', 'call', 'on', 'arrival', 'second', 'floor', 'ring', 'bell', 'twice']
                  AS w) words,
               generate_series(1, 3 + (g % 7)))
  FROM generate_series(1, 60000) g;
"#;

/// VmRSS of a process, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmRSS line")
        * 1024
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

#[test]
fn sixteen_column_coded_connections_at_once_through_one_zstd6_pair() {
    let cluster = Cluster::start().expect("cluster");
    cluster.psql(GENERATE).expect("generate rows");
    for i in 0..LOADERS {
        cluster
            .psql(&format!(
                "CREATE TABLE orders_in_{i} (LIKE orders INCLUDING ALL);"
            ))
            .expect("target table");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let copy_to = |via: Via, table: &str, file: &std::path::Path| {
        let sql = format!(
            "\\copy (SELECT * FROM {table} ORDER BY id) TO '{}'",
            file.display()
        );
        run_ok(client(&cluster, "psql", via).args(["-X", "-v", "ON_ERROR_STOP=1", "-c", &sql]));
        sha256_file(file)
    };
    let source = dir.path().join("direct.copy");
    let direct = copy_to(Via::Direct, "orders", &source);
    let size = std::fs::metadata(&source).expect("size").len();
    assert!(size > 5_000_000, "only {size} bytes of COPY text");

    let keys = Keys::new();
    let tunnel = Tunnel::start(&keys, &cluster, Upstream::Socket, "zstd:6");
    tunnel.wait_stats_files();
    let pids = tunnel.pids();
    std::thread::sleep(Duration::from_millis(500));
    let before = (rss(pids.0), rss(pids.1));

    let running = AtomicBool::new(true);
    let (peak, read_hashes) = std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            let mut peak = before;
            while running.load(Ordering::Relaxed) {
                peak = (peak.0.max(rss(pids.0)), peak.1.max(rss(pids.1)));
                std::thread::sleep(Duration::from_millis(100));
            }
            peak
        });
        let via = Via::Tunnel(&tunnel);
        let loaders: Vec<_> = (0..LOADERS)
            .map(|i| {
                let sql = format!("\\copy orders_in_{i} FROM '{}'", source.display());
                let mut cmd = client(&cluster, "psql", via);
                cmd.args(["-X", "-v", "ON_ERROR_STOP=1", "-c", &sql]);
                s.spawn(move || run_ok(&mut cmd))
            })
            .collect();
        let readers: Vec<_> = (0..READERS)
            .map(|i| {
                let file = dir.path().join(format!("read-{i}.copy"));
                let copy_to = &copy_to;
                s.spawn(move || copy_to(via, "orders", &file))
            })
            .collect();
        for l in loaders {
            l.join().expect("loader thread");
        }
        let hashes: Vec<String> = readers
            .into_iter()
            .map(|r| r.join().expect("reader thread"))
            .collect();
        running.store(false, Ordering::Relaxed);
        (sampler.join().expect("sampler"), hashes)
    });
    let fin = tunnel.finish();

    for (i, h) in read_hashes.iter().enumerate() {
        assert_eq!(h, &direct, "COPY TO {i} through zstd:6 differs from direct");
    }
    for i in 0..LOADERS {
        let back = dir.path().join(format!("back-{i}.copy"));
        assert_eq!(
            copy_to(Via::Direct, &format!("orders_in_{i}"), &back),
            direct,
            "the table COPY FROM {i} loaded through zstd:6 differs"
        );
    }

    // Rows went column-coded both ways, and each half decoded what the other coded.
    let (c, sv) = (&fin.client, &fin.server);
    for (what, sent, got) in [
        (
            "frontend->backend",
            &c.frontend_to_backend,
            &sv.frontend_to_backend,
        ),
        (
            "backend->frontend",
            &sv.backend_to_frontend,
            &c.backend_to_frontend,
        ),
    ] {
        assert!(
            sent.column_chunks * 2 > sent.chunks,
            "{what}: {} of {} chunks column-coded\n{fin:?}",
            sent.column_chunks,
            sent.chunks
        );
        assert_eq!(sent.column_chunks, got.column_chunks, "{what}\n{fin:?}");
        assert_eq!(sent.raw_bytes, got.raw_bytes, "{what}\n{fin:?}");
    }
    for s in [c, sv] {
        assert_eq!(s.decompression_errors, 0, "{s:?}");
        assert_eq!(s.connections_total, (LOADERS + READERS) as u64, "{s:?}");
    }
    for line in fin.client_log.lines().chain(fin.server_log.lines()) {
        assert!(!line.contains("error"), "{line}");
    }

    let n = (LOADERS + READERS) as u64;
    let per = (
        peak.0.saturating_sub(before.0) / n,
        peak.1.saturating_sub(before.1) / n,
    );
    eprintln!(
        "zstd:6, {n} connections column-coded at once ({} of {} chunks frontend->backend, {} of {} \
         backend->frontend): resident client half {:.1} -> {:.1} MiB ({:.0} KiB per connection), \
         server half {:.1} -> {:.1} MiB ({:.0} KiB per connection)",
        c.frontend_to_backend.column_chunks,
        c.frontend_to_backend.chunks,
        sv.backend_to_frontend.column_chunks,
        sv.backend_to_frontend.chunks,
        mib(before.0),
        mib(peak.0),
        per.0 as f64 / 1024.0,
        mib(before.1),
        mib(peak.1),
        per.1 as f64 / 1024.0
    );
    assert!(
        per.0 <= MAX_PER_CONNECTION && per.1 <= MAX_PER_CONNECTION,
        "resident growth per connection: client half {} KiB, server half {} KiB",
        per.0 / 1024,
        per.1 / 1024
    );
}
