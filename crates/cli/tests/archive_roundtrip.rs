//! `pgcompress archive push|get` on WAL written by a real PostgreSQL and on every other kind of
//! file PostgreSQL archives: byte-identical round trips, conflict semantics, concurrent pushes,
//! and corruption detection.

mod archive_support;

use archive_support::{
    cluster_with_wal, conflict_semantics, corruption_is_detected, list_json, round_trip,
};
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
        archive_support::init(&repo, &cluster.data_dir());
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
        // The prose rows' text was word-coded in at least one segment.
        let coded = files_whose_parts(&info, |p| p.iter().any(|p| p["word_coded"] == true));
        assert!(coded > 0, "no segment had word-coded text: {info}");
        // In 16 MB segments the largest stream is cut into pieces for the second thread
        // (consecutive parts with the same role), and those come back like the others.
        if seg_mb == 16 {
            let cut = files_whose_parts(&info, |p| {
                p.windows(2).any(|w| w[0]["role"] == w[1]["role"])
            });
            assert!(cut > 0, "no 16 MB segment had a stream in pieces: {info}");
            // pgbench's page images (wal_compression off) were compressed as the split
            // found them: one zstd frame that does not state its size, decoded a window at
            // a time on get (the round trips above).
            assert!(
                streamed_images(&repo) > 0,
                "no 16 MB segment had its page images streamed: {info}"
            );
        }
        // The live segment ends in zeros (or stale bytes), stored without compressing them.
        let live_parts = parts_of(&info, &live_name);
        assert!(
            live_parts.iter().any(|r| r == "zeros" || r == "stale"),
            "{live_name}: {live_parts:?}"
        );
        let with_zero_tail = files_whose_parts(&info, |p| p.iter().any(|p| p["role"] == "zeros"));
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
    archive_support::init_from_segment(&repo, &segment_1mb.clone().expect("a 1 MB segment"));
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
    ];
    for f in &files {
        round_trip(&repo, f, scratch);
    }
    // A segment's name on bytes that are not WAL is refused: no system to check it against.
    let not_wal = file(&other, "000000010000000000000009", &noise(1 << 20, 12));
    let out = archive_support::archive(&repo, &["push", not_wal.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(!repo.join("000000010000000000000009.pgcz").exists());
    let info = list_json(&repo);
    for f in info["files"].as_array().expect("files") {
        assert_eq!(f["transform"], "plain", "{f}");
    }

    let segment = segment_1mb.as_deref().expect("a 1 MB segment");
    let repo = scratch.join("repo-conflict");
    archive_support::init_from_segment(&repo, segment);
    conflict_semantics(&repo, scratch, segment);
    settings_and_usage(scratch, &repo);
    let corrupt = scratch.join("repo-corrupt");
    archive_support::init_from_segment(&corrupt, segment);
    corruption_is_detected(&corrupt, scratch, segment);
}

/// Usage errors exit 2, but get's exit 200 (PostgreSQL ends recovery on 1 to 125);
/// PGCOMPRESS_REPO and a config file stand in for --repo.
fn settings_and_usage(scratch: &Path, repo: &Path) {
    let repo_arg = repo.to_str().expect("utf-8");
    let dest = scratch.join("usage-dest");
    let dest_arg = dest.to_str().expect("utf-8");
    for args in [
        vec!["archive", "get", "onlyone"],
        vec![
            "archive",
            "get",
            "--repo",
            repo_arg,
            "--fsnyc",
            "00000002.history",
            dest_arg,
        ],
        vec![
            "archive",
            "get",
            "--repo",
            repo_arg,
            "--prefetch",
            "4",
            "00000002.history",
            dest_arg,
        ],
        vec![
            "archive",
            "get",
            "--repo",
            repo_arg,
            "--prefetch",
            "0",
            "--spool",
            "/tmp",
            "x",
            dest_arg,
        ],
        vec![
            "archive",
            "--repo",
            repo_arg,
            "get",
            "00000002.history",
            dest_arg,
        ],
    ] {
        let out = std::process::Command::new(archive_support::bin())
            .args(&args)
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(200), "{args:?}: {out:?}");
        assert!(!out.stderr.is_empty(), "{args:?}: nothing said");
        assert!(!dest.exists());
    }
    for args in [
        vec!["archive", "push", "--repo", repo_arg, "--fsync", dest_arg],
        vec!["archive", "push"],
        vec!["archive", "list", "--repo", repo_arg, "extra"],
    ] {
        let out = std::process::Command::new(archive_support::bin())
            .args(&args)
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
    }
    let out = std::process::Command::new(archive_support::bin())
        .args(["archive", "get", "--help"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let out = std::process::Command::new(archive_support::bin())
        .args(["archive", "list"])
        .env_remove("PGCOMPRESS_REPO")
        .env_remove("PGCOMPRESS_CONFIG")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no repository") && err.lines().count() == 1,
        "{err}"
    );
    // get without a repository is a misconfiguration: above 125, not "not archived".
    let out = std::process::Command::new(archive_support::bin())
        .args(["archive", "get", "00000002.history"])
        .arg(scratch.join("RECOVERYHISTORY"))
        .env_remove("PGCOMPRESS_REPO")
        .env_remove("PGCOMPRESS_CONFIG")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(200));
    // PGCOMPRESS_REPO stands in for --repo.
    let out = std::process::Command::new(archive_support::bin())
        .args(["archive", "verify"])
        .env("PGCOMPRESS_REPO", repo)
        .env_remove("PGCOMPRESS_CONFIG")
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // So does `repo` in a config file, named by --config or PGCOMPRESS_CONFIG; the flag and
    // the environment win over the file.
    let config = scratch.join("pgcompress.toml");
    std::fs::write(
        &config,
        format!(
            "repo = {:?}\nmethod = \"lz4\"\n",
            repo.display().to_string()
        ),
    )
    .expect("write config");
    for via_env in [false, true] {
        let mut cmd = std::process::Command::new(archive_support::bin());
        cmd.args(["archive", "info", "--json"])
            .env_remove("PGCOMPRESS_REPO");
        if via_env {
            cmd.env("PGCOMPRESS_CONFIG", &config);
        } else {
            cmd.arg("--config")
                .arg(&config)
                .env_remove("PGCOMPRESS_CONFIG");
        }
        let out = cmd.output().expect("run");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let info: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        assert_eq!(info["repository"], repo.display().to_string());
    }
    let elsewhere = scratch.join("repo-elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("mkdir");
    let out = std::process::Command::new(archive_support::bin())
        .args(["archive", "info", "--json", "--config"])
        .arg(&config)
        .env("PGCOMPRESS_REPO", &elsewhere)
        .output()
        .expect("run");
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(info["repository"], elsewhere.display().to_string());
    // The file's method is used by push unless --method says otherwise.
    let src = file(&scratch.join("other"), "config-method", &noise(100_000, 3));
    let out = std::process::Command::new(archive_support::bin())
        .args(["archive", "push", "--config"])
        .arg(&config)
        .arg(&src)
        .env_remove("PGCOMPRESS_REPO")
        .env_remove("PGCOMPRESS_METHOD")
        .output()
        .expect("run");
    assert!(out.status.success());
    let info = list_json(repo);
    let method = info["files"]
        .as_array()
        .expect("files")
        .iter()
        .find(|f| f["name"] == "config-method")
        .expect("listed")["method"]
        .clone();
    assert_eq!(method, "lz4");
    // A config file with a mistake: one line naming the file and the key, exit 2.
    std::fs::write(&config, "repo = \"/x\"\nregoin = \"eu-west-1\"\n").expect("write");
    let out = std::process::Command::new(archive_support::bin())
        .args(["archive", "list", "--config"])
        .arg(&config)
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.lines().count() == 1 && err.contains("regoin") && err.contains("pgcompress.toml"),
        "{err}"
    );
}

/// Containers in the directory repository `repo` whose page images are stored as one zstd
/// frame without a stated content size (its frame header descriptor has neither a content
/// size field nor the single-segment flag, RFC 8878 3.1.1.1.1).
fn streamed_images(repo: &Path) -> usize {
    use archive::container::{Header, Role};
    use archive::walsplit::Stream;
    let mut n = 0;
    for entry in std::fs::read_dir(repo).expect("read repo") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "pgcz") {
            continue;
        }
        let bytes = std::fs::read(&path).expect("read container");
        let (header, mut at) = Header::parse(&bytes)
            .expect("a valid header")
            .expect("a whole header");
        for p in &header.parts {
            let stored = &bytes[at..at + p.stored_len as usize];
            at += p.stored_len as usize;
            let unsized_zstd = stored.len() > 5
                && stored[..4] == [0x28, 0xb5, 0x2f, 0xfd]
                && stored[4] & 0xe0 == 0;
            if p.role == Role::WalStream(Stream::Images) && !p.words && unsized_zstd {
                n += 1;
            }
        }
    }
    n
}

/// How many files of `archive info --json` output have parts that satisfy `pred`.
fn files_whose_parts(
    info: &serde_json::Value,
    pred: impl Fn(&[serde_json::Value]) -> bool,
) -> usize {
    info["files"]
        .as_array()
        .expect("files")
        .iter()
        .filter(|f| f["parts"].as_array().is_some_and(|p| pred(p)))
        .count()
}
