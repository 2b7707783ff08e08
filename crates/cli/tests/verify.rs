//! `pgcompress wal verify` on WAL a real PostgreSQL 15 wrote: sound WAL passes;
//! a flipped bit, a truncated file, a zeroed page and another cluster's segment
//! in the middle each fail with one line naming the file and LSN, and exit 1.

mod common;

use common::*;
use std::path::PathBuf;

fn verify(files: &[PathBuf]) -> (i32, String, String) {
    wal_command("verify", files)
}

/// A copy of `files` in a fresh directory, to damage.
fn copy(c: &Corpus, label: &str, files: &[PathBuf]) -> Vec<PathBuf> {
    isolate(c.dir.path(), label, files)
}

fn assert_corrupt(label: &str, files: &[PathBuf], expect_file: &str, expect_words: &str) {
    let (code, _out, err) = verify(files);
    assert_eq!(code, 1, "{label}: exit code; stderr: {err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{label}: one line: {err}");
    // The style of every error the command prints.
    assert!(
        lines[0].starts_with("pgcompress: error: corrupt WAL: "),
        "{label}: {err}"
    );
    assert!(
        lines[0].contains(expect_file),
        "{label}: names the file {expect_file}: {err}"
    );
    assert!(
        lines[0].contains(" at ") && lines[0].contains('/'),
        "{label}: names an LSN: {err}"
    );
    assert!(
        lines[0].contains(expect_words),
        "{label}: says {expect_words:?}: {err}"
    );
    assert!(!err.contains("panicked"), "{label}: no panic");
}

#[test]
fn verify_passes_sound_wal_and_names_each_corruption() {
    let c = corpus(1, 200);
    for (setting, files) in &c.phases {
        let (code, out, err) = verify(files);
        assert_eq!(code, 0, "{setting}: {out}{err}");
        let major = c.cluster.install().major();
        assert!(
            out.starts_with(&format!("OK: PostgreSQL {major} WAL")),
            "{out}"
        );
    }
    let (code, out, err) = verify(&c.all);
    assert_eq!(code, 0, "all: {out}{err}");
    // The live pg_wal ends mid-segment, maybe with recycled segments after it.
    let (code, out, err) = verify(&c.live);
    assert_eq!(code, 0, "live: {out}{err}");
    assert!(out.contains("end of WAL at"), "{out}");

    let all = &c.all;
    assert!(all.len() >= 6);
    let mid = all.len() / 2;
    let victim = name(&all[mid]);

    // A flipped bit inside record data.
    let f = copy(&c, "flip", all);
    edit(&f[mid], |b| b[300_000] ^= 0x20);
    assert_corrupt("flipped bit", &f, &victim[..20], "");

    // A truncated file.
    let f = copy(&c, "trunc", all);
    edit(&f[mid], |b| b.truncate(500_000));
    assert_corrupt("truncated", &f, &victim, "truncated");

    // A zeroed page in the middle of a segment.
    let f = copy(&c, "zero", all);
    edit(&f[mid], |b| b[8192 * 7..8192 * 8].fill(0));
    assert_corrupt("zeroed page", &f, &victim, "valid WAL follows");

    // A segment of another cluster, renamed into the middle.
    let other = pgtest::Cluster::builder()
        .wal_segsize_mb(1)
        .start()
        .expect("other cluster");
    other
        .psql("CREATE TABLE x AS SELECT generate_series(1, 1000) g;")
        .expect("sql");
    other.switch_wal().expect("switch");
    let theirs = other.wal_segment_files().expect("segments");
    let f = copy(&c, "foreign", all);
    std::fs::copy(&theirs[0], &f[mid]).expect("replace");
    assert_corrupt("foreign segment", &f, &victim, "");

    // Damage in the last segment, after which nothing valid follows, is still found
    // when it is inside a record.
    let last = all.len() - 1;
    let f = copy(&c, "lastflip", all);
    edit(&f[last], |b| b[9000] ^= 1);
    let (code, _, err) = verify(&f);
    assert_eq!(code, 1, "flip in the last segment: {err}");
}

#[test]
fn bad_input_gets_one_line_and_exit_2() {
    let dir = tempfile::tempdir().expect("tmp");
    let junk = dir.path().join("000000010000000000000001");
    std::fs::write(
        &junk,
        b"this is not WAL at all, not even a page header, and more bytes",
    )
    .expect("write");
    for cmd in ["stats", "verify"] {
        let out = pgcompress(&["wal", cmd, &junk.display().to_string()]);
        assert_eq!(out.status.code(), Some(2), "{cmd}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{cmd}: {err}");
        assert!(err.contains("not a WAL segment"), "{cmd}: {err}");
        assert!(out.stdout.is_empty());
    }
    let empty = tempfile::tempdir().expect("tmp");
    let out = pgcompress(&["wal", "stats", &empty.path().display().to_string()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no WAL segment files"));
    let out = pgcompress(&["wal", "stats", "/nonexistent/pg_wal"]);
    assert_eq!(out.status.code(), Some(2));
    let out = pgcompress(&[
        "wal",
        "stats",
        "--blcksz",
        "1000",
        &junk.display().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(2));
}
