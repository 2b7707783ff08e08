//! The peers `bench tunnel` measures the tunnel against, each a pair of processes between the client
//! namespace and PostgreSQL: a plain TCP relay pair (`socat`, the floor of any two-hop proxy) and an
//! `ssh -C` port forward through an sshd of its own (what DBAs use today to compress PostgreSQL traffic).
//!
//! Each side is started through a caller-given wrapper that turns a program into a [`Command`] (e.g.
//! `ip netns exec NS <program>`), so nothing here knows how the namespaces are made; in tests the wrapper is
//! plain [`Command::new`]. Dropping a relay stops its whole process tree (forked socat children, sshd's
//! per-connection processes) leaves first, so every process is reaped by its own parent.
//!
//! The CPU time of each relay's process tree is [`crate::sys::tree_cpu_seconds`]'s.

use super::child::spawn_until;
use crate::error::{Error, Result};
use crate::sys::{alive, descendants, present, signal};
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

mod socat;
mod ssh;

pub use socat::SocatPair;
pub use ssh::SshForward;

/// How long a process may take to exit after SIGTERM before it gets SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// Where PostgreSQL listens, as seen from the server namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PgTarget {
    /// A TCP address.
    Tcp(SocketAddr),
    /// A Unix socket directory and the port that names the socket file (`.s.PGSQL.<port>`).
    Unix {
        /// The socket directory.
        dir: PathBuf,
        /// The server's port.
        port: u16,
    },
}

impl PgTarget {
    /// The socket file of a Unix target.
    fn socket_path(dir: &Path, port: u16) -> PathBuf {
        dir.join(format!(".s.PGSQL.{port}"))
    }

    /// socat's address for connecting to PostgreSQL.
    fn socat_address(&self) -> OsString {
        match self {
            PgTarget::Tcp(SocketAddr::V4(a)) => {
                format!("TCP4:{}:{},nodelay", a.ip(), a.port()).into()
            }
            PgTarget::Tcp(SocketAddr::V6(a)) => {
                format!("TCP6:[{}]:{},nodelay", a.ip(), a.port()).into()
            }
            PgTarget::Unix { dir, port } => {
                let mut s = OsString::from("UNIX-CONNECT:");
                s.push(Self::socket_path(dir, *port));
                s
            }
        }
    }

    /// The remote end of an `ssh -L` forward.
    fn ssh_forward_target(&self) -> OsString {
        match self {
            PgTarget::Tcp(SocketAddr::V4(a)) => format!("{}:{}", a.ip(), a.port()).into(),
            PgTarget::Tcp(SocketAddr::V6(a)) => format!("[{}]:{}", a.ip(), a.port()).into(),
            PgTarget::Unix { dir, port } => Self::socket_path(dir, *port).into_os_string(),
        }
    }
}

/// A program started through a wrapper, with a label for CPU figures and error messages.
struct Proc {
    label: &'static str,
    child: Child,
}

impl Proc {
    /// Starts `cmd` with standard error piped and waits until a line containing `ready` appears; returns
    /// the process and the lines it printed until then. Standard error is drained afterwards so the
    /// process never blocks on a full pipe.
    fn start(
        label: &'static str,
        program: &str,
        cmd: &mut Command,
        ready: &str,
    ) -> Result<(Proc, Vec<String>)> {
        let (child, ready) = spawn_until(cmd, program, &format!("starting the {label}"), ready)?;
        let mut p = Proc { label, child };
        match ready {
            Ok(said) => Ok((p, said)),
            Err(reason) => {
                p.stop();
                Err(Error::Tunnel {
                    what: format!("the {label}"),
                    reason,
                })
            }
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stops the process and everything it started: descendants first (deepest first), so their parents
    /// reap them, then the process itself, which is reaped here. SIGTERM, then SIGKILL after a grace time.
    fn stop(&mut self) {
        let pid = self.pid();
        if matches!(self.child.try_wait(), Ok(None)) {
            let tree = descendants(pid);
            for &d in &tree {
                signal(d, nix::sys::signal::Signal::SIGTERM);
            }
            let deadline = Instant::now() + STOP_GRACE;
            while tree.iter().any(|&d| alive(d)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            for &d in &tree {
                if alive(d) {
                    signal(d, nix::sys::signal::Signal::SIGKILL);
                }
            }
            // Give the parent a moment to reap what was just killed.
            let deadline = Instant::now() + Duration::from_millis(500);
            while tree.iter().any(|&d| present(d)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            signal(pid, nix::sys::signal::Signal::SIGTERM);
            let deadline = Instant::now() + STOP_GRACE;
            while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Fails with [`Error::MissingPrograms`] when `program` is not installed.
fn require(program: &str, package: &str) -> Result<()> {
    let found = if program.starts_with('/') {
        Path::new(program).is_file()
    } else {
        pgtest::which(program).is_some()
    };
    if found {
        Ok(())
    } else {
        Err(Error::MissingPrograms {
            command: "bench tunnel",
            programs: vec![program.into()],
            packages: vec![package.into()],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_as_socat_and_ssh_spell_them() {
        let t = PgTarget::Tcp("127.0.0.1:5432".parse().expect("addr"));
        assert_eq!(t.socat_address(), "TCP4:127.0.0.1:5432,nodelay");
        assert_eq!(t.ssh_forward_target(), "127.0.0.1:5432");
        let t = PgTarget::Tcp("[::1]:5433".parse().expect("addr"));
        assert_eq!(t.socat_address(), "TCP6:[::1]:5433,nodelay");
        assert_eq!(t.ssh_forward_target(), "[::1]:5433");
        let t = PgTarget::Unix {
            dir: "/tmp/pg sock".into(),
            port: 5434,
        };
        assert_eq!(t.socat_address(), "UNIX-CONNECT:/tmp/pg sock/.s.PGSQL.5434");
        assert_eq!(t.ssh_forward_target(), "/tmp/pg sock/.s.PGSQL.5434");
    }
}
