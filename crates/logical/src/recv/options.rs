//! What a consumer is told: the slot, where the output goes, spill store and timers.

use std::path::PathBuf;
use std::time::Duration;

use codec::{Method, Spec};

use crate::Lsn;

/// Where committed transactions are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Standard output, flushed per transaction; nothing is kept across runs.
    Stdout,
    /// A file, appended and made durable, its state file beside it (exactly once across
    /// crashes, see [`crate::output::Sink`]).
    File(PathBuf),
}

/// What a consumer reads and how; [`RecvOptions::new`] gives the defaults of
/// `pgcompress logical recv`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RecvOptions {
    /// The logical replication slot (pgoutput).
    pub slot: String,
    /// Publications to receive.
    pub publications: Vec<String>,
    /// Create the slot first.
    pub create_slot: bool,
    /// With `create_slot`: an existing slot of that name is fine.
    pub if_not_exists: bool,
    /// Start position (the server starts at the later of this and the slot's confirmed LSN).
    /// With an output file that already holds changes, a position past what it holds is
    /// refused: the changes between would be missing.
    pub start: Option<Lsn>,
    /// Empty the output file and its state and begin a new stream, whatever they held: the
    /// one explicit way past the checks that a file continues only its own stream.
    pub start_over: bool,
    /// Where the output goes.
    pub output: Output,
    /// Directory of spill files; `None` for [`RecvOptions::default_spill_dir`].
    pub spill_dir: Option<PathBuf>,
    /// Compression of spill files.
    pub spill_compression: Spec,
    /// Bytes open transactions may hold in memory together before they spill.
    pub work_mem: usize,
    /// Time between fsyncs; zero fsyncs after every transaction.
    pub fsync_interval: Duration,
    /// Time between status updates to the server (at least 100 ms), besides the ones it asks
    /// for and the one after each fsync.
    pub status_interval: Duration,
    /// Also write a `B` line before and a `C` line after each transaction.
    pub begin_commit: bool,
    /// Stop once the server has sent WAL up to this LSN and no transaction is open.
    pub stop_at_lsn: Option<Lsn>,
    /// Stop after this long without data from the server.
    pub idle_exit: Option<Duration>,
    /// How often [`super::Recv::run`] reports [`super::Progress`]; `None` never.
    pub progress_interval: Option<Duration>,
    /// The pgoutput protocol version to ask for; `None` for the highest the server speaks
    /// (3 on PostgreSQL 15, 4 from 16). Version 1 has no streaming: the server holds large
    /// transactions and sends them at commit.
    pub proto_version: Option<u32>,
}

impl RecvOptions {
    /// Slot `slot`, `publications`, into `output`: lz4 spill files, 64 MiB of memory, an fsync
    /// per transaction, a status update every 10 s, no B/C lines, no stop condition.
    pub fn new(slot: impl Into<String>, publications: Vec<String>, output: Output) -> Self {
        RecvOptions {
            slot: slot.into(),
            publications,
            create_slot: false,
            if_not_exists: false,
            start: None,
            start_over: false,
            output,
            spill_dir: None,
            spill_compression: Spec::new(Method::Lz4),
            work_mem: crate::assemble::DEFAULT_WORK_MEM,
            fsync_interval: Duration::ZERO,
            status_interval: Duration::from_secs(10),
            begin_commit: false,
            stop_at_lsn: None,
            idle_exit: None,
            progress_interval: None,
            proto_version: None,
        }
    }

    /// The spill directory used when `spill_dir` is `None`, for the cluster whose system
    /// identifier is `system_id`: one per user and per stream, at a name no other account can
    /// take first. `FILE.spill` beside the output file (which continues one stream only); for
    /// standard output, `pgcompress/spill/<system_id>-<slot>` in the user's cache directory
    /// (`$XDG_CACHE_HOME`, else `~/.cache`, the home from `$HOME` or else the password
    /// database). `None` when there is no home to put it in.
    pub fn default_spill_dir(&self, system_id: &str) -> Option<PathBuf> {
        match &self.output {
            Output::Stdout => {
                // Digits and a slot name ([a-z0-9_]) as the server gives them; anything else
                // could not leave the directory either.
                let name: String = format!("{system_id}-{}", self.slot)
                    .chars()
                    .map(|c| {
                        if c.is_ascii_alphanumeric() || c == '-' {
                            c
                        } else {
                            '_'
                        }
                    })
                    .collect();
                Some(cache_dir()?.join("pgcompress").join("spill").join(name))
            }
            Output::File(p) => {
                let mut s = p.clone().into_os_string();
                s.push(".spill");
                Some(PathBuf::from(s))
            }
        }
    }
}

/// The user's cache directory: `$XDG_CACHE_HOME` when it is an absolute path, else `.cache` in
/// the home directory (`$HOME`, else the password database's entry for the effective user).
fn cache_dir() -> Option<PathBuf> {
    let absolute = |v: Option<std::ffi::OsString>| v.map(PathBuf::from).filter(|p| p.is_absolute());
    if let Some(p) = absolute(std::env::var_os("XDG_CACHE_HOME")) {
        return Some(p);
    }
    let home = absolute(std::env::var_os("HOME")).or_else(|| {
        nix::unistd::User::from_uid(nix::unistd::geteuid())
            .ok()
            .flatten()
            .map(|u| u.dir)
            .filter(|p| p.is_absolute())
    })?;
    Some(home.join(".cache"))
}
