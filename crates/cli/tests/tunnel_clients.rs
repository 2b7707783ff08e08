//! Real clients, unchanged, through `pgcompress tunnel` with zstd:1 and lz4 against a real PostgreSQL 15,
//! each compared with a direct connection: psql scripts, pgbench in its three
//! query modes, pg_dump -Fc then pg_restore -j 2, and a cancelled pg_sleep.

mod tunnel_support;

use std::process::Stdio;
use std::time::{Duration, Instant};

use pgtest::Cluster;
use tunnel_support::{client, psql, run_ok, table_checksums, Keys, Tunnel, Upstream, Via, METHODS};

/// A script that exercises what psql users do: errors that do not stop it, an aborted transaction,
/// COPY FROM STDIN inside the script, \copy out and back in, notices, and results of several MB.
const SCRIPT: &str = r#"SET TimeZone = 'UTC';
CREATE TEMP TABLE items (id int PRIMARY KEY, name text, price numeric(10,2), seen timestamptz);
INSERT INTO items SELECT g, 'item ' || g, g * 1.25, timestamptz '2024-01-01 00:00+00' + g * interval '1 minute'
  FROM generate_series(1, 50000) g;
SELECT count(*), sum(price) FROM items;
SELECT * FROM no_such_table;
INSERT INTO items VALUES (1, 'duplicate', 0, NULL);
BEGIN;
UPDATE items SET price = price * 2 WHERE id <= 10;
SELECT 1/0;
SELECT 'after an error in a transaction';
ROLLBACK;
SELECT sum(price) FROM items WHERE id <= 10;
COPY items (id, name, price, seen) FROM STDIN;
100001	inline	1.00	2024-02-01 00:00:00+00
100002	inline two	2.00	\N
\.
\copy items TO 'OUT_FILE'
CREATE TEMP TABLE back (LIKE items);
\copy back FROM 'OUT_FILE'
SELECT count(*), sum(price), max(seen) FROM back;
SELECT id, name, price, seen, md5(name) FROM items ORDER BY id;
SELECT g, repeat(md5(g::text), 1 + g % 40) FROM generate_series(1, 20000) g;
DO $$ BEGIN RAISE NOTICE 'a notice from the server: %', 42; END $$;
SELECT pg_sleep(0.05), 'interactive';
\echo done
"#;

#[test]
fn psql_script_output_is_identical() {
    let cluster = Cluster::start().expect("cluster");
    let keys = Keys::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let run = |via: Via, name: &str| {
        // \copy takes its file name literally (no variables), so each run gets its own script; the
        // script's name is the same for all, since psql puts it in front of every error message.
        let out_file = dir.path().join(format!("{name}.copy"));
        let script = dir.path().join("script.sql");
        let text = SCRIPT.replace("OUT_FILE", &out_file.display().to_string());
        std::fs::write(&script, text).expect("write script");
        let mut cmd = client(&cluster, "psql", via);
        cmd.arg("-X").arg("-f").arg(&script);
        let out = run_ok(&mut cmd);
        let copied = std::fs::read(&out_file).expect("\\copy output");
        (out.stdout, out.stderr, copied)
    };
    let (stdout, stderr, copied) = run(Via::Direct, "direct");
    let text = String::from_utf8_lossy(&stderr);
    // The script's errors happened and did not stop it.
    for expected in [
        "relation \"no_such_table\" does not exist",
        "duplicate key value",
        "division by zero",
        "current transaction is aborted",
        "a notice from the server: 42",
    ] {
        assert!(
            text.contains(expected),
            "direct stderr lacks {expected:?}: {text}"
        );
    }
    assert!(
        stdout.len() > 10_000_000,
        "large results: {} bytes",
        stdout.len()
    );
    assert!(String::from_utf8_lossy(&stdout)
        .trim_end()
        .ends_with("done"));
    for method in METHODS {
        let tunnel = Tunnel::start(&keys, &cluster, Upstream::Socket, method);
        let (t_stdout, t_stderr, t_copied) = run(Via::Tunnel(&tunnel), method);
        let fin = tunnel.finish();
        assert_same(&stdout, &t_stdout, &format!("psql stdout through {method}"));
        assert_same(&stderr, &t_stderr, &format!("psql stderr through {method}"));
        assert_same(&copied, &t_copied, &format!("\\copy file through {method}"));
        let b2f = fin.client.backend_to_frontend;
        eprintln!(
            "psql script through {method}: {} bytes from the server, {} on the link ({} chunks)",
            b2f.raw_bytes, b2f.link_bytes, b2f.chunks
        );
        assert!(b2f.raw_bytes >= stdout.len() as u64 / 2, "{fin:?}");
        assert!(
            b2f.chunks > 0,
            "the large results were not compressed: {fin:?}"
        );
    }
}

/// Byte equality with a readable failure: the first line that differs.
fn assert_same(expected: &[u8], got: &[u8], what: &str) {
    if expected == got {
        return;
    }
    let e = String::from_utf8_lossy(expected);
    let g = String::from_utf8_lossy(got);
    let (n, (el, gl)) = e
        .lines()
        .zip(g.lines())
        .enumerate()
        .find(|(_, (a, b))| a != b)
        .unwrap_or((0, ("(one is a prefix of the other)", "")));
    panic!(
        "{what} differs from direct ({} vs {} bytes); first difference at line {}: direct {el:?}, tunnel {gl:?}",
        expected.len(),
        got.len(),
        n + 1
    );
}

#[test]
fn pgbench_simple_extended_prepared() {
    let cluster = Cluster::start().expect("cluster");
    cluster.pgbench_init(1).expect("pgbench -i");
    let keys = Keys::new();
    let transactions = 150;
    let clients = 2;
    let mut expected_history = 0;
    let tunnels: Vec<Tunnel> = METHODS
        .iter()
        .map(|m| Tunnel::start(&keys, &cluster, Upstream::Socket, m))
        .collect();
    let mut vias = vec![Via::Direct];
    vias.extend(tunnels.iter().map(Via::Tunnel));
    for via in vias {
        for mode in ["simple", "extended", "prepared"] {
            let started = Instant::now();
            let mut cmd = client(&cluster, "pgbench", via);
            cmd.args(["-n", "-M", mode, "-c", &clients.to_string(), "-j", "2"])
                .args(["-t", &transactions.to_string()]);
            let out = run_ok(&mut cmd);
            let text = String::from_utf8_lossy(&out.stdout);
            let total = transactions * clients;
            let processed = format!("number of transactions actually processed: {total}/{total}");
            assert!(
                text.contains(&processed),
                "{} -M {mode}: {text}",
                via.label()
            );
            assert!(
                text.contains("number of failed transactions: 0 "),
                "{} -M {mode}: {text}",
                via.label()
            );
            expected_history += total;
            eprintln!(
                "pgbench -M {mode} {}: {total} transactions in {:.2} s",
                via.label(),
                started.elapsed().as_secs_f64()
            );
            // Every transaction landed exactly once: the balances agree with the history.
            let sums = psql(
                &cluster,
                via,
                "SELECT (SELECT count(*) FROM pgbench_history), (SELECT sum(delta) FROM pgbench_history), \
                 (SELECT sum(abalance) FROM pgbench_accounts), (SELECT sum(bbalance) FROM pgbench_branches), \
                 (SELECT sum(tbalance) FROM pgbench_tellers)",
            );
            let f: Vec<&str> = sums.split('|').collect();
            assert_eq!(f[0], expected_history.to_string(), "history rows: {sums}");
            assert!(
                f[1] == f[2] && f[2] == f[3] && f[3] == f[4],
                "balances: {sums}"
            );
        }
    }
    for t in tunnels {
        let method = t.method.clone();
        let fin = t.finish();
        assert_eq!(fin.client.decompression_errors, 0, "{fin:?}");
        assert_eq!(fin.client.connections_open, 0, "{fin:?}");
        // pgbench opens one connection per client per run (three runs), plus the checks.
        assert!(
            fin.client.connections_total >= 3 * clients as u64,
            "{method}: {fin:?}"
        );
    }
}

#[test]
fn pg_dump_then_pg_restore_jobs_2() {
    let cluster = Cluster::start().expect("cluster");
    // A server-only package (16's) borrows 17's pg_dump and pg_restore (15's refuse a newer
    // server); 17's pg_restore sets transaction_timeout, which 16 does not know, so there the
    // archive is turned into a script offline, that one line dropped, and psql restores it.
    let borrowed = cluster.install().own_bin("pg_restore").is_none();
    cluster.pgbench_init(1).expect("pgbench -i");
    cluster
        .psql(
            "CREATE TABLE kinds (id int PRIMARY KEY, b bytea, j jsonb, a int[], t text, ts timestamptz);
             INSERT INTO kinds SELECT g, decode(md5(g::text), 'hex'), jsonb_build_object('g', g, 'm', md5(g::text)),
                    ARRAY[g, g * 2, g * 3], repeat(md5(g::text), g % 50), '2024-01-01'::timestamptz + g * interval '1 s'
               FROM generate_series(1, 20000) g;
             CREATE INDEX ON kinds (ts);",
        )
        .expect("extra table");
    let source = table_checksums(&cluster, Via::Direct, "postgres");
    let keys = Keys::new();
    let dir = tempfile::tempdir().expect("tempdir");
    for method in METHODS {
        let tunnel = Tunnel::start(&keys, &cluster, Upstream::Socket, method);
        let via = Via::Tunnel(&tunnel);
        let dump = dir.path().join(format!("{method}.dump"));
        let started = Instant::now();
        run_ok(
            client(&cluster, "pg_dump", via)
                .args(["-Fc", "-d", "postgres", "-f"])
                .arg(&dump),
        );
        let dumped = started.elapsed();
        let db = format!("restored_{}", method.replace(':', "_"));
        run_ok(client(&cluster, "createdb", via).arg(&db));
        let started = Instant::now();
        if borrowed {
            let script = run_ok(
                client(&cluster, "pg_restore", Via::Direct)
                    .arg("-f-")
                    .arg(&dump),
            )
            .stdout;
            let script: String = String::from_utf8(script)
                .expect("utf-8 script")
                .lines()
                .filter(|l| !l.starts_with("SET transaction_timeout"))
                .map(|l| format!("{l}\n"))
                .collect();
            let path = dir.path().join(format!("{method}.sql"));
            std::fs::write(&path, script).expect("write script");
            run_ok(
                client(&cluster, "psql", via)
                    .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", &db, "-f"])
                    .arg(&path),
            );
        } else {
            run_ok(
                client(&cluster, "pg_restore", via)
                    .args(["-j", "2", "-d", &db])
                    .arg(&dump),
            );
        }
        let restored = started.elapsed();
        assert_eq!(
            table_checksums(&cluster, via, &db),
            source,
            "tables restored through {method} differ from the source"
        );
        let fin = tunnel.finish();
        eprintln!(
            "pg_dump -Fc through {method}: {:.2} s ({} bytes from the server, {} on the link); \
             {}: {:.2} s ({} bytes to the server, {} on the link)",
            dumped.as_secs_f64(),
            if borrowed {
                "pg_restore script by psql"
            } else {
                "pg_restore -j 2"
            },
            fin.client.backend_to_frontend.raw_bytes,
            fin.client.backend_to_frontend.link_bytes,
            restored.as_secs_f64(),
            fin.client.frontend_to_backend.raw_bytes,
            fin.client.frontend_to_backend.link_bytes,
        );
        assert_eq!(fin.client.decompression_errors, 0, "{fin:?}");
    }
}

#[test]
fn pg_sleep_is_cancelled_through_the_tunnel() {
    let cluster = Cluster::start().expect("cluster");
    let keys = Keys::new();
    let sql = "SELECT pg_sleep(30) /* cancel me */";
    let cancel = |via: Via| -> (Duration, String) {
        let mut cmd = client(&cluster, "psql", via);
        cmd.args(["-X", "-c", sql])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let child = cmd.spawn().expect("spawn psql");
        let active = format!(
            "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query = '{sql}'"
        );
        cluster
            .wait_until("pg_sleep to run", Duration::from_secs(20), || {
                Ok(cluster.query_one(&active)? == "1")
            })
            .expect("the query runs");
        // psql answers SIGINT by sending a CancelRequest on a new connection to where it connected.
        let started = Instant::now();
        tunnel_support::signal(child.id(), libc::SIGINT);
        let out = child.wait_with_output().expect("psql exits");
        let took = started.elapsed();
        assert!(!out.status.success(), "{}: psql succeeded?", via.label());
        (took, String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (took, direct_err) = cancel(Via::Direct);
    eprintln!(
        "pg_sleep(30) cancelled direct in {:.3} s",
        took.as_secs_f64()
    );
    assert!(
        direct_err.contains("canceling statement due to user request"),
        "{direct_err}"
    );
    for method in METHODS {
        let tunnel = Tunnel::start(&keys, &cluster, Upstream::Socket, method);
        let (took, err) = cancel(Via::Tunnel(&tunnel));
        let fin = tunnel.finish();
        eprintln!(
            "pg_sleep(30) cancelled through {method} in {:.3} s",
            took.as_secs_f64()
        );
        // PostgreSQL's "canceling statement due to user request", as direct: the cancel
        // reached the backend before pg_sleep(30) ended, whatever the machine's speed.
        assert_eq!(err, direct_err, "psql's message through {method}");
        // The session and the CancelRequest, each on its own link connection.
        assert_eq!(fin.client.connections_total, 2, "{fin:?}");
    }
}

/// PostgreSQL 18's protocol 3.2 (its longer cancel keys) through the tunnel: 18's psql insists on
/// it (min and max 3.2, so the connection fails rather than fall back) and reads the same result
/// as directly. Older majors have no 3.2 server or client: said on stderr.
#[test]
fn protocol_3_2_through_the_tunnel() {
    let cluster = Cluster::start().expect("cluster");
    let major = cluster.install().major();
    if major < 18 || cluster.install().own_bin("psql").is_none() {
        eprintln!("PostgreSQL {major}: protocol 3.2 needs 18's server and psql: not tested");
        return;
    }
    let query = "SELECT md5(string_agg(g::text, ',')) FROM generate_series(1, 200000) g";
    let run = |via: Via| {
        let mut cmd = client(&cluster, "psql", via);
        cmd.env("PGMINPROTOCOLVERSION", "3.2")
            .env("PGMAXPROTOCOLVERSION", "3.2")
            .args(["-X", "-At", "-c", query, "-c", "\\conninfo"]);
        String::from_utf8(run_ok(&mut cmd).stdout).expect("utf8")
    };
    let direct = run(Via::Direct);
    assert!(direct.contains("Protocol Version|3.2"), "{direct}");
    let keys = Keys::new();
    for method in METHODS {
        let tunnel = Tunnel::start(&keys, &cluster, Upstream::Socket, method);
        let through = run(Via::Tunnel(&tunnel));
        tunnel.finish();
        assert!(
            through.contains("Protocol Version|3.2"),
            "{method}: {through}"
        );
        assert_eq!(
            direct.lines().next(),
            through.lines().next(),
            "{method}: the result differs"
        );
    }
}
