//! What a consumer tells: progress while it runs, why it stopped, and what it did.

#[cfg(doc)]
use super::{Recv, RecvOptions};
use crate::Lsn;

/// Why [`Recv::run`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StopReason {
    /// The stop flag was raised (SIGINT, SIGTERM).
    Signal,
    /// The server ended the COPY stream.
    ServerEnded,
    /// The server sent WAL up to [`RecvOptions::stop_at_lsn`] and no transaction was open.
    StopAtLsn,
    /// [`RecvOptions::idle_exit`] passed without data.
    Idle,
}

impl StopReason {
    /// The reason in words, as `--json`'s summary gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Signal => "signal",
            StopReason::ServerEnded => "server ended the stream",
            StopReason::StopAtLsn => "reached --stop-at-lsn",
            StopReason::Idle => "idle for --idle-exit",
        }
    }
}

/// Where the consumer stands, as [`Recv::run`] reports it every
/// [`RecvOptions::progress_interval`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Progress {
    /// The flush LSN last confirmed to the server.
    pub confirmed: Lsn,
    /// The highest position the server has sent.
    pub received: Lsn,
    /// Transactions written.
    pub transactions: u64,
    /// Transactions skipped as already written by an earlier run.
    pub skipped_transactions: u64,
    /// Lines of changes written.
    pub changes: u64,
    /// Durable bytes of the output (0 on standard output).
    pub output_bytes: u64,
    /// Payload bytes of every stored message received.
    pub received_bytes: u64,
    /// Transactions open now.
    pub open_transactions: u64,
    /// Bytes of changes held in memory by open transactions now (at most about
    /// [`RecvOptions::work_mem`]).
    pub memory_bytes: u64,
    /// Transactions that have had a spill file.
    pub spilled_transactions: u64,
    /// Raw change bytes written to spill files.
    pub spill_raw_bytes: u64,
    /// Bytes written to spill files.
    pub spill_disk_bytes: u64,
    /// Spill files existing now.
    pub spill_files: u64,
    /// Bytes in spill files now.
    pub spill_file_bytes: u64,
}

/// What a run did, from [`Recv::finish`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Summary {
    /// Why the run ended.
    pub reason: StopReason,
    /// Transactions written.
    pub transactions: u64,
    /// Transactions skipped as already written by an earlier run.
    pub skipped_transactions: u64,
    /// Lines of changes written.
    pub changes: u64,
    /// Durable bytes of the output (0 on standard output).
    pub output_bytes: u64,
    /// Commit LSN of the last durable transaction.
    pub last_commit_lsn: Lsn,
    /// The flush LSN last confirmed to the server.
    pub flushed_lsn: Lsn,
    /// Payload bytes of every stored message received.
    pub received_bytes: u64,
    /// Transactions that had a spill file.
    pub spilled_transactions: u64,
    /// Raw change bytes written to spill files.
    pub spill_raw_bytes: u64,
    /// Bytes written to spill files.
    pub spill_disk_bytes: u64,
    /// Seconds since the start.
    pub seconds: f64,
}
