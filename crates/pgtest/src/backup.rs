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
        if from.standby {
            cmd.arg("-R");
        }
        run(&mut cmd)?;
        Ok(())
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
