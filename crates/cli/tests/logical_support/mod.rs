//! Shared pieces of the `logical recv` tests: a cluster set up for logical decoding, the
//! binary, and the comparison of our JSON lines with test_decoding's text (PostgreSQL's own
//! decoding of the same slot position).
#![allow(dead_code)]

use pgtest::Cluster;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

/// A cluster with wal_level = logical and the given logical_decoding_work_mem.
pub fn cluster(work_mem: Option<&str>) -> Cluster {
    let mut b = Cluster::builder()
        .guc("wal_level", "logical")
        .guc("max_wal_senders", "10")
        .guc("max_replication_slots", "10")
        .guc("wal_sender_timeout", "10s")
        // Two-phase transactions in the workloads: without the slot's two_phase option the
        // server decodes them at COMMIT PREPARED, as ordinary transactions.
        .guc("max_prepared_transactions", "4")
        .guc("timezone", "UTC");
    if let Some(m) = work_mem {
        b = b.guc("logical_decoding_work_mem", m);
    }
    b.start().expect("start cluster")
}

/// The pgcompress binary.
pub fn pgcompress() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pgcompress"))
}

/// Runs `sql` with the cluster's `psql` binary on `conninfo`, stopping at the first error,
/// and asserts that it succeeded: for worker threads, which cannot borrow the cluster.
pub fn run_psql(psql: &Path, conninfo: &str, sql: &str) {
    let mut cmd = Command::new(psql);
    cmd.args([
        "-X",
        "-q",
        "-v",
        "ON_ERROR_STOP=1",
        "-d",
        conninfo,
        "-c",
        sql,
    ]);
    let o = pgtest::run(&mut cmd).expect("run psql");
    assert!(
        o.status.success(),
        "psql failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `pgcompress logical recv` on `cluster`'s database, `slot` and publication `p`; the caller
/// adds the rest.
pub fn recv_command(cluster: &Cluster, slot: &str) -> Command {
    let mut cmd = pgcompress();
    cmd.args([
        "logical",
        "recv",
        "--dbname",
        &cluster.conninfo(),
        "--slot",
        slot,
        "--publication",
        "p",
    ]);
    cmd
}

/// `logical recv` on `slot` into `out` until the server has sent `stop` (plus `extra` args).
pub fn recv(cluster: &Cluster, slot: &str, out: &Path, stop: &str, extra: &[&str]) -> Output {
    let mut cmd = recv_command(cluster, slot);
    cmd.arg("-o")
        .arg(out)
        .args(["--stop-at-lsn", stop, "--idle-exit", "60", "--json"])
        .args(extra);
    let o = cmd.output().expect("run pgcompress");
    assert!(
        o.status.success(),
        "logical recv failed: {}\n{}",
        String::from_utf8_lossy(&o.stderr),
        cluster.log_tail(20)
    );
    o
}

/// One change, normalised so that both decodings can be compared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub xid: u32,
    pub action: String,
    pub table: String,
    /// (name, value as text; None for NULL), unchanged TOAST left out.
    pub columns: Vec<(String, Option<String>)>,
    /// The old key or row, NULLs left out (test_decoding skips them).
    pub identity: Vec<(String, Option<String>)>,
}

fn json_text(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        other => Some(other.to_string()),
    }
}

fn json_cols(v: Option<&Value>) -> Vec<(String, Option<String>)> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|c| {
                    (
                        c["name"].as_str().unwrap_or_default().to_owned(),
                        json_text(&c["value"]),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Our output file, parsed; B and C lines are skipped.
pub fn ours(path: &Path) -> Vec<(Change, Value)> {
    let text = std::fs::read_to_string(path).expect("read output");
    let mut out = Vec::new();
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let action = v["action"].as_str().unwrap_or_default().to_owned();
        if action == "B" || action == "C" {
            continue;
        }
        let table = if action == "M" {
            format!(
                "message {} {}",
                v["prefix"].as_str().unwrap_or_default(),
                v["content"].as_str().unwrap_or_default()
            )
        } else {
            format!(
                "{}.{}",
                v["schema"].as_str().unwrap_or_default(),
                v["table"].as_str().unwrap_or_default()
            )
        };
        let columns = json_cols(v.get("columns"));
        let mut identity: Vec<_> = json_cols(v.get("identity"))
            .into_iter()
            .filter(|(_, v)| v.is_some())
            .collect();
        if action == "U" && identity.iter().all(|c| columns.contains(c)) {
            // The key did not change: wal2json-style output repeats it from the new row,
            // test_decoding prints no old key. Compared as "no old key".
            identity.clear();
        }
        out.push((
            Change {
                xid: v["xid"].as_u64().unwrap_or(0) as u32,
                action,
                table,
                columns,
                identity,
            },
            v,
        ));
    }
    out
}

/// Splits `name[type]:value name[type]:value …` as test_decoding prints a tuple.
fn td_tuple(mut s: &str) -> Vec<(String, Option<String>)> {
    let mut cols = Vec::new();
    loop {
        s = s.trim_start();
        if s.is_empty() {
            return cols;
        }
        let open = s.find('[').expect("column name");
        let name = s[..open].to_owned();
        let close = s[open..].find("]:").expect("column type") + open;
        s = &s[close + 2..];
        let value;
        if let Some(rest) = s.strip_prefix('\'') {
            let mut v = String::new();
            let mut it = rest.char_indices().peekable();
            let mut end = rest.len();
            while let Some((i, c)) = it.next() {
                if c == '\'' {
                    if it.peek().map(|p| p.1) == Some('\'') {
                        v.push('\'');
                        it.next();
                    } else {
                        end = i + 1;
                        break;
                    }
                } else {
                    v.push(c);
                }
            }
            value = Some(v);
            s = &rest[end..];
        } else {
            let end = s.find(' ').unwrap_or(s.len());
            let raw = &s[..end];
            s = &s[end..];
            value = match raw {
                "null" => None,
                "unchanged-toast-datum" => continue,
                r => Some(r.trim_start_matches("B'").trim_end_matches('\'').to_owned()),
            };
        }
        cols.push((name, value));
    }
}

/// test_decoding's text (include-xids on, skip-empty-xacts on) as changes.
pub fn test_decoding(cluster: &Cluster, slot: &str) -> Vec<Change> {
    let text = cluster
        .query_one(&format!(
            "SELECT coalesce(string_agg(data, E'\\x1e' ORDER BY ord), '') FROM \
             pg_logical_slot_peek_changes('{slot}', NULL, NULL, 'include-xids', '1', \
             'skip-empty-xacts', '1') WITH ORDINALITY AS c(lsn, xid, data, ord)"
        ))
        .expect("peek test_decoding");
    let mut xid = 0;
    let mut out = Vec::new();
    for line in text.split('\u{1e}').filter(|l| !l.is_empty()) {
        if let Some(x) = line.strip_prefix("BEGIN ") {
            xid = x.parse().expect("xid");
            continue;
        }
        if line.starts_with("COMMIT") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("message: transactional: 1 prefix: ") {
            let (prefix, tail) = rest.split_once(", sz: ").expect("message");
            let content = tail.split_once("content:").expect("content").1;
            out.push(Change {
                xid,
                action: "M".into(),
                table: format!("message {prefix} {content}"),
                columns: vec![],
                identity: vec![],
            });
            continue;
        }
        let rest = line
            .strip_prefix("table ")
            .unwrap_or_else(|| panic!("{line}"));
        let (tables, rest) = rest.split_once(": ").expect("table");
        let (action, body) = rest.split_once(':').expect("action");
        let action = match action {
            "INSERT" => "I",
            "UPDATE" => "U",
            "DELETE" => "D",
            "TRUNCATE" => "T",
            a => panic!("action {a}"),
        };
        if action == "T" {
            for t in tables.split(", ") {
                out.push(Change {
                    xid,
                    action: "T".into(),
                    table: t.to_owned(),
                    columns: vec![],
                    identity: vec![],
                });
            }
            continue;
        }
        let (mut columns, mut identity) = (vec![], vec![]);
        let body = body.trim_start();
        match action {
            "I" => columns = td_tuple(body),
            "D" => identity = td_tuple(body.trim_start_matches("(no-tuple-data)")),
            _ => match body.strip_prefix("old-key:") {
                Some(b) => {
                    let (old, new) = b.split_once(" new-tuple:").expect("new-tuple");
                    identity = td_tuple(old);
                    columns = td_tuple(new);
                }
                None => columns = td_tuple(body),
            },
        }
        identity.retain(|(_, v)| v.is_some());
        out.push(Change {
            xid,
            action: action.into(),
            table: tables.to_owned(),
            columns,
            identity,
        });
    }
    out
}

/// Asserts both decodings are equal change for change, showing the first difference.
pub fn assert_same(ours: &[Change], theirs: &[Change]) {
    for (i, (a, b)) in ours.iter().zip(theirs).enumerate() {
        assert_eq!(a, b, "change {i} differs (ours left, test_decoding right)");
    }
    assert_eq!(
        ours.len(),
        theirs.len(),
        "ours has {} changes, test_decoding {}",
        ours.len(),
        theirs.len()
    );
}

/// True when the server has the wal2json output plugin (Debian's postgresql-15-wal2json,
/// which scripts/setup.sh installs; the packages of the other majors carry none).
pub fn has_wal2json(cluster: &Cluster) -> bool {
    let install = cluster.install();
    let there = install
        .bindir()
        .parent()
        .is_some_and(|p| p.join("lib/wal2json.so").exists());
    // CI installs it for 15 through scripts/setup.sh: there, a missing plugin is a failure,
    // not a skip.
    assert!(
        there || install.major() != 15 || std::env::var_os("CI").is_none(),
        "CI is set but wal2json is not installed (scripts/setup.sh installs postgresql-15-wal2json)"
    );
    there
}

/// wal2json format 2 (with xids and timestamps) of `slot`, one JSON object per line.
pub fn wal2json(cluster: &Cluster, slot: &str) -> Vec<Value> {
    let text = cluster
        .query_one(&format!(
            "SELECT coalesce(string_agg(data, E'\\x1e' ORDER BY ord), '') FROM \
             pg_logical_slot_peek_changes('{slot}', NULL, NULL, 'format-version', '2', \
             'include-xids', '1', 'include-timestamp', '1', 'include-lsn', '1') \
             WITH ORDINALITY AS c(lsn, xid, data, ord)"
        ))
        .expect("peek wal2json");
    text.split('\u{1e}')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Makes one of our lines and one of wal2json's comparable: only where the two must differ.
/// wal2json gives each change its own `lsn` (ours is the commit LSN), prints bytea as bare
/// hex (ours is PostgreSQL's text form, `\x…`) and NaN or infinite numbers as null (ours keeps
/// the text).
pub fn w2j_normalise(mut v: Value, ours: bool) -> Value {
    let action = v["action"].as_str().unwrap_or_default().to_owned();
    if let Some(o) = v.as_object_mut() {
        if action != "B" && action != "C" {
            o.remove("lsn");
        }
        for key in ["columns", "identity"] {
            let Some(cols) = o.get_mut(key).and_then(Value::as_array_mut) else {
                continue;
            };
            for c in cols {
                let ty = c["type"].as_str().unwrap_or_default().to_owned();
                let value = &mut c["value"];
                match value.as_str() {
                    Some(s) if ours && ty == "bytea" => {
                        *value = Value::String(s.trim_start_matches("\\x").to_owned())
                    }
                    Some("NaN" | "Infinity" | "-Infinity")
                        if ours && matches!(ty.as_str(), "real" | "double precision") =>
                    {
                        *value = Value::Null
                    }
                    _ => {}
                }
            }
        }
    }
    v
}

/// xorshift64*: a small deterministic generator, so a printed seed replays a run exactly.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}
