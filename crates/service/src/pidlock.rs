//! Pid and lock files of a long-running command: one process owns a role (serving a spool,
//! prefetching into it) while it holds an exclusive `flock` on a lock file and a pid file names
//! it. A probe tries the lock shared, so it never looks like an owner to another probe; a
//! process starting waits up to [`START_WAIT`] for a lock held by nobody named in the pid file.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read};
use std::path::Path;

use nix::fcntl::{Flock, FlockArg};

use crate::error::ServiceError;

/// Reads a file of at most 4 KiB as text (a pid file, a status line).
pub fn read_small(path: &Path) -> Option<String> {
    let f = File::open(path).ok()?;
    let mut text = String::new();
    f.take(4096).read_to_string(&mut text).ok()?;
    Some(text)
}

/// How long a process starting to serve (or prefetch) waits for a lock held by nobody named
/// in the pid file: a probe holds it for an instant, a starting process until it writes its id.
pub const START_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Whether the file at `pid` names this process.
pub fn names_me(pid: &Path) -> bool {
    read_small(pid).as_deref().map(str::trim) == Some(std::process::id().to_string().as_str())
}

/// Whether `lock` is held and `pid` names a live process. The lock is tried shared, so a
/// probe never looks like an owner to another probe.
pub fn held(lock: &Path, pid: &Path) -> Result<bool, ServiceError> {
    let Some(owner) = read_small(pid).and_then(|t| t.trim().parse::<u32>().ok()) else {
        return Ok(false);
    };
    // A live process has a /proc entry (a recycled id is caught by the lock being free).
    if !Path::new("/proc").join(owner.to_string()).exists() {
        return Ok(false);
    }
    let file = match File::open(lock) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(ServiceError::io("opening", lock)(e)),
    };
    match Flock::lock(file, FlockArg::LockSharedNonblock) {
        Ok(_) => Ok(false),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Ok(true),
        Err((_, e)) => Err(ServiceError::io("locking", lock)(e.into())),
    }
}

/// Takes a lock with `try_lock`, trying again for up to [`START_WAIT`] while `served` says no
/// live process owns it; `None` once one does.
pub fn take<L, E>(
    try_lock: impl Fn() -> Result<Option<L>, E>,
    served: impl Fn() -> Result<bool, E>,
) -> Result<Option<L>, E> {
    let until = std::time::Instant::now() + START_WAIT;
    loop {
        if let Some(lock) = try_lock()? {
            return Ok(Some(lock));
        }
        if served()? || std::time::Instant::now() >= until {
            return Ok(None);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// An exclusive lock on the file at `path` (created if missing, never truncated), held until
/// dropped; `None` when another process holds it.
pub fn try_lock_file(path: &Path) -> Result<Option<Flock<File>>, ServiceError> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(ServiceError::io("opening", path))?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(Some(lock)),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Ok(None),
        Err((_, e)) => Err(ServiceError::io("locking", path)(e.into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_is_a_held_lock_and_a_pid_file_naming_a_live_process() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (lock, pid) = (dir.path().join("x.lock"), dir.path().join("x.pid"));
        // Neither file yet: nobody owns it, and a probe creates nothing.
        assert!(!held(&lock, &pid).expect("probe"));
        assert!(!lock.exists());
        let taken = try_lock_file(&lock).expect("lock").expect("free");
        // Held, but no pid file: a process starting, not an owner.
        assert!(!held(&lock, &pid).expect("probe"));
        assert!(try_lock_file(&lock).expect("lock").is_none(), "taken twice");
        std::fs::write(&pid, format!("{}\n", std::process::id())).expect("pid");
        assert!(names_me(&pid));
        assert!(held(&lock, &pid).expect("probe"));
        // An owner is not waited for: take gives up at once.
        let none = take(|| try_lock_file(&lock), || held(&lock, &pid)).expect("take");
        assert!(none.is_none());
        drop(taken);
        // Released: the pid file alone names no owner, and the lock can be taken again.
        assert!(!held(&lock, &pid).expect("probe"));
        let again = take(|| try_lock_file(&lock), || held(&lock, &pid)).expect("take");
        assert!(again.is_some());
    }

    #[test]
    fn a_pid_file_naming_another_or_nothing_is_not_ours() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pid = dir.path().join("x.pid");
        assert!(!names_me(&pid));
        std::fs::write(&pid, "not a pid\n").expect("pid");
        assert!(!names_me(&pid));
        std::fs::write(&pid, format!("{}\n", std::process::id() + 1)).expect("pid");
        assert!(!names_me(&pid));
    }
}
