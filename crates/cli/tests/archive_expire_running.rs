//! `archive expire` must not break a base backup that is still running. Backup A
//! starts, backup B starts later and finishes first, `archive expire --keep 1` runs while A
//! is still going (B is then the newest finished backup and its start the retention cut),
//! and A, once finished, must restore from the archive to a consistent state. Once with A
//! taken by the low-level API (`pg_backup_start` in a session kept open, the data directory
//! copied by hand) and B by `pg_basebackup`, once the other way round (A a `pg_basebackup`
//! held in the middle of its stream); each on a directory and on an S3 bucket (moto_server).
//!
//! With `--min-age 0` the plan removes WAL that A needs (the bug, kept as a check that the
//! scenario is the one reported); with the default minimum age nothing A needs goes; with one
//! just long enough to reach back to A's start, exactly the WAL before A's start goes.

mod archive_support;

use archive::retention::{classify, parse_segment_name, FileKind, Position};
use archive_support::restore::{switch_and_wait_archived, wait, Restored};
use archive_support::s3::{Moto, S3Repo};
use archive_support::{
    archive, expire_json, names, position, server_scratch, server_writable_dir, Repo,
};
use pgtest::run::{as_server_user, run};
use pgtest::Cluster;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, SystemTime};

/// Checksum of the pgbench tables and the history rows.
const CHECKSUM_SQL: &str = "SELECT md5(string_agg(aid::text || ':' || abalance, ',' ORDER BY aid)) \
    || md5((SELECT string_agg(bid::text || ':' || bbalance, ',' ORDER BY bid) FROM pgbench_branches)) \
    || (SELECT count(*) FROM pgbench_history) FROM pgbench_accounts";

/// Which backup is the long one (A); the other (B) starts after it and finishes first.
#[derive(Debug, Clone, Copy)]
enum Long {
    /// A by `pg_backup_start`/`pg_backup_stop`, B by `pg_basebackup`.
    LowLevel,
    /// A by `pg_basebackup`, B by `pg_backup_start`/`pg_backup_stop`.
    Streamed,
}

#[test]
fn expire_on_a_directory_keeps_a_running_low_level_backup_restorable() {
    let scratch = server_scratch("pgc-expire-running-");
    let repo = server_writable_dir(scratch.path(), "repo");
    scenario(&repo, scratch.path(), Long::LowLevel);
}

#[test]
fn expire_on_a_directory_keeps_a_running_pg_basebackup_restorable() {
    let scratch = server_scratch("pgc-expire-running-");
    let repo = server_writable_dir(scratch.path(), "repo");
    scenario(&repo, scratch.path(), Long::Streamed);
}

#[test]
fn expire_on_s3_keeps_a_running_low_level_backup_restorable() {
    s3(
        "expire_on_s3_keeps_a_running_low_level_backup_restorable",
        Long::LowLevel,
    );
}

#[test]
fn expire_on_s3_keeps_a_running_pg_basebackup_restorable() {
    s3(
        "expire_on_s3_keeps_a_running_pg_basebackup_restorable",
        Long::Streamed,
    );
}

#[test]
fn expire_help_states_the_guarantee_and_its_limit() {
    let out = Command::new(archive_support::bin())
        .args(["archive", "expire", "--help"])
        .output()
        .expect("pgcompress");
    // clap wraps the text to the terminal's width: compare words.
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{help}");
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    for said in [
        "--min-age <DURATION>",
        "[default: 24h]",
        "every backup that started less than --min-age ago stays restorable",
        "a backup running for longer than --min-age is not protected",
        "pg_stat_progress_basebackup",
    ] {
        assert!(help.contains(said), "--help does not say {said:?}:\n{help}");
    }
}

fn s3(test: &str, long: Long) {
    let Some(moto) = Moto::start_or_skip(test) else {
        return;
    };
    moto.create_bucket("pgc-running");
    let scratch = server_scratch("pgc-expire-running-");
    let top = scratch.path();
    let mut repo = S3Repo::new(&moto, "pgc-running", "cluster/wal");
    repo.write_config(&top.join("pgcompress.toml"));
    scenario(&repo, top, long);
}

/// Some WAL, switched and archived.
fn write_wal(cluster: &Cluster, seed: u32) -> String {
    cluster
        .pgbench(&[
            "-n",
            "-t",
            "200",
            "-c",
            "2",
            &format!("--random-seed={seed}"),
        ])
        .expect("pgbench");
    switch_and_wait_archived(cluster)
}

/// A `psql` session kept open: the low-level backup API needs the backup to start and stop
/// in the same session.
struct Session {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Session {
    fn open(cluster: &Cluster) -> Session {
        let mut cmd = cluster.command("psql");
        cmd.args(["-X", "-q", "-At", "-v", "ON_ERROR_STOP=1"])
            .args(cluster.conn_args())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        as_server_user(&mut cmd).expect("server user");
        let mut child = cmd.spawn().expect("psql");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Session {
            child,
            stdin,
            stdout,
        }
    }

    /// Runs `sql` (one statement returning one line) and returns the line.
    fn query(&mut self, sql: &str) -> String {
        // \echo after the statement: psql flushes its output whenever it reads a command.
        writeln!(self.stdin, "{sql};\n\\echo").expect("write to psql");
        self.stdin.flush().expect("flush");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read from psql");
        assert!(!line.is_empty(), "psql ended: {sql}");
        let mut blank = String::new();
        self.stdout.read_line(&mut blank).expect("read from psql");
        line.trim_end().to_owned()
    }

    fn close(mut self) {
        drop(self.stdin);
        assert!(self.child.wait().expect("psql").success());
    }
}

/// A backup made with `pg_backup_start` in an open session and a copy of the data directory.
struct LowLevel {
    session: Session,
    dir: std::path::PathBuf,
}

impl LowLevel {
    /// Starts the backup and copies the data directory into `dir`.
    fn start(cluster: &Cluster, label: &str, dir: &Path) -> LowLevel {
        let mut session = Session::open(cluster);
        session.query(&format!("SELECT pg_backup_start('{label}', true)"));
        copy_data_dir(&cluster.data_dir(), dir, true);
        LowLevel {
            session,
            dir: dir.to_path_buf(),
        }
    }

    /// Ends the backup (waiting for its WAL to be archived) and writes its backup_label.
    fn stop(mut self) {
        let hex = self
            .session
            .query("SELECT encode(convert_to(labelfile, 'UTF8'), 'hex') FROM pg_backup_stop(true)");
        let label: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
            .collect();
        std::fs::write(self.dir.join("backup_label"), label).expect("backup_label");
        self.session.close();
    }
}

/// Copies a running server's data directory as the low-level API's documentation says
/// (files may change or vanish meanwhile): without pg_wal's contents and postmaster.pid.
fn copy_data_dir(from: &Path, to: &Path, top: bool) {
    std::fs::create_dir(to).expect("mkdir");
    let mode = std::fs::metadata(from).expect("stat").permissions();
    std::fs::set_permissions(to, mode).expect("chmod");
    for entry in std::fs::read_dir(from).expect("read data dir") {
        let entry = entry.expect("entry");
        let name = entry.file_name();
        let (src, dst) = (entry.path(), to.join(&name));
        if top && (name == "postmaster.pid" || name == "postmaster.opts") {
            continue;
        }
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            if top && name == "pg_wal" {
                std::fs::create_dir_all(dst.join("archive_status")).expect("mkdir pg_wal");
            } else {
                copy_data_dir(&src, &dst, false);
            }
        } else if kind.is_file() {
            match std::fs::copy(&src, &dst) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => panic!("copy {}: {e}", src.display()),
            }
        }
    }
}

/// A `pg_basebackup` writing its tar to a pipe nobody reads yet: it stays in the middle of
/// its stream, the backup in progress, until [`Streamed::finish`] reads it.
struct Streamed {
    child: Child,
}

impl Streamed {
    fn start(cluster: &Cluster) -> Streamed {
        let mut cmd = cluster.command("pg_basebackup");
        cmd.args(["-D", "-", "-F", "t", "-X", "none", "-c", "fast"])
            .stdout(Stdio::piped());
        as_server_user(&mut cmd).expect("server user");
        let child = cmd.spawn().expect("pg_basebackup");
        // The server's view of a streamed backup: it is under way once it streams files.
        wait("pg_basebackup to start", Duration::from_secs(120), || {
            cluster
                .query_one("SELECT count(*) FROM pg_stat_progress_basebackup WHERE phase = 'streaming database files'")
                .is_ok_and(|n| n == "1")
        });
        Streamed { child }
    }

    /// Reads the rest of the stream into `dir` and waits for the backup to end.
    fn finish(mut self, dir: &Path) {
        std::fs::create_dir(dir).expect("mkdir");
        let mut tar = Command::new("tar")
            .arg("-x")
            .arg("-C")
            .arg(dir)
            .arg("-f")
            .arg("-")
            .stdin(Stdio::piped())
            .spawn()
            .expect("tar");
        let mut from = self.child.stdout.take().expect("stdout");
        let mut to = tar.stdin.take().expect("stdin");
        std::io::copy(&mut from, &mut to).expect("copy the tar stream");
        drop(to);
        assert!(self.child.wait().expect("pg_basebackup").success());
        assert!(tar.wait().expect("tar").success());
        std::fs::create_dir_all(dir.join("pg_wal/archive_status")).expect("mkdir pg_wal");
        let mut mode = std::fs::metadata(dir).expect("stat").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut mode, 0o700);
        std::fs::set_permissions(dir, mode).expect("chmod");
    }
}

fn scenario<R: Repo + ?Sized>(repo: &R, top: &Path, long: Long) {
    let push = repo.command_line("push", "%p");
    let primary = Cluster::builder()
        .wal_segsize_mb(1)
        .guc("archive_mode", "on")
        .guc("wal_compression", "off")
        .start()
        .expect("start primary");
    archive_support::init(repo, &primary.data_dir());
    primary
        .set_guc_and_reload("archive_command", &push)
        .expect("archive_command");
    primary.pgbench_init(1).expect("pgbench -i");
    // WAL from before A: what expire may remove. Archived well before A starts, so that a
    // minimum age reaching back to A's start (by whole seconds, as S3 times go) leaves it.
    let before_a = write_wal(&primary, 1);
    std::thread::sleep(Duration::from_secs(3));
    let a_time = SystemTime::now();

    // A starts.
    let a_dir = top.join("a");
    let (low, streamed) = match long {
        Long::LowLevel => (Some(LowLevel::start(&primary, "a", &a_dir)), None),
        Long::Streamed => (None, Some(Streamed::start(&primary))),
    };
    let a_start = primary
        .query_one("SELECT pg_walfile_name(redo_lsn) FROM pg_control_checkpoint()")
        .expect("redo");
    let (_, a_pos) = parse_segment_name(&a_start).expect("segment");
    let before_a_pos = parse_segment_name(&before_a).expect("segment").1;
    assert!(before_a_pos < a_pos);
    // Several segments A needs, then B starts and finishes while A runs.
    for seed in 2..5 {
        write_wal(&primary, seed);
    }
    match long {
        Long::LowLevel => {
            let mut bb = primary.command("pg_basebackup");
            bb.arg("-D")
                .arg(top.join("b"))
                .args(["-X", "none", "-c", "fast"]);
            run(&mut bb).expect("pg_basebackup");
        }
        Long::Streamed => LowLevel::start(&primary, "b", &top.join("b")).stop(),
    }
    write_wal(&primary, 5);

    let before = names(repo);
    let backups: Vec<&String> = before.iter().filter(|n| n.ends_with(".backup")).collect();
    assert_eq!(backups.len(), 1, "only B has finished: {before:?}");
    let b_pos = position(backups[0]).expect("position");
    let a_needs: Vec<&String> = before
        .iter()
        .filter(|n| matches!(classify(n), FileKind::Segment { pos, .. } if pos >= a_pos))
        .collect();
    let a_needs_before_b = a_needs
        .iter()
        .filter(|n| position(n).is_some_and(|p| p < b_pos))
        .count();
    assert!(
        a_needs_before_b >= 3,
        "B starts {a_needs_before_b} segments after A"
    );

    // A is still running; the server shows it only when it is a streamed one.
    let streaming = primary
        .query_one("SELECT count(*) FROM pg_stat_progress_basebackup")
        .expect("progress");
    assert_eq!(streaming, if low.is_some() { "0" } else { "1" });

    // Without the minimum age, --keep 1 cuts at B's start: the bug.
    let bare = expire_json(repo, &["--keep", "1", "--min-age", "0", "--dry-run"]);
    let doomed: Vec<&str> = bare["removed"]
        .as_array()
        .expect("removed")
        .iter()
        .map(|r| r["name"].as_str().expect("name"))
        .filter(|n| a_needs.iter().any(|a| a == n))
        .collect();
    assert_eq!(doomed.len(), a_needs_before_b, "{bare}");
    assert_eq!(names(repo), before, "a dry run removed files");

    // Expire as the operator would, while A is still running: with the default minimum age
    // (24h) nothing goes here, and the report says what it held back.
    let out = archive(repo, &["expire", "--keep", "1", "--dry-run"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("kept by --min-age 24h: "), "{text}");
    let done = expire_json(repo, &["--keep", "1"]);
    assert_eq!(done["removed_files"], 0, "{done}");
    assert_eq!(done["min_age"], "24h", "{done}");
    for n in &doomed {
        assert!(
            done["held"]
                .as_array()
                .expect("held")
                .iter()
                .any(|h| h == n),
            "{done}"
        );
    }
    assert_eq!(names(repo), before);

    // A minimum age that just reaches back to A's start: what was archived before A started
    // goes, A keeps all. The segment in progress when A started is held too when A's start
    // switched it out (anything written since `before_a`, such as the background writer's
    // standby snapshot, makes it non-empty): it was archived after A started.
    let age = format!("{}s", a_time.elapsed().expect("clock").as_secs() + 2);
    let done = expire_json(repo, &["--keep", "1", "--min-age", &age]);
    let held_from = Position(
        done["held_from"]
            .as_str()
            .and_then(|s| u64::from_str_radix(s, 16).ok())
            .expect("held_from"),
    );
    assert!(
        held_from > before_a_pos && held_from <= a_pos,
        "held from {held_from}: archived before A ({before_a_pos}) or after A's start ({a_pos}): {done}"
    );
    assert_eq!(done["cutoff"], done["held_from"], "{done}");
    assert_eq!(done["retention_cutoff"], b_pos.to_string(), "{done}");
    let removed = done["removed"].as_array().expect("removed");
    assert!(!removed.is_empty(), "{done}");
    for r in removed {
        let name = r["name"].as_str().expect("name");
        assert!(
            position(name).is_some_and(|p| p < held_from),
            "{name}: {done}"
        );
    }
    let after = names(repo);
    let lost: Vec<&&String> = a_needs.iter().filter(|n| !after.contains(**n)).collect();
    eprintln!(
        "A starts in {a_start}, B in {}: --min-age 0 would remove {} of A's {} segments; --min-age {age} removed {} files, of A's segments {} are gone: {lost:?}",
        backups[0],
        doomed.len(),
        a_needs.len(),
        done["removed_files"],
        lost.len()
    );

    // A finishes; the server goes on, and A restores through the archive to its state.
    match (low, streamed) {
        (Some(low), _) => low.stop(),
        (_, Some(streamed)) => streamed.finish(&a_dir),
        _ => unreachable!(),
    }
    write_wal(&primary, 6);
    let checksum = primary.query_one(CHECKSUM_SQL).expect("checksum");
    let get = repo.command_line("get", "%f %p");
    let restored = Restored::start(&primary, &a_dir, top, &get, "");
    restored.wait_promoted();
    let log = restored.log_text();
    assert!(log.contains("consistent recovery state reached"), "{log}");
    assert!(
        log.contains(&format!("restored log file \"{a_start}\"")),
        "{log}"
    );
    assert_eq!(restored.query(CHECKSUM_SQL), checksum, "{log}");
    assert!(lost.is_empty(), "expire removed WAL of a running backup");
}
