//! WAL of a PostgreSQL major pgcompress does not read (14 and older, 19) is refused with one
//! line naming the version and a non-zero exit, never a partial table. No 14 or 19 server runs
//! here, so the pages of real WAL (from the server the run tests) get another major's magic.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `XLOG_PAGE_MAGIC` of PostgreSQL 14 and of 19devel (xlog_internal.h of those branches).
const FOREIGN: [(u16, &str); 2] = [(0xD10D, "PostgreSQL 14"), (0xD120, "PostgreSQL 19")];
const PAGE: usize = 8192;

fn with_magic(src: &Path, dir: &Path, magic: u16) -> PathBuf {
    let mut bytes = std::fs::read(src).expect("read segment");
    for page in bytes.chunks_mut(PAGE) {
        page[..2].copy_from_slice(&magic.to_le_bytes());
    }
    let dest = dir.join(src.file_name().expect("name"));
    std::fs::write(&dest, bytes).expect("write copy");
    dest
}

#[test]
fn unsupported_majors_are_named_in_one_line() {
    let cluster = pgtest::Cluster::builder()
        .wal_segsize_mb(1)
        .archive_dir(true)
        .start()
        .expect("start cluster");
    cluster
        .psql("CREATE TABLE t AS SELECT g FROM generate_series(1, 1000) g;")
        .expect("workload");
    let name = cluster
        .query_one("SELECT pg_walfile_name(pg_current_wal_insert_lsn())")
        .expect("segment name");
    cluster.switch_wal().expect("switch");
    let segment = cluster
        .wait_for_archived(&name, std::time::Duration::from_secs(60))
        .expect("the segment archived");
    for (magic, name) in FOREIGN {
        let dir = tempfile::tempdir().expect("tempdir");
        let copy = with_magic(&segment, dir.path(), magic);
        for sub in ["stats", "verify"] {
            let out = Command::new(env!("CARGO_BIN_EXE_pgcompress"))
                .args(["wal", sub])
                .arg(&copy)
                .output()
                .expect("run pgcompress");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                !out.status.success(),
                "{sub} {magic:#X}: exit {:?}",
                out.status
            );
            assert!(
                out.stdout.is_empty(),
                "{sub} {magic:#X}: printed {:?}",
                out.stdout
            );
            assert_eq!(err.trim_end().lines().count(), 1, "{sub} {magic:#X}: {err}");
            assert!(err.contains(name), "{sub} {magic:#X}: {err}");
            assert!(err.contains("unsupported"), "{sub} {magic:#X}: {err}");
        }
    }
}
