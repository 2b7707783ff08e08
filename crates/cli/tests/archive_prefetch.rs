//! `archive get --prefetch`: the segments after the one asked for are restored ahead into
//! the spool, and a queued file is used only if it is the right one, intact: a damaged file,
//! one moved to another name, or one from another repository is fetched again from the
//! repository instead. Recovery of a real server through it: archive_async.rs.

mod archive_support;

use archive_support::{bin, push, Repo};
use pgtest::Cluster;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn get_prefetch(repo: &Path, spool: &Path, name: &str, dest: &Path) -> std::process::Output {
    let mut cmd = Command::new(bin());
    cmd.args(["archive", "get", "--prefetch", "3", "--spool"])
        .arg(spool)
        .arg(name)
        .arg(dest);
    repo.apply(&mut cmd);
    cmd.output().expect("get")
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn name_of(p: &Path) -> &str {
    p.file_name().and_then(|n| n.to_str()).expect("name")
}

#[test]
fn a_prefetched_file_never_stands_in_for_a_different_or_damaged_one() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let top = scratch.path();
    let cluster = Cluster::builder()
        .wal_segsize_mb(1)
        .start()
        .expect("start cluster");
    cluster.pgbench_init(1).expect("pgbench -i");
    cluster.switch_wal().expect("switch");
    let mut segs: Vec<PathBuf> = cluster.copy_wal_to(&top.join("wal")).expect("copy");
    drop(cluster);
    segs.sort();
    assert!(segs.len() >= 5, "{segs:?}");
    segs.truncate(5);
    let repo = top.join("repo");
    archive_support::init_from_segment(&repo, &segs[0]);
    for s in &segs {
        push(&repo, s);
    }
    let spool = top.join("spool");
    let data = spool.join("fetch/data");
    let meta = spool.join("fetch/meta");
    let dest = top.join("RECOVERYXLOG");
    let check = |i: usize| {
        let out = get_prefetch(&repo, &spool, name_of(&segs[i]), &dest);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            std::fs::read(&dest).expect("read") == std::fs::read(&segs[i]).expect("read"),
            "segment {i} restored different bytes"
        );
        std::fs::remove_file(&dest).expect("rm");
    };
    // The first get misses and starts the prefetcher, which queues the next three.
    check(0);
    wait_for("the queue", || {
        (1..4).all(|i| meta.join(name_of(&segs[i])).exists())
    });

    // Damaged: one bit of the queued segment 1 flipped.
    let damaged = data.join(name_of(&segs[1]));
    let mut bytes = std::fs::read(&damaged).expect("read");
    bytes[5000] ^= 0x10;
    std::fs::write(&damaged, &bytes).expect("write");
    check(1);
    // Another name: segment 3's queued file and meta put in place of segment 2's.
    let (n2, n3) = (name_of(&segs[2]), name_of(&segs[3]));
    std::fs::copy(data.join(n3), data.join(n2)).expect("cp");
    std::fs::copy(meta.join(n3), meta.join(n2)).expect("cp");
    check(2);
    // Another repository: segment 3's meta names a different one.
    let text = std::fs::read_to_string(meta.join(n3)).expect("meta");
    let other = text.replace(&repo.display().to_string(), "/elsewhere");
    assert_ne!(text, other);
    std::fs::write(meta.join(n3), other).expect("write");
    check(3);
    // An intact queued file is used.
    wait_for("segment 4 queued", || meta.join(name_of(&segs[4])).exists());
    check(4);
    wait_for("the prefetcher's count", || {
        std::fs::read_to_string(spool.join("fetch/stats"))
            .is_ok_and(|s| s.starts_with("hits 1 misses 4 "))
    });
    if let Ok(pid) = std::fs::read_to_string(spool.join("fetch.pid")) {
        let _ = Command::new("kill").args(["-9", pid.trim()]).status();
    }
}
