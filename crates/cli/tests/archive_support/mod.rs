//! Helpers shared by the `archive_*` integration tests: the pgcompress binary as
//! archive_command/restore_command would run it, and WAL written by a real server.
#![allow(dead_code)]

use pgtest::Cluster;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The binary under test.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_pgcompress"))
}

/// Runs `pgcompress archive ARGS...` with `--repo REPO` and returns its output.
pub fn archive(repo: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(bin());
    cmd.arg("archive").arg(args[0]).arg("--repo").arg(repo);
    cmd.args(&args[1..]);
    cmd.env_remove("PGCOMPRESS_REPO");
    cmd.output().expect("run pgcompress")
}

/// `archive push` of `path`; panics unless it exits 0.
pub fn push(repo: &Path, path: &Path) {
    let out = archive(repo, &["push", path.to_str().expect("utf-8 path")]);
    assert!(
        out.status.success(),
        "push {} failed: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `archive get NAME DEST`.
pub fn get(repo: &Path, name: &str, dest: &Path) -> Output {
    archive(repo, &["get", name, dest.to_str().expect("utf-8 path")])
}

/// Pushes `path`, gets it back and checks the bytes are identical.
pub fn round_trip(repo: &Path, path: &Path, scratch: &Path) {
    push(repo, path);
    let name = path.file_name().and_then(|n| n.to_str()).expect("name");
    let dest = scratch.join(format!("restored-{name}"));
    let out = get(repo, name, &dest);
    assert!(
        out.status.success(),
        "get {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let a = std::fs::read(path).expect("read original");
    let b = std::fs::read(&dest).expect("read restored");
    assert!(a == b, "{name}: restored bytes differ from the original");
    std::fs::remove_file(&dest).expect("rm");
}

/// `archive list --json` of the repository, as JSON.
pub fn list_json(repo: &Path) -> serde_json::Value {
    let out = archive(repo, &["info", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

/// A cluster with `seg_mb` segments and some pgbench WAL, with both wal_compression off and on,
/// plus switched segments. Returns the cluster (running) once every switched segment is in its
/// archive directory.
pub fn cluster_with_wal(seg_mb: u32, extra: &[(&str, &str)]) -> Cluster {
    let mut b = Cluster::builder()
        .wal_segsize_mb(seg_mb)
        .archive_dir(true)
        .guc("max_wal_size", "1GB");
    for (k, v) in extra {
        b = b.guc(*k, *v);
    }
    let cluster = b.start().expect("start cluster");
    cluster.pgbench_init(1).expect("pgbench -i");
    for setting in ["off", "lz4"] {
        cluster
            .set_guc_and_reload("wal_compression", setting)
            .expect("wal_compression");
        cluster.checkpoint().expect("checkpoint");
        cluster
            .pgbench(&["-n", "-t", "300", "-c", "2", "--random-seed=7"])
            .expect("pgbench");
        cluster.switch_wal().expect("switch");
    }
    // A low-activity segment: a few records, then a switch (mostly zero tail).
    cluster
        .psql("CREATE TABLE small AS SELECT 1 AS x")
        .expect("ctas");
    cluster.switch_wal().expect("switch");
    cluster
}

/// A directory the server user (postgres, when the tests run as root) can write into.
pub fn server_writable_dir(parent: &Path, name: &str) -> PathBuf {
    let d = parent.join(name);
    std::fs::create_dir_all(&d).expect("mkdir");
    pgtest::run::chown_to_server_user(&d).expect("chown");
    d
}
