//! `archive serve` is quiet and alone: an idle server writes nothing, a server whose spool is
//! removed stops instead of re-creating it, and a second server on a spool leaves it to the
//! first.

mod archive_support;

use archive_support::bin;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

/// `archive serve` on `spool` for an empty `archive_status` under `top`.
fn serve(top: &Path, spool: &Path) -> Child {
    let wal = top.join("pg_wal");
    std::fs::create_dir_all(wal.join("archive_status")).expect("mkdir");
    Command::new(bin())
        .args(["archive", "serve", "--workers", "1"])
        .arg("--spool")
        .arg(spool)
        .arg("--wal-dir")
        .arg(&wal)
        .arg("--repo")
        .arg(top.join("repo"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn archive serve")
}

/// Returns once `server` has written its id to the spool's `serve.pid`.
fn wait_serving(spool: &Path, server: &mut Child) {
    let want = server.id().to_string();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let pid = std::fs::read_to_string(spool.join("serve.pid")).unwrap_or_default();
        if pid.trim() == want {
            return;
        }
        if let Some(status) = server.try_wait().expect("try_wait") {
            panic!("archive serve exited before serving the spool: {status}");
        }
        assert!(
            Instant::now() < deadline,
            "archive serve did not take the spool"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for `child` to exit, at most `guard` (a hang guard, not a timing assertion).
fn wait_exit(child: &mut Child, guard: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + guard;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// Every entry under `dir` with its modification time and inode.
fn listing(dir: &Path) -> BTreeMap<PathBuf, (SystemTime, u64)> {
    use std::os::unix::fs::MetadataExt;
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).expect("list") {
            let e = e.expect("entry");
            let m = e.metadata().expect("metadata");
            if m.is_dir() {
                todo.push(e.path());
            }
            out.insert(e.path(), (m.modified().expect("mtime"), m.ino()));
        }
    }
    let m = std::fs::metadata(dir).expect("metadata");
    out.insert(dir.to_path_buf(), (m.modified().expect("mtime"), m.ino()));
    out
}

fn stop(mut child: Child) -> String {
    let _ = child.kill();
    let out = child.wait_with_output().expect("wait");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn an_idle_server_writes_nothing_to_its_spool() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let spool = scratch.path().join("spool");
    let mut server = serve(scratch.path(), &spool);
    wait_serving(&spool, &mut server);
    // Let it settle into idleness, then watch it.
    std::thread::sleep(Duration::from_millis(500));
    let before = listing(&spool);
    std::thread::sleep(Duration::from_secs(3));
    let after = listing(&spool);
    let log = stop(server);
    assert_eq!(before, after, "the idle server wrote to its spool\n{log}");
}

#[test]
fn a_server_whose_spool_is_removed_stops_without_re_creating_it() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let spool = scratch.path().join("spool");
    let mut server = serve(scratch.path(), &spool);
    wait_serving(&spool, &mut server);
    std::fs::remove_dir_all(&spool).expect("rm spool");
    let status = wait_exit(&mut server, Duration::from_secs(20));
    let exists = spool.exists();
    let log = stop(server);
    assert!(
        status.is_some(),
        "the server runs on without its spool\n{log}"
    );
    assert!(!exists, "the removed spool was re-created\n{log}");
}

#[test]
fn a_second_server_on_one_spool_leaves_it_to_the_first() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let spool = scratch.path().join("spool");
    let mut first = serve(scratch.path(), &spool);
    wait_serving(&spool, &mut first);
    let mut second = serve(scratch.path(), &spool);
    let status = wait_exit(&mut second, Duration::from_secs(20));
    let second_log = stop(second);
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "the second server did not exit 0\n{second_log}"
    );
    assert!(second_log.contains("already served"), "{second_log}");
    std::thread::sleep(Duration::from_millis(200));
    let still = first.try_wait().expect("try_wait").is_none();
    let pid = std::fs::read_to_string(spool.join("serve.pid")).unwrap_or_default();
    let want = first.id().to_string();
    let served = archive::spool::Spool::new(&spool).served().expect("probe");
    let log = stop(first);
    assert!(still, "the first server stopped\n{log}");
    assert_eq!(
        pid.trim(),
        want,
        "serve.pid no longer names the first server"
    );
    assert!(served, "the probe does not see the first server");
}

#[test]
fn a_probe_at_start_up_does_not_turn_the_server_away() {
    use std::os::unix::io::AsRawFd;
    let scratch = tempfile::tempdir().expect("tempdir");
    let spool = scratch.path().join("spool");
    std::fs::create_dir_all(&spool).expect("mkdir");
    // What a push's liveness probe did: take the lock for a moment, here as the server starts.
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(spool.join("serve.lock"))
        .expect("open lock");
    // SAFETY: flock on a descriptor this test owns.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_SH) };
    assert_eq!(rc, 0, "flock");
    let mut server = serve(scratch.path(), &spool);
    std::thread::sleep(Duration::from_millis(300));
    drop(lock);
    let exited = wait_exit(&mut server, Duration::from_secs(3));
    let log = stop(server);
    assert!(
        exited.is_none(),
        "the server gave up a spool nobody served\n{log}"
    );
}
