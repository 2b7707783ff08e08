//! `pgcompress archive push|get` on WAL written by a real PostgreSQL and on every other kind of
//! file PostgreSQL archives: byte-identical round trips, conflict semantics, concurrent pushes,
//! and corruption detection.

mod archive_support;

use archive_support::{archive, cluster_with_wal, get, list_json, push, round_trip};
use std::path::{Path, PathBuf};

/// Writes `data` to `dir/name` and returns the path.
fn file(dir: &Path, name: &str, data: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, data).expect("write");
    p
}

fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// The segment being written: the last one whose first page says it is that segment
/// (recycled segments waiting for reuse still carry their old page addresses).
fn live_segment(wal: &[PathBuf], seg_size: u64) -> PathBuf {
    let segs_per_id = 0x1_0000_0000 / seg_size;
    wal.iter()
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let (Ok(log), Ok(seg)) = (
                u64::from_str_radix(name.get(8..16).unwrap_or("x"), 16),
                u64::from_str_radix(name.get(16..24).unwrap_or("x"), 16),
            ) else {
                return false;
            };
            let head = std::fs::read(p).expect("read");
            head.get(8..16)
                .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
                == Some((log * segs_per_id + seg) * seg_size)
        })
        .max()
        .expect("a live segment")
        .clone()
}

fn parts_of(info: &serde_json::Value, name: &str) -> Vec<String> {
    info["files"]
        .as_array()
        .expect("files")
        .iter()
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("{name} not listed"))["parts"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|p| p["role"].as_str().unwrap_or("").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn every_kind_of_file_round_trips() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let scratch = scratch.path();
    let mut segment_1mb = None;
    for seg_mb in [1u32, 16] {
        let cluster = cluster_with_wal(seg_mb, &[]);
        // pg_wal as the server has it: switched and complete segments, the live one (zeros
        // past the insert point) and recycled ones (stale content).
        let wal = cluster
            .copy_wal_to(&scratch.join(format!("wal{seg_mb}")))
            .expect("copy");
        let archived = cluster.archived_segments().expect("archived");
        let repo = scratch.join(format!("repo{seg_mb}"));
        for seg in &wal {
            round_trip(&repo, seg, scratch);
        }
        // Complete segments (switched and full ones) from the archive directory; names
        // already pushed from pg_wal hold the same bytes and are "already archived".
        for seg in &archived {
            round_trip(&repo, seg, scratch);
        }
        drop(cluster);
        assert!(
            wal.len() + archived.len() >= 4,
            "too few segments: {wal:?} {archived:?}"
        );
        let live = live_segment(&wal, u64::from(seg_mb) << 20);
        let live_name = live
            .file_name()
            .and_then(|n| n.to_str())
            .expect("name")
            .to_owned();
        let partial = scratch.join(format!("{live_name}.partial"));
        std::fs::copy(live, &partial).expect("copy partial");
        round_trip(&repo, &partial, scratch);

        let info = list_json(&repo);
        for f in info["files"].as_array().expect("files") {
            assert_eq!(
                f["transform"], "wal-records",
                "{f}: a real segment gets the WAL records transform"
            );
        }
        // The live segment ends in zeros (or stale bytes), stored without compressing them.
        let live_parts = parts_of(&info, &live_name);
        assert!(
            live_parts.iter().any(|r| r == "zeros" || r == "stale"),
            "{live_name}: {live_parts:?}"
        );
        let with_zero_tail = info["files"]
            .as_array()
            .expect("files")
            .iter()
            .filter(|f| {
                f["parts"]
                    .as_array()
                    .is_some_and(|p| p.iter().any(|p| p["role"] == "zeros"))
            })
            .count();
        assert!(
            with_zero_tail >= 2,
            "switched segments should have zero tails: {info}"
        );
        if seg_mb == 1 {
            segment_1mb = wal.first().cloned();
        }
    }

    // Everything else PostgreSQL archives, and things it never would: stored plainly.
    let other = scratch.join("other");
    std::fs::create_dir(&other).expect("mkdir");
    let repo = scratch.join("repo-other");
    let files = [
        file(&other, "00000002.history", b"1\t0/3000000\tno recovery target specified\n"),
        file(
            &other,
            "000000010000000000000002.00000028.backup",
            b"START WAL LOCATION: 0/2000028 (file 000000010000000000000002)\nSTOP WAL LOCATION: 0/2000100 (file 000000010000000000000002)\n",
        ),
        file(&other, "empty", b""),
        file(&other, "short", b"abc"),
        file(&other, "junk.bin", &noise(3 << 20, 11)),
        file(&other, "000000010000000000000009", &noise(1 << 20, 12)),
    ];
    for f in &files {
        round_trip(&repo, f, scratch);
    }
    let info = list_json(&repo);
    for f in info["files"].as_array().expect("files") {
        assert_eq!(f["transform"], "plain", "{f}");
    }

    conflict_semantics(scratch, segment_1mb.as_deref().expect("a 1 MB segment"));
    corruption_is_detected(scratch, segment_1mb.as_deref().expect("a 1 MB segment"));
}

/// Same name + same content succeeds; different content fails and changes nothing; two
/// concurrent pushes of one file both succeed.
fn conflict_semantics(scratch: &Path, segment: &Path) {
    let repo = scratch.join("repo-conflict");
    let name = segment.file_name().and_then(|n| n.to_str()).expect("name");
    // Concurrent pushes of the same file into an empty repository.
    let children: Vec<_> = (0..4)
        .map(|_| {
            std::process::Command::new(archive_support::bin())
                .args(["archive", "push", "--repo"])
                .arg(&repo)
                .arg(segment)
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn")
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().expect("wait");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let stored = std::fs::read(repo.join(format!("{name}.pgcz"))).expect("archived");

    // Again: already archived, identical → exit 0 with a warning.
    let out = archive(&repo, &["push", segment.to_str().expect("path")]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("already archived"));

    // The same name with different content.
    let other_dir = scratch.join("conflict-src");
    std::fs::create_dir_all(&other_dir).expect("mkdir");
    let mut changed = std::fs::read(segment).expect("read");
    let n = changed.len();
    changed[n - 1] ^= 0xff;
    let changed_path = file(&other_dir, name, &changed);
    let out = archive(&repo, &["push", changed_path.to_str().expect("path")]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("different content") && err.lines().count() == 1,
        "{err}"
    );
    assert_eq!(
        std::fs::read(repo.join(format!("{name}.pgcz"))).expect("archived"),
        stored,
        "the archived copy must not change"
    );

    // get from a repository that does not exist: a loud failure above 125, so
    // PostgreSQL aborts recovery instead of taking it for the end of the archive.
    let out = get(
        &scratch.join("no-such-repo"),
        "00000005.history",
        &scratch.join("RECOVERYHISTORY"),
    );
    assert_eq!(out.status.code(), Some(200));
    assert_eq!(String::from_utf8_lossy(&out.stderr).lines().count(), 1);
    assert!(!scratch.join("RECOVERYHISTORY").exists());

    // get of a missing file: exit 1, nothing on stderr, no destination.
    let dest = scratch.join("RECOVERYHISTORY");
    let out = get(&repo, "00000005.history", &dest);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!dest.exists());

    // Usage errors exit 2.
    let out = std::process::Command::new(archive_support::bin())
        .args(["archive", "get", "onlyone"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let out = std::process::Command::new(archive_support::bin())
        .args(["archive", "list"])
        .env_remove("PGCOMPRESS_REPO")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    // PGCOMPRESS_REPO stands in for --repo.
    let out = std::process::Command::new(archive_support::bin())
        .args(["archive", "verify"])
        .env("PGCOMPRESS_REPO", &repo)
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Flipping a byte anywhere in an archived file makes get and verify fail with one line and
/// leaves no destination file.
fn corruption_is_detected(scratch: &Path, segment: &Path) {
    let repo = scratch.join("repo-corrupt");
    push(&repo, segment);
    let name = segment.file_name().and_then(|n| n.to_str()).expect("name");
    let stored_path = repo.join(format!("{name}.pgcz"));
    let good = std::fs::read(&stored_path).expect("read");
    let len = good.len();
    // Every other byte of the first 200 (the whole header and the start of the payload),
    // then 40 offsets spread over the payload, and the last byte.
    let mut offsets: Vec<usize> = (0..200.min(len)).step_by(2).collect();
    offsets.extend((1..=40).map(|i| i * (len - 1) / 41));
    offsets.push(len - 1);
    let dest = scratch.join("RECOVERYXLOG");
    for at in offsets {
        let mut bad = good.clone();
        bad[at] ^= 0x04;
        std::fs::write(&stored_path, &bad).expect("write");
        let out = get(&repo, name, &dest);
        let err = String::from_utf8_lossy(&out.stderr);
        // Above 125: PostgreSQL aborts recovery rather than take it for a missing file.
        assert_eq!(out.status.code(), Some(200), "flip at {at}: {err}");
        assert_eq!(
            err.lines().count(),
            1,
            "flip at {at}: one line expected: {err}"
        );
        assert!(err.contains(name), "flip at {at}: {err}");
        assert!(!dest.exists(), "flip at {at}: destination left behind");
        let out = archive(&repo, &["verify"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "verify, flip at {at}: {err}");
        assert!(
            err.lines().next().is_some_and(|l| l.contains(name)),
            "{err}"
        );
    }
    std::fs::write(&stored_path, &good).expect("restore");
    let out = archive(&repo, &["verify"]);
    assert!(out.status.success());
    let leftovers: Vec<_> = std::fs::read_dir(scratch)
        .expect("ls")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".pgcompress."))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}
