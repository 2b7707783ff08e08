//! PostgreSQL is the oracle: a real server decodes the same workload through pgoutput (read as
//! bytes with `pg_logical_slot_peek_binary_changes`, decoded here, streamed transactions
//! assembled as the apply worker does) and through test_decoding on a second slot created at
//! the same point; the two must agree transaction for transaction, change for change, value
//! for value.

use std::collections::HashMap;

use logical::dml::OldTuple;
use logical::{Decoder, Lsn, Message, Options, Streaming, TupleData, Value};
use pgtest::Cluster;

const SETUP: &str = r#"
CREATE TABLE t (i int PRIMARY KEY, t text);
CREATE TABLE w (id int PRIMARY KEY, n numeric, b bool, v varchar(10), ts timestamptz, j jsonb,
                bin bytea, f float8, arr int[], "Mixed" text, s smallint, big bigint, bits bit(3));
CREATE TABLE full_t (k int, v text);
ALTER TABLE full_t REPLICA IDENTITY FULL;
CREATE TABLE toasty (id int PRIMARY KEY, n int, big text);
ALTER TABLE toasty ALTER COLUMN big SET STORAGE EXTERNAL;
CREATE TABLE trunc_a (x int);
CREATE TABLE trunc_b (y serial);
CREATE PUBLICATION pub FOR ALL TABLES;
SELECT 1 FROM pg_create_logical_replication_slot('po', 'pgoutput');
SELECT 1 FROM pg_create_logical_replication_slot('td', 'test_decoding');
"#;

const WORKLOAD: &str = r#"
INSERT INTO w VALUES (1, 1.50, true, 'abc', '2020-01-02 03:04:05+00', '{"a": [1, "x"]}', '\x00ff27',
                      2.5, '{1,2,NULL}', 'it''s "q"', -3, 9000000000, B'101'),
                     (2, NULL, false, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
UPDATE w SET n = 2, v = 'de''f' WHERE id = 1;
UPDATE w SET id = 3 WHERE id = 2;
DELETE FROM w WHERE id = 3;
INSERT INTO full_t VALUES (1, 'a'), (2, NULL);
UPDATE full_t SET v = 'b' WHERE k = 1;
DELETE FROM full_t WHERE k = 2;
INSERT INTO toasty SELECT 1, 0, string_agg(md5(g::text), '') FROM generate_series(1, 400) g;
UPDATE toasty SET n = 1 WHERE id = 1;
UPDATE toasty SET big = 'small now' WHERE id = 1;
DELETE FROM toasty;
INSERT INTO trunc_a VALUES (1);
INSERT INTO trunc_b DEFAULT VALUES;
TRUNCATE trunc_a, trunc_b RESTART IDENTITY;
TRUNCATE trunc_a;
SELECT 1 FROM pg_logical_emit_message(false, 'nontx', 'outside');
BEGIN;
INSERT INTO t VALUES (0, 'zero');
SELECT 1 FROM pg_logical_emit_message(true, 'tx', 'inside');
COMMIT;
BEGIN;
INSERT INTO t SELECT i, 'Hello number n°' || i FROM generate_series(1, 3000) i;
SAVEPOINT s1;
INSERT INTO t SELECT i, 'Hello number n°' || i FROM generate_series(3001, 6000) i;
ROLLBACK TO SAVEPOINT s1;
SAVEPOINT s2;
INSERT INTO t SELECT i, 'rolled back later' FROM generate_series(6001, 6100) i;
SAVEPOINT s3;
INSERT INTO t SELECT i, 'nested' FROM generate_series(6101, 9000) i;
RELEASE SAVEPOINT s3;
ROLLBACK TO SAVEPOINT s2;
INSERT INTO t SELECT i, 'kept' FROM generate_series(9001, 9500) i;
UPDATE t SET t = t || '!' WHERE i % 100 = 0;
DELETE FROM t WHERE i % 250 = 0;
SELECT 1 FROM pg_logical_emit_message(true, 'big', 'streamed message');
COMMIT;
BEGIN;
INSERT INTO t SELECT i, 'aborted ' || i FROM generate_series(20001, 26000) i;
ROLLBACK;
INSERT INTO t VALUES (-1, NULL);
"#;

/// test_decoding's `quote_identifier` for our plain names (keywords are avoided in SETUP).
fn quote_ident(s: &str) -> String {
    let plain = s.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain {
        s.to_owned()
    } else {
        format!("\"{}\"", s.replace('"', "\"\""))
    }
}

/// test_decoding's `print_literal` (contrib/test_decoding/test_decoding.c).
fn literal(type_oid: u32, text: &str) -> String {
    match type_oid {
        // int2, int4, int8, oid, float4, float8, numeric: as is.
        21 | 23 | 20 | 26 | 700 | 701 | 1700 => text.to_owned(),
        // bit, varbit
        1560 | 1562 => format!("B'{text}'"),
        16 => if text == "t" { "true" } else { "false" }.to_owned(),
        _ => format!("'{}'", text.replace('\'', "''")),
    }
}

struct Rel {
    name: String,
    columns: Vec<(String, u32, i32)>,
}

struct Renderer<'c> {
    cluster: &'c Cluster,
    relations: HashMap<u32, Rel>,
    type_names: HashMap<u32, String>,
}

impl Renderer<'_> {
    /// test_decoding prints `format_type_be(typid)`: the name without the type modifier.
    fn type_name(&mut self, oid: u32) -> String {
        let cluster = self.cluster;
        self.type_names
            .entry(oid)
            .or_insert_with(|| {
                cluster
                    .query_one(&format!("SELECT format_type({oid}, NULL)"))
                    .expect("format_type")
            })
            .clone()
    }

    fn tuple(&mut self, relid: u32, tuple: &TupleData<'_>, skip_nulls: bool) -> String {
        let columns = self.relations[&relid].columns.clone();
        assert_eq!(columns.len(), tuple.columns.len(), "tuple width");
        let mut out = String::new();
        for ((name, oid, _typmod), value) in columns.iter().zip(&tuple.columns) {
            let shown = match value {
                Value::Null if skip_nulls => continue,
                Value::Null => "null".to_owned(),
                Value::UnchangedToast => "unchanged-toast-datum".to_owned(),
                Value::Text(t) => literal(*oid, std::str::from_utf8(t).expect("utf-8")),
                Value::Binary(_) => panic!("binary values were not asked for"),
            };
            let ty = self.type_name(*oid);
            out.push_str(&format!(" {}[{ty}]:{shown}", quote_ident(name)));
        }
        out
    }

    /// The test_decoding line for a change message, or None for other kinds.
    fn change(&mut self, msg: &Message<'_>) -> Option<String> {
        let table = |r: &Renderer<'_>, relid: u32| format!("table {}", r.relations[&relid].name);
        Some(match msg {
            Message::Insert(i) => {
                format!(
                    "{}: INSERT:{}",
                    table(self, i.relid),
                    self.tuple(i.relid, &i.new, false)
                )
            }
            Message::Update(u) => {
                let mut s = format!("{}: UPDATE:", table(self, u.relid));
                if let Some(old) = &u.old {
                    s.push_str(" old-key:");
                    s.push_str(&self.tuple(u.relid, old.tuple(), true));
                    s.push_str(" new-tuple:");
                }
                s.push_str(&self.tuple(u.relid, &u.new, false));
                s
            }
            Message::Delete(d) => {
                let old = match &d.old {
                    OldTuple::Key(t) | OldTuple::Full(t) => t,
                };
                format!(
                    "{}: DELETE:{}",
                    table(self, d.relid),
                    self.tuple(d.relid, old, true)
                )
            }
            Message::Truncate(t) => {
                let names: Vec<&str> = t
                    .relids
                    .iter()
                    .map(|r| self.relations[r].name.as_str())
                    .collect();
                let mut flags = String::new();
                if t.options & logical::dml::TRUNCATE_RESTART_IDENTITY != 0 {
                    flags.push_str(" restart_seqs");
                }
                if t.options & logical::dml::TRUNCATE_CASCADE != 0 {
                    flags.push_str(" cascade");
                }
                if flags.is_empty() {
                    flags.push_str(" (no-flags)");
                }
                format!("table {}: TRUNCATE:{flags}", names.join(", "))
            }
            Message::Message(m) => format!(
                "message: transactional: {} prefix: {}, sz: {} content:{}",
                u8::from(m.is_transactional()),
                String::from_utf8_lossy(m.prefix),
                m.content.len(),
                String::from_utf8_lossy(m.content)
            ),
            _ => return None,
        })
    }
}

/// A streamed transaction held until its commit, with the position where each subtransaction's
/// first change went (as the apply worker's `subxact_info`), for subtransaction aborts.
#[derive(Default)]
struct Streamed {
    lines: Vec<String>,
    subxacts: Vec<(u32, usize)>,
}

#[derive(Default, Debug)]
struct Shape {
    stream_starts: usize,
    stream_commits: usize,
    top_aborts: usize,
    sub_aborts: usize,
    relations_in_stream: usize,
    messages: usize,
}

/// Decodes the pgoutput rows and renders committed transactions as test_decoding would.
fn pgoutput_lines(cluster: &Cluster, version: u32, streaming: Streaming) -> (Vec<String>, Shape) {
    let stream_opt = match streaming {
        Streaming::Off => "off",
        Streaming::On => "on",
        Streaming::Parallel => "parallel",
    };
    let rows = cluster
        .psql(&format!(
            "SELECT lsn, encode(data, 'hex') FROM pg_logical_slot_peek_binary_changes('po', NULL, NULL, \
             'proto_version', '{version}', 'publication_names', 'pub', 'streaming', '{stream_opt}', \
             'messages', 'true')"
        ))
        .expect("peek pgoutput");
    let mut dec = Decoder::new(Options {
        proto_version: version,
        streaming,
    })
    .expect("decoder");
    let mut r = Renderer {
        cluster,
        relations: HashMap::new(),
        type_names: HashMap::new(),
    };
    let mut out = Vec::new();
    let mut shape = Shape::default();
    let mut current: Option<(u32, Vec<String>)> = None;
    let mut streamed: HashMap<u32, Streamed> = HashMap::new();
    for row in rows.lines() {
        shape.messages += 1;
        let (lsn, hex) = row.split_once('|').expect("lsn|hex");
        let lsn = Lsn::parse(lsn).expect("lsn");
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
            .collect();
        // Real messages cut short at every byte are errors that leave the state alone (all
        // kinds, and the first few hundred of the many inserts).
        if bytes.first() != Some(&b'I') || shape.messages < 300 {
            for n in 0..bytes.len() {
                let mut d = dec.clone();
                assert!(d.decode(&bytes[..n]).is_err(), "{lsn}: prefix {n} of {hex}");
                assert_eq!(d.stream_xid(), dec.stream_xid());
            }
        }
        let msg = dec
            .decode(&bytes)
            .map_err(|e| e.with_lsn(lsn))
            .unwrap_or_else(|e| panic!("{e}"));
        match &msg {
            Message::Begin(b) => {
                assert!(current.is_none(), "nested Begin");
                current = Some((b.xid, Vec::new()));
            }
            Message::Commit(_) => {
                let (xid, lines) = current.take().expect("Commit without Begin");
                if !lines.is_empty() {
                    out.push(format!("BEGIN {xid}"));
                    out.extend(lines);
                    out.push(format!("COMMIT {xid}"));
                }
            }
            Message::Relation(rel) => {
                if rel.xid.is_some() {
                    shape.relations_in_stream += 1;
                }
                let ns = String::from_utf8_lossy(rel.namespace);
                let name = String::from_utf8_lossy(rel.name);
                r.relations.insert(
                    rel.relid,
                    Rel {
                        name: format!("{}.{}", quote_ident(&ns), quote_ident(&name)),
                        columns: rel
                            .columns
                            .iter()
                            .map(|c| {
                                (
                                    String::from_utf8_lossy(c.name).into_owned(),
                                    c.type_oid,
                                    c.type_modifier,
                                )
                            })
                            .collect(),
                    },
                );
            }
            Message::StreamStart(s) => {
                shape.stream_starts += 1;
                if s.first_segment {
                    streamed.insert(s.xid, Streamed::default());
                }
            }
            Message::StreamCommit(c) => {
                shape.stream_commits += 1;
                let txn = streamed.remove(&c.xid).expect("commit of a streamed xid");
                out.push(format!("BEGIN {}", c.xid));
                out.extend(txn.lines);
                out.push(format!("COMMIT {}", c.xid));
            }
            Message::StreamAbort(a) if a.is_top_level() => {
                shape.top_aborts += 1;
                streamed.remove(&a.xid);
            }
            Message::StreamAbort(a) => {
                shape.sub_aborts += 1;
                if let Some(txn) = streamed.get_mut(&a.xid) {
                    if let Some(pos) = txn.subxacts.iter().position(|&(x, _)| x == a.subxid) {
                        txn.lines.truncate(txn.subxacts[pos].1);
                        txn.subxacts.truncate(pos);
                    }
                }
            }
            other => {
                let Some(line) = r.change(other) else {
                    continue;
                };
                let change_xid = other.stream_xid();
                match (dec.stream_xid(), &mut current) {
                    (Some(top), _) => {
                        let sub = change_xid.expect("changes in a stream carry their xid");
                        let txn = streamed.get_mut(&top).expect("block of a known xid");
                        if sub != top && !txn.subxacts.iter().any(|&(x, _)| x == sub) {
                            txn.subxacts.push((sub, txn.lines.len()));
                        }
                        txn.lines.push(line);
                    }
                    (None, Some((_, lines))) => {
                        assert_eq!(change_xid, None);
                        lines.push(line);
                    }
                    // A non-transactional message stands alone.
                    (None, None) => out.push(line),
                }
            }
        }
    }
    assert!(
        current.is_none() && streamed.is_empty(),
        "unfinished transactions"
    );
    (out, shape)
}

fn test_decoding_lines(cluster: &Cluster) -> Vec<String> {
    cluster
        .psql(
            "SELECT data FROM pg_logical_slot_peek_changes('td', NULL, NULL, \
             'include-xids', '1', 'skip-empty-xacts', '1')",
        )
        .expect("peek test_decoding")
        .lines()
        .map(str::to_owned)
        .collect()
}

fn compare(want: &[String], got: &[String], what: &str) {
    for (i, (w, g)) in want.iter().zip(got).enumerate() {
        assert_eq!(g, w, "{what}: line {i} differs");
    }
    assert_eq!(got.len(), want.len(), "{what}: line counts differ");
}

/// Runs the workload on a fresh cluster and compares every pgoutput flavour PostgreSQL 15 speaks
/// with test_decoding. With `small_work_mem` (64kB, the minimum) the large transactions stream;
/// with the default 64MB nothing does.
fn agree(small_work_mem: bool) {
    let mut builder = Cluster::builder().guc("wal_level", "logical");
    if small_work_mem {
        builder = builder.guc("logical_decoding_work_mem", "64kB");
    }
    let cluster = builder.start().expect("cluster starts");
    cluster.psql(SETUP).expect("setup");
    cluster.psql(WORKLOAD).expect("workload");

    let want = test_decoding_lines(&cluster);
    assert!(want.len() > 3500, "test_decoding saw {} lines", want.len());
    assert!(want.iter().any(|l| l.contains("unchanged-toast-datum")));
    assert!(want.iter().any(|l| l.contains("old-key:")));
    assert!(want.iter().any(|l| l.contains("TRUNCATE: restart_seqs")));
    assert!(!want
        .iter()
        .any(|l| l.contains("aborted") || l.contains("rolled back") || l.contains("nested")));

    // Streaming on (v2, v3): with the small work_mem the large transactions arrive in blocks,
    // with subtransaction and top-level aborts, and Relation messages inside the blocks.
    for version in [2, 3] {
        let (got, shape) = pgoutput_lines(&cluster, version, Streaming::On);
        compare(
            &want,
            &got,
            &format!("proto_version {version}, streaming on"),
        );
        if small_work_mem {
            assert!(shape.stream_starts >= 2, "{shape:?}");
            assert_eq!(shape.stream_commits, 1, "{shape:?}");
            assert!(shape.top_aborts >= 1, "{shape:?}");
            assert!(shape.sub_aborts >= 1, "{shape:?}");
            assert!(shape.relations_in_stream >= 1, "{shape:?}");
        } else {
            assert_eq!(shape.stream_starts, 0, "{shape:?}");
        }
    }
    // Streaming off (v1): the server spills (or holds) and sends everything at commit.
    let (got, shape) = pgoutput_lines(&cluster, 1, Streaming::Off);
    compare(&want, &got, "proto_version 1");
    assert_eq!(shape.stream_starts, 0, "{shape:?}");
}

#[test]
fn pgoutput_agrees_with_test_decoding_when_streaming() {
    agree(true);
}

#[test]
fn pgoutput_agrees_with_test_decoding_with_default_work_mem() {
    agree(false);
}

/// Commit times (`--format json`'s `timestamp`) read as PostgreSQL writes a `timestamptz` in UTC,
/// over its whole range: the two infinities, its first and last instants, the years around 1 BC
/// and 2000 past steps of about 147 years, each instant's eight bytes taken from
/// `timestamptz_send` and its text from the server.
#[test]
fn commit_times_print_as_postgresql_prints_them() {
    let cluster = Cluster::start().expect("cluster starts");
    let rows = cluster
        .psql(
            "SET TimeZone = 'UTC'; SET DateStyle = 'ISO';
             SELECT v::text, encode(timestamptz_send(v), 'hex') FROM (
               VALUES ('infinity'::timestamptz), ('-infinity'), ('4713-01-01 00:00:00+00 BC'),
                      ('294276-12-31 23:59:59.999999+00'), ('0001-01-01 00:00:00+00'),
                      ('0001-12-31 23:59:59.5+00 BC'), ('1999-12-31 23:59:59.999999+00'),
                      ('2000-01-01 00:00:00+00'), ('1969-12-31 23:59:59+00'),
                      ('2024-02-29 12:34:56.5+00')
               UNION ALL
               SELECT '4713-01-01 00:00:00+00 BC'::timestamptz
                      + g * interval '147 years 37 days 13:17:19.123457'
               FROM generate_series(1, 2000) g
             ) t(v);",
        )
        .expect("timestamps");
    let mut seen = 0;
    for row in rows.lines() {
        let (text, hex) = row.split_once('|').expect("two columns");
        let bytes: [u8; 8] = hex::decode(hex)
            .expect("hex")
            .try_into()
            .expect("eight bytes");
        let us = i64::from_be_bytes(bytes);
        assert_eq!(logical::output::format_timestamp(us), text, "{us} µs");
        seen += 1;
    }
    assert_eq!(seen, 2010);
}
