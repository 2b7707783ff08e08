//! Pushing ahead of the archiver: a long-lived process ([`serve`]) watches
//! `pg_wal/archive_status/*.ready`, packs and stores several segments at once over one
//! repository (one S3 client, its connections kept), and leaves a marker per stored file in a
//! spool directory; `archive push --async` ([`wait`]) then returns as soon as the marker for
//! its file says that exact content is durably in that repository, which is usually before
//! PostgreSQL asks.
//!
//! The spool holds no WAL, only small files, so it is bounded by the number of `.ready` files:
//!
//! - `done/<name>`: `<xxh3-128 of the original, hex> <repository>`; written (to a temporary
//!   name, then renamed) only after the repository reported the file durably stored, and
//!   removed once PostgreSQL has marked the file done. A marker for other bytes or another
//!   repository never satisfies a push: the foreground hashes the file itself and compares.
//! - `error/<name>`: the last failure storing it (the process retries).
//! - `serve.lock` (held with `flock` while a process serves this spool), `serve.pid` (written
//!   once the lock is held; the owner is the live process it names, holding the lock),
//!   `serve.log` (when a push started the process), `status` (backlog, for messages; written
//!   only when it changes, so an idle server writes nothing).
//! - `fetch/`: the files restored ahead of recovery ([`prefetch`]).

pub mod metrics;
mod prefetch;
mod serve;
mod wait;

use std::fs::{self, File};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use nix::fcntl::Flock;
use service::pidlock::{held, names_me, read_small, take, try_lock_file};

use crate::error::ArchiveError;

pub use metrics::SpoolMetrics;
pub use prefetch::{prefetch, PrefetchOptions};
pub use serve::{serve, ServeOptions};
pub use wait::{wait_stored, WaitOptions};

/// A spool directory.
#[derive(Debug, Clone)]
pub struct Spool {
    dir: PathBuf,
}

/// Holding this keeps other processes from serving the same spool.
#[derive(Debug)]
pub struct ServeLock {
    _lock: Flock<File>,
}

/// What a `done/<name>` marker says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    /// Hex XXH3-128 of the original file that was stored.
    pub xxh3: String,
    /// The repository it was stored in.
    pub location: String,
}

impl Spool {
    /// The spool in `dir` (created when first used).
    pub fn new(dir: impl Into<PathBuf>) -> Spool {
        Spool { dir: dir.into() }
    }

    /// The spool directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn done_dir(&self) -> PathBuf {
        self.dir.join("done")
    }

    fn error_dir(&self) -> PathBuf {
        self.dir.join("error")
    }

    /// `serve.pid`: the serving process's id.
    pub fn pid_path(&self) -> PathBuf {
        self.dir.join("serve.pid")
    }

    /// `serve.log`: where a process that a push started writes.
    pub fn log_path(&self) -> PathBuf {
        self.dir.join("serve.log")
    }

    fn status_path(&self) -> PathBuf {
        self.dir.join("status")
    }

    /// Creates the spool's directories.
    pub fn create(&self) -> Result<(), ArchiveError> {
        for d in [self.done_dir(), self.error_dir()] {
            fs::create_dir_all(&d).map_err(ArchiveError::io("creating", &d))?;
        }
        Ok(())
    }

    /// Takes the serving lock; `None` when another process holds it.
    pub fn try_lock(&self) -> Result<Option<ServeLock>, ArchiveError> {
        self.create()?;
        Ok(try_lock_file(&self.dir.join("serve.lock"))?.map(|lock| ServeLock { _lock: lock }))
    }

    /// Whether a process serves this spool now: `serve.pid` names a live process and the
    /// serving lock is held. A probe neither creates the spool nor takes the lock exclusively:
    /// a push probing must not re-create a removed spool, nor turn away a server starting at
    /// that moment, and a server that holds the lock but has not yet written its id is not
    /// taken for one that serves.
    pub fn served(&self) -> Result<bool, ArchiveError> {
        Ok(held(&self.dir.join("serve.lock"), &self.pid_path())?)
    }

    /// Takes the serving lock and records this process in `serve.pid`; `None` when another
    /// live process serves the spool. A lock held without a live owner in `serve.pid` is a
    /// probe or a server starting: it is tried again for up to [`service::pidlock::START_WAIT`].
    pub fn take_serving(&self) -> Result<Option<ServeLock>, ArchiveError> {
        let lock = take(|| self.try_lock(), || self.served())?;
        if lock.is_some() {
            write_in(
                &self.dir,
                "serve.pid",
                format!("{}\n", std::process::id()).as_bytes(),
            )?;
        }
        Ok(lock)
    }

    /// Whether `serve.pid` still names this process: a serving process stops when its spool
    /// is removed (or another took it over) instead of writing it back into existence.
    pub fn still_ours(&self) -> bool {
        names_me(&self.pid_path())
    }

    /// The marker for `name`, if there is a readable one.
    pub fn marker(&self, name: &str) -> Option<Marker> {
        let text = read_small(&self.done_dir().join(name))?;
        let (xxh3, location) = text.trim_end_matches('\n').split_once(' ')?;
        Some(Marker {
            xxh3: xxh3.to_owned(),
            location: location.to_owned(),
        })
    }

    /// Records that `name`, whose original has the XXH3-128 `xxh3`, is durably stored in
    /// `location`. Called only after the repository said so.
    pub fn write_marker(
        &self,
        name: &str,
        xxh3: &[u8],
        location: &str,
    ) -> Result<(), ArchiveError> {
        let text = format!("{} {location}\n", hex::encode(xxh3));
        write_in(&self.done_dir(), name, text.as_bytes())
    }

    /// Removes the marker of `name` (PostgreSQL has marked it done).
    pub fn remove_marker(&self, name: &str) {
        let _ = fs::remove_file(self.done_dir().join(name));
    }

    /// Names that have a marker.
    pub fn markers(&self) -> Result<Vec<String>, ArchiveError> {
        list_names(&self.done_dir())
    }

    /// The last error storing `name` and when it was written.
    pub fn error(&self, name: &str) -> Option<(String, std::time::SystemTime)> {
        let path = self.error_dir().join(name);
        let when = fs::metadata(&path).and_then(|m| m.modified()).ok()?;
        Some((read_small(&path)?, when))
    }

    /// Records the failure to store `name`.
    pub fn write_error(&self, name: &str, message: &str) -> Result<(), ArchiveError> {
        write_in(&self.error_dir(), name, message.as_bytes())
    }

    /// Forgets the failure to store `name`.
    pub fn remove_error(&self, name: &str) {
        let _ = fs::remove_file(self.error_dir().join(name));
    }

    /// Writes the status line the serving process keeps current.
    pub fn write_status(&self, text: &str) -> Result<(), ArchiveError> {
        write_in(&self.dir, "status", text.as_bytes())
    }

    /// The status line, if any.
    pub fn status(&self) -> Option<String> {
        read_small(&self.status_path()).map(|s| s.trim_end().to_owned())
    }
}

/// Writes `dir/name` through a temporary file and a rename, so readers see all or nothing.
/// Not fsynced: a marker lost in an OS crash only makes a push wait for the file to be
/// stored again (an identical push succeeds).
fn write_replace(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), ArchiveError> {
    fs::create_dir_all(dir).map_err(ArchiveError::io("creating", dir))?;
    write_in(dir, name, bytes)
}

/// [`write_replace`] into a directory that must exist already: a long-lived process writing
/// into a spool someone removed gets an error instead of re-creating it.
fn write_in(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), ArchiveError> {
    let tmp = dir.join(format!(
        ".{name}.{}.{}",
        std::process::id(),
        crate::repo::nanos()
    ));
    fs::write(&tmp, bytes).map_err(ArchiveError::io("writing", &tmp))?;
    let dest = dir.join(name);
    fs::rename(&tmp, &dest).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        ArchiveError::io(format!("renaming {} to", tmp.display()), &dest)(e)
    })
}

fn list_names(dir: &Path) -> Result<Vec<String>, ArchiveError> {
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(ArchiveError::io("listing", dir)(e)),
    };
    let mut names = Vec::new();
    for entry in rd {
        let entry = entry.map_err(ArchiveError::io("listing", dir))?;
        if let Ok(name) = entry.file_name().into_string() {
            if !name.starts_with('.') {
                names.push(name);
            }
        }
    }
    Ok(names)
}

/// The XXH3-128 of a file, as the container records it, read a window at a time.
pub fn xxh3_file(path: &Path) -> Result<[u8; 16], ArchiveError> {
    let read_err = |e| ArchiveError::io("reading", path)(e);
    let f = File::open(path).map_err(read_err)?;
    let len = f.metadata().map_err(read_err)?.len();
    let len = usize::try_from(len).map_err(|_| read_err(ErrorKind::FileTooLarge.into()))?;
    let mut hasher = twox_hash::XxHash3_128::default();
    crate::input::Input::File(&f, len)
        .for_each_window(|w| hasher.write(w))
        .map_err(read_err)?;
    Ok(hasher.finish_128().to_be_bytes())
}
