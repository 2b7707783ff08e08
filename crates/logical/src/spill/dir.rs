//! The spill directory is private to the account that runs the consumer: spill files hold
//! row data of transactions that have not committed, and whoever can replace one with valid
//! records can put rows in the output. PostgreSQL keeps its own spill in `pg_replslot` at
//! 0700, files 0600; OpenSSH (`StrictModes`) and GnuPG refuse a home they do not own alone.
//!
//! - The directory is created 0700 (and any missing parent with it); one that exists must be a
//!   real directory, not a link, owned by the effective user, with no permission for group or
//!   others. Every directory above it must belong to root or to the effective user and be
//!   writable by nobody else, unless it has the sticky bit (`/tmp`): otherwise another account
//!   could rename the spill directory away and put its own in its place.
//! - Spill files are created 0600 with `O_EXCL` and `O_NOFOLLOW`, and read back through the
//!   descriptor they were written with, never opened again by name.
//! - One consumer per directory: a lock (`flock`) on [`LOCK_NAME`] in it, held while the store
//!   is open, so a second store on the same directory is refused before it removes anything.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};

use crate::AssembleError;

/// Name of the lock file in a spill directory.
pub(crate) const LOCK_NAME: &str = "pgcompress-spill.lock";

/// The lock on an open spill directory; released when dropped.
pub(crate) struct DirLock {
    _lock: Flock<File>,
}

impl std::fmt::Debug for DirLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DirLock")
    }
}

fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

fn unsafe_dir(path: &Path, problem: String) -> AssembleError {
    AssembleError::UnsafeDir {
        path: path.to_path_buf(),
        problem,
        euid: euid(),
    }
}

/// [`open_private`], then removes the spill files a store left there (its own file names
/// only): what [`crate::Assembler::open`] does to the file system.
pub(crate) fn open_store(dir: &Path) -> Result<(PathBuf, DirLock), AssembleError> {
    let (dir, lock) = open_private(dir)?;
    for entry in std::fs::read_dir(&dir).map_err(AssembleError::io(&dir))? {
        let entry = entry.map_err(AssembleError::io(&dir))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(super::FILE_PREFIX) && name.ends_with(super::FILE_SUFFIX) {
            let p = entry.path();
            std::fs::remove_file(&p).map_err(AssembleError::io(&p))?;
        }
    }
    Ok((dir, lock))
}

/// Creates `dir` (mode 0700, missing parents too) or checks the one that exists, checks the
/// directories above it, and takes its lock. Returns the directory with the links above it
/// resolved: the path checked, and the one every spill file is then created under.
pub(crate) fn open_private(dir: &Path) -> Result<(PathBuf, DirLock), AssembleError> {
    match DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            // Parents missing: created 0700 as well (`mkdir -p -m 700` leaves them 0755).
            DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(AssembleError::io(dir))?;
        }
        Err(e) => return Err(AssembleError::io(dir)(e)),
    }
    check_dir(dir)?;
    let dir = &check_parents(dir)?;
    check_dir(dir)?;
    let lock_path = dir.join(LOCK_NAME);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(&lock_path)
        .map_err(AssembleError::io(&lock_path))?;
    let lock = Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|(_, errno)| {
        if errno == nix::errno::Errno::EWOULDBLOCK {
            AssembleError::DirInUse {
                path: dir.to_path_buf(),
            }
        } else {
            AssembleError::io(&lock_path)(io::Error::from(errno))
        }
    })?;
    Ok((dir.clone(), DirLock { _lock: lock }))
}

/// The directory itself: a real directory, ours, closed to group and others.
fn check_dir(dir: &Path) -> Result<(), AssembleError> {
    let m = std::fs::symlink_metadata(dir).map_err(AssembleError::io(dir))?;
    if m.file_type().is_symlink() {
        return Err(unsafe_dir(dir, "is a symbolic link".into()));
    }
    if !m.is_dir() {
        return Err(unsafe_dir(dir, "is not a directory".into()));
    }
    let mode = m.mode() & 0o7777;
    if m.uid() != euid() {
        return Err(unsafe_dir(
            dir,
            format!("belongs to uid {} (mode {mode:04o})", m.uid()),
        ));
    }
    if mode & 0o077 != 0 {
        return Err(unsafe_dir(
            dir,
            format!("is mode {mode:04o}, open to group or others"),
        ));
    }
    Ok(())
}

/// Every directory above: root's or ours, and writable by nobody else unless sticky. Returns
/// `dir` below its parent's canonical path.
fn check_parents(dir: &Path) -> Result<PathBuf, AssembleError> {
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let parent: PathBuf = parent.canonicalize().map_err(AssembleError::io(parent))?;
    let name = dir
        .file_name()
        .ok_or_else(|| unsafe_dir(dir, "does not end in a directory name".into()))?;
    let me = euid();
    for p in parent.ancestors() {
        let m = std::fs::metadata(p).map_err(AssembleError::io(p))?;
        let mode = m.mode() & 0o7777;
        let sticky = mode & 0o1000 != 0;
        if m.uid() != 0 && m.uid() != me {
            return Err(unsafe_dir(
                dir,
                format!(
                    "lies in {}, which belongs to uid {} (mode {mode:04o}) and could be replaced by it",
                    p.display(),
                    m.uid()
                ),
            ));
        }
        if mode & 0o022 != 0 && !sticky {
            return Err(unsafe_dir(
                dir,
                format!(
                    "lies in {}, mode {mode:04o}: group or others may rename it and put theirs in its place",
                    p.display()
                ),
            ));
        }
    }
    Ok(parent.join(name))
}

/// Creates a new spill file, 0600, never through a link and never over an existing name.
pub(crate) fn create_file(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
}
