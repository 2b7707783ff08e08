//! WAL-related helpers on [`Cluster`]: LSNs, segment switches, segment files, archiving.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cluster::Cluster;
use crate::error::{Error, Result};

/// WAL segment file names are 24 hex digits: timeline, log and segment (`access/xlog_internal.h`, XLogFileName).
pub fn is_wal_segment_name(name: &str) -> bool {
    name.len() == 24 && name.bytes().all(|b| b.is_ascii_hexdigit())
}

impl Cluster {
    /// The directory the server writes WAL into (`data/pg_wal`).
    pub fn wal_dir(&self) -> PathBuf {
        self.data_dir().join("pg_wal")
    }

    /// The current WAL insert position as PostgreSQL prints it, e.g. `0/16B3D80`.
    pub fn current_wal_lsn(&self) -> Result<String> {
        self.query_one("SELECT pg_current_wal_lsn()")
    }

    /// Forces a switch to a new WAL segment and returns the LSN where the old one ended.
    pub fn switch_wal(&self) -> Result<String> {
        self.query_one("SELECT pg_switch_wal()")
    }

    /// Runs `CHECKPOINT`, so the next change to each page writes a full-page image.
    pub fn checkpoint(&self) -> Result<()> {
        self.psql("CHECKPOINT").map(drop)
    }

    /// The WAL segment files in `pg_wal`, sorted by name (which is WAL order within a timeline).
    pub fn wal_segment_files(&self) -> Result<Vec<PathBuf>> {
        segment_files_in(&self.wal_dir())
    }

    /// The segment files archived so far, sorted; empty when archiving is off.
    pub fn archived_segments(&self) -> Result<Vec<PathBuf>> {
        match self.archive_dir() {
            Some(dir) => segment_files_in(dir),
            None => Ok(Vec::new()),
        }
    }

    /// Waits until the archiver has copied the segment named `name` (e.g. from [`Cluster::wal_segment_files`])
    /// and returns its path in the archive.
    pub fn wait_for_archived(&self, name: &str, timeout: Duration) -> Result<PathBuf> {
        let dir = self.archive_dir().ok_or_else(|| Error::WaitTimeout {
            what: format!(
                "segment {name} to be archived, but archiving is off (use .archive_dir(true))"
            ),
            after: Duration::ZERO,
        })?;
        let path = dir.join(name);
        // The file appears as soon as `cp` starts writing it; the archiver's statistics say when it finished
        // (segment names of one timeline sort in WAL order).
        let done = format!(
            "SELECT coalesce(last_archived_wal, '') >= {} FROM pg_stat_archiver",
            crate::builder::sql_quote(name)
        );
        self.wait_until(
            &format!("segment {name} in {}", dir.display()),
            timeout,
            || Ok(path.is_file() && self.query_one(&done)? == "t"),
        )?;
        Ok(path)
    }

    /// Copies the WAL segment files into `dest` (created if needed) and returns the copies, sorted.
    ///
    /// The copies belong to the current user and are readable by everyone, even when the server runs as
    /// `postgres`. The segment being written is copied as it is at that moment: call [`Cluster::switch_wal`] or
    /// [`Cluster::stop`] first for a complete one.
    pub fn copy_wal_to(&self, dest: &Path) -> Result<Vec<PathBuf>> {
        copy_segments(&self.wal_segment_files()?, dest)
    }
}

fn segment_files_in(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = fs::read_dir(dir).map_err(Error::io(format!("listing {}", dir.display())))?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(Error::io(format!("listing {}", dir.display())))?;
        let is_segment = entry.file_name().to_str().is_some_and(is_wal_segment_name);
        if is_segment && entry.path().is_file() {
            files.push(entry.path());
        }
    }
    files.sort();
    Ok(files)
}

fn copy_segments(files: &[PathBuf], dest: &Path) -> Result<Vec<PathBuf>> {
    use std::os::unix::fs::PermissionsExt;
    fs::create_dir_all(dest).map_err(Error::io(format!("creating {}", dest.display())))?;
    let mut copies = Vec::with_capacity(files.len());
    for src in files {
        let Some(name) = src.file_name() else {
            continue;
        };
        let to = dest.join(name);
        // Reading as root bypasses the 0600 mode; the copy is created by (and so owned by) the current user.
        fs::copy(src, &to).map_err(Error::io(format!(
            "copying {} to {}",
            src.display(),
            to.display()
        )))?;
        fs::set_permissions(&to, fs::Permissions::from_mode(0o644)).map_err(Error::io(format!(
            "setting permissions of {}",
            to.display()
        )))?;
        copies.push(to);
    }
    Ok(copies)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_names() {
        assert!(is_wal_segment_name("000000010000000000000001"));
        assert!(!is_wal_segment_name("000000010000000000000001.partial"));
        assert!(!is_wal_segment_name("00000002.history"));
        assert!(!is_wal_segment_name("archive_status"));
    }
}
