//! The local directory store.
//!
//! Durability follows PostgreSQL's `contrib/basic_archive`: a container is written to a
//! unique temporary file in `<repo>/.tmp/`, fsynced, then published with `link(2)`, which
//! fails if the final name exists, so a file is never overwritten and a crash at any moment
//! leaves either nothing or a complete, fsynced container under the final name. The
//! directory is fsynced after the link.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::{nanos, sync_dir, Check, Store};
use crate::error::ArchiveError;

/// Directory inside the repository holding files being written.
pub const TMP_DIR: &str = ".tmp";
/// Temporary files older than this are left over from killed pushes and are removed.
const STALE_TMP_AGE: Duration = Duration::from_secs(3600);

/// A repository directory.
#[derive(Debug, Clone)]
pub struct LocalStore {
    dir: PathBuf,
}

impl LocalStore {
    /// The store rooted at `dir` (created by `archive init`). A relative `dir` is made
    /// absolute against the current directory, so that processes started elsewhere (the
    /// spool's serving process) name the same repository the same way.
    pub fn new(dir: impl Into<PathBuf>) -> LocalStore {
        let dir = dir.into();
        LocalStore {
            dir: std::path::absolute(&dir).unwrap_or(dir),
        }
    }

    /// The repository directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The directory of temporary files, created if missing; the repository directory
    /// itself is never created here (only by [`Store::create_location`]), so a push to a
    /// directory that vanished fails instead of starting an archive in its place.
    fn tmp_dir(&self) -> Result<PathBuf, ArchiveError> {
        let tmp_dir = self.dir.join(TMP_DIR);
        match fs::create_dir(&tmp_dir) {
            Ok(()) => Ok(tmp_dir),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(tmp_dir),
            Err(e) => Err(ArchiveError::io("creating", &tmp_dir)(e)),
        }
    }

    /// Links the fsynced temporary file `tmp` to `key` unless the name is taken, removes
    /// `tmp` and fsyncs the directory: `Ok(false)` when `key` already exists.
    fn publish(&self, tmp: &Path, key: &str) -> Result<bool, ArchiveError> {
        let dest = self.dir.join(key);
        let linked = fs::hard_link(tmp, &dest);
        let _ = fs::remove_file(tmp);
        match linked {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::AlreadyExists => return Ok(false),
            Err(e) => {
                return Err(ArchiveError::Io {
                    what: format!("linking {} to", tmp.display()),
                    path: dest,
                    source: e,
                })
            }
        }
        sync_dir(&self.dir)?;
        Ok(true)
    }

    /// [`LocalStore::publish`] of a container staged in `tmp_dir`, then removes what killed
    /// pushes left there.
    fn publish_container(
        &self,
        tmp_dir: &Path,
        tmp: &Path,
        key: &str,
    ) -> Result<bool, ArchiveError> {
        let created = self.publish(tmp, key)?;
        if created {
            remove_stale_temps(tmp_dir);
        }
        Ok(created)
    }
}

impl Store for LocalStore {
    fn read(&self, key: &str) -> Result<Option<Vec<u8>>, ArchiveError> {
        let path = self.dir.join(key);
        match fs::read(&path) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(ArchiveError::io("reading", &path)(e)),
        }
    }

    fn read_head(&self, key: &str, len: usize) -> Result<Option<(u64, Vec<u8>)>, ArchiveError> {
        let path = self.dir.join(key);
        let read = (|| -> std::io::Result<(u64, Vec<u8>)> {
            let f = File::open(&path)?;
            let size = f.metadata()?.len();
            let mut buf = Vec::with_capacity(len.min(size as usize));
            f.take(len as u64).read_to_end(&mut buf)?;
            Ok((size, buf))
        })();
        match read {
            Ok(x) => Ok(Some(x)),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(ArchiveError::io("reading", &path)(e)),
        }
    }

    fn create(&self, key: &str, bytes: Vec<u8>) -> Result<bool, ArchiveError> {
        if !key.ends_with(super::SUFFIX) {
            // The identity file `archive init` writes is staged beside the containers under
            // a dot name (which no listing takes for one), so that init, whoever runs it,
            // leaves no `.tmp` directory that the server's user could not write into.
            let tmp = write_temp(&self.dir, &format!(".{key}"), &bytes)?;
            return self.publish(&tmp, key);
        }
        let tmp_dir = self.tmp_dir()?;
        let tmp = write_temp(&tmp_dir, key, &bytes)?;
        self.publish_container(&tmp_dir, &tmp, key)
    }

    fn create_checked(
        &self,
        key: &str,
        bytes: &[u8],
        check: Check<'_>,
    ) -> Result<bool, ArchiveError> {
        let tmp_dir = self.tmp_dir()?;
        // The fsync of the temporary file waits on the disk, not the CPU: the check runs
        // meanwhile. The final name appears only after both.
        let (written, checked) = std::thread::scope(|scope| {
            let checker = scope.spawn(|| check(bytes));
            let written = write_temp(&tmp_dir, key, bytes);
            (written, checker.join().expect("check thread panicked"))
        });
        let tmp = written?;
        if let Err(e) = checked {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        self.publish_container(&tmp_dir, &tmp, key)
    }

    fn settle(&self, key: &str) -> Result<(), ArchiveError> {
        let path = self.dir.join(key);
        File::open(&path)
            .and_then(|f| f.sync_all())
            .map_err(ArchiveError::io("syncing", &path))?;
        sync_dir(&self.dir)
    }

    fn list_modified(&self) -> Result<Vec<(String, u64, Option<SystemTime>)>, ArchiveError> {
        // The mtime is when the container was written into .tmp/, just before link()
        // published it; nothing writes a published container again.
        let rd = fs::read_dir(&self.dir).map_err(ArchiveError::io("listing", &self.dir))?;
        let mut keys = Vec::new();
        for entry in rd {
            let entry = entry.map_err(ArchiveError::io("listing", &self.dir))?;
            let Ok(key) = entry.file_name().into_string() else {
                continue;
            };
            match entry.metadata() {
                Ok(m) if m.is_file() => keys.push((key, m.len(), m.modified().ok())),
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(ArchiveError::io("reading", entry.path())(e)),
            }
        }
        Ok(keys)
    }

    fn delete(&self, keys: &[String]) -> Result<(), ArchiveError> {
        for key in keys {
            let path = self.dir.join(key);
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(ArchiveError::io("removing", &path)(e)),
            }
        }
        if keys.is_empty() {
            return Ok(());
        }
        sync_dir(&self.dir)
    }

    fn check_present(&self) -> Result<(), ArchiveError> {
        if self.dir.is_dir() {
            Ok(())
        } else {
            Err(ArchiveError::NoRepository {
                location: self.location(),
                reason: "is not a directory".into(),
            })
        }
    }

    fn create_location(&self) -> Result<(), ArchiveError> {
        fs::create_dir_all(&self.dir).map_err(ArchiveError::io("creating", &self.dir))?;
        if let Some(parent) = self.dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            sync_dir(parent)?;
        }
        Ok(())
    }

    fn location(&self) -> String {
        self.dir.display().to_string()
    }
}

fn write_temp(tmp_dir: &Path, key: &str, bytes: &[u8]) -> Result<PathBuf, ArchiveError> {
    let tmp = tmp_dir.join(format!("{key}.{}.{}", std::process::id(), nanos()));
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(ArchiveError::io("creating", &tmp))?;
    let written = f
        .write_all(bytes)
        .and_then(|()| f.sync_all())
        .map_err(ArchiveError::io("writing", &tmp));
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(tmp)
}

/// Removes temporary files that killed pushes left behind, best effort.
fn remove_stale_temps(tmp_dir: &Path) {
    let Ok(rd) = fs::read_dir(tmp_dir) else {
        return;
    };
    let now = SystemTime::now();
    for entry in rd.flatten() {
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| now.duration_since(t).ok())
            .is_some_and(|age| age > STALE_TMP_AGE);
        if old {
            let _ = fs::remove_file(entry.path());
        }
    }
}
