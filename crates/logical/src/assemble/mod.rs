//! The transaction assembler: pgoutput messages in, committed transactions out, in commit
//! order, whether they came whole (Begin … Commit) or streamed in blocks while in progress
//! (Stream Start … Stop, many times, then Stream Commit or Abort).
//!
//! It does what PostgreSQL's apply worker does with a streamed transaction (`worker.c`:
//! `stream_open_file`, `subxact_info_add`, `stream_abort_internal`), with the reorderbuffer's
//! memory rule (`ReorderBufferCheckMemoryLimit`): open transactions are held in memory up to
//! `work_mem` together; past it, the largest one's changes go to its spill file
//! ([`crate::spill`]), compressed. A subtransaction abort cuts the memory tail or the file back
//! to where that subtransaction began; a top-level abort deletes the file; a Stream Start with
//! `first_segment` for an xid already held (the server decoding again after a reconnect)
//! starts it over.
//!
//! Sans-IO apart from the spill files: the caller moves bytes from the connection and decides
//! when to confirm.

mod committed;
pub(crate) mod error;
pub(crate) mod stats;
mod txn;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use codec::{Method, Spec};

pub use committed::CommittedTxn;
pub use error::{AssembleError, Violation};
pub use stats::{SpillStats, TxnStats};

use crate::decoder::{Decoder, Message, Options};
use crate::spill::counters::Counters;
use crate::spill::dir::DirLock;
use crate::Lsn;
use committed::CommitInfo;
use txn::{FileSpec, Txn};

/// Default memory for open transactions: 64 MiB, PostgreSQL's `logical_decoding_work_mem`.
pub const DEFAULT_WORK_MEM: usize = 64 << 20;

/// Open stream frames kept at once: past this, the transaction that spilled least recently
/// ends its frame and frees its encoder (a zstd stream context is megabytes); its next record
/// starts a new frame.
pub const MAX_LIVE_FRAMES: usize = 8;

pub use crate::spill::{FILE_PREFIX, FILE_SUFFIX};

/// How the assembler holds open transactions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssemblerConfig {
    /// Bytes of changes all open transactions may hold in memory together.
    pub work_mem: usize,
    /// Directory of the spill files: created 0700 if missing; one that exists must be a
    /// directory of the effective user closed to group and others, below directories nobody
    /// else may change (see [`crate::spill`]). One assembler per directory, which it locks: it
    /// removes the spill files it finds there when it starts.
    pub spill_dir: PathBuf,
    /// Compression of spill files: `lz4` (default), `zstd[:N]`, `pglz` or `none`.
    pub spec: Spec,
}

impl AssemblerConfig {
    /// The defaults (64 MiB, lz4) with spill files in `spill_dir`.
    pub fn new(spill_dir: impl Into<PathBuf>) -> AssemblerConfig {
        AssemblerConfig {
            work_mem: DEFAULT_WORK_MEM,
            spill_dir: spill_dir.into(),
            spec: Spec {
                method: Method::Lz4,
                level: None,
                long: None,
                workers: None,
            },
        }
    }
}

/// Whether spill files can be written with `spec` (method and level), without touching
/// anything: a consumer checks it before it connects.
pub fn check_spill_spec(spec: &Spec) -> Result<(), AssembleError> {
    if let Some(reason) = crate::spill::unsupported_reason(spec) {
        return Err(AssembleError::Spec {
            spec: spec.to_string(),
            reason: reason.into(),
        });
    }
    // Refuse a bad level now rather than at the first spill.
    codec::BlockCompressor::new(spec).map_err(|e| AssembleError::Spec {
        spec: spec.to_string(),
        reason: e.to_string(),
    })?;
    Ok(())
}

/// What became ready after a message.
#[derive(Debug)]
pub enum Ready {
    /// A transaction committed (Commit or Stream Commit); consume it before the next push.
    Txn(CommittedTxn),
    /// A non-transactional logical message (`M` with flags 0), the payload as received.
    NonTransactional(Vec<u8>),
}

/// Assembles the transactions of one replication session.
///
/// ```
/// use logical::{Assembler, AssemblerConfig, Decoder, Lsn, Message, Options, Ready, Streaming};
/// let dir = tempfile::tempdir().unwrap();
/// let options = Options { proto_version: 2, streaming: Streaming::On };
/// let mut a = Assembler::open(AssemblerConfig::new(dir.path().join("spill")), options).unwrap();
/// // Stream Start (xid 7, first segment), Truncate of relation 16384 by subxid 7, Stream Stop.
/// a.push(Lsn(0x100), &[b'S', 0, 0, 0, 7, 1]).unwrap();
/// a.push(Lsn(0x108), &[b'T', 0, 0, 0, 7, 0, 0, 0, 1, 0, 0, 0, 0x40, 0]).unwrap();
/// a.push(Lsn(0x110), &[b'E']).unwrap();
/// // Stream Commit of xid 7: the transaction comes back, its changes replayed in order.
/// let mut commit = vec![b'c', 0, 0, 0, 7, 0];
/// commit.extend(0x200u64.to_be_bytes()); // commit LSN
/// commit.extend(0x208u64.to_be_bytes()); // end LSN
/// commit.extend(0i64.to_be_bytes()); // commit time
/// let Some(Ready::Txn(mut txn)) = a.push(Lsn(0x200), &commit).unwrap() else { panic!() };
/// let mut dec = Decoder::new(options).unwrap();
/// let mut buf = Vec::new();
/// assert!(txn.next_payload(&mut buf).unwrap());
/// assert!(matches!(txn.decode(&mut dec, &buf), Ok(Message::Truncate(t)) if t.relids == [0x4000]));
/// assert!(!txn.next_payload(&mut buf).unwrap());
/// ```
pub struct Assembler {
    config: AssemblerConfig,
    decoder: Decoder,
    txns: HashMap<u32, Txn>,
    /// The non-streamed transaction being received (between Begin and Commit).
    current: Option<u32>,
    memory: usize,
    received: u64,
    counters: Arc<Counters>,
    /// The spill directory as checked (links above it resolved).
    dir: PathBuf,
    _lock: DirLock,
    next_file: u64,
    spills: u64,
}

impl std::fmt::Debug for Assembler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Assembler")
            .field("config", &self.config)
            .field("open", &self.txns.len())
            .field("memory", &self.memory)
            .finish_non_exhaustive()
    }
}

impl Assembler {
    /// Opens the spill store and returns an assembler for a session negotiated with `options`:
    /// the one step with effects on the file system. Creates `spill_dir` (0700) if needed,
    /// refuses it unless it is private to this account ([`AssembleError::UnsafeDir`]) or when
    /// another assembler holds it ([`AssembleError::DirInUse`]), and removes leftover spill
    /// files of this store there (its own file names only). The spec and the options are
    /// checked first, so a refused one touches nothing.
    pub fn open(config: AssemblerConfig, options: Options) -> Result<Self, AssembleError> {
        check_spill_spec(&config.spec)?;
        let decoder = Decoder::new(options)?;
        let (dir, lock) = crate::spill::dir::open_store(&config.spill_dir)?;
        Ok(Assembler {
            config,
            decoder,
            txns: HashMap::new(),
            current: None,
            memory: 0,
            received: 0,
            counters: Arc::new(Counters::default()),
            dir,
            _lock: lock,
            next_file: 0,
            spills: 0,
        })
    }

    /// The decoder state of the session (negotiated options, open streamed block).
    pub fn decoder(&self) -> &Decoder {
        &self.decoder
    }

    /// Totals: raw and on-disk bytes, memory, open and spilled transactions, files.
    pub fn stats(&self) -> SpillStats {
        SpillStats {
            received_bytes: self.received,
            raw_bytes: Counters::get(&self.counters.raw_bytes),
            disk_written_bytes: Counters::get(&self.counters.disk_written_bytes),
            disk_bytes: Counters::get(&self.counters.disk_bytes),
            memory_bytes: self.memory as u64,
            open_txns: self.txns.len() as u64,
            spilled_txns: Counters::get(&self.counters.spilled_txns),
            files: Counters::get(&self.counters.files),
        }
    }

    /// One pgoutput payload (the data of an XLogData) and the XLogData's WAL start LSN.
    /// Returns what became ready.
    pub fn push(&mut self, wal_start: Lsn, payload: &[u8]) -> Result<Option<Ready>, AssembleError> {
        let block = self.decoder.stream_xid();
        let msg = self
            .decoder
            .decode(payload)
            .map_err(|e| e.with_lsn(wal_start))?;
        let violation = |violation| AssembleError::Protocol {
            lsn: wal_start,
            violation,
        };
        match msg {
            Message::Begin(b) => {
                if let Some(open) = self.current.or(block) {
                    return Err(violation(Violation::BeginInsideTransaction { open }));
                }
                // A streamed transaction of that xid from before a reconnect is stale.
                self.drop_txn(b.xid);
                self.txns.insert(b.xid, Txn::new(b.xid));
                self.current = Some(b.xid);
                Ok(None)
            }
            Message::Commit(c) => {
                let xid = self
                    .current
                    .take()
                    .ok_or(violation(Violation::CommitWithoutBegin))?;
                let info = CommitInfo {
                    xid,
                    commit_lsn: c.commit_lsn,
                    end_lsn: c.end_lsn,
                    commit_time: c.commit_time,
                    streamed: false,
                };
                Ok(Some(Ready::Txn(self.commit(info))))
            }
            Message::StreamStart(s) => {
                if let Some(open) = self.current {
                    return Err(violation(Violation::StreamInsideTransaction { open }));
                }
                if s.first_segment {
                    self.drop_txn(s.xid);
                    self.txns.insert(s.xid, Txn::new(s.xid));
                } else if !self.txns.contains_key(&s.xid) {
                    return Err(violation(Violation::UnknownStream { xid: s.xid }));
                }
                Ok(None)
            }
            Message::StreamStop => Ok(None),
            Message::StreamCommit(c) => {
                if let Some(open) = self.current {
                    return Err(violation(Violation::StreamInsideTransaction { open }));
                }
                if let Some(open) = block {
                    return Err(violation(Violation::EndInsideBlock { open }));
                }
                let info = CommitInfo {
                    xid: c.xid,
                    commit_lsn: c.commit_lsn,
                    end_lsn: c.end_lsn,
                    commit_time: c.commit_time,
                    streamed: true,
                };
                Ok(Some(Ready::Txn(self.commit(info))))
            }
            Message::StreamAbort(a) => {
                if let Some(open) = self.current {
                    return Err(violation(Violation::StreamInsideTransaction { open }));
                }
                if let Some(open) = block {
                    return Err(violation(Violation::EndInsideBlock { open }));
                }
                // An abort for an xid not held is tolerated (PostgreSQL 18 before aa4c52b808
                // could send one for a transaction it never streamed).
                if a.is_top_level() {
                    self.drop_txn(a.xid);
                } else if let Some(t) = self.txns.get_mut(&a.xid) {
                    let before = t.tail.len();
                    let r = t.abort_sub(a.subxid);
                    self.memory = self.memory - before + t.tail.len();
                    r?;
                }
                Ok(None)
            }
            Message::Message(m) if !m.is_transactional() => {
                Ok(Some(Ready::NonTransactional(payload.to_vec())))
            }
            Message::Origin(_)
            | Message::Relation(_)
            | Message::Type(_)
            | Message::Insert(_)
            | Message::Update(_)
            | Message::Delete(_)
            | Message::Truncate(_)
            | Message::Message(_) => {
                let subxid = msg.stream_xid();
                let Some(xid) = block.or(self.current) else {
                    return Err(violation(Violation::OutsideTransaction { tag: payload[0] }));
                };
                self.store(xid, subxid, payload)?;
                Ok(None)
            }
            _ => Err(violation(Violation::TwoPhase { tag: payload[0] })),
        }
    }

    /// Files one message under `xid`, then keeps memory within `work_mem`.
    fn store(
        &mut self,
        xid: u32,
        subxid: Option<u32>,
        payload: &[u8],
    ) -> Result<(), AssembleError> {
        let t = self
            .txns
            .entry(xid)
            // Begin and Stream Start made the entry; never reached otherwise.
            .or_insert_with(|| Txn::new(xid));
        let before = t.tail.len();
        t.push(subxid, payload);
        self.memory = self.memory - before + t.tail.len();
        self.received += payload.len() as u64;
        // A transaction that is already on disk writes its changes out in whole records
        // instead of holding them: memory stays small and records stay large.
        if t.file.is_some() && t.tail.len() >= crate::spill::RECORD_TARGET {
            self.spill(xid)?;
        }
        while self.memory > self.config.work_mem {
            let Some(largest) = self
                .txns
                .values()
                .filter(|t| !t.tail.is_empty())
                .max_by_key(|t| t.tail.len())
                .map(|t| t.xid)
            else {
                break;
            };
            self.spill(largest)?;
        }
        Ok(())
    }

    /// Moves `xid`'s in-memory changes to its spill file.
    fn spill(&mut self, xid: u32) -> Result<(), AssembleError> {
        let Some(t) = self.txns.get_mut(&xid) else {
            return Ok(());
        };
        let before = t.tail.len();
        let r = t.spill(FileSpec {
            dir: &self.dir,
            next_file: &mut self.next_file,
            spec: &self.config.spec,
            counters: &self.counters,
        });
        self.memory = self.memory - before + t.tail.len();
        self.spills += 1;
        t.last_spill = self.spills;
        r?;
        self.limit_frames();
        Ok(())
    }

    /// Keeps at most [`MAX_LIVE_FRAMES`] stream encoders alive.
    fn limit_frames(&mut self) {
        loop {
            let live = self.txns.values_mut().filter_map(|t| {
                let spilled = t.last_spill;
                t.file
                    .as_mut()
                    .filter(|f| f.has_frame())
                    .map(|f| (spilled, f))
            });
            let mut count = 0;
            let mut oldest: Option<(u64, &mut crate::spill::writer::SpillWriter)> = None;
            for (spilled, f) in live {
                count += 1;
                if oldest.as_ref().is_none_or(|(s, _)| spilled < *s) {
                    oldest = Some((spilled, f));
                }
            }
            match oldest {
                Some((_, f)) if count > MAX_LIVE_FRAMES => f.begin_frame(),
                _ => return,
            }
        }
    }

    /// Forgets `xid` (its file is deleted).
    fn drop_txn(&mut self, xid: u32) {
        if let Some(t) = self.txns.remove(&xid) {
            self.memory -= t.tail.len();
        }
    }

    /// Takes `info.xid` out of the open transactions as committed (empty when not held: a
    /// streamed transaction none of whose changes were sent).
    fn commit(&mut self, info: CommitInfo) -> CommittedTxn {
        let t = self
            .txns
            .remove(&info.xid)
            .unwrap_or_else(|| Txn::new(info.xid));
        self.memory -= t.tail.len();
        let f = t.finish();
        let stats = TxnStats {
            raw_bytes: f.raw_bytes,
            spilled_raw_bytes: f.spilled_raw,
            disk_bytes: f.file.as_ref().map_or(0, |g| g.len()),
            changes: f.changes,
        };
        CommittedTxn::new(info, stats, f.file, f.tail)
    }
}
