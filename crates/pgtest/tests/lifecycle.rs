//! Teardown: directories go away on drop and on panic; clusters run side by side.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use pgtest::Cluster;

#[test]
fn drop_stops_server_and_removes_directory() {
    let cluster = Cluster::start().expect("cluster starts");
    let root = cluster.root_dir().to_path_buf();
    let pid_file = cluster.data_dir().join("postmaster.pid");
    let pid = std::fs::read_to_string(&pid_file).expect("pid file");
    let pid = pid.lines().next().expect("pid line").trim().to_owned();
    assert!(root.exists());
    drop(cluster);
    assert!(!root.exists(), "{} still exists", root.display());
    // pg_ctl returns once postmaster.pid is gone, a moment before the process itself has exited.
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(&pid) {
        assert!(Instant::now() < deadline, "postmaster {pid} still running");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A process is alive while /proc lists it and it is not a zombie waiting for init to reap it.
fn alive(pid: &str) -> bool {
    let status = PathBuf::from("/proc").join(pid).join("status");
    std::fs::read_to_string(status).is_ok_and(|s| !s.contains("State:\tZ"))
}

#[test]
fn directory_removed_after_panic() {
    let mut seen = None;
    let result = catch_unwind(AssertUnwindSafe(|| {
        let cluster = Cluster::start().expect("cluster starts");
        seen = Some(cluster.root_dir().to_path_buf());
        cluster.psql("SELECT 1").expect("sql");
        panic!("test failure inside a cluster's scope");
    }));
    assert!(result.is_err());
    let root = seen.expect("cluster started");
    assert!(!root.exists(), "{} still exists", root.display());
}

#[test]
fn two_clusters_at_once() {
    let a = Cluster::start().expect("first cluster");
    let b = Cluster::start().expect("second cluster");
    assert_ne!(a.root_dir(), b.root_dir());
    a.psql("CREATE TABLE only_in_a (x int)").expect("sql");
    b.psql("CREATE TABLE only_in_b (x int)").expect("sql");
    let in_a = "SELECT string_agg(relname, ',') FROM pg_class WHERE relname LIKE 'only_in_%'";
    assert_eq!(a.query_one(in_a).expect("a"), "only_in_a");
    assert_eq!(b.query_one(in_a).expect("b"), "only_in_b");
}

#[test]
fn keep_leaves_the_directory() {
    let mut cluster = Cluster::start().expect("cluster starts");
    let kept = cluster.keep();
    drop(cluster);
    assert!(kept.join("data").join("PG_VERSION").exists());
    assert!(
        !kept.join("data").join("postmaster.pid").exists(),
        "server still running"
    );
    std::fs::remove_dir_all(&kept).expect("clean up kept directory");
}

#[test]
fn start_failure_reports_the_log_and_cleans_up() {
    let err = Cluster::builder()
        .guc("shared_buffers", "not a size")
        .start()
        .expect_err("bad setting must stop the server from starting");
    let msg = err.to_string();
    let pgtest::Error::StartFailed { data_dir, .. } = &err else {
        panic!("expected StartFailed, got {msg}");
    };
    assert!(
        msg.contains("shared_buffers"),
        "log tail should name the bad setting: {msg}"
    );
    let root = data_dir.parent().expect("data dir has a parent");
    assert!(!root.exists(), "{} still exists", root.display());
}
