//! `pgcompress archive` on an S3-compatible repository, against a real server the test starts
//! (moto_server): byte-identical round trips of WAL written by a real PostgreSQL, the same
//! conflict, missing-file and corruption semantics as a directory, list/info/verify, and the
//! settings that select the repository (flags, environment, config file).

mod archive_support;

use archive_support::s3::{credentials, Moto, S3Repo};
use archive_support::{
    archive, bin, cluster_with_wal, conflict_semantics, corruption_is_detected, list_json,
    round_trip, Repo,
};
use sha2::{Digest, Sha256};
use std::path::Path;
use std::process::Command;

const BUCKET: &str = "pgc-archive";

#[test]
fn s3_repository_behaves_like_a_directory() {
    let Some(moto) = Moto::start_or_skip("s3_repository_behaves_like_a_directory") else {
        return;
    };
    moto.create_bucket(BUCKET);
    server_honors_put_if_absent(&moto);

    let scratch = tempfile::tempdir().expect("tempdir");
    let scratch = scratch.path();
    let cluster = cluster_with_wal(1, &[]);
    let wal = cluster.copy_wal_to(&scratch.join("wal")).expect("copy");
    // Complete (switched) segments from the cluster's archive directory, which goes with it.
    let archived = cluster.archived_segments().expect("archived");
    assert!(wal.len() + archived.len() >= 4, "{wal:?} {archived:?}");

    let repo = S3Repo::new(&moto, BUCKET, "cluster-a/wal");
    uninitialized_prefix_is_refused(&repo, &cluster.data_dir(), &wal[0], scratch);
    archive_support::init(&repo, &cluster.data_dir());
    for seg in wal.iter().chain(&archived) {
        round_trip(&repo, seg, scratch);
    }
    let archived: Vec<_> = archived
        .iter()
        .map(|p| {
            let copy = scratch.join(p.file_name().expect("name"));
            std::fs::copy(p, &copy).expect("copy archived segment");
            copy
        })
        .collect();
    drop(cluster);
    // What the repository recorded is the SHA-256 of each original, and each container is
    // an object PREFIX/<name>.pgcz.
    let info = list_json(&repo);
    assert_eq!(info["repository"], repo.url());
    let files = info["files"].as_array().expect("files");
    let names: std::collections::BTreeSet<&str> = wal
        .iter()
        .chain(&archived)
        .map(|p| p.file_name().and_then(|n| n.to_str()).expect("name"))
        .collect();
    assert_eq!(files.len(), names.len(), "{info}");
    for seg in wal.iter().chain(&archived) {
        let name = seg.file_name().and_then(|n| n.to_str()).expect("name");
        let f = files
            .iter()
            .find(|f| f["name"] == name)
            .unwrap_or_else(|| panic!("{name} not listed: {info}"));
        let sha = hex::encode(Sha256::digest(std::fs::read(seg).expect("read")));
        assert_eq!(f["sha256"], sha, "{name}");
        assert_eq!(f["transform"], "wal-records", "{name}");
        let stored = repo.stored(name).expect("object");
        assert_eq!(f["stored"], stored.len(), "{name}");
    }
    assert!(
        info["total"]["ratio"].as_f64().expect("ratio") > 1.0,
        "{info}"
    );
    let out = archive(&repo, &["list"]);
    assert!(out.status.success());
    let table = String::from_utf8_lossy(&out.stdout);
    assert_eq!(table.lines().count(), names.len() + 1, "{table}");
    let out = archive(&repo, &["info"]);
    let info_text = String::from_utf8_lossy(&out.stdout);
    assert!(
        info_text
            .lines()
            .any(|l| l.starts_with("repository:") && l.ends_with(&repo.url())),
        "{info_text}"
    );
    let out = archive(&repo, &["verify"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains(&format!("verified {} files", names.len())),
        "{text}"
    );

    // Prefixes are separate repositories; other objects under a prefix are not containers.
    let other = S3Repo::new(&moto, BUCKET, "cluster-b");
    assert_eq!(
        moto.put_object(BUCKET, "cluster-b/README.txt", &[], b"not a container"),
        200
    );
    assert_eq!(list_json(&other)["files"].as_array().map(Vec::len), Some(0));

    let segment = wal.first().expect("a segment");
    let conflict = S3Repo::new(&moto, BUCKET, "conflict");
    archive_support::init_from_segment(&conflict, segment);
    conflict_semantics(&conflict, scratch, segment);
    let corrupt = S3Repo::new(&moto, BUCKET, "corrupt");
    archive_support::init_from_segment(&corrupt, segment);
    corruption_is_detected(&corrupt, scratch, segment);
    settings_select_the_repository(&moto, &repo, scratch, segment);
    unreachable_store(scratch, segment);
}

/// Before `archive init`, push exits 2 and get 200, and neither writes an object; after it, a
/// segment of another system is refused and nothing is written.
fn uninitialized_prefix_is_refused(repo: &S3Repo, pgdata: &Path, segment: &Path, scratch: &Path) {
    let name = segment.file_name().and_then(|n| n.to_str()).expect("name");
    let out = archive(repo, &["push", segment.to_str().expect("path")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("not initialized") && err.contains("archive init"),
        "{err}"
    );
    let dest = scratch.join("uninitialized-get");
    let out = archive(repo, &["get", name, dest.to_str().expect("path")]);
    assert_eq!(out.status.code(), Some(200), "{out:?}");
    assert!(!dest.exists());
    assert_eq!(list_json(repo)["files"].as_array().map(Vec::len), Some(0));
    assert!(repo.stored(name).is_none());
    // Another system's segment, once the prefix belongs to this one.
    let foreign_dir = scratch.join("foreign");
    std::fs::create_dir_all(&foreign_dir).expect("mkdir");
    let mut foreign = std::fs::read(segment).expect("read");
    foreign[24] ^= 1; // xlp_sysid, in the first page's long header
    let foreign_path = foreign_dir.join(name);
    std::fs::write(&foreign_path, &foreign).expect("write");
    archive_support::init(repo, pgdata);
    let out = archive(repo, &["push", foreign_path.to_str().expect("path")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("belongs to system"), "{err}");
    assert!(repo.stored(name).is_none());
}

/// The server refuses a conditional PutObject (`If-None-Match: *`) over an existing key, the
/// primitive a push relies on not to overwrite.
fn server_honors_put_if_absent(moto: &Moto) {
    assert_eq!(moto.put_object(BUCKET, "probe/key", &[], b"first"), 200);
    assert_eq!(
        moto.put_object(BUCKET, "probe/key", &[("If-None-Match", "*")], b"second"),
        412,
        "the test server ignores If-None-Match: * ({})",
        moto.log_tail()
    );
    assert_eq!(
        moto.get_object(BUCKET, "probe/key").as_deref(),
        Some(&b"first"[..])
    );
}

/// PGCOMPRESS_REPO and AWS_ENDPOINT_URL, or a config file, select the same repository as the
/// flags; flags win over both.
fn settings_select_the_repository(moto: &Moto, repo: &S3Repo, scratch: &Path, segment: &Path) {
    let name = segment.file_name().and_then(|n| n.to_str()).expect("name");
    let dest = scratch.join("via-settings");
    let check = |mut cmd: Command, how: &str| {
        cmd.arg(name).arg(&dest);
        let out = cmd.output().expect("run");
        assert!(
            out.status.success(),
            "{how}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            std::fs::read(&dest).expect("read") == std::fs::read(segment).expect("read"),
            "{how}"
        );
        std::fs::remove_file(&dest).expect("rm");
    };
    let base = || {
        let mut cmd = Command::new(bin());
        cmd.args(["archive", "get"]);
        credentials(&mut cmd);
        cmd
    };
    let mut cmd = base();
    cmd.env("PGCOMPRESS_REPO", repo.url())
        .env("AWS_ENDPOINT_URL", moto.endpoint())
        .env("AWS_REGION", "eu-central-1");
    check(cmd, "environment");

    let config = scratch.join("s3.toml");
    let mut via_file = S3Repo::new(moto, BUCKET, &repo.prefix);
    via_file.write_config(&config);
    let mut cmd = base();
    cmd.arg("--config").arg(&config);
    check(cmd, "--config");
    let mut cmd = base();
    cmd.env("PGCOMPRESS_CONFIG", &config);
    check(cmd, "PGCOMPRESS_CONFIG");

    // The environment wins over the file: a wrong endpoint there is used, and fails loudly.
    let mut cmd = base();
    cmd.arg("--config")
        .arg(&config)
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
        .arg(name)
        .arg(&dest);
    let out = cmd.output().expect("run");
    assert_eq!(out.status.code(), Some(200));
    assert!(!dest.exists());
    // The flag wins over the environment.
    let mut cmd = base();
    cmd.arg("--config")
        .arg(&config)
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
        .args(["--endpoint", &moto.endpoint()]);
    check(cmd, "--endpoint over AWS_ENDPOINT_URL");

    // Bad locations and endpoints: one line, exit 2 (200 for get).
    for (args, code, needle) in [
        (vec!["list", "--repo", "s3://"], 2, "bucket"),
        (vec!["list", "--repo", "s3://b/x//y"], 2, "empty segment"),
        (vec!["list", "--repo", "s3:/b"], 2, "s3://bucket/prefix"),
        (
            vec!["list", "--repo", "s3://b", "--endpoint", "127.0.0.1:9"],
            2,
            "http://",
        ),
        (vec!["get", "--repo", "s3://", "x", "y"], 200, "bucket"),
    ] {
        let mut cmd = Command::new(bin());
        cmd.arg("archive");
        credentials(&mut cmd);
        let out = cmd.args(&args).output().expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert!(
            err.lines().count() == 1 && err.contains(needle),
            "{args:?}: {err}"
        );
    }
}

/// A store that does not answer (it accepts each connection and closes it at once): push fails
/// (exit 1, PostgreSQL retries it later), get stops recovery (200), each with one line, after a
/// bounded number of attempts: the store's listener counts the connections, at least one (the error
/// is the store's) and at most those of one request's tries (`max_retries` 5, so 6 tries, each of
/// which the HTTP client may open twice: it sends again once on a connection reset before any answer;
/// 12 seen), so a command never retries on and on against a dead store.
fn unreachable_store(scratch: &Path, segment: &Path) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listener");
    let endpoint = format!("http://{}", listener.local_addr().expect("address"));
    let attempts = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&attempts);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            counted.fetch_add(1, Ordering::SeqCst);
            drop(conn);
        }
    });
    let name = segment.file_name().and_then(|n| n.to_str()).expect("name");
    let dest = scratch.join("unreachable");
    for (sub, tail, code) in [
        ("push", vec![segment.to_str().expect("path")], 1),
        ("get", vec![name, dest.to_str().expect("path")], 200),
    ] {
        let mut cmd = Command::new(bin());
        cmd.args(["archive", sub]);
        credentials(&mut cmd);
        cmd.args(["--repo", "s3://nowhere/wal", "--endpoint", &endpoint])
            .args(&tail);
        let before = attempts.load(Ordering::SeqCst);
        let out = cmd.output().expect("run");
        let tried = attempts.load(Ordering::SeqCst) - before;
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{sub}: {err}");
        assert_eq!(err.lines().count(), 1, "{sub}: {err}");
        assert!(
            (1..=12).contains(&tried),
            "{sub} connected to the store {tried} times: {err}"
        );
    }
    assert!(!dest.exists());
}
