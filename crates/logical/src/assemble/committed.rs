//! A committed transaction, handed out by the assembler and replayed from its spill file and
//! in-memory tail.

use std::fs::File;
use std::io::BufReader;

use super::stats::TxnStats;
use crate::spill::writer::FileGuard;
use crate::spill::{change_at, SpillReader};
use crate::{AssembleError, DecodeError, Decoder, Lsn, Message};

/// Where the replay of the spill file stands.
enum Disk {
    /// Not opened yet.
    Unread(FileGuard),
    /// Being read.
    Reading(FileGuard, Box<SpillReader<BufReader<File>>>),
    /// Read to its end (the file stays until the transaction is dropped).
    Done(FileGuard),
    /// Stopped at a bad record at this offset: the replay cannot go on.
    Failed(FileGuard, u64),
    /// The transaction never spilled.
    None,
}

/// A transaction whose commit arrived: its stored messages, in WAL order, ready to replay.
/// Dropping it deletes its spill file.
pub struct CommittedTxn {
    /// Top-level transaction id.
    pub xid: u32,
    /// LSN of the commit record.
    pub commit_lsn: Lsn,
    /// End LSN of the transaction: what to confirm as flushed once the output is durable.
    pub end_lsn: Lsn,
    /// Commit time, µs since 2000-01-01.
    pub commit_time: i64,
    /// True when it came as a streamed transaction (Stream Start … Stream Commit).
    pub streamed: bool,
    /// Its byte counters.
    pub stats: TxnStats,
    disk: Disk,
    tail: Vec<u8>,
    tail_pos: usize,
    delivered: u64,
}

impl std::fmt::Debug for CommittedTxn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommittedTxn")
            .field("xid", &self.xid)
            .field("commit_lsn", &self.commit_lsn)
            .field("end_lsn", &self.end_lsn)
            .field("streamed", &self.streamed)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// The fields of a commit message that a [`CommittedTxn`] keeps.
pub(crate) struct CommitInfo {
    pub xid: u32,
    pub commit_lsn: Lsn,
    pub end_lsn: Lsn,
    pub commit_time: i64,
    pub streamed: bool,
}

impl CommittedTxn {
    pub(crate) fn new(
        info: CommitInfo,
        stats: TxnStats,
        file: Option<FileGuard>,
        tail: Vec<u8>,
    ) -> CommittedTxn {
        CommittedTxn {
            xid: info.xid,
            commit_lsn: info.commit_lsn,
            end_lsn: info.end_lsn,
            commit_time: info.commit_time,
            streamed: info.streamed,
            stats,
            disk: file.map_or(Disk::None, Disk::Unread),
            tail,
            tail_pos: 0,
            delivered: 0,
        }
    }

    /// The next stored message of the transaction, in WAL order (Relation, Type, DML,
    /// Truncate, Message, Origin), as received; false at the end. Reads the spill file back
    /// record by record (bounded memory), verifying each record's checksum: a bad record is
    /// [`AssembleError::Corrupt`] with the file and offset.
    pub fn next_payload(&mut self, buf: &mut Vec<u8>) -> Result<bool, AssembleError> {
        loop {
            match std::mem::replace(&mut self.disk, Disk::None) {
                Disk::Unread(guard) => {
                    let path = guard.path().to_path_buf();
                    let opened = guard
                        .reopen()
                        .map_err(AssembleError::io(&path))
                        .and_then(|f| {
                            SpillReader::new(BufReader::with_capacity(64 * 1024, f), path)
                        });
                    match opened {
                        Ok(reader) => self.disk = Disk::Reading(guard, Box::new(reader)),
                        Err(e) => {
                            self.disk = Disk::Failed(guard, 0);
                            return Err(e);
                        }
                    }
                }
                Disk::Reading(guard, mut reader) => {
                    let more = reader.next_change(buf);
                    match more {
                        Ok(true) => {
                            self.disk = Disk::Reading(guard, reader);
                            self.delivered += 1;
                            return Ok(true);
                        }
                        Ok(false) => {
                            if reader.offset() != guard.len() {
                                return Err(AssembleError::Corrupt {
                                    path: guard.path().to_path_buf(),
                                    offset: reader.offset(),
                                    reason: format!(
                                        "file ends at {} bytes; {} were written",
                                        reader.offset(),
                                        guard.len()
                                    ),
                                });
                            }
                            self.disk = Disk::Done(guard);
                        }
                        Err(e) => {
                            let at = match &e {
                                AssembleError::Corrupt { offset, .. } => *offset,
                                _ => reader.offset(),
                            };
                            self.disk = Disk::Failed(guard, at);
                            return Err(e);
                        }
                    }
                }
                Disk::Failed(guard, at) => {
                    let e = AssembleError::Corrupt {
                        path: guard.path().to_path_buf(),
                        offset: at,
                        reason: "the replay already stopped here after an error".into(),
                    };
                    self.disk = Disk::Failed(guard, at);
                    return Err(e);
                }
                other => {
                    self.disk = other;
                    break;
                }
            }
        }
        // The tail never left this process, but it is read with the same checked framing.
        match change_at(&self.tail, self.tail_pos) {
            Ok(Some(r)) => {
                buf.clear();
                buf.extend_from_slice(&self.tail[r.clone()]);
                self.tail_pos = r.end;
                self.delivered += 1;
                Ok(true)
            }
            Ok(None) | Err(()) => {
                self.tail_pos = self.tail.len();
                if self.delivered != self.stats.changes {
                    return Err(self.count_mismatch());
                }
                Ok(false)
            }
        }
    }

    fn count_mismatch(&self) -> AssembleError {
        let (path, offset) = match &self.disk {
            Disk::Done(g) | Disk::Unread(g) | Disk::Reading(g, _) | Disk::Failed(g, _) => {
                (g.path().to_path_buf(), g.len())
            }
            Disk::None => (std::path::PathBuf::from("(memory)"), 0),
        };
        AssembleError::Corrupt {
            path,
            offset,
            reason: format!(
                "{} changes read back, {} were stored",
                self.delivered, self.stats.changes
            ),
        }
    }

    /// Decodes a payload returned by [`CommittedTxn::next_payload`] (streamed payloads carry
    /// the xid after the tag, which `decoder` is told about here).
    pub fn decode<'a>(
        &self,
        decoder: &mut Decoder,
        payload: &'a [u8],
    ) -> Result<Message<'a>, DecodeError> {
        decoder.decode_stored(payload, self.streamed.then_some(self.xid))
    }
}
