//! A server started by hand from a base backup directory, recovering through
//! `restore_command` (pgtest creates clusters only with initdb or pg_basebackup -X stream).

use pgtest::run::{run, run_with};
use pgtest::Cluster;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// How a restored server comes up: recovering to a target, or as a standby.
enum Role {
    Recovery,
    Standby,
}

/// A restored server, stopped (immediate) on drop.
pub struct Restored<'a> {
    source: &'a Cluster,
    data: PathBuf,
    sock: PathBuf,
    port: u16,
    log: PathBuf,
}

impl<'a> Restored<'a> {
    /// Starts the base backup in `data` with `restore_command` and `extra` lines appended to
    /// its postgresql.conf and a recovery.signal; its socket and log go into `top`. Uses the
    /// binaries of `source`.
    pub fn start(
        source: &'a Cluster,
        data: &Path,
        top: &Path,
        restore_command: &str,
        extra: &str,
    ) -> Restored<'a> {
        Self::start_as(source, data, top, restore_command, extra, Role::Recovery)
    }

    /// Starts the base backup in `data` as a standby fed by `restore_command` alone
    /// (standby.signal, no primary_conninfo); it never promotes.
    pub fn standby(
        source: &'a Cluster,
        data: &Path,
        top: &Path,
        restore_command: &str,
    ) -> Restored<'a> {
        Self::start_as(source, data, top, restore_command, "", Role::Standby)
    }

    /// Starts the base backup in `data` for recovery with `restore_command`, which must stop
    /// recovery: returns the server log once the server has exited, and panics if it came up.
    pub fn refused(source: &'a Cluster, data: &Path, top: &Path, restore_command: &str) -> String {
        match Self::try_start_as(source, data, top, restore_command, "", Role::Recovery) {
            Ok(r) => panic!(
                "the server came up with restore_command {restore_command:?}:\n{}",
                r.log_text()
            ),
            Err((_, log)) => log,
        }
    }

    fn start_as(
        source: &'a Cluster,
        data: &Path,
        top: &Path,
        restore_command: &str,
        extra: &str,
        role: Role,
    ) -> Restored<'a> {
        Self::try_start_as(source, data, top, restore_command, extra, role)
            .unwrap_or_else(|(e, log)| panic!("start restored cluster: {e}\n{log}"))
    }

    /// The server started, or why `pg_ctl start` failed and the server log.
    fn try_start_as(
        source: &'a Cluster,
        data: &Path,
        top: &Path,
        restore_command: &str,
        extra: &str,
        role: Role,
    ) -> Result<Restored<'a>, (String, String)> {
        let (name, signal, offset) = match role {
            Role::Recovery => ("restored", "recovery.signal", 1000),
            Role::Standby => ("standby", "standby.signal", 2000),
        };
        let sock = super::server_writable_dir(top, &format!("{name}-sock"));
        let port = source.port() + offset;
        let mut conf = std::fs::read_to_string(data.join("postgresql.conf")).expect("conf");
        conf.push_str(&format!(
            "\nport = {port}\nunix_socket_directories = '{}'\narchive_mode = off\n\
             restore_command = '{restore_command}'\n{extra}\n",
            sock.display()
        ));
        std::fs::write(data.join("postgresql.conf"), conf).expect("write conf");
        std::fs::write(data.join(signal), "").expect(signal);
        chown_tree(data);
        let log = top.join(format!("{name}.log"));
        std::fs::write(&log, "").expect("log");
        pgtest::run::chown_to_server_user(&log).expect("chown log");
        let restored = Restored {
            source,
            data: data.to_path_buf(),
            sock,
            port,
            log,
        };
        match restored.pg_ctl(&[
            "-l",
            restored.log.to_str().expect("path"),
            "-w",
            "-t",
            "120",
            "start",
        ]) {
            Ok(_) => Ok(restored),
            Err(e) => Err((e.to_string(), restored.log_text())),
        }
    }

    fn pg_ctl(&self, args: &[&str]) -> pgtest::Result<std::process::Output> {
        let mut cmd = Command::new(self.source.install().bin("pg_ctl"));
        cmd.arg("-D").arg(&self.data).args(args);
        run_with(&mut cmd, None, Duration::from_secs(120))
    }

    /// One value from `sql`.
    pub fn query(&self, sql: &str) -> String {
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

    /// The server log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until recovery has ended and the server accepts writes.
    pub fn wait_promoted(&self) {
        wait("promotion", Duration::from_secs(120), || {
            self.query("SELECT pg_is_in_recovery()") == "f"
        });
    }
}

impl Drop for Restored<'_> {
    fn drop(&mut self) {
        let _ = self.pg_ctl(&["-m", "immediate", "-w", "stop"]);
    }
}

/// Polls `f` every 100 ms until it holds; panics after `timeout`.
pub fn wait(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Hands a copied data directory to the server user.
pub fn chown_tree(dir: &Path) {
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

/// Switches WAL on `cluster` and waits until its archiver has archived that segment,
/// failing if archive_command failed.
pub fn switch_and_wait_archived(cluster: &Cluster) -> String {
    let last = cluster
        .query_one("SELECT pg_walfile_name(pg_switch_wal())")
        .expect("switch");
    wait_archived(cluster, &last);
    last
}

/// Waits until the archiver of `cluster` reports `segment` (or a later file) archived.
pub fn wait_archived(cluster: &Cluster, segment: &str) {
    wait("the archiver", Duration::from_secs(120), || {
        let row = cluster
            .query_one(
                "SELECT coalesce(last_archived_wal, '') || ' ' || failed_count FROM pg_stat_archiver",
            )
            .expect("pg_stat_archiver");
        let failed = row.rsplit(' ').next().unwrap_or("0");
        assert_eq!(
            failed,
            "0",
            "archive_command failed: {}",
            cluster.log_tail(20)
        );
        row.split(' ').next().is_some_and(|l| l >= segment)
    });
}
