//! The ends of the waits before streaming: a deadline (`connect_timeout` for connecting and
//! logging in, a fixed bound for the commands that answer at once) and a stop flag that a
//! signal handler raises. A blocking read waits a short slice at a time and looks at both
//! between slices, so neither a silent server nor a signal leaves it waiting.

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use super::ConnError;

/// The longest a blocking read waits before it looks at the stop flag and the deadline again.
pub(crate) const SLICE: Duration = Duration::from_millis(100);

/// A stop flag and, for the exchange under way, a deadline.
#[derive(Debug, Clone, Default)]
pub(crate) struct Waits {
    stop: Option<Arc<AtomicBool>>,
    deadline: Option<Deadline>,
}

#[derive(Debug, Clone, Copy)]
struct Deadline {
    at: Instant,
    after: Duration,
    setting: Option<&'static str>,
}

impl Waits {
    /// No deadline; `stop` (when given) ends every wait once raised.
    pub(crate) fn new(stop: Option<Arc<AtomicBool>>) -> Waits {
        Waits {
            stop,
            deadline: None,
        }
    }

    /// The same stop flag, and a deadline `after` from now (none for `None`); `setting` names
    /// what the user can change to move it (`connect_timeout`).
    pub(crate) fn within(&self, after: Option<Duration>, setting: Option<&'static str>) -> Waits {
        Waits {
            stop: self.stop.clone(),
            deadline: after.map(|after| Deadline {
                at: Instant::now() + after,
                after,
                setting,
            }),
        }
    }

    /// Whether the stop flag is raised.
    pub(crate) fn stopped(&self) -> bool {
        self.stop.as_ref().is_some_and(|s| s.load(Ordering::SeqCst))
    }

    /// How long the next blocking call may wait for `what`; an error once the flag is raised
    /// or the deadline has passed.
    pub(crate) fn slice(&self, what: &str) -> Result<Duration, ConnError> {
        if self.stopped() {
            return Err(ConnError::Stopped(what.to_owned()));
        }
        let Some(d) = self.deadline else {
            return Ok(SLICE);
        };
        let left = d.at.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ConnError::Timeout {
                what: what.to_owned(),
                after: d.after,
                setting: d.setting,
            });
        }
        Ok(left.min(SLICE))
    }

    /// A TCP connection to `addr`, within the deadline and until the flag is raised. The
    /// standard library has no connect that can be interrupted: it runs on a thread of its
    /// own, which is left to finish alone (and drop what it got) when the wait ends first.
    pub(crate) fn connect(&self, addr: SocketAddr) -> Result<TcpStream, ConnError> {
        let what = format!("connecting to {addr}");
        let limit = self
            .deadline
            .map(|d| d.at.saturating_duration_since(Instant::now()));
        if limit.is_some_and(|l| l.is_zero()) {
            self.slice(&what)?;
        }
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("pg-connect".into())
            .spawn(move || {
                let r = match limit {
                    Some(l) => TcpStream::connect_timeout(&addr, l),
                    None => TcpStream::connect(addr),
                };
                let _ = tx.send(r);
            })
            .map_err(ConnError::io("starting the connect thread"))?;
        loop {
            let wait = self.slice(&what)?;
            match rx.recv_timeout(wait) {
                Ok(Ok(s)) => return Ok(s),
                Ok(Err(e)) => {
                    // The deadline passed inside connect(): say so as for any other wait. Without
                    // a deadline, the kernel's own timeout (SYNs unanswered) is an I/O error.
                    return Err(match self.deadline {
                        Some(d) if e.kind() == std::io::ErrorKind::TimedOut => ConnError::Timeout {
                            what,
                            after: d.after,
                            setting: d.setting,
                        },
                        _ => ConnError::io(what)(e),
                    });
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(ConnError::Protocol(format!(
                        "{what}: the connect thread died"
                    )))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raised_flag_or_a_passed_deadline_ends_the_wait() {
        let flag = Arc::new(AtomicBool::new(false));
        let w = Waits::new(Some(flag.clone()));
        assert_eq!(w.slice("x").unwrap(), SLICE);
        let soon = w.within(Some(Duration::from_millis(30)), Some("connect_timeout"));
        assert!(soon.slice("x").unwrap() <= Duration::from_millis(30));
        std::thread::sleep(Duration::from_millis(40));
        let e = soon.slice("reading").unwrap_err().to_string();
        assert!(
            e.contains("timeout") && e.contains("connect_timeout"),
            "{e}"
        );
        flag.store(true, Ordering::SeqCst);
        assert!(matches!(w.slice("x"), Err(ConnError::Stopped(_))));
    }
}
