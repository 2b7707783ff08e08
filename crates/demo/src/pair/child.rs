//! Starting a helper process (a tunnel half, socat, sshd, ssh) and waiting until it says it is ready.

use crate::error::{Error, Result};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// How long a process may take to say it listens.
pub const START_TIMEOUT: Duration = Duration::from_secs(20);

/// Starts `cmd` (`program`, for errors; `what`, the step) with standard error piped and waits until a
/// line containing `ready` appears. Returns the child and either the lines it printed until then or,
/// when it exited or timed out first, why; the caller stops the child then, as it knows how. Standard
/// error is drained afterwards so the process never blocks on a full pipe.
pub fn spawn_until(
    cmd: &mut Command,
    program: &str,
    what: &str,
    ready: &str,
) -> Result<(Child, std::result::Result<Vec<String>, String>)> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| Error::Spawn {
            what: what.into(),
            program: program.into(),
            source,
        })?;
    let stderr = child
        .stderr
        .take()
        .ok_or(Error::Internal("stderr not piped"))?;
    let (tx, rx) = mpsc::channel();
    let ready = ready.to_owned();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stderr).lines();
        let mut said = Vec::new();
        for line in lines.by_ref().map_while(std::result::Result::ok) {
            let done = line.contains(&ready);
            said.push(line);
            if done {
                let _ = tx.send(Ok(std::mem::take(&mut said)));
                break;
            }
        }
        let _ = tx.send(Err(said));
        // Drain the rest (per-connection lines, an exit summary) so the process never blocks.
        for _ in lines.map_while(std::result::Result::ok) {}
    });
    let ready = match rx.recv_timeout(START_TIMEOUT) {
        Ok(Ok(said)) => Ok(said),
        Ok(Err(said)) => Err(format!("exited before listening: {}", last_lines(&said))),
        Err(_) => Err(format!(
            "did not listen within {} s",
            START_TIMEOUT.as_secs()
        )),
    };
    Ok((child, ready))
}

/// The last few lines a process printed, for an error message.
fn last_lines(said: &[String]) -> String {
    let tail: Vec<&str> = said.iter().rev().take(3).rev().map(|s| s.trim()).collect();
    if tail.is_empty() {
        "no message".into()
    } else {
        tail.join(" / ")
    }
}
