//! End to end with PostgreSQL as the oracle: a PostgreSQL cluster archives through
//! `pgcompress archive push`; a second cluster restored from a pg_basebackup with
//! `pgcompress archive get` as restore_command reaches the same data at a recovery target.
//! Once with a local directory repository, once with an S3 bucket on a moto server.

mod archive_support;

use archive_support::s3::{Moto, S3Repo};
use archive_support::{list_json, server_writable_dir, Repo};
use pgtest::run::{run, run_with};
use pgtest::Cluster;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Checksum of the pgbench tables.
const CHECKSUM_SQL: &str = "SELECT md5(string_agg(aid::text || ':' || abalance, ',' ORDER BY aid)) \
    || md5((SELECT string_agg(bid::text || ':' || bbalance, ',' ORDER BY bid) FROM pgbench_branches)) \
    FROM pgbench_accounts";

/// A restored server started by hand: pgtest creates clusters only with initdb.
struct Restored<'a> {
    source: &'a Cluster,
    data: PathBuf,
    sock: PathBuf,
    port: u16,
}

impl Restored<'_> {
    fn pg_ctl(&self, args: &[&str]) -> pgtest::Result<std::process::Output> {
        let mut cmd = Command::new(self.source.install().bin("pg_ctl"));
        cmd.arg("-D").arg(&self.data).args(args);
        run_with(&mut cmd, None, Duration::from_secs(120))
    }

    fn query(&self, sql: &str) -> String {
        let mut cmd = Command::new(self.source.install().bin("psql"));
        cmd.args(["-X", "-At", "-h"]).arg(&self.sock).args([
            "-p",
            &self.port.to_string(),
            "-U",
            "postgres",
            "-d",
            "postgres",
            "-c",
            sql,
        ]);
        let out = run(&mut cmd).expect("psql on the restored cluster");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}

impl Drop for Restored<'_> {
    fn drop(&mut self) {
        let _ = self.pg_ctl(&["-m", "immediate", "-w", "stop"]);
    }
}

fn wait(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn recovery_from_a_directory_archive_reaches_the_same_data() {
    let scratch = scratch();
    let top = scratch.path();
    let repo = server_writable_dir(top, "repo");
    recovery_reaches_the_same_data(&repo, top);
}

#[test]
fn recovery_from_an_s3_archive_reaches_the_same_data() {
    let Some(moto) = Moto::start_or_skip("recovery_from_an_s3_archive_reaches_the_same_data")
    else {
        return;
    };
    moto.create_bucket("pgc-e2e");
    let scratch = scratch();
    let top = scratch.path();
    // archive_command and restore_command name the repository through a config file.
    let mut repo = S3Repo::new(&moto, "pgc-e2e", "cluster/wal");
    repo.write_config(&top.join("pgcompress.toml"));
    recovery_reaches_the_same_data(&repo, top);
}

fn scratch() -> tempfile::TempDir {
    let scratch = tempfile::Builder::new()
        .prefix("pgc-e2e-")
        .tempdir()
        .expect("tempdir");
    pgtest::run::chown_to_server_user(scratch.path()).expect("chown");
    scratch
}

/// A cluster archives into `repo` through push; a base backup recovers through get to a
/// named restore point and has the data the source had there.
fn recovery_reaches_the_same_data<R: Repo>(repo: &R, top: &Path) {
    let push = repo.command_line("push", "%p");
    let cluster = Cluster::builder()
        .guc("archive_mode", "on")
        .guc("archive_command", &push)
        .guc("wal_compression", "off")
        .start()
        .expect("start cluster");
    cluster.pgbench_init(1).expect("pgbench -i");

    // Base backup without WAL: recovery must fetch every segment through `get`.
    let backup = top.join("restored");
    let mut bb = cluster.command("pg_basebackup");
    bb.arg("-D").arg(&backup).args(["-X", "none", "-c", "fast"]);
    run(&mut bb).expect("pg_basebackup");

    cluster
        .pgbench(&["-n", "-t", "500", "-c", "2", "--random-seed=3"])
        .expect("pgbench");
    let checksum = cluster.query_one(CHECKSUM_SQL).expect("checksum");
    cluster
        .query_one("SELECT pg_create_restore_point('pgcompress_target')")
        .expect("restore point");
    // Work after the target, which recovery must not replay.
    cluster
        .pgbench(&["-n", "-t", "200", "-c", "1", "--random-seed=4"])
        .expect("pgbench after target");
    let last = cluster
        .query_one("SELECT pg_walfile_name(pg_switch_wal())")
        .expect("switch");
    wait("the archiver", Duration::from_secs(60), || {
        let row = cluster
            .query_one("SELECT coalesce(last_archived_wal, '') || ' ' || failed_count FROM pg_stat_archiver")
            .expect("pg_stat_archiver");
        let failed = row.rsplit(' ').next().unwrap_or("0");
        assert_eq!(
            failed,
            "0",
            "archive_command failed: {}",
            cluster.log_tail(20)
        );
        row.split(' ').next().is_some_and(|l| l >= last.as_str())
    });
    let final_checksum = cluster.query_one(CHECKSUM_SQL).expect("checksum");
    assert_ne!(final_checksum, checksum);
    let archived = list_json(repo)["files"].as_array().map_or(0, Vec::len);
    assert!(archived >= 3, "only {archived} files archived");

    // A copy of the base backup for the standby below, before the recovery settings go in.
    let standby_data = top.join("standby");
    let mut cp = Command::new("cp");
    cp.arg("-a").arg(&backup).arg(&standby_data);
    run(&mut cp).expect("copy the base backup");

    // The second cluster: the base backup, restore_command = get, a named target.
    let sock = server_writable_dir(top, "sock2");
    let port = cluster.port() + 1000;
    let get = repo.command_line("get", "%f %p");
    let mut conf = std::fs::read_to_string(backup.join("postgresql.conf")).expect("conf");
    conf.push_str(&format!(
        "\nport = {port}\nunix_socket_directories = '{}'\narchive_mode = off\n\
         restore_command = '{get}'\nrecovery_target_name = 'pgcompress_target'\n\
         recovery_target_action = 'promote'\n",
        sock.display()
    ));
    std::fs::write(backup.join("postgresql.conf"), conf).expect("write conf");
    std::fs::write(backup.join("recovery.signal"), "").expect("recovery.signal");
    chown_tree(&backup);
    let restored = Restored {
        source: &cluster,
        data: backup.clone(),
        sock,
        port,
    };
    let log = top.join("restored.log");
    std::fs::write(&log, "").expect("log");
    pgtest::run::chown_to_server_user(&log).expect("chown log");
    restored
        .pg_ctl(&[
            "-l",
            log.to_str().expect("path"),
            "-w",
            "-t",
            "120",
            "start",
        ])
        .unwrap_or_else(|e| {
            panic!(
                "start restored cluster: {e}\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            )
        });
    wait("promotion", Duration::from_secs(60), || {
        restored.query("SELECT pg_is_in_recovery()") == "f"
    });
    let log_text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        log_text.contains("recovery stopping at restore point \"pgcompress_target\""),
        "{log_text}"
    );
    assert!(log_text.contains("restored log file"), "{log_text}");
    assert_eq!(restored.query(CHECKSUM_SQL), checksum, "{log_text}");

    // A standby fed from the archive alone (standby.signal, restore_command, no primary_conninfo)
    // replays every archived segment, past the restore point, to the primary's last switch.
    let sock = server_writable_dir(top, "sock3");
    let port = cluster.port() + 2000;
    let mut conf = std::fs::read_to_string(standby_data.join("postgresql.conf")).expect("conf");
    conf.push_str(&format!(
        "\nport = {port}\nunix_socket_directories = '{}'\narchive_mode = off\n\
         restore_command = '{get}'\n",
        sock.display()
    ));
    std::fs::write(standby_data.join("postgresql.conf"), conf).expect("write conf");
    std::fs::write(standby_data.join("standby.signal"), "").expect("standby.signal");
    chown_tree(&standby_data);
    let standby = Restored {
        source: &cluster,
        data: standby_data,
        sock,
        port,
    };
    let log = top.join("standby.log");
    std::fs::write(&log, "").expect("log");
    pgtest::run::chown_to_server_user(&log).expect("chown log");
    standby
        .pg_ctl(&[
            "-l",
            log.to_str().expect("path"),
            "-w",
            "-t",
            "120",
            "start",
        ])
        .unwrap_or_else(|e| {
            panic!(
                "start the standby: {e}\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            )
        });
    wait(
        "the standby to replay the archive",
        Duration::from_secs(120),
        || standby.query(CHECKSUM_SQL) == final_checksum,
    );
    assert_eq!(standby.query("SELECT pg_is_in_recovery()"), "t");
}

/// Hands a copied data directory to the server user.
fn chown_tree(dir: &Path) {
    pgtest::run::chown_to_server_user(dir).expect("chown");
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                chown_tree(&p);
            } else {
                pgtest::run::chown_to_server_user(&p).expect("chown");
            }
        }
    }
}
