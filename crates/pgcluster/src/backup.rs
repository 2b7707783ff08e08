//! Clusters that start from another server's base backup, and `pg_hba.conf` lines.

use std::fs;

use crate::builder::BaseBackup;
use crate::cluster::Cluster;
use crate::error::{Error, Result};
use crate::run::run;

impl Cluster {
    /// Fills the data directory with `pg_basebackup -X stream` from `from.conninfo`, instead of `initdb`.
    pub(crate) fn base_backup(&self, from: &BaseBackup) -> Result<()> {
        let mut cmd = self.command("pg_basebackup");
        cmd.arg("-D").arg(self.data_dir());
        cmd.args([
            "-X",
            "stream",
            "-c",
            "fast",
            "--no-sync",
            "-d",
            &from.conninfo,
        ]);
        // A server-only package borrows a newer major's pg_basebackup, whose -R writes options
        // of its own libpq (17's sslnegotiation) that the older walreceiver rejects: there the
        // standby settings are written here, with the conninfo as given.
        let own_client = self.install().own_bin("pg_basebackup").is_some();
        if from.standby && own_client {
            cmd.arg("-R");
        }
        run(&mut cmd)?;
        if from.standby && !own_client {
            self.write_standby_settings(&from.conninfo)?;
        }
        Ok(())
    }

    /// What `pg_basebackup -R` writes: standby.signal and primary_conninfo.
    fn write_standby_settings(&self, conninfo: &str) -> Result<()> {
        let auto = self.data_dir().join("postgresql.auto.conf");
        let mut text = fs::read_to_string(&auto).unwrap_or_default();
        text.push_str(&format!(
            "primary_conninfo = '{}'\n",
            conninfo.replace('\\', "\\\\").replace('\'', "''")
        ));
        fs::write(&auto, text).map_err(Error::io(format!("writing {}", auto.display())))?;
        let signal = self.data_dir().join("standby.signal");
        fs::write(&signal, "").map_err(Error::io(format!("writing {}", signal.display())))?;
        crate::run::chown_to_server_user(&auto)?;
        crate::run::chown_to_server_user(&signal)
    }

    /// Puts `lines` at the top of `pg_hba.conf`: PostgreSQL uses the first line that matches a connection.
    pub(crate) fn write_hba(&self, lines: &[String]) -> Result<()> {
        if lines.is_empty() {
            return Ok(());
        }
        let path = self.data_dir().join("pg_hba.conf");
        let old =
            fs::read_to_string(&path).map_err(Error::io(format!("reading {}", path.display())))?;
        let mut text = String::from("# pgtest harness lines, ahead of the rest\n");
        for line in lines {
            text.push_str(line);
            text.push('\n');
        }
        text.push_str(&old);
        fs::write(&path, text).map_err(Error::io(format!("writing {}", path.display())))
    }
}
