//! What every long-running command (`pgcompress demo`, `pgcompress-bench spill`, `pgcompress-bench tunnel`)
//! shares: Ctrl-C handling and progress on stderr. Both binaries build on it, so neither imports the other.

pub mod progress;

pub use progress::Progress;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set by the Ctrl-C handler. The server runs in its own session (pg_ctl calls `setsid`), so it does not see
/// the terminal's SIGINT; we must live long enough to stop it.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Exit status of a program ended by SIGINT, as shells report it.
pub const EXIT_INTERRUPTED: u8 = 130;

/// Whether the user pressed Ctrl-C.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Installs the Ctrl-C handler and starts progress lines labelled `label` (`pgcompress-bench spill`).
///
/// Without the handler Ctrl-C would kill us and leave a daemonized server running. Children in our
/// process group (psql, pgbench) still die of the SIGINT, their failure unwinds to the caller, and
/// dropping the cluster (relays, namespaces) stops and deletes it. A second handler cannot be installed;
/// that only happens in tests, so the error is ignored.
pub fn start(label: &'static str) -> Progress {
    let _ = ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::SeqCst));
    Progress::labelled(label, interrupted)
}
