//! `pgcompress logical recv` against a real PostgreSQL: what it writes equals, change for
//! change, the server's own decoding (test_decoding through pg_logical_slot_peek_changes) of
//! a slot created at the same position, with logical_decoding_work_mem at its 64kB minimum
//! (large transactions stream, and our --work-mem of 64kB makes them spill here) and at the
//! default (the server sends them whole at commit).

mod logical_support;

use logical_support::{
    assert_same, cluster, has_wal2json, ours, recv, recv_command, run_psql, test_decoding,
    w2j_normalise, wal2json,
};
use pgtest::Cluster;
use std::thread;

const SCHEMA: &str = "
CREATE TABLE kinds (
  id int PRIMARY KEY, i2 int2, i8 int8, num numeric(12,3), f4 real, f8 float8, b bool,
  t text, vc varchar(20), ch char(5), d date, tm time, tz timetz, ts timestamp(3),
  tstz timestamptz, iv interval, ba bytea, u uuid, j json, jb jsonb, ai int[], at text[]);
CREATE TABLE full_t (a int, b text, big text);
ALTER TABLE full_t REPLICA IDENTITY FULL;
CREATE TABLE bulk (id int PRIMARY KEY, payload text);
CREATE TABLE toasty (id int PRIMARY KEY, n int, doc text);
ALTER TABLE toasty ALTER COLUMN doc SET STORAGE EXTERNAL;
CREATE TABLE gone (x int);
CREATE PUBLICATION p FOR ALL TABLES;
";

const WORKLOAD: &str = "
INSERT INTO kinds VALUES (1, -2, 9000000000, 123456.789, 1.5, -0.25, true, 'it''s \"q\" \\ tab	nl
x', 'short', 'ab', '2024-02-29', '12:34:56', '01:02:03+04', '2024-01-02 03:04:05.678',
  '2024-01-02 03:04:05+00', '1 day 02:00:00', '\\x00ff10', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
  '{\"k\": [1, 2]}', '{\"z\": 1, \"a\": null}', '{1,NULL,3}', '{\"a b\",c}');
INSERT INTO kinds (id) VALUES (2);
UPDATE kinds SET t = 'changed', vc = NULL WHERE id = 1;
UPDATE kinds SET id = 3 WHERE id = 2;
DELETE FROM kinds WHERE id = 3;
INSERT INTO full_t VALUES (1, 'one', NULL), (2, 'two', repeat('x', 10));
UPDATE full_t SET b = 'uno' WHERE a = 1;
DELETE FROM full_t WHERE a = 2;
INSERT INTO toasty SELECT 1, 0, string_agg(md5(g::text), '') FROM generate_series(1, 300) g;
UPDATE toasty SET n = 1 WHERE id = 1;
INSERT INTO toasty VALUES (2, 0, repeat(md5('large'), 40000));
BEGIN;
INSERT INTO bulk SELECT g, 'row ' || g FROM generate_series(1, 3000) g;
SAVEPOINT s1;
INSERT INTO bulk SELECT g, 'rolled back ' || g FROM generate_series(3001, 5000) g;
ROLLBACK TO s1;
SAVEPOINT s2;
UPDATE bulk SET payload = payload || ' kept' WHERE id <= 1500;
RELEASE s2;
SELECT pg_logical_emit_message(true, 'pfx', 'in a big transaction');
COMMIT;
BEGIN;
INSERT INTO bulk SELECT g, 'aborted ' || g FROM generate_series(10001, 14000) g;
ROLLBACK;
INSERT INTO gone VALUES (1), (2);
BEGIN;
INSERT INTO gone VALUES (10);
UPDATE kinds SET t = 'prepared' WHERE id = 1;
PREPARE TRANSACTION 'tp_commit';
COMMIT PREPARED 'tp_commit';
BEGIN;
INSERT INTO gone VALUES (11);
PREPARE TRANSACTION 'tp_rollback';
ROLLBACK PREPARED 'tp_rollback';
TRUNCATE gone, full_t;
";

/// Two large transactions in two sessions at once, so their streams interleave.
fn interleaved(cluster: &Cluster) {
    let sessions: Vec<_> = (0..2)
        .map(|s| {
            let sql = format!(
                "BEGIN;
                 INSERT INTO bulk SELECT g, 'session {s} a' FROM generate_series({a}, {b}) g;
                 SELECT pg_sleep(0.3);
                 INSERT INTO bulk SELECT g, 'session {s} b' FROM generate_series({c}, {d}) g;
                 SELECT pg_sleep(0.3);
                 DELETE FROM bulk WHERE id BETWEEN {a} AND {a} + 99;
                 COMMIT;",
                a = 20_000 + s * 10_000,
                b = 21_999 + s * 10_000,
                c = 22_000 + s * 10_000,
                d = 23_999 + s * 10_000,
            );
            let conninfo = cluster.conninfo();
            let psql = cluster.install().bin("psql");
            thread::spawn(move || run_psql(&psql, &conninfo, &sql))
        })
        .collect();
    for s in sessions {
        s.join().expect("session thread");
    }
}

fn run_case(server_work_mem: Option<&str>, our_work_mem: &str, spill: &str) {
    let cluster = cluster(server_work_mem);
    cluster.psql(SCHEMA).expect("schema");
    cluster
        .psql(
            "SELECT pg_create_logical_replication_slot('ours', 'pgoutput');
             SELECT pg_create_logical_replication_slot('td', 'test_decoding');",
        )
        .expect("slots");
    let w2j = has_wal2json(&cluster);
    if w2j {
        cluster
            .psql("SELECT pg_create_logical_replication_slot('w2j', 'wal2json');")
            .expect("wal2json slot");
    } else {
        eprintln!("wal2json is not installed: comparing with test_decoding only");
    }
    cluster.psql(WORKLOAD).expect("workload");
    interleaved(&cluster);
    let stop = cluster.current_wal_lsn().expect("lsn");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.jsonl");
    let o = recv(
        &cluster,
        "ours",
        &out,
        &stop,
        &[
            "--work-mem",
            our_work_mem,
            "--spill-compression",
            spill,
            "--begin-commit",
        ],
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&o.stdout).expect("--json summary on stdout");
    let ours_all = ours(&out);
    let mine: Vec<_> = ours_all.iter().map(|(c, _)| c.clone()).collect();
    let theirs = test_decoding(&cluster, "td");
    assert!(
        theirs.len() > 10_000,
        "workload too small: {}",
        theirs.len()
    );
    assert_same(&mine, &theirs);
    if w2j {
        // Line for line, Begin and Commit included, with wal2json format 2.
        let text = std::fs::read_to_string(&out).expect("output");
        let ours_lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("json"))
            .collect();
        let theirs = wal2json(&cluster, "w2j");
        for (i, (a, b)) in ours_lines.iter().zip(&theirs).enumerate() {
            assert_eq!(
                w2j_normalise(a.clone(), true),
                w2j_normalise(b.clone(), false),
                "line {i} differs (ours left, wal2json right)"
            );
        }
        assert_eq!(ours_lines.len(), theirs.len());
        // Same key order as wal2json, for readers that compare text.
        assert!(
            text.starts_with(r#"{"action":"B","xid":"#),
            "{}",
            &text[..80]
        );
    }
    // The workload reached every path it was written for.
    for action in ["I", "U", "D", "T", "M"] {
        assert!(
            mine.iter().any(|c| c.action == action),
            "no {action} change"
        );
    }
    assert!(mine
        .iter()
        .any(|c| c.action == "U" && c.table == "public.kinds" && !c.identity.is_empty()));
    assert!(mine
        .iter()
        .any(|c| c.action == "D" && c.table == "public.full_t" && c.identity.len() == 3));
    assert!(!mine.iter().any(|c| c.columns.iter().any(|(_, v)| v
        .as_deref()
        .is_some_and(|v| v.starts_with("aborted") || v.starts_with("rolled back")))));

    // Types and JSON shapes that test_decoding cannot show.
    let first = &ours_all[0].1;
    assert!(first.get("timestamp").is_some() && first.get("xid").is_some());
    assert_eq!(first["action"], "I");
    let cols = first["columns"].as_array().expect("columns");
    let ty = |n: &str| {
        cols.iter()
            .find(|c| c["name"] == n)
            .map(|c| (c["type"].clone(), c["value"].clone()))
            .expect("column")
    };
    assert_eq!(ty("id"), ("integer".into(), 1.into()));
    assert_eq!(ty("b"), ("boolean".into(), true.into()));
    assert_eq!(ty("vc").0, "character varying(20)");
    assert_eq!(ty("num").0, "numeric(12,3)");
    assert_eq!(ty("ts").0, "timestamp(3) without time zone");
    assert_eq!(ty("ai"), ("integer[]".into(), "{1,NULL,3}".into()));
    assert_eq!(ty("jb").0, "jsonb");
    // Commit LSNs never go backwards: transactions are in commit order.
    let lsns: Vec<u64> = ours_all
        .iter()
        .map(|(_, v)| {
            logical::Lsn::parse(v["lsn"].as_str().expect("lsn"))
                .expect("lsn")
                .0
        })
        .collect();
    assert!(lsns.windows(2).all(|w| w[0] <= w[1]));
    assert_eq!(summary["reason"], "reached --stop-at-lsn");
    assert!(summary["transactions"].as_u64().unwrap_or(0) >= 10);
    if server_work_mem.is_some() {
        let streamed = cluster
            .query_one("SELECT stream_txns FROM pg_stat_replication_slots WHERE slot_name = 'ours'")
            .expect("slot stats");
        assert_ne!(
            streamed, "0",
            "the server streamed nothing: the test lost its point"
        );
    }
    if our_work_mem == "64kB" {
        let raw = summary["spill_raw_bytes"].as_u64().unwrap_or(0);
        let disk = summary["spill_disk_bytes"].as_u64().unwrap_or(0);
        assert!(raw > 100_000, "nothing spilled: {summary}");
        assert!(
            disk < raw / 2,
            "lz4 spill of this workload should halve it: {summary}"
        );
    }
}

#[test]
fn same_changes_as_test_decoding_when_streaming_and_spilling() {
    run_case(Some("64kB"), "64kB", "lz4");
}

#[test]
fn same_changes_as_test_decoding_at_default_work_mem() {
    run_case(None, "64MB", "zstd:1");
}

/// Every pgoutput protocol version the server speaks (1 to 3 on PostgreSQL 15, 1 to 4 from 16)
/// gives test_decoding's changes: version 1 without streaming (the server holds and spills the
/// large transactions itself and sends them at commit), 2 and up streamed and spilled here.
/// A version the server does not speak is refused in one line before anything is written.
#[test]
fn every_protocol_version_the_server_speaks_gives_the_same_changes() {
    let cluster = cluster(Some("64kB"));
    let highest = match cluster.install().major() {
        15 => 3,
        _ => 4,
    };
    cluster.psql(SCHEMA).expect("schema");
    let mut slots = String::new();
    for v in 1..=highest {
        slots += &format!("SELECT pg_create_logical_replication_slot('ours_v{v}', 'pgoutput');");
    }
    slots += "SELECT pg_create_logical_replication_slot('td', 'test_decoding');";
    cluster.psql(&slots).expect("slots");
    cluster.psql(WORKLOAD).expect("workload");
    interleaved(&cluster);
    let stop = cluster.current_wal_lsn().expect("lsn");
    let theirs = test_decoding(&cluster, "td");
    assert!(
        theirs.len() > 10_000,
        "workload too small: {}",
        theirs.len()
    );
    let dir = tempfile::tempdir().expect("tempdir");

    let refused = recv_command(&cluster, "ours_v1")
        .arg("-o")
        .arg(dir.path().join("refused.jsonl"))
        .args(["--proto-version", &(highest + 1).to_string()])
        .output()
        .expect("run pgcompress");
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!(
            "pgoutput protocol version {} is not one",
            highest + 1
        )),
        "{err}"
    );
    assert!(!dir.path().join("refused.jsonl").exists());

    for v in 1..=highest {
        let slot = format!("ours_v{v}");
        let out = dir.path().join(format!("v{v}.jsonl"));
        let version = v.to_string();
        recv(
            &cluster,
            &slot,
            &out,
            &stop,
            &["--proto-version", &version, "--work-mem", "64kB"],
        );
        let mine: Vec<_> = ours(&out).into_iter().map(|(c, _)| c).collect();
        assert_same(&mine, &theirs);
        let (streamed, spilled) = cluster
            .query_one(&format!(
                "SELECT stream_txns || ' ' || spill_txns FROM pg_stat_replication_slots \
                 WHERE slot_name = '{slot}'"
            ))
            .expect("slot stats")
            .split_once(' ')
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
            .expect("two numbers");
        if v == 1 {
            assert_eq!(streamed, "0", "version 1 cannot stream");
            assert_ne!(
                spilled, "0",
                "the server held nothing: the test lost its point"
            );
        } else {
            assert_ne!(streamed, "0", "version {v}: the server streamed nothing");
        }
        eprintln!(
            "proto_version {v}: {} changes equal test_decoding's (server streamed {streamed}, \
             spilled {spilled} transactions)",
            mine.len()
        );
    }
}

/// --create-slot, SIGTERM (exit 0 with everything durable), a restart with --if-not-exists
/// that writes nothing twice, and `-o -`.
#[test]
fn sigterm_finishes_durably_and_a_restart_continues() {
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    let cluster = cluster(None);
    cluster
        .psql("CREATE TABLE t (id int PRIMARY KEY, v text); CREATE PUBLICATION p FOR TABLE t;")
        .expect("schema");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.jsonl");
    let args = |extra: &[&str]| {
        let mut cmd = logical_support::pgcompress();
        cmd.args(["logical", "recv", "-d", &cluster.conninfo(), "--slot", "s"])
            .args([
                "--publication",
                "p",
                "--create-slot",
                "--if-not-exists",
                "-o",
            ])
            .arg(&out)
            .args(extra);
        cmd
    };
    let child = args(&["--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // The slot exists once the command has started replication.
    cluster
        .wait_until("the slot to be active", Duration::from_secs(30), || {
            Ok(cluster.query_one("SELECT count(*) FROM pg_replication_slots WHERE active")? == "1")
        })
        .expect("slot active");
    cluster
        .psql("INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 100) g;")
        .expect("insert");
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::read_to_string(&out)
        .unwrap_or_default()
        .lines()
        .count()
        < 100
    {
        assert!(Instant::now() < deadline, "rows never arrived");
        std::thread::sleep(Duration::from_millis(50));
    }
    let summary = sigterm_summary(child);
    assert_eq!(summary["reason"], "signal");
    assert_eq!(summary["transactions"], 1);
    let len = std::fs::metadata(&out).expect("out").len();
    let state = std::fs::read_to_string(dir.path().join("out.jsonl.state")).expect("state");
    assert!(state.contains(&format!("offset {len}\n")), "{state}");
    // The server was told: the slot is confirmed past the transaction. The walsender reads
    // the last status update after the consumer has gone, so its effect is waited for.
    let flushed = summary["flushed_lsn"]
        .as_str()
        .expect("flushed_lsn")
        .to_owned();
    let confirmed = "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 's'";
    cluster
        .wait_until("the last status update", Duration::from_secs(30), || {
            Ok(cluster.query_one(confirmed)? == flushed)
        })
        .unwrap_or_else(|e| {
            let now = cluster.query_one(confirmed).unwrap_or_default();
            panic!("{e}: confirmed_flush_lsn {now}, the summary says {flushed}")
        });

    cluster
        .psql("UPDATE t SET v = 'w' WHERE id <= 10;")
        .expect("update");
    let stop = cluster.current_wal_lsn().expect("lsn");
    let o = args(&["--stop-at-lsn", &stop]).output().expect("rerun");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rows = ours(&out);
    assert_eq!(rows.len(), 110, "100 inserts once, then 10 updates");
    assert!(rows[100..].iter().all(|(c, _)| c.action == "U"));

    // To standard output.
    cluster
        .psql(
            "SELECT pg_create_logical_replication_slot('s2', 'pgoutput');
             INSERT INTO t VALUES (1000, 'to stdout');",
        )
        .expect("slot s2");
    let stop = cluster.current_wal_lsn().expect("lsn");
    let o = logical_support::pgcompress()
        .args(["logical", "recv", "-d", &cluster.conninfo(), "--slot", "s2"])
        .args(["--publication", "p", "-o", "-", "--stop-at-lsn", &stop])
        // Its spill directory in the test's, not in the home of whoever runs the tests.
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .output()
        .expect("stdout run");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).expect("utf-8");
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.contains(r#""value":"to stdout""#), "{text}");
}

/// The acceptance bound on memory, on the `logical recv` process itself: a streamed transaction of
/// over 1 GB of changes held with `--work-mem 64MB` while its peak resident memory stays under 256 MB.
/// Takes a few minutes and about 3 GB of disk; `scripts/memory-bounds.sh` runs it.
#[test]
#[ignore]
fn a_gigabyte_transaction_through_logical_recv_stays_under_256mb() {
    use std::process::Stdio;
    use std::time::Duration;

    let cluster = cluster(None);
    cluster
        .psql(
            "CREATE TABLE big (id int PRIMARY KEY, v text);
             ALTER TABLE big ALTER COLUMN v SET STORAGE EXTERNAL;
             CREATE PUBLICATION p FOR TABLE big;
             SELECT pg_create_logical_replication_slot('s', 'pgoutput');",
        )
        .expect("schema");
    // 1.1 million rows of 1 KiB of text in one transaction.
    cluster
        .psql(
            "INSERT INTO big SELECT g, repeat(md5(g::text), 32)
             FROM generate_series(1, 1100000) g;",
        )
        .expect("the large transaction");
    let stop = cluster
        .query_one("SELECT pg_current_wal_lsn()")
        .expect("lsn");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.jsonl");
    let mut child = logical_support::pgcompress()
        .args([
            "logical",
            "recv",
            "--dbname",
            &cluster.conninfo(),
            "--slot",
            "s",
        ])
        .args(["--publication", "p", "--work-mem", "64MB", "--spill-dir"])
        .arg(dir.path().join("spill"))
        .arg("-o")
        .arg(&out)
        .args(["--stop-at-lsn", &stop, "--idle-exit", "120", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // VmHWM only grows: the last value read before the process exits is its peak so far.
    let status = format!("/proc/{}/status", child.id());
    let mut peak_kb = 0u64;
    while child.try_wait().expect("wait").is_none() {
        if let Ok(text) = std::fs::read_to_string(&status) {
            if let Some(kb) = text
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            {
                peak_kb = peak_kb.max(kb);
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let o = child.wait_with_output().expect("exit");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&o.stdout).expect("summary");
    let raw = summary["spill_raw_bytes"].as_u64().unwrap_or_default();
    eprintln!(
        "logical recv held a transaction of {raw} bytes of changes with --work-mem 64MB: peak RSS {} MiB; summary {summary}",
        peak_kb / 1024
    );
    assert!(raw > 1 << 30, "only {raw} bytes of changes: {summary}");
    let lines = std::fs::read_to_string(&out)
        .expect("output")
        .lines()
        .count();
    assert_eq!(lines, 1_100_000);
    assert!(peak_kb > 0 && peak_kb < 256 * 1024, "peak RSS {peak_kb} kB");
}

/// Within a transaction, changes come out in WAL order, not key order: two streamed
/// transactions insert into one table at once, and the second updates 100 of its rows with a
/// bitmap heap scan, which visits them in physical order. The first 40 were moved to the end
/// of the table by an earlier update, so that order is not key order; ours must equal
/// test_decoding's, change for change, with the server streaming and our --work-mem spilling.
#[test]
fn changes_keep_wal_order_inside_concurrent_streamed_transactions() {
    let cluster = cluster(Some("64kB"));
    cluster
        .psql(
            "CREATE TABLE evt (k int PRIMARY KEY, payload jsonb);
             CREATE PUBLICATION p FOR TABLE evt;
             SELECT pg_create_logical_replication_slot('ours', 'pgoutput');
             SELECT pg_create_logical_replication_slot('td', 'test_decoding');",
        )
        .expect("schema and slots");
    let first = "BEGIN;
        INSERT INTO evt SELECT g, '{\"a\": 1}' FROM generate_series(100001, 107500) g;
        SELECT pg_sleep(1);
        INSERT INTO evt SELECT g, '{\"a\": 1}' FROM generate_series(107501, 115000) g;
        COMMIT;";
    let second = "BEGIN;
        INSERT INTO evt SELECT g, '{\"b\": 1}' FROM generate_series(200001, 212000) g;
        UPDATE evt SET payload = '{\"y\": 1}' WHERE k BETWEEN 200001 AND 200040;
        SELECT pg_sleep(0.5);
        SET LOCAL enable_seqscan = off;
        SET LOCAL enable_indexscan = off;
        UPDATE evt SET payload = '{\"z\": 2}' WHERE k BETWEEN 200001 AND 200100;
        COMMIT;";
    let sessions: Vec<_> = [first, second]
        .into_iter()
        .map(|sql| {
            let (psql, conninfo) = (cluster.install().bin("psql"), cluster.conninfo());
            let sql = sql.to_owned();
            let t = thread::spawn(move || run_psql(&psql, &conninfo, &sql));
            thread::sleep(std::time::Duration::from_millis(100));
            t
        })
        .collect();
    for s in sessions {
        s.join().expect("session thread");
    }
    let stop = cluster.current_wal_lsn().expect("lsn");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.jsonl");
    recv(&cluster, "ours", &out, &stop, &["--work-mem", "64kB"]);
    let mine: Vec<_> = ours(&out).into_iter().map(|(c, _)| c).collect();
    let theirs = test_decoding(&cluster, "td");
    let z_keys = |changes: &[logical_support::Change]| -> Vec<String> {
        changes
            .iter()
            .filter(|c| {
                c.action == "U"
                    && c.columns.iter().any(|(n, v)| {
                        n == "payload" && v.as_deref().is_some_and(|v| v.contains("\"z\""))
                    })
            })
            .filter_map(|c| {
                c.columns
                    .iter()
                    .find(|(n, _)| n == "k")
                    .and_then(|(_, v)| v.clone())
            })
            .collect()
    };
    let theirs_z = z_keys(&theirs);
    assert_eq!(theirs_z.len(), 100);
    let mut sorted = theirs_z.clone();
    sorted.sort();
    assert_ne!(
        theirs_z, sorted,
        "the scan visited the rows in key order: the test lost its point"
    );
    assert_eq!(
        z_keys(&mine),
        theirs_z,
        "the bitmap scan's updates, ours against test_decoding"
    );
    assert_same(&mine, &theirs);
    let streamed = cluster
        .query_one("SELECT stream_txns FROM pg_stat_replication_slots WHERE slot_name = 'ours'")
        .expect("slot stats");
    assert_ne!(streamed, "0", "the server streamed nothing");
}

/// `--metrics`: while a large transaction is open, a scrape shows it held, its spill file and the
/// memory of open transactions within `--work-mem`; once it commits, the counters agree exactly
/// with the output file (transactions, change lines, durable bytes), with the server's own view
/// of the slot (`confirmed_flush_lsn`) and with the `--json` summary printed at SIGTERM.
#[test]
fn metrics_agree_with_the_output_the_server_and_the_summary() {
    use std::collections::HashMap;
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    const WORK_MEM: u64 = 64 << 10;
    let cluster = cluster(Some("64kB"));
    cluster
        .psql(
            "CREATE TABLE t (id int PRIMARY KEY, v text); CREATE PUBLICATION p FOR TABLE t;
             SELECT pg_create_logical_replication_slot('m', 'pgoutput');",
        )
        .expect("schema");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.jsonl");
    let port = pgtest::free_port().expect("port");
    let mut child = recv_command(&cluster, "m")
        .arg("-o")
        .arg(&out)
        .args(["--work-mem", "64kB", "--status-interval", "0.2"])
        .args(["--begin-commit", "--json"])
        .args(["--metrics", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut scrape = || -> HashMap<String, u64> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let text = loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                panic!("logical recv exited early: {status}");
            }
            match scrape_port(port) {
                Some(text) => break text,
                None if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                None => panic!("no metrics endpoint on port {port}"),
            }
        };
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        let (_, body) = text.split_once("\r\n\r\n").expect("body");
        assert!(body.ends_with("# EOF\n"), "{body}");
        body.lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| {
                let (name, value) = l.split_once(' ').expect("name value");
                (name.to_owned(), value.parse().expect("an integer"))
            })
            .collect()
    };
    let get = |m: &HashMap<String, u64>, name: &str| -> u64 {
        *m.get(&format!("pgcompress_logical_{name}"))
            .unwrap_or_else(|| panic!("{name} missing: {m:?}"))
    };
    let wait = |what: &str,
                scrape: &mut dyn FnMut() -> HashMap<String, u64>,
                done: &dyn Fn(&HashMap<String, u64>) -> bool| {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let m = scrape();
            assert!(
                get(&m, "memory_bytes") <= WORK_MEM,
                "over --work-mem: {m:?}"
            );
            if done(&m) {
                return m;
            }
            assert!(Instant::now() < deadline, "{what}: {m:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };

    // Five small transactions, then a large one that stays open for a while: the server
    // streams it (logical_decoding_work_mem 64kB) and it spills here.
    cluster
        .psql(
            &(0..5)
                .map(|i| format!("INSERT INTO t VALUES ({i}, 'small {i}');\n"))
                .collect::<String>(),
        )
        .expect("small transactions");
    let large = {
        let (psql, conninfo) = (cluster.install().bin("psql"), cluster.conninfo());
        std::thread::spawn(move || {
            run_psql(
                &psql,
                &conninfo,
                "BEGIN;
                 INSERT INTO t SELECT g, repeat('x', 200) FROM generate_series(100, 20099) g;
                 SELECT pg_sleep(8);
                 COMMIT;",
            )
        })
    };
    let open = wait(
        "the large transaction held and spilled",
        &mut scrape,
        &|m| get(m, "open_transactions") == 1 && get(m, "spill_files") >= 1,
    );
    assert!(!large.is_finished(), "seen only after the commit: {open:?}");
    assert!(get(&open, "spilled_transactions_total") >= 1, "{open:?}");
    assert!(get(&open, "spill_file_bytes") > 0, "{open:?}");
    assert!(get(&open, "spill_raw_bytes_total") > 0, "{open:?}");
    large.join().expect("large transaction");
    let end = logical::Lsn::parse(&cluster.current_wal_lsn().expect("lsn")).expect("lsn");

    // Everything committed is written and confirmed; nothing is held any more.
    let server_confirmed = || {
        let text = cluster
            .query_one("SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'm'")
            .expect("confirmed_flush_lsn");
        logical::Lsn::parse(&text).expect("lsn").0
    };
    let done = wait(
        "all written, confirmed and agreed with the server",
        &mut scrape,
        &|m| {
            get(m, "confirmed_lsn") >= end.0
                && get(m, "open_transactions") == 0
                && get(m, "confirmed_lsn") == server_confirmed()
        },
    );
    let text = std::fs::read_to_string(&out).expect("output");
    let commits = text
        .lines()
        .filter(|l| l.starts_with(r#"{"action":"C""#))
        .count() as u64;
    let changes = text
        .lines()
        .filter(|l| !l.starts_with(r#"{"action":"B""#))
        .count() as u64
        - commits;
    assert_eq!(commits, 6, "five small transactions and the large one");
    assert_eq!(changes, 20_005);
    assert_eq!(get(&done, "transactions_total"), commits);
    assert_eq!(get(&done, "changes_total"), changes);
    assert_eq!(get(&done, "output_durable_bytes"), text.len() as u64);
    assert_eq!(get(&done, "memory_bytes"), 0);
    assert_eq!(get(&done, "spill_files"), 0);
    assert_eq!(get(&done, "spill_file_bytes"), 0);
    assert_eq!(
        get(&done, "lag_bytes"),
        get(&done, "received_lsn").saturating_sub(get(&done, "confirmed_lsn"))
    );
    assert!(
        get(&done, "received_bytes_total") > 20_000 * 200,
        "{done:?}"
    );
    // The process's own figures, as the tunnel gives them.
    let rss = done["process_resident_memory_bytes"];
    assert!(rss > 1 << 20 && rss < 256 << 20, "resident memory {rss}");
    assert!(done["process_open_fds"] >= 3, "{done:?}");

    let summary = sigterm_summary(child);
    for (key, metric) in [
        ("transactions", "transactions_total"),
        ("changes", "changes_total"),
        ("output_bytes", "output_durable_bytes"),
        ("received_bytes", "received_bytes_total"),
        ("spilled_transactions", "spilled_transactions_total"),
        ("spill_raw_bytes", "spill_raw_bytes_total"),
        ("spill_disk_bytes", "spill_written_bytes_total"),
    ] {
        assert_eq!(
            summary[key].as_u64(),
            Some(get(&done, metric)),
            "{key} against {metric}: {summary}"
        );
    }
}

/// Sends SIGTERM to a `logical recv --json` run and returns the summary it printed, once it has
/// exited 0.
fn sigterm_summary(child: std::process::Child) -> serde_json::Value {
    let term = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill -TERM");
    assert!(term.success());
    let o = child.wait_with_output().expect("exit");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("--json summary on stdout")
}

/// `GET /metrics` on 127.0.0.1:`port`, or `None` while nothing listens there.
fn scrape_port(port: u16) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("send");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    Some(out)
}
