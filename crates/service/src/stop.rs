//! How a long-running command learns that it was asked to stop: SIGINT (Ctrl-C), SIGTERM (a
//! service manager, `kill`) and SIGHUP (the terminal went away).
//!
//! A process has one handler for these; [`install`] sets it up the first time it is called and
//! hands every caller the same [`Stop`] token afterwards. Blocking loops look at
//! [`Stop::is_stopped`] (or hand [`Stop::flag`] to a library that takes a flag) and sleep with
//! [`Stop::wait`], which ends early on a signal; tokio code awaits [`Stop::signalled`] (with
//! the `tokio` feature). Signals are counted, so a command can give the second one a
//! meaning of its own (the tunnel's halves end their drain at once).

use crate::ServiceError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, LazyLock, Mutex, OnceLock};
use std::time::Duration;

/// What the handler records, for every token of the process.
struct State {
    /// Raised by the first signal; shared with libraries that take an `Arc<AtomicBool>`.
    flag: Arc<AtomicBool>,
    /// Signals received so far, under the lock [`Stop::wait`] sleeps on.
    count: Mutex<u32>,
    woken: Condvar,
    /// The count again, for async waiters.
    #[cfg(feature = "tokio")]
    watch: tokio::sync::watch::Sender<u32>,
}

/// What the handler records; made before the handler exists, so that no signal is lost.
static STATE: LazyLock<State> = LazyLock::new(|| State {
    flag: Arc::new(AtomicBool::new(false)),
    count: Mutex::new(0),
    woken: Condvar::new(),
    #[cfg(feature = "tokio")]
    watch: tokio::sync::watch::Sender::new(0),
});

/// Whether the handler was installed, or why it could not be.
static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();

/// The process's stop request, shared by every part of a command. Cheap to copy.
#[derive(Clone, Copy)]
pub struct Stop {
    state: &'static State,
}

impl std::fmt::Debug for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stop")
            .field("signals", &self.signals())
            .finish()
    }
}

/// Installs the handler for SIGINT, SIGTERM and SIGHUP (once per process; later calls return
/// the same token) and returns the token it raises.
///
/// Fails when the handler cannot be installed, for example when code outside this module
/// already installed one through the same crate.
pub fn install() -> Result<Stop, ServiceError> {
    let state: &'static State = &STATE;
    // The handler runs on a thread of its own, not in signal context, so it may take locks.
    INSTALLED
        .get_or_init(|| ctrlc::set_handler(move || record(state)).map_err(|e| e.to_string()))
        .clone()
        .map_err(ServiceError::Signals)?;
    Ok(Stop { state })
}

/// Counts one signal and wakes every waiter.
fn record(state: &State) {
    let mut count = state.count.lock().unwrap_or_else(|e| e.into_inner());
    *count = count.saturating_add(1);
    state.flag.store(true, Ordering::SeqCst);
    #[cfg(feature = "tokio")]
    state.watch.send_replace(*count);
    state.woken.notify_all();
}

impl Stop {
    /// True once a signal came.
    pub fn is_stopped(&self) -> bool {
        self.state.flag.load(Ordering::SeqCst)
    }

    /// How many signals came so far.
    pub fn signals(&self) -> u32 {
        *self.state.count.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The flag a signal raises, for libraries that look at a flag between steps.
    pub fn flag(&self) -> &Arc<AtomicBool> {
        &self.state.flag
    }

    /// Sleeps until a signal came or `deadline` passed; true if stopped.
    pub fn wait(&self, deadline: Duration) -> bool {
        let count = self.state.count.lock().unwrap_or_else(|e| e.into_inner());
        let (count, _) = self
            .state
            .woken
            .wait_timeout_while(count, deadline, |n| *n == 0)
            .unwrap_or_else(|e| e.into_inner());
        *count > 0
    }

    /// Waits until `n` signals came in all (1: the first).
    #[cfg(feature = "tokio")]
    pub async fn signalled(&self, n: u32) {
        let mut rx = self.state.watch.subscribe();
        // The sender lives in a static, so the channel never closes.
        let _ = rx.wait_for(|count| *count >= n).await;
    }
}
