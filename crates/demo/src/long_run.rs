//! What every long-running command (`pgcompress demo`, `pgcompress-bench spill`, `pgcompress-bench tunnel`)
//! shares: Ctrl-C handling and progress on stderr. Both binaries build on it, so neither imports the other.

pub mod progress;

pub use progress::Progress;
use std::sync::OnceLock;

/// The process's stop token, once [`start`] installed the handler. The server runs in its own session
/// (pg_ctl calls `setsid`), so it does not see the terminal's SIGINT; we must live long enough to stop it.
static STOP: OnceLock<service::Stop> = OnceLock::new();

/// Exit status of a program ended by SIGINT, as shells report it.
pub const EXIT_INTERRUPTED: u8 = 130;

/// Whether the user pressed Ctrl-C.
pub fn interrupted() -> bool {
    STOP.get().is_some_and(|s| s.is_stopped())
}

/// Installs the Ctrl-C handler and starts progress lines labelled `label` (`pgcompress-bench spill`).
///
/// Without the handler Ctrl-C would kill us and leave a daemonized server running. Children in our
/// process group (psql, pgbench) still die of the SIGINT, their failure unwinds to the caller, and
/// dropping the cluster (relays, namespaces) stops and deletes it. A handler that cannot be installed
/// (the system refused) leaves Ctrl-C's default, which is reported and otherwise ignored: the run itself
/// does not depend on it.
pub fn start(label: &'static str) -> Progress {
    match service::stop::install() {
        Ok(stop) => {
            let _ = STOP.set(stop);
        }
        Err(e) => eprintln!("{label}: {e}"),
    }
    Progress::labelled(label, interrupted)
}
