//! `archive push --async` and `archive serve`: the foreground returns 0 only once its exact
//! bytes are durably in the repository, whatever is killed when.
//!
//! - A simulated archiver (as PostgreSQL's: one foreground at a time, oldest .ready first,
//!   .ready renamed .done on exit 0, a retry otherwise) drives real segments while SIGKILL
//!   hits the foreground, the serving process or both at random moments. Every segment
//!   reported archived must restore byte-identical. `PGCOMPRESS_ASYNC_TRIALS` sets the
//!   number of trials (default 4; scripts/archive-crash.sh runs 100).
//! - A failing repository fills the backlog: the serving process says so (log, metrics), the
//!   foreground exits 1 with the reason, nothing is dropped, and everything is stored once
//!   the repository works again.
//! - A real PostgreSQL archives through `push --async` while the serving process is killed
//!   repeatedly; a base backup then recovers through `get` to the same data.

mod archive_support;

use archive_support::restore::{switch_and_wait_archived, Restored};
use archive_support::s3::{Moto, S3Repo};
use archive_support::{archive, bin, get, server_writable_dir, Repo};
use pgtest::run::run;
use pgtest::Cluster;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Segments written by a real server: pgbench WAL, 4 MB each.
fn segments(dir: &Path, count: usize) -> Vec<PathBuf> {
    let cluster = Cluster::builder()
        .wal_segsize_mb(4)
        .start()
        .expect("start cluster");
    cluster.pgbench_init(1).expect("pgbench -i");
    let mut round = 0;
    loop {
        let wal = cluster.wal_segment_files().expect("wal");
        if wal.len() > count {
            break;
        }
        cluster
            .pgbench(&[
                "-n",
                "-t",
                "500",
                "-c",
                "2",
                &format!("--random-seed={round}"),
            ])
            .expect("pgbench");
        round += 1;
    }
    cluster.switch_wal().expect("switch");
    let mut wal = cluster.copy_wal_to(dir).expect("copy");
    wal.sort();
    wal.truncate(count);
    wal
}

/// A fake data directory: `pg_wal` with the segments and a `.ready` file for each.
fn pg_wal(top: &Path, segments: &[PathBuf]) -> PathBuf {
    let wal = top.join("pg_wal");
    std::fs::create_dir_all(wal.join("archive_status")).expect("mkdir");
    for s in segments {
        let name = s.file_name().expect("name");
        std::fs::copy(s, wal.join(name)).expect("copy");
        let mut ready = name.to_owned();
        ready.push(".ready");
        std::fs::write(wal.join("archive_status").join(ready), "").expect("ready");
    }
    wal
}

fn foreground(repo: &Path, spool: &Path, segment: &Path, timeout: u64) -> Child {
    Command::new(bin())
        .args([
            "archive",
            "push",
            "--async",
            "--timeout",
            &timeout.to_string(),
        ])
        .arg("--spool")
        .arg(spool)
        .arg("--repo")
        .arg(repo)
        .arg(segment)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn push --async")
}

/// Whether `pid` is a live process (not gone, not a zombie waiting for its parent).
fn alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| Some(s.rsplit_once(')')?.1.split_whitespace().next()? != "Z"))
        .unwrap_or(false)
}

/// SIGKILL to the process serving `spool`, if one runs; returns once it is dead, and whether
/// there was one.
fn kill_server(spool: &Path) -> bool {
    kill_server_at(&spool.join("serve.pid"))
}

/// SIGKILL to the process whose id is in `pid_file`, if it runs.
fn kill_server_at(pid_file: &Path) -> bool {
    let Ok(pid) = std::fs::read_to_string(pid_file) else {
        return false;
    };
    let pid = pid.trim();
    if !alive(pid) {
        return false;
    }
    let killed = Command::new("kill")
        .args(["-9", pid])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    while alive(pid) {
        assert!(Instant::now() < deadline, "process {pid} survives SIGKILL");
        std::thread::sleep(Duration::from_millis(5));
    }
    killed
}

/// Waits until no process holds the spool's lock (nothing restarts one meanwhile).
fn wait_unserved(spool: &Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while archive::spool::Spool::new(spool)
        .served()
        .expect("lock check")
    {
        assert!(Instant::now() < deadline, "the spool stays served");
        std::thread::sleep(Duration::from_millis(10));
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn trials() -> usize {
    std::env::var("PGCOMPRESS_ASYNC_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4)
}

#[test]
fn sigkill_of_the_foreground_or_the_server_never_reports_a_segment_that_is_not_stored() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let scratch = scratch.path();
    let segs = segments(&scratch.join("wal"), 6);
    // The time one undisturbed foreground takes, the first (which starts the server)
    // included, sets the range of kill delays.
    let calib = scratch.join("calibrate");
    let wal = pg_wal(&calib, &segs);
    archive_support::init_from_segment(&calib.join("repo"), &segs[0]);
    let started = Instant::now();
    for s in &segs {
        let name = s.file_name().expect("name");
        let out = foreground(
            &calib.join("repo"),
            &calib.join("spool"),
            &wal.join(name),
            60,
        )
        .wait_with_output()
        .expect("wait");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let per_segment = (started.elapsed().as_micros() as u64 / segs.len() as u64).max(1000);
    kill_server(&calib.join("spool"));

    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let (mut fg_kills, mut server_kills, mut reported) = (0, 0, 0);
    for trial in 0..trials() {
        let top = scratch.join(format!("trial-{trial}"));
        let wal = pg_wal(&top, &segs);
        let (repo, spool) = (top.join("repo"), top.join("spool"));
        archive_support::init_from_segment(&repo, &segs[0]);
        for seg in &segs {
            let name = seg.file_name().and_then(|n| n.to_str()).expect("name");
            let path = wal.join(name);
            let mut attempts = 0;
            loop {
                attempts += 1;
                assert!(attempts < 50, "trial {trial}: {name} never archived");
                let mut child = foreground(&repo, &spool, &path, 60);
                let action = rng.next() % 4;
                if action != 0 {
                    std::thread::sleep(Duration::from_micros(rng.next() % (2 * per_segment)));
                    if action & 1 != 0 {
                        let _ = child.kill();
                        fg_kills += 1;
                    }
                    if action & 2 != 0 && kill_server(&spool) {
                        server_kills += 1;
                    }
                }
                let out = child.wait_with_output().expect("wait");
                if !out.status.success() {
                    continue;
                }
                // Reported archived: it must be in the repository, whole and identical,
                // even if the server dies right now.
                reported += 1;
                if rng.next() % 3 == 0 && kill_server(&spool) {
                    server_kills += 1;
                }
                let dest = top.join("restored");
                let got = get(&repo, name, &dest);
                assert!(
                    got.status.success(),
                    "trial {trial}: {name} reported archived but get fails: {}",
                    String::from_utf8_lossy(&got.stderr)
                );
                assert!(
                    std::fs::read(&dest).expect("read") == std::fs::read(seg).expect("read"),
                    "trial {trial}: {name} restores different bytes"
                );
                std::fs::remove_file(&dest).expect("rm");
                let status = wal.join("archive_status");
                std::fs::rename(
                    status.join(format!("{name}.ready")),
                    status.join(format!("{name}.done")),
                )
                .expect("mark done");
                break;
            }
        }
        let out = archive(&repo, &["verify"]);
        assert!(out.status.success(), "trial {trial}: verify failed");
        kill_server(&spool);
        wait_unserved(&spool);
        std::fs::remove_dir_all(&top).expect("clean");
    }
    eprintln!(
        "{} trials of {} segments: {reported} reported archived, all restored byte-identical; \
         {fg_kills} foreground and {server_kills} server SIGKILLs (kill delays 0..{} ms)",
        trials(),
        segs.len(),
        2 * per_segment / 1000
    );
}

#[test]
fn a_full_backlog_is_loud_and_nothing_is_dropped() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let top = scratch.path();
    let segs = segments(&top.join("wal"), 4);
    let wal = pg_wal(top, &segs);
    // The repository path is a file: every store fails.
    let repo = top.join("repo");
    std::fs::write(&repo, "not a directory").expect("write");
    let spool = top.join("spool");
    let port = pgtest::free_port().expect("port");
    let mut server = Command::new(bin())
        .args(["archive", "serve", "--workers", "1", "--queue-max", "2"])
        .args(["--metrics", &format!("127.0.0.1:{port}")])
        .arg("--spool")
        .arg(&spool)
        .arg("--wal-dir")
        .arg(&wal)
        .arg("--repo")
        .arg(&repo)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("serve");
    // Until this server holds the spool, a foreground push would start a server of its own
    // (without metrics) and this one would exit as "already served".
    wait_serving(&spool, &mut server);
    let first = wal.join(segs[0].file_name().expect("name"));
    let out = foreground(&repo, &spool, &first, 30)
        .wait_with_output()
        .expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("repo"), "{err}");
    let metrics = scrape(port);
    for want in [
        "pgcompress_archive_backlog_files 4",
        "pgcompress_archive_backlog_full 1",
    ] {
        assert!(metrics.lines().any(|l| l == want), "{want}:\n{metrics}");
    }
    for family in ["process_resident_memory_bytes ", "process_open_fds "] {
        assert!(
            metrics.lines().any(|l| l.starts_with(family)),
            "{family}:\n{metrics}"
        );
    }
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("pgcompress_archive_push_errors_total ") && !l.ends_with(" 0")),
        "{metrics}"
    );
    // The repository comes back: every file is stored, each foreground returns 0.
    std::fs::remove_file(&repo).expect("rm");
    archive_support::init_from_segment(&repo, &segs[0]);
    for s in &segs {
        let path = wal.join(s.file_name().expect("name"));
        let out = foreground(&repo, &spool, &path, 60)
            .wait_with_output()
            .expect("wait");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let metrics = scrape(port);
    assert!(
        metrics
            .lines()
            .any(|l| l == "pgcompress_archive_pushed_files_total 4"),
        "{metrics}"
    );
    let _ = server.kill();
    let out = server.wait_with_output().expect("wait");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains("more than the queue maximum 2") && log.contains("nothing is dropped"),
        "{log}"
    );
    for s in &segs {
        let name = s.file_name().and_then(|n| n.to_str()).expect("name");
        let dest = top.join("restored");
        assert!(get(&repo, name, &dest).status.success());
        assert!(std::fs::read(&dest).expect("read") == std::fs::read(s).expect("read"));
    }
}

/// Returns once `server` has written its id to the spool's `serve.pid` (it holds the lock).
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
            "archive serve did not take the spool in 30 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `GET /metrics` over loopback.
fn scrape(port: u16) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("send");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    out
}

#[test]
fn a_server_archiving_through_async_push_recovers_to_the_same_data() {
    let scratch = scratch();
    let top = scratch.path();
    let repo = server_writable_dir(top, "repo");
    async_recovery(&repo, top);
}

#[test]
fn async_push_to_s3_recovers_to_the_same_data() {
    let Some(moto) = Moto::start_or_skip("async_push_to_s3_recovers_to_the_same_data") else {
        return;
    };
    moto.create_bucket("pgc-async");
    let scratch = scratch();
    let top = scratch.path();
    let mut repo = S3Repo::new(&moto, "pgc-async", "cluster/wal");
    repo.write_config(&top.join("pgcompress.toml"));
    async_recovery(&repo, top);
}

fn scratch() -> tempfile::TempDir {
    let scratch = tempfile::Builder::new()
        .prefix("pgc-async-")
        .tempdir()
        .expect("tempdir");
    pgtest::run::chown_to_server_user(scratch.path()).expect("chown");
    scratch
}

const CHECKSUM_SQL: &str = "SELECT md5(string_agg(aid::text || ':' || abalance, ',' ORDER BY aid)) \
    || md5((SELECT string_agg(bid::text || ':' || bbalance, ',' ORDER BY bid) FROM pgbench_branches)) \
    FROM pgbench_accounts";

fn async_recovery<R: Repo>(repo: &R, top: &Path) {
    let spool = server_writable_dir(top, "spool");
    let push = repo.command_line("push", &format!("--async --spool {} %p", spool.display()));
    // As an operator sets it up: the repository is initialized for the cluster before
    // archive_command points at it (the server keeps its WAL meanwhile).
    let cluster = Cluster::builder()
        .wal_segsize_mb(1)
        .guc("archive_mode", "on")
        .guc("wal_compression", "off")
        .start()
        .expect("start cluster");
    archive_support::init(repo, &cluster.data_dir());
    cluster
        .set_guc_and_reload("archive_command", &push)
        .expect("archive_command");
    cluster.pgbench_init(1).expect("pgbench -i");
    let backup = top.join("backup");
    let mut bb = cluster.command("pg_basebackup");
    bb.arg("-D").arg(&backup).args(["-X", "none", "-c", "fast"]);
    run(&mut bb).expect("pg_basebackup");
    // The serving process dies three times while the server writes; each next push starts
    // another.
    let mut kills = 0;
    for seed in 0..6 {
        cluster
            .pgbench(&[
                "-n",
                "-t",
                "300",
                "-c",
                "2",
                &format!("--random-seed={seed}"),
            ])
            .expect("pgbench");
        if seed % 2 == 1 && kill_server(&spool) {
            kills += 1;
        }
    }
    let last = switch_and_wait_archived(&cluster);
    assert!(kills > 0, "the serving process never ran");
    let checksum = cluster.query_one(CHECKSUM_SQL).expect("checksum");
    // Recovery restores through a prefetching get.
    let fetch_spool = server_writable_dir(top, "fetch-spool");
    let get = repo.command_line(
        "get",
        &format!("--prefetch 4 --spool {} %f %p", fetch_spool.display()),
    );
    let restored = Restored::start(&cluster, &backup, top, &get, "");
    restored.wait_promoted();
    let log = restored.log_text();
    assert_eq!(restored.query(CHECKSUM_SQL), checksum, "{log}");
    assert!(
        log.contains(&format!("restored log file \"{last}\"")),
        "{log}"
    );
    let stats = std::fs::read_to_string(fetch_spool.join("fetch/stats")).unwrap_or_default();
    let hits: u64 = stats
        .split_whitespace()
        .nth(1)
        .and_then(|h| h.parse().ok())
        .unwrap_or(0);
    assert!(
        hits > 0,
        "no request was answered from the prefetch queue: {stats:?}"
    );
    eprintln!("async push ({kills} server kills), recovery through get --prefetch 4: {stats}");
    kill_server_at(&fetch_spool.join("fetch.pid"));
    kill_server(&spool);
}
