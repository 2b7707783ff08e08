//! One open transaction: its changes in memory (the tail), then in its spill file once memory
//! is short, and where each subtransaction began so that its abort can cut both back.

use std::path::Path;
use std::sync::Arc;

use codec::Spec;

use crate::spill::counters::Counters;
use crate::spill::writer::{FileGuard, SpillWriter};
use crate::spill::{change_at, push_change, LARGE_CHANGE, RECORD_TARGET};
use crate::AssembleError;

/// Where a subtransaction's first change is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pos {
    /// At this offset of the spill file (a record boundary where a frame begins).
    File(u64),
    /// At this offset of the in-memory tail.
    Tail(usize),
}

/// A subtransaction and the transaction's counters just before its first change.
#[derive(Debug, Clone, Copy)]
struct Sub {
    subxid: u32,
    at: Pos,
    changes: u64,
    raw_bytes: u64,
    spilled_raw: u64,
}

/// Everything a new spill file needs.
pub(crate) struct FileSpec<'a> {
    /// The spill directory.
    pub dir: &'a Path,
    /// Number of the last file created there.
    pub next_file: &'a mut u64,
    pub spec: &'a Spec,
    pub counters: &'a Arc<Counters>,
}

/// An open transaction.
pub(crate) struct Txn {
    pub xid: u32,
    /// Changes not yet on disk, framed as in a record (varint length, payload).
    pub tail: Vec<u8>,
    /// Tail offsets where a subtransaction begins: a new frame starts there on disk.
    marks: Vec<usize>,
    subs: Vec<Sub>,
    last_sub: Option<u32>,
    pub file: Option<SpillWriter>,
    pub changes: u64,
    pub raw_bytes: u64,
    pub spilled_raw: u64,
    /// When it last spilled, in the assembler's spill count: the oldest gives up its stream
    /// context first.
    pub last_spill: u64,
}

/// What a committed transaction hands over.
pub(crate) struct Finished {
    pub tail: Vec<u8>,
    pub file: Option<FileGuard>,
    pub changes: u64,
    pub raw_bytes: u64,
    pub spilled_raw: u64,
}

impl Txn {
    pub(crate) fn new(xid: u32) -> Txn {
        Txn {
            xid,
            tail: Vec::new(),
            marks: Vec::new(),
            subs: Vec::new(),
            last_sub: None,
            file: None,
            changes: 0,
            raw_bytes: 0,
            spilled_raw: 0,
            last_spill: 0,
        }
    }

    /// Adds one stored message; `subxid` is the xid a streamed message carried.
    pub(crate) fn push(&mut self, subxid: Option<u32>, payload: &[u8]) {
        if let Some(s) = subxid {
            // As the apply worker's subxact_info_add: the top-level xid never starts a
            // subtransaction, and a subxid seen before keeps its first position.
            if s != self.xid && self.last_sub != Some(s) && !self.subs.iter().any(|x| x.subxid == s)
            {
                let at = self.tail.len();
                self.subs.push(Sub {
                    subxid: s,
                    at: Pos::Tail(at),
                    changes: self.changes,
                    raw_bytes: self.raw_bytes,
                    spilled_raw: self.spilled_raw,
                });
                if self.marks.last() != Some(&at) {
                    self.marks.push(at);
                }
            }
            self.last_sub = Some(s);
        }
        push_change(&mut self.tail, payload);
        self.changes += 1;
        self.raw_bytes += payload.len() as u64;
    }

    /// Moves the whole tail to the spill file (creating it if needed).
    pub(crate) fn spill(&mut self, new_file: FileSpec<'_>) -> Result<(), AssembleError> {
        if self.tail.is_empty() {
            return Ok(());
        }
        let file = match &mut self.file {
            Some(f) => f,
            None => self.file.insert(SpillWriter::create(
                new_file.dir,
                new_file.next_file,
                *new_file.spec,
                self.xid,
                Arc::clone(new_file.counters),
            )?),
        };
        let tail = std::mem::take(&mut self.tail);
        let marks = std::mem::take(&mut self.marks);
        let mut batch = Vec::with_capacity(RECORD_TARGET + LARGE_CHANGE);
        let mut next_mark = marks.iter().copied().peekable();
        let mut pos = 0;
        let mut spilled = 0u64;
        let result = (|| {
            while let Ok(Some(r)) = change_at(&tail, pos) {
                if next_mark.peek() == Some(&pos) {
                    next_mark.next();
                    if !batch.is_empty() {
                        file.write_batch(&batch)?;
                        batch.clear();
                    }
                    file.begin_frame();
                    let at = file.len();
                    for s in &mut self.subs {
                        if s.at == Pos::Tail(pos) {
                            s.at = Pos::File(at);
                        }
                    }
                }
                let framed = &tail[pos..r.end];
                spilled += (r.end - r.start) as u64;
                if r.len() >= LARGE_CHANGE {
                    if !batch.is_empty() {
                        file.write_batch(&batch)?;
                        batch.clear();
                    }
                    file.write_large(framed)?;
                } else {
                    batch.extend_from_slice(framed);
                    if batch.len() >= RECORD_TARGET {
                        file.write_batch(&batch)?;
                        batch.clear();
                    }
                }
                pos = r.end;
            }
            if !batch.is_empty() {
                file.write_batch(&batch)?;
            }
            Ok(())
        })();
        self.spilled_raw += spilled;
        Counters::add(&new_file.counters.raw_bytes, spilled);
        result
    }

    /// Discards `subxid`'s changes and everything after them; nothing when it had none.
    pub(crate) fn abort_sub(&mut self, subxid: u32) -> Result<(), AssembleError> {
        let Some(i) = self.subs.iter().position(|s| s.subxid == subxid) else {
            return Ok(());
        };
        let sub = self.subs[i];
        self.subs.truncate(i);
        match sub.at {
            Pos::Tail(off) => {
                self.tail.truncate(off);
                self.marks.retain(|&m| m < off);
            }
            Pos::File(off) => {
                self.tail.clear();
                self.marks.clear();
                if let Some(f) = &mut self.file {
                    f.truncate(off)?;
                }
            }
        }
        self.changes = sub.changes;
        self.raw_bytes = sub.raw_bytes;
        self.spilled_raw = sub.spilled_raw;
        self.last_sub = None;
        Ok(())
    }

    /// Hands the transaction's data over at commit.
    pub(crate) fn finish(self) -> Finished {
        Finished {
            tail: self.tail,
            file: self.file.map(SpillWriter::into_guard),
            changes: self.changes,
            raw_bytes: self.raw_bytes,
            spilled_raw: self.spilled_raw,
        }
    }
}
