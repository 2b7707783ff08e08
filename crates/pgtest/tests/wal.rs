//! WAL segments written by a real server: switching, segment size, archiving, copying.

use std::time::Duration;

use pgtest::{is_wal_segment_name, Cluster};

#[test]
fn switch_wal_creates_segments() {
    let cluster = Cluster::start().expect("cluster starts");
    let before = cluster.wal_segment_files().expect("list");
    assert!(!before.is_empty());
    cluster
        .psql("CREATE TABLE t AS SELECT generate_series(1, 1000) AS x")
        .expect("sql");
    let lsn = cluster.switch_wal().expect("switch");
    assert!(lsn.contains('/'), "{lsn}");
    cluster.psql("INSERT INTO t VALUES (1)").expect("sql");
    cluster.checkpoint().expect("checkpoint");
    let after = cluster.wal_segment_files().expect("list");
    let newest_before = before.last().expect("one segment");
    assert!(
        after.iter().any(|p| p > newest_before),
        "{before:?} -> {after:?}"
    );
    for p in &after {
        let name = p.file_name().and_then(|n| n.to_str()).expect("utf-8 name");
        assert!(is_wal_segment_name(name), "{name}");
        assert_eq!(p.metadata().expect("stat").len(), 16 << 20);
    }
    assert!(cluster.current_wal_lsn().expect("lsn").contains('/'));
}

#[test]
fn one_megabyte_segments() {
    let cluster = Cluster::builder()
        .wal_segsize_mb(1)
        .start()
        .expect("cluster starts");
    assert_eq!(
        cluster.query_one("SHOW wal_segment_size").expect("show"),
        "1MB"
    );
    cluster.switch_wal().expect("switch");
    cluster.psql("SELECT 1").expect("sql");
    for p in cluster.wal_segment_files().expect("list") {
        assert_eq!(
            p.metadata().expect("stat").len(),
            1 << 20,
            "{}",
            p.display()
        );
    }
}

#[test]
fn archive_dir_captures_switched_segments() {
    let cluster = Cluster::builder()
        .wal_segsize_mb(1)
        .archive_dir(true)
        .start()
        .expect("cluster starts");
    assert_eq!(cluster.query_one("SHOW archive_mode").expect("show"), "on");
    let name = cluster
        .query_one("SELECT pg_walfile_name(pg_current_wal_lsn())")
        .expect("current segment");
    cluster
        .psql("CREATE TABLE t (x int); INSERT INTO t VALUES (1)")
        .expect("sql");
    cluster.switch_wal().expect("switch");
    let archived = cluster
        .wait_for_archived(&name, Duration::from_secs(60))
        .expect("archived in time");
    assert_eq!(archived.metadata().expect("stat").len(), 1 << 20);
    assert!(cluster
        .archived_segments()
        .expect("list archive")
        .contains(&archived));
    assert!(archived.starts_with(cluster.archive_dir().expect("archive on")));
}

#[test]
fn copy_wal_to_gives_readable_copies() {
    let cluster = Cluster::builder()
        .wal_segsize_mb(1)
        .start()
        .expect("cluster starts");
    cluster.switch_wal().expect("switch");
    let dest = tempfile::tempdir().expect("tempdir");
    let copies = cluster.copy_wal_to(&dest.path().join("wal")).expect("copy");
    assert_eq!(
        copies.len(),
        cluster.wal_segment_files().expect("list").len()
    );
    for c in &copies {
        let bytes = std::fs::read(c).expect("copy is readable by the current user");
        assert_eq!(bytes.len(), 1 << 20);
        // XLogLongPageHeaderData starts with the magic of the WAL format (access/xlog_internal.h).
        assert_eq!(
            u16::from_le_bytes([bytes[0], bytes[1]]),
            0xD110,
            "PG15 XLOG_PAGE_MAGIC"
        );
    }
}
