//! Running PostgreSQL programs: the root → `postgres` user switch, timeouts, and errors that say what ran.
//!
//! PostgreSQL's `initdb`, `postgres` and `pg_ctl` refuse to run as root (`src/backend/main/main.c`,
//! `check_root`). Tests on CI machines often do run as root, so [`run`] drops to the `postgres` system user when
//! the effective uid is 0 and runs the program as the current user otherwise.

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output, Stdio};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// How long [`run`] lets a program run before killing it. Generous: the longest users are pgbench workloads.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// The system user PostgreSQL programs run as when the harness itself runs as root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerUser {
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
    /// Home directory, used as `HOME` for the programs.
    pub home: PathBuf,
}

/// Returns the user to switch to: `Some(postgres)` when running as root, `None` when running as anyone else.
///
/// The answer is computed once per process.
pub fn server_user() -> Result<Option<&'static ServerUser>> {
    static USER: OnceLock<Result<Option<ServerUser>, ()>> = OnceLock::new();
    let found = USER.get_or_init(|| {
        if !nix::unistd::geteuid().is_root() {
            return Ok(None);
        }
        match nix::unistd::User::from_name("postgres") {
            Ok(Some(u)) => Ok(Some(ServerUser {
                uid: u.uid.as_raw(),
                gid: u.gid.as_raw(),
                home: u.dir,
            })),
            _ => Err(()),
        }
    });
    match found {
        Ok(user) => Ok(user.as_ref()),
        Err(()) => Err(Error::NoServerUser),
    }
}

/// Makes `cmd` run as the server user when we are root; leaves it alone otherwise.
///
/// Sets uid, gid and `HOME` (the standard library drops supplementary groups when it changes uid as root).
/// A command already wrapped to switch users by itself (`Cluster::command` in a network namespace) is left alone.
pub fn as_server_user(cmd: &mut Command) -> Result<&mut Command> {
    let switched = cmd
        .get_envs()
        .any(|(k, v)| k == SWITCHED_ENV && v.is_some_and(|v| v == "1"));
    if switched {
        return Ok(cmd);
    }
    if let Some(user) = server_user()? {
        cmd.uid(user.uid).gid(user.gid).env("HOME", &user.home);
        cmd.env("USER", "postgres").env("LOGNAME", "postgres");
    }
    Ok(cmd)
}

/// Set on a command whose program switches to the server user itself (`ip netns exec NS setpriv ...`):
/// `ip` must start as root, so [`as_server_user`] must not change the uid of the command.
const SWITCHED_ENV: &str = "HARNESS_PGTEST_SWITCHED_USER";

/// Marks `cmd` as switching to `user` by itself and gives it that user's environment (`HOME`, `USER`,
/// `LOGNAME`); [`as_server_user`] then leaves it alone.
pub(crate) fn mark_switched(cmd: &mut Command, user: &ServerUser) {
    cmd.env(SWITCHED_ENV, "1")
        .env("HOME", &user.home)
        .env("USER", "postgres")
        .env("LOGNAME", "postgres");
}

/// Hands `path` to the server user when we are root, so PostgreSQL can write into it. No-op otherwise.
pub fn chown_to_server_user(path: &Path) -> Result<()> {
    if let Some(user) = server_user()? {
        std::os::unix::fs::chown(path, Some(user.uid), Some(user.gid))
            .map_err(Error::io(format!("chown {} to postgres", path.display())))?;
    }
    Ok(())
}

/// Runs a PostgreSQL program as the server user (see [`as_server_user`]) with [`DEFAULT_TIMEOUT`].
///
/// Fails with [`Error::Command`] on a non-zero exit, carrying the command line, status and stderr.
pub fn run(cmd: &mut Command) -> Result<Output> {
    run_with(cmd, None, DEFAULT_TIMEOUT)
}

/// Like [`run`], feeding `stdin` to the program and killing it after `timeout`.
pub fn run_with(cmd: &mut Command, stdin: Option<&[u8]>, timeout: Duration) -> Result<Output> {
    as_server_user(cmd)?;
    run_as_current_user(cmd, stdin, timeout)
}

/// Runs `cmd` without any user switch, with a timeout; for programs that are not PostgreSQL servers or clients.
pub fn run_as_current_user(
    cmd: &mut Command,
    stdin: Option<&[u8]>,
    timeout: Duration,
) -> Result<Output> {
    let command = command_line(cmd);
    let output = spawn_and_wait(cmd, stdin, timeout, &command)?;
    if output.status.success() {
        Ok(output)
    } else {
        Err(Error::Command {
            command,
            status: describe(output.status),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
            stdout: String::from_utf8_lossy(&output.stdout).trim().to_owned(),
        })
    }
}

fn spawn_and_wait(
    cmd: &mut Command,
    stdin: Option<&[u8]>,
    timeout: Duration,
    command: &str,
) -> Result<Output> {
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|source| Error::Spawn {
        command: command.to_owned(),
        source,
    })?;
    // Readers and the writer run on their own threads so a chatty program cannot deadlock on a full pipe.
    let writer = match (stdin, child.stdin.take()) {
        (Some(bytes), Some(mut pipe)) => {
            let bytes = bytes.to_vec();
            // A program that exits early closes the pipe; its exit status tells the story, not EPIPE.
            Some(thread::spawn(move || drop(pipe.write_all(&bytes))))
        }
        _ => None,
    };
    let out = reader(child.stdout.take());
    let err = reader(child.stderr.take());
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(Error::io(format!("waiting for `{command}`"))(e)),
        }
    };
    if let Some(w) = writer {
        let _ = w.join();
    }
    // A program that left a daemon holding our pipes would block these joins; pg_ctl redirects the postmaster's
    // output to its log file, so in practice the pipes close when the program exits.
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    match status {
        Some(status) => Ok(Output {
            status,
            stdout,
            stderr,
        }),
        None => Err(Error::Timeout {
            command: command.to_owned(),
            after: timeout,
            stderr: String::from_utf8_lossy(&stderr).trim().to_owned(),
        }),
    }
}

fn reader<R: Read + Send + 'static>(pipe: Option<R>) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut buf);
        }
        buf
    })
}

fn describe(status: ExitStatus) -> String {
    status.to_string()
}

/// Renders a command for error messages: program and arguments, shell-quoted where needed.
pub fn command_line(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(quote)
        .collect::<Vec<_>>()
        .join(" ")
}

fn quote(arg: &OsStr) -> String {
    let s = arg.to_string_lossy();
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c));
    if plain {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_only_when_needed() {
        let mut cmd = Command::new("psql");
        cmd.args(["-c", "SELECT 'a'", "-p", "5432"]);
        assert_eq!(command_line(&cmd), r"psql -c 'SELECT '\''a'\''' -p 5432");
    }

    #[test]
    fn failure_carries_status_and_stderr() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo oops >&2; exit 3"]);
        let err =
            run_as_current_user(&mut cmd, None, Duration::from_secs(10)).expect_err("should fail");
        let msg = err.to_string();
        assert!(msg.contains("oops") && msg.contains("3"), "{msg}");
    }

    #[test]
    fn timeout_kills_the_program() {
        // Left alone, `sleep 30` would end with status 0: only the deadline makes this an error.
        let mut cmd = Command::new("sleep");
        cmd.arg("30");
        let err = run_as_current_user(&mut cmd, None, Duration::from_millis(200))
            .expect_err("should fail");
        assert!(matches!(err, Error::Timeout { .. }), "{err}");
    }

    #[test]
    fn stdin_is_fed() {
        let mut cmd = Command::new("cat");
        let out = run_as_current_user(&mut cmd, Some(b"hello"), Duration::from_secs(10))
            .expect("cat runs");
        assert_eq!(out.stdout, b"hello");
    }
}
