//! The reports a DBA reads from a repository a real server archived into: `archive list` (one
//! line per file), `archive info` (the repository, or one file, in detail) and what `archive
//! expire --dry-run` says the real run will leave.

mod archive_support;

use archive_support::restore::switch_and_wait_archived;
use archive_support::{archive, names, server_scratch, server_writable_dir};
use pgtest::run::run;
use pgtest::Cluster;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn text(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("utf-8")
}

/// A word of exactly 16 hexadecimal digits: an internal segment position, not a name a DBA
/// knows (segment names have 24, LSNs a slash).
fn has_raw_position(s: &str) -> bool {
    s.split(|c: char| !c.is_ascii_alphanumeric())
        .any(|w| w.len() == 16 && w.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The number before `what` in `line` ("5 files remain" -> 5).
fn count_before(line: &str, what: &str) -> usize {
    let head = line
        .split(what)
        .next()
        .unwrap_or_else(|| panic!("{what:?} not in {line}"));
    head.split_whitespace()
        .last()
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("no count before {what:?} in {line}"))
}

fn base_backup(cluster: &Cluster, dir: &Path) {
    let mut bb = cluster.command("pg_basebackup");
    bb.arg("-D").arg(dir).args(["-X", "none", "-c", "fast"]);
    run(&mut bb).expect("pg_basebackup");
}

/// A repository a real server archived into: two base backups, WAL between and after.
struct Archived {
    // Dropped in this order: the server stops before its archive directory goes.
    _primary: Cluster,
    repo: PathBuf,
    before: BTreeSet<String>,
    _scratch: tempfile::TempDir,
}

fn archived() -> Archived {
    let scratch = server_scratch("pgc-reports-");
    let top = scratch.path();
    let repo = server_writable_dir(top, "repo");
    let primary = Cluster::builder()
        .wal_segsize_mb(1)
        .guc("archive_mode", "on")
        .start()
        .expect("start cluster");
    archive_support::init(&repo, &primary.data_dir());
    primary
        .set_guc_and_reload(
            "archive_command",
            &archive_support::Repo::command_line(&repo, "push", "%p"),
        )
        .expect("archive_command");
    primary.pgbench_init(1).expect("pgbench -i");
    base_backup(&primary, &top.join("b0"));
    primary
        .pgbench(&["-n", "-t", "200", "--random-seed=1"])
        .expect("pgbench");
    switch_and_wait_archived(&primary);
    base_backup(&primary, &top.join("b1"));
    switch_and_wait_archived(&primary);
    let before = names(&repo);
    assert!(before.iter().any(|n| n.ends_with(".backup")), "{before:?}");
    Archived {
        _scratch: scratch,
        repo,
        _primary: primary,
        before,
    }
}

#[test]
fn list_is_one_aligned_line_per_file_within_100_columns() {
    let Archived { repo, before, .. } = &archived();

    // list: a header and one line per file, within 100 columns, no column named twice.
    let list = text(&archive(repo, &["list"]));
    eprintln!("{list}");
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines.len(), before.len() + 1, "{list}");
    let header: Vec<&str> = lines[0]
        .split("  ")
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .collect();
    for (i, h) in header.iter().enumerate() {
        assert!(
            !header[i + 1..].contains(h),
            "column {h:?} twice: {}",
            lines[0]
        );
    }
    for l in &lines {
        assert!(
            l.chars().count() <= 100,
            "{} columns: {l}",
            l.chars().count()
        );
    }
    // Aligned: every row's ratio column ends where the header's does.
    let ratio_end = lines[0].find("ratio").expect("a ratio column") + "ratio".len();
    for l in &lines[1..] {
        assert_eq!(
            l.as_bytes().get(ratio_end - 1),
            Some(&b'x'),
            "misaligned: {l}\n{list}"
        );
    }
    assert!(!list.contains("page images"), "{list}");
    for name in before {
        assert_eq!(
            lines
                .iter()
                .filter(|l| l.split_whitespace().next() == Some(name.as_str()))
                .count(),
            1,
            "{name}"
        );
    }
}

#[test]
fn info_sums_up_the_repository_or_one_file_key_by_key() {
    let Archived { repo, before, .. } = &archived();
    let list = text(&archive(repo, &["list"]));
    // info: not the table again, but the repository summed up, key: value, narrow.
    let info = text(&archive(repo, &["info"]));
    assert_ne!(info, list);
    assert!(info.lines().count() < before.len(), "{info}");
    let mut keys = Vec::new();
    for l in info.lines() {
        assert!(l.chars().count() <= 100, "{l}");
        let (key, _) = l
            .split_once(':')
            .unwrap_or_else(|| panic!("not key: value: {l}"));
        assert!(
            !keys.contains(&key.trim().to_owned()),
            "{key} twice:\n{info}"
        );
        keys.push(key.trim().to_owned());
    }
    let files = info
        .lines()
        .find_map(|l| l.split_once(':').filter(|(k, _)| k.trim() == "files"))
        .map(|(_, v)| v.trim().to_owned())
        .unwrap_or_else(|| panic!("no files line:\n{info}"));
    assert!(
        files.split_whitespace().next() == Some(&before.len().to_string()),
        "{info}"
    );
    // info NAME: the details of one file.
    let segment = before.iter().find(|n| n.len() == 24).expect("a segment");
    let one = text(&archive(repo, &["info", segment]));
    eprintln!("{info}\n{one}");
    assert!(one.contains(segment) && one.contains("sha256"), "{one}");
    for l in one.lines() {
        assert!(l.chars().count() <= 100, "{l}");
    }
}

#[test]
fn expire_dry_run_says_what_the_real_run_leaves() {
    let Archived { repo, before, .. } = &archived();
    let before = before.clone();
    // expire --dry-run: the same removals and the same count left as the real run.
    let dry = text(&archive(
        repo,
        &["expire", "--keep", "1", "--min-age", "0", "--dry-run"],
    ));
    assert!(!has_raw_position(&dry), "{dry}");
    assert_eq!(names(repo), before, "a dry run removed files");
    let summary = dry.lines().last().expect("a summary");
    let would = count_before(summary, "files (");
    let remain = count_before(summary, "files would remain");
    let real = text(&archive(repo, &["expire", "--keep", "1", "--min-age", "0"]));
    assert!(!has_raw_position(&real), "{real}");
    let after = names(repo);
    assert!(would > 0, "{dry}");
    assert_eq!(
        before.len() - after.len(),
        would,
        "dry run:\n{dry}\nreal run:\n{real}"
    );
    assert_eq!(after.len(), remain, "dry run:\n{dry}\nreal run:\n{real}");
    let real_summary = real.lines().last().expect("a summary");
    assert_eq!(count_before(real_summary, "files remain"), remain, "{real}");
    // Both name the removed files the same way, with a verb that tells them apart.
    let removed = |t: &str, verb: &str| -> Vec<String> {
        t.lines()
            .filter_map(|l| l.strip_prefix(verb).map(str::to_owned))
            .collect()
    };
    assert_eq!(removed(&dry, "would remove "), removed(&real, "removed "));
}
