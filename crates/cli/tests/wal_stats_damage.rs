//! `pgcompress wal stats` on damaged WAL exits as `pg_waldump --stats` does on the
//! same files, says what is wrong on stderr, and agrees with `wal verify`.

mod common;

use common::*;
use std::path::Path;

/// Damages a copy of `all` with `damage` (given the middle segment) and compares.
fn check(c: &Corpus, label: &str, damage: impl FnOnce(&Path)) {
    let files = isolate(c.dir.path(), label, &c.all);
    let mid = files.len() / 2;
    damage(&files[mid]);
    let victim = name(&files[mid]);
    let (pg_code, pg_out, pg_err) = pg_waldump_stats_exit(&c.cluster, &files);
    let (code, out, err) = wal_command("stats", &files);
    eprintln!("{label}: pg_waldump exit {pg_code}: {pg_err}; pgcompress exit {code}: {err}");
    assert_ne!(pg_code, 0, "{label}: pg_waldump sees the damage");
    assert_eq!(
        code, pg_code,
        "{label}: exit status as pg_waldump's\n{out}{err}"
    );
    assert!(!err.contains("panicked"), "{label}: {err}");
    // The damage is an error line on stderr, naming the segment, not only a line at
    // the end of the table.
    let line = err
        .lines()
        .find(|l| l.starts_with("pgcompress: "))
        .unwrap_or_else(|| panic!("{label}: an error line on stderr: {err:?}"));
    assert!(
        line.contains(&victim[..16]) && line.contains(" at "),
        "{label}: names the segment and LSN: {line}"
    );
    // Where pg_waldump printed its table before the error, ours is the same table.
    if !pg_out.is_empty() {
        assert!(
            out.starts_with(&pg_out),
            "{label}: table differs:\n{out}\n---\n{pg_out}"
        );
    }
    // --json: the same status, and the damage in the object.
    let out = pgcompress_on(&["wal", "stats", "--json"], &files);
    assert_eq!(
        out.status.code(),
        Some(pg_code),
        "{label}: --json exit status"
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(
        j["damage"]["file"]
            .as_str()
            .is_some_and(|f| f.contains(&victim[..16])),
        "{label}: damage in the JSON: {}",
        j["damage"]
    );
    // `wal verify` judges the same files the same way.
    let (vcode, _, verr) = wal_command("verify", &files);
    assert_eq!(vcode, code, "{label}: wal verify agrees: {verr}");
}

#[test]
fn stats_exits_as_pg_waldump_on_damaged_and_truncated_wal() {
    let c = corpus(1, 100);
    assert!(c.all.len() >= 6, "enough segments: {}", c.all.len());
    // Sound WAL: both succeed, and so does ours on the live pg_wal, whose ordinary
    // end (zeros after the last record) is not damage.
    let (pg_code, _, pg_err) = pg_waldump_stats_exit(&c.cluster, &c.all);
    let (code, _, err) = wal_command("stats", &c.all);
    assert_eq!((code, pg_code), (0, 0), "sound WAL: {err} / {pg_err}");
    let (code, _, err) = wal_command("stats", &c.live);
    assert_eq!(code, 0, "live pg_wal: {err}");
    assert_eq!(stats_json(&c.all)["damage"], serde_json::Value::Null);

    check(&c, "truncated", |f| edit(f, |b| b.truncate(500_000)));
    check(&c, "record-byte", |f| edit(f, |b| b[300_000] ^= 0x20));
    // xlp_pageaddr of the eighth page: the page claims another address.
    check(&c, "page-header", |f| edit(f, |b| b[8192 * 7 + 9] ^= 0x01));
}
