//! `pgcompress wal stats` on damaged WAL exits as `pg_waldump --stats` does on the
//! same files, says what is wrong on stderr, and agrees with `wal verify`.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Exit status, stdout and stderr of `pg_waldump --stats -p DIR FIRST LAST`.
fn pg_waldump(c: &Corpus, files: &[PathBuf]) -> (i32, String, String) {
    let waldump = c
        .cluster
        .install()
        .own_bin("pg_waldump")
        .expect("this major's pg_waldump: the oracle of this test");
    let out = Command::new(waldump)
        .arg("--stats")
        .arg("-p")
        .arg(files[0].parent().expect("dir"))
        .arg(name(&files[0]))
        .arg(name(files.last().expect("last")))
        .output()
        .expect("run pg_waldump");
    (
        out.status.code().expect("pg_waldump exit code"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn ours(cmd: &str, files: &[PathBuf]) -> (i32, String, String) {
    let mut args = vec!["wal".to_string(), cmd.to_string()];
    args.extend(files.iter().map(|f| f.display().to_string()));
    let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let out = pgcompress(&args);
    (
        out.status.code().expect("exit code"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn edit(path: &Path, f: impl FnOnce(&mut Vec<u8>)) {
    let mut b = std::fs::read(path).expect("read");
    f(&mut b);
    std::fs::write(path, b).expect("write");
}

/// Damages a copy of `all` with `damage` (given the middle segment) and compares.
fn check(c: &Corpus, label: &str, damage: impl FnOnce(&Path)) {
    let files = isolate(c.dir.path(), label, &c.all);
    let mid = files.len() / 2;
    damage(&files[mid]);
    let victim = name(&files[mid]);
    let (pg_code, pg_out, pg_err) = pg_waldump(c, &files);
    let (code, out, err) = ours("stats", &files);
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
    let mut args = vec!["wal".to_string(), "stats".to_string(), "--json".to_string()];
    args.extend(files.iter().map(|f| f.display().to_string()));
    let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let out = pgcompress(&args);
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
    let (vcode, _, verr) = ours("verify", &files);
    assert_eq!(vcode, code, "{label}: wal verify agrees: {verr}");
}

#[test]
fn stats_exits_as_pg_waldump_on_damaged_and_truncated_wal() {
    let c = corpus(1, 100);
    assert!(c.all.len() >= 6, "enough segments: {}", c.all.len());
    // Sound WAL: both succeed, and so does ours on the live pg_wal, whose ordinary
    // end (zeros after the last record) is not damage.
    let (pg_code, _, pg_err) = pg_waldump(&c, &c.all);
    let (code, _, err) = ours("stats", &c.all);
    assert_eq!((code, pg_code), (0, 0), "sound WAL: {err} / {pg_err}");
    let (code, _, err) = ours("stats", &c.live);
    assert_eq!(code, 0, "live pg_wal: {err}");
    assert_eq!(stats_json(&c.all)["damage"], serde_json::Value::Null);

    check(&c, "truncated", |f| edit(f, |b| b.truncate(500_000)));
    check(&c, "record-byte", |f| edit(f, |b| b[300_000] ^= 0x20));
    // xlp_pageaddr of the eighth page: the page claims another address.
    check(&c, "page-header", |f| edit(f, |b| b[8192 * 7 + 9] ^= 0x01));
}
