//! Configuring a throwaway cluster before `initdb`.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::install::PgInstall;

/// Settings for a cluster that [`ClusterBuilder::start`] creates; obtained from
/// [`Cluster::builder`](crate::Cluster::builder).
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until .start() is called"]
pub struct ClusterBuilder {
    pub(crate) install: Option<PgInstall>,
    pub(crate) major: Option<u32>,
    pub(crate) wal_segsize_mb: Option<u32>,
    pub(crate) data_checksums: bool,
    pub(crate) gucs: Vec<(String, String)>,
    pub(crate) archive: bool,
    pub(crate) keep: bool,
    pub(crate) start_timeout: Duration,
    pub(crate) tcp: bool,
    pub(crate) hba: Vec<String>,
    pub(crate) base_backup: Option<BaseBackup>,
    pub(crate) netns: Option<String>,
}

/// Where a cluster made by [`ClusterBuilder::from_base_backup`] copies its data from.
#[derive(Debug, Clone)]
pub(crate) struct BaseBackup {
    /// libpq connection string of the server to copy (`pg_basebackup -d`).
    pub(crate) conninfo: String,
    /// Whether the copy starts as a streaming standby (`pg_basebackup -R`).
    pub(crate) standby: bool,
}

impl Default for ClusterBuilder {
    fn default() -> Self {
        ClusterBuilder {
            install: None,
            major: None,
            wal_segsize_mb: None,
            data_checksums: false,
            gucs: Vec::new(),
            archive: false,
            keep: std::env::var_os("PGTEST_KEEP").is_some_and(|v| v == "1"),
            start_timeout: Duration::from_secs(60),
            tcp: false,
            hba: Vec::new(),
            base_backup: None,
            netns: None,
        }
    }
}

impl ClusterBuilder {
    /// Uses this installation instead of [`PgInstall::find`].
    pub fn install(mut self, install: PgInstall) -> Self {
        self.install = Some(install);
        self
    }

    /// Uses PostgreSQL `major` ([`PgInstall::of_major`]) instead of [`PgInstall::find`] (which honours
    /// `$PGCOMPRESS_PG_MAJOR`). [`install`](Self::install) wins over this.
    pub fn major(mut self, major: u32) -> Self {
        self.major = Some(major);
        self
    }

    /// WAL segment size in megabytes (`initdb --wal-segsize`, a power of two from 1 to 1024). Default 16.
    pub fn wal_segsize_mb(mut self, mb: u32) -> Self {
        self.wal_segsize_mb = Some(mb);
        self
    }

    /// Enables data checksums (`initdb --data-checksums`), which also makes hint-bit changes WAL-logged.
    pub fn data_checksums(mut self, on: bool) -> Self {
        self.data_checksums = on;
        self
    }

    /// Sets a server parameter in `postgresql.conf`; later calls win. Overrides the harness defaults
    /// (for example `fsync = off`).
    pub fn guc(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.gucs.push((name.into(), value.into()));
        self
    }

    /// Turns on WAL archiving into a directory the harness owns, see
    /// [`Cluster::archive_dir`](crate::Cluster::archive_dir).
    pub fn archive_dir(mut self, on: bool) -> Self {
        self.archive = on;
        self
    }

    /// Keeps the temporary directory after the cluster is dropped (also enabled by `PGTEST_KEEP=1`).
    pub fn keep(mut self, keep: bool) -> Self {
        self.keep = keep;
        self
    }

    /// Also listens on TCP, on 127.0.0.1 and a port that was free when the cluster was created, for clients
    /// that only speak TCP (the tunnel, client libraries' test suites). The Unix socket stays.
    pub fn listen_tcp(mut self, on: bool) -> Self {
        self.tcp = on;
        self
    }

    /// Puts a line at the top of `pg_hba.conf`, ahead of initdb's `trust` lines (the first matching line
    /// wins); later calls come after earlier ones. For example `host all all 127.0.0.1/32 scram-sha-256`.
    pub fn hba_line(mut self, line: impl Into<String>) -> Self {
        self.hba.push(line.into());
        self
    }

    /// Makes the data directory with `pg_basebackup -X stream` from the server at `conninfo` (a libpq
    /// connection string) instead of `initdb`. With `standby`, the copy also gets `pg_basebackup -R`
    /// (`standby.signal` and a `primary_conninfo` equal to `conninfo`) and starts as a streaming standby;
    /// without it, it recovers to the end of the backup and starts as a primary of its own.
    pub fn from_base_backup(mut self, conninfo: impl Into<String>, standby: bool) -> Self {
        self.base_backup = Some(BaseBackup {
            conninfo: conninfo.into(),
            standby,
        });
        self
    }

    /// Runs PostgreSQL and every program the cluster starts (`initdb`, `pg_ctl`, `psql`, `pgbench`, whatever
    /// [`Cluster::command`](crate::Cluster::command) makes) inside the network namespace `name` (`ip netns exec`,
    /// then the switch to the `postgres` user), typically [`NetLink::ns`](crate::netns::NetLink::ns) of the
    /// server side. With [`listen_tcp`](Self::listen_tcp) and `guc("listen_addresses", "<server address>")`
    /// the server is reachable from the client namespace over the veth only; `pg_hba.conf` then trusts
    /// `samenet` (the namespace's own subnets) after the lines of [`hba_line`](Self::hba_line). Unix sockets are
    /// files, reachable from any namespace: measure the network path over TCP. Needs root.
    pub fn netns(mut self, name: impl Into<String>) -> Self {
        self.netns = Some(name.into());
        self
    }

    /// How long to wait for the server to accept connections. Default 60 seconds.
    pub fn start_timeout(mut self, timeout: Duration) -> Self {
        self.start_timeout = timeout;
        self
    }
}

/// GUC names are written into `postgresql.conf` and SQL unquoted, so only plain identifiers are allowed.
pub(crate) fn check_guc_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidGucName { name: name.into() })
    }
}

/// Quotes a value as a `postgresql.conf` string (`src/backend/utils/misc/guc-file.l` unescapes `\` and `''`).
pub(crate) fn conf_quote(value: &str) -> String {
    format!("'{}'", value.replace('\\', "\\\\").replace('\'', "''"))
}

/// Quotes a value as an SQL string literal (standard_conforming_strings is on by default).
pub(crate) fn sql_quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guc_names_are_checked() {
        assert!(check_guc_name("wal_compression").is_ok());
        assert!(check_guc_name("auto_explain.log_min_duration").is_ok());
        assert!(check_guc_name("x = 1; DROP").is_err());
        assert!(check_guc_name("").is_err());
    }

    #[test]
    fn quoting() {
        assert_eq!(conf_quote(r"it's a\b"), r"'it''s a\\b'");
        assert_eq!(sql_quote("it's"), "'it''s'");
    }
}
