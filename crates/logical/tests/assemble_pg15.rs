//! PostgreSQL 15 is the oracle for the assembler: the same workload is read from two pgoutput
//! slots created at the same point, one with `streaming 'on'` (large transactions arrive in
//! blocks while in progress, with savepoint rollbacks and aborts to apply) and one with
//! streaming off (the server spills and sends each transaction whole at commit). Every
//! streamed payload goes through the [`Assembler`] with a small work_mem, so it spills; the
//! replayed transactions must equal the non-streamed ones, transaction for transaction and
//! byte for byte (the streamed payloads' subxid aside). The seed workload's spill ratio is
//! printed for every spec and checked for lz4 and zstd:1.

mod common;

use std::collections::HashMap;

use logical::{Assembler, AssemblerConfig, Lsn, Message, Options, Ready, Streaming};
use pgtest::Cluster;

const SETUP: &str = r#"
CREATE TABLE t (i int PRIMARY KEY, t text);
CREATE TABLE small (k int PRIMARY KEY, v text);
CREATE TABLE conc (k int PRIMARY KEY, v text);
CREATE TABLE trunc (x int);
CREATE PUBLICATION p FOR ALL TABLES;
SELECT 1 FROM pg_create_logical_replication_slot('s_on', 'pgoutput');
SELECT 1 FROM pg_create_logical_replication_slot('s_off', 'pgoutput');
"#;

const WORKLOAD: &str = r#"
INSERT INTO small VALUES (1, 'one');
SELECT 1 FROM pg_logical_emit_message(false, 'nt', 'outside');
INSERT INTO t SELECT i, 'Hello number n°' || i FROM generate_series(1, 100000) i;
BEGIN;
INSERT INTO small SELECT i, repeat('x', 50) || i FROM generate_series(2, 3000) i;
SAVEPOINT a;
INSERT INTO small SELECT i, 'rolled back' FROM generate_series(3001, 6000) i;
ROLLBACK TO SAVEPOINT a;
SAVEPOINT b;
INSERT INTO small SELECT i, 'rolled back later' FROM generate_series(6001, 7000) i;
SAVEPOINT c;
INSERT INTO small SELECT i, 'nested' FROM generate_series(7001, 9000) i;
RELEASE SAVEPOINT c;
ROLLBACK TO SAVEPOINT b;
SAVEPOINT d;
INSERT INTO small SELECT i, 'kept' FROM generate_series(9001, 9500) i;
RELEASE SAVEPOINT d;
UPDATE small SET v = v || '!' WHERE k % 7 = 0;
DELETE FROM small WHERE k % 11 = 0;
SELECT 1 FROM pg_logical_emit_message(true, 'tx', 'inside');
INSERT INTO trunc SELECT generate_series(1, 10);
TRUNCATE trunc;
COMMIT;
BEGIN;
INSERT INTO small SELECT i, 'aborted ' || i FROM generate_series(20001, 26000) i;
ROLLBACK;
INSERT INTO small SELECT 100000, string_agg(md5(g::text), '') FROM generate_series(1, 1000) g;
"#;

/// One session's half of two large transactions that run at the same time.
fn concurrent(base: i32) -> String {
    let mut s = String::from("BEGIN;\n");
    for round in 0..4 {
        let from = base + round * 1000;
        s.push_str(&format!(
            "INSERT INTO conc SELECT i, 'session {base} round {round} ' || i FROM generate_series({from}, {}) i;\nSELECT pg_sleep(0.3);\n",
            from + 999
        ));
    }
    s.push_str("COMMIT;\n");
    s
}

fn peek(cluster: &Cluster, slot: &str, streaming: &str) -> Vec<(Lsn, Vec<u8>)> {
    let rows = cluster
        .psql(&format!(
            "SELECT lsn, encode(data, 'hex') FROM pg_logical_slot_peek_binary_changes('{slot}', NULL, NULL, \
             'proto_version', '2', 'publication_names', 'p', 'streaming', '{streaming}', 'messages', 'true')"
        ))
        .expect("peek");
    rows.lines()
        .map(|row| {
            let (lsn, hex) = row.split_once('|').expect("lsn|hex");
            let bytes = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
                .collect();
            (Lsn::parse(lsn).expect("lsn"), bytes)
        })
        .collect()
}

/// A committed transaction as compared: xid, commit and end LSN, and its DML, Truncate and
/// Message payloads without the streamed subxid. Relation messages are compared apart: the
/// server sends them once per session without streaming but once per streamed transaction.
#[derive(Debug, PartialEq, Eq)]
struct Txn {
    xid: u32,
    commit_lsn: Lsn,
    end_lsn: Lsn,
    changes: Vec<Vec<u8>>,
}

struct Run {
    txns: Vec<Txn>,
    relations: HashMap<u32, Vec<u8>>,
    non_transactional: Vec<Vec<u8>>,
    /// (raw bytes, disk bytes) of the seed transaction's spill.
    seed_spill: (u64, u64),
    streamed: usize,
    spilled: u64,
}

fn assemble(rows: &[(Lsn, Vec<u8>)], streaming: Streaming, spec: &str, work_mem: usize) -> Run {
    let dir = private_tempdir().expect("tempdir");
    let mut config = AssemblerConfig::new(dir.path());
    config.work_mem = work_mem;
    config.spec = spec.parse().expect("spec");
    let options = Options {
        proto_version: 2,
        streaming,
    };
    let mut a = Assembler::open(config, options).expect("assembler");
    let mut dec = logical::Decoder::new(options).expect("decoder");
    let mut run = Run {
        txns: Vec::new(),
        relations: HashMap::new(),
        non_transactional: Vec::new(),
        seed_spill: (0, 0),
        streamed: 0,
        spilled: 0,
    };
    let mut buf = Vec::new();
    for (lsn, payload) in rows {
        match a.push(*lsn, payload).unwrap_or_else(|e| panic!("{e}")) {
            Some(Ready::Txn(mut t)) => {
                let mut changes = Vec::new();
                let mut rows_of_t = 0;
                while t.next_payload(&mut buf).unwrap_or_else(|e| panic!("{e}")) {
                    let msg = t.decode(&mut dec, &buf).expect("decode");
                    let mut plain = buf.clone();
                    if t.streamed && msg.stream_xid().is_some() {
                        plain.drain(1..5);
                    }
                    match msg {
                        Message::Relation(r) => {
                            run.relations.insert(r.relid, plain);
                        }
                        Message::Insert(i) => {
                            if run
                                .relations
                                .get(&i.relid)
                                .is_some_and(|r| r.windows(3).any(|w| w == b"\0t\0"))
                            {
                                rows_of_t += 1;
                            }
                            changes.push(plain);
                        }
                        _ => changes.push(plain),
                    }
                }
                if rows_of_t == 100_000 {
                    run.seed_spill = (t.stats.spilled_raw_bytes, t.stats.disk_bytes);
                }
                run.streamed += usize::from(t.streamed);
                run.txns.push(Txn {
                    xid: t.xid,
                    commit_lsn: t.commit_lsn,
                    end_lsn: t.end_lsn,
                    changes,
                });
            }
            Some(Ready::NonTransactional(m)) => run.non_transactional.push(m),
            None => {}
        }
        assert!(a.stats().memory_bytes <= work_mem as u64);
    }
    let s = a.stats();
    assert_eq!((s.open_txns, s.files, s.memory_bytes), (0, 0, 0), "{s:?}");
    run.spilled = s.spilled_txns;
    run
}

#[test]
fn streamed_and_spilled_equals_the_servers_whole_transactions() {
    let cluster = Cluster::builder()
        .guc("wal_level", "logical")
        .guc("logical_decoding_work_mem", "64kB")
        .start()
        .expect("cluster starts");
    cluster.psql(SETUP).expect("setup");
    cluster.psql(WORKLOAD).expect("workload");
    std::thread::scope(|s| {
        let a = s.spawn(|| cluster.psql(&concurrent(1_000_000)));
        std::thread::sleep(std::time::Duration::from_millis(150));
        let b = s.spawn(|| cluster.psql(&concurrent(2_000_000)));
        a.join().expect("join").expect("session a");
        b.join().expect("join").expect("session b");
    });

    let on = peek(&cluster, "s_on", "on");
    let off = peek(&cluster, "s_off", "off");
    let count = |rows: &[(Lsn, Vec<u8>)], tag: u8| rows.iter().filter(|(_, p)| p[0] == tag).count();
    assert!(count(&on, b'S') > 10, "the large transactions streamed");
    assert!(
        count(&on, b'A') >= 3,
        "savepoint rollbacks and the abort arrived as Stream Abort"
    );
    assert_eq!(count(&off, b'S'), 0);

    let want = assemble(&off, Streaming::Off, "lz4", 64 << 20);
    assert_eq!(want.streamed, 0);
    assert!(want.txns.len() >= 5);
    let mut figures = Vec::new();
    for spec in ["none", "pglz", "lz4", "zstd:1", "zstd:3"] {
        let got = assemble(&on, Streaming::On, spec, 64 * 1024);
        assert!(got.streamed >= 3, "{spec}: {} streamed", got.streamed);
        assert!(got.spilled >= 3, "{spec}: {} spilled", got.spilled);
        assert_eq!(got.txns.len(), want.txns.len(), "{spec}");
        for (g, w) in got.txns.iter().zip(&want.txns) {
            assert_eq!(g, w, "{spec}: transaction {}", w.xid);
        }
        assert_eq!(got.relations, want.relations, "{spec}");
        assert_eq!(got.non_transactional, want.non_transactional, "{spec}");
        let (raw, disk) = got.seed_spill;
        assert!(
            raw > 4_000_000,
            "{spec}: the seed transaction spilled {raw} bytes"
        );
        let ratio = disk as f64 / raw as f64;
        figures.push(format!("{spec}: {raw} raw -> {disk} on disk ({ratio:.4}x)"));
        match spec {
            "lz4" => assert!(ratio <= 0.25, "lz4 spilled at {ratio:.4}x"),
            "zstd:1" => assert!(ratio <= 0.05, "zstd:1 spilled at {ratio:.4}x"),
            "none" => assert!((1.0..1.03).contains(&ratio), "none at {ratio:.4}x"),
            _ => {}
        }
    }
    println!("seed workload, 100k rows, spill of the streamed transaction:");
    for f in &figures {
        println!("  {f}");
    }
}

/// A temporary directory closed to group and others, as a spill directory must be.
fn private_tempdir() -> std::io::Result<tempfile::TempDir> {
    use std::os::unix::fs::PermissionsExt;
    tempfile::Builder::new()
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
}
