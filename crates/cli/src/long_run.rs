//! What every long-running command (`demo`, `bench spill`, `bench tunnel`) shares: Ctrl-C handling,
//! progress on stderr and the path of this executable. `demo` and `bench` both build on it, so neither
//! imports the other.

pub(crate) mod progress;

use anyhow::Context;
pub(crate) use progress::Progress;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set by the Ctrl-C handler. The server runs in its own session (pg_ctl calls `setsid`), so it does not see
/// the terminal's SIGINT; we must live long enough to stop it.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Exit status of a program ended by SIGINT, as shells report it.
pub(crate) const EXIT_INTERRUPTED: u8 = 130;

/// Whether the user pressed Ctrl-C.
pub(crate) fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Installs the Ctrl-C handler and starts progress lines labelled `label` (`pgcompress bench spill`).
///
/// Without the handler Ctrl-C would kill us and leave a daemonized server running. Children in our
/// process group (psql, pgbench) still die of the SIGINT, their failure unwinds to the caller, and
/// dropping the cluster (relays, namespaces) stops and deletes it. A second handler cannot be installed;
/// that only happens in tests, so the error is ignored.
pub(crate) fn start(label: &'static str) -> Progress {
    let _ = ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::SeqCst));
    Progress::labelled(label, interrupted)
}

/// This executable, which the benchmarks and the demo run as `pgcompress`.
pub(crate) fn me() -> anyhow::Result<PathBuf> {
    std::env::current_exe().context("locating this executable")
}
