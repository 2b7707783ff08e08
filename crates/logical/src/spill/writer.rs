//! Writes one transaction's spill file: records appended, the file cut back for a
//! subtransaction abort, deleted when dropped.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use codec::{BlockCompressor, Method, Spec};

use super::counters::Counters;
use super::{
    file_header, RecordHeader, FILE_HEADER_LEN, FRAME_MAX_RAW, STRATEGY_ONE_SHOT, STRATEGY_RAW,
    STRATEGY_STREAM, STRATEGY_STREAM_NEW,
};
use super::{FILE_PREFIX, FILE_SUFFIX};
use crate::AssembleError;

/// How stream frames are written. Every record carries its own CRC-32C, so the LZ4 frame's
/// xxHash32 checksums (content and block) would only check the same bytes again, at about the
/// cost of the compression itself on the seed rows. And a record holds about
/// [`super::RECORD_TARGET`] of changes, one LZ4 block, so linked blocks gain next to nothing
/// while they make LZ4 carry a dictionary from block to block: a 64 KiB copy per block and
/// slower matching (figures: docs/LOGICAL.md).
fn framing() -> codec::Framing {
    codec::Framing::default()
        .checksums(false)
        .linked_blocks(false)
}

/// A spill file: its path, the descriptor it was written through (and is read back through:
/// the file is never opened again by name) and its size; removes the file and takes it off the
/// counters when dropped.
#[derive(Debug)]
pub(crate) struct FileGuard {
    path: PathBuf,
    file: File,
    len: u64,
    counters: Arc<Counters>,
}

impl FileGuard {
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The file from its start, for reading back.
    pub(crate) fn reopen(&self) -> std::io::Result<File> {
        let mut f = self.file.try_clone()?;
        f.seek(SeekFrom::Start(0))?;
        Ok(f)
    }

    pub(crate) fn len(&self) -> u64 {
        self.len
    }
}

impl Drop for FileGuard {
    fn drop(&mut self) {
        // Nothing to do about a failure here: the directory is swept at the next start.
        let _ = std::fs::remove_file(&self.path);
        Counters::sub(&self.counters.disk_bytes, self.len);
        Counters::sub(&self.counters.files, 1);
    }
}

/// The bytes a stream encoder produced since the last look.
#[derive(Clone, Default)]
struct Sink(Arc<Mutex<Vec<u8>>>);

impl Sink {
    fn take_into(&self, out: &mut Vec<u8>) {
        let mut v = self.0.lock().unwrap_or_else(|e| e.into_inner());
        out.clear();
        std::mem::swap(&mut *v, out);
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut v = self.0.lock().unwrap_or_else(|e| e.into_inner());
        v.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The open stream frame: an encoder whose history spans records.
struct Frame {
    enc: codec::Encoder<Sink>,
    sink: Sink,
    raw: usize,
}

/// Appends records to one spill file.
pub(crate) struct SpillWriter {
    guard: FileGuard,
    spec: Spec,
    block: Option<BlockCompressor>,
    frame: Option<Frame>,
    stored: Vec<u8>,
}

impl SpillWriter {
    /// Creates a new file for `xid` in `dir` (`pgcompress-spill-<xid>-<n>.spill`, the first
    /// `n` after `next_file` whose name is free: a name already taken, by a link or anything
    /// else, is passed over, never opened) and writes the file header.
    pub(crate) fn create(
        dir: &Path,
        next_file: &mut u64,
        spec: Spec,
        xid: u32,
        counters: Arc<Counters>,
    ) -> Result<SpillWriter, AssembleError> {
        let mut taken = 0;
        let (path, file) = loop {
            *next_file += 1;
            let path = dir.join(format!("{FILE_PREFIX}{xid}-{}{FILE_SUFFIX}", *next_file));
            match super::dir::create_file(&path) {
                Ok(f) => break (path, f),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && taken < 100 => {
                    taken += 1;
                }
                Err(e) => return Err(AssembleError::io(&path)(e)),
            }
        };
        Counters::add(&counters.files, 1);
        Counters::add(&counters.spilled_txns, 1);
        let mut guard = FileGuard {
            path,
            file,
            len: 0,
            counters,
        };
        guard
            .file
            .write_all(&file_header(&spec, xid))
            .map_err(AssembleError::io(&guard.path))?;
        guard.len = FILE_HEADER_LEN as u64;
        Counters::add(&guard.counters.disk_bytes, guard.len);
        Counters::add(&guard.counters.disk_written_bytes, guard.len);
        Ok(SpillWriter {
            guard,
            spec,
            block: None,
            frame: None,
            stored: Vec::new(),
        })
    }

    /// Current size of the file.
    pub(crate) fn len(&self) -> u64 {
        self.guard.len
    }

    /// Ends the current stream frame: the next stream record opens an independent one, so
    /// the file may later be cut back to the current end.
    pub(crate) fn begin_frame(&mut self) {
        self.frame = None;
    }

    /// Writes a batch of small changes (raw record bytes).
    pub(crate) fn write_batch(&mut self, raw: &[u8]) -> Result<(), AssembleError> {
        match self.spec.method {
            Method::None => self.record(STRATEGY_RAW, None, raw),
            Method::Lz4 | Method::Zstd => self.stream_record(raw),
            _ => self.one_shot(raw),
        }
    }

    /// Writes one large change (raw record bytes) in a record of its own.
    pub(crate) fn write_large(&mut self, raw: &[u8]) -> Result<(), AssembleError> {
        match self.spec.method {
            Method::None => self.record(STRATEGY_RAW, None, raw),
            _ => self.one_shot(raw),
        }
    }

    /// True while a stream frame (and its encoder's memory) is open.
    pub(crate) fn has_frame(&self) -> bool {
        self.frame.is_some()
    }

    /// Cuts the file back to `len` (a record boundary where a frame began).
    pub(crate) fn truncate(&mut self, len: u64) -> Result<(), AssembleError> {
        let len = len.clamp(FILE_HEADER_LEN as u64, self.guard.len);
        let file = &mut self.guard.file;
        file.set_len(len)
            .and_then(|()| file.seek(SeekFrom::Start(len)).map(drop))
            .map_err(AssembleError::io(&self.guard.path))?;
        Counters::sub(&self.guard.counters.disk_bytes, self.guard.len - len);
        self.guard.len = len;
        self.frame = None;
        Ok(())
    }

    /// Closes the file for writing; the guard still deletes it when dropped.
    pub(crate) fn into_guard(self) -> FileGuard {
        self.guard
    }

    fn compress_err(&self) -> impl FnOnce(codec::CodecError) -> AssembleError {
        let path = self.guard.path.clone();
        move |source| AssembleError::Compress { path, source }
    }

    fn one_shot(&mut self, raw: &[u8]) -> Result<(), AssembleError> {
        // Made on first use: a zstd context is megabytes, and most files never need one.
        if self.block.is_none() {
            self.block = Some(BlockCompressor::new(&self.spec).map_err(self.compress_err())?);
        }
        let mut stored = std::mem::take(&mut self.stored);
        let r = match self.block.as_mut() {
            Some(b) => b.compress(raw, &mut stored).map_err(self.compress_err()),
            None => {
                stored.clear();
                Ok(())
            }
        };
        let r = r.and_then(|()| {
            if !stored.is_empty() && stored.len() < raw.len() {
                self.record(STRATEGY_ONE_SHOT, Some(&stored), raw)
            } else {
                self.record(STRATEGY_RAW, None, raw)
            }
        });
        self.stored = stored;
        r
    }

    fn stream_record(&mut self, raw: &[u8]) -> Result<(), AssembleError> {
        let fresh = match &self.frame {
            Some(f) => f.raw + raw.len() > FRAME_MAX_RAW,
            None => true,
        };
        if fresh {
            let sink = Sink::default();
            let enc = codec::Encoder::with_framing(&self.spec, sink.clone(), framing())
                .map_err(self.compress_err())?;
            self.frame = Some(Frame { enc, sink, raw: 0 });
        }
        let mut stored = std::mem::take(&mut self.stored);
        let path = &self.guard.path;
        let r = match self.frame.as_mut() {
            Some(f) => f
                .enc
                .write_all(raw)
                .and_then(|()| f.enc.flush())
                .map(|()| {
                    f.raw += raw.len();
                    f.sink.take_into(&mut stored);
                })
                .map_err(|e| AssembleError::Compress {
                    path: path.clone(),
                    source: codec::CodecError::Library {
                        method: self.spec.method,
                        source: e,
                    },
                }),
            None => Ok(()),
        };
        let r = r.and_then(|()| {
            if stored.len() < raw.len() {
                let strategy = if fresh {
                    STRATEGY_STREAM_NEW
                } else {
                    STRATEGY_STREAM
                };
                self.record(strategy, Some(&stored), raw)
            } else {
                // The reader never sees these stream bytes, so the frame cannot go on.
                self.frame = None;
                self.record(STRATEGY_RAW, None, raw)
            }
        });
        self.stored = stored;
        r
    }

    /// Appends one record: header, then `stored` (or `raw` itself).
    fn record(
        &mut self,
        strategy: u8,
        stored: Option<&[u8]>,
        raw: &[u8],
    ) -> Result<(), AssembleError> {
        let body = stored.unwrap_or(raw);
        let header = RecordHeader::new(strategy, body.len(), raw)
            .filter(|_| raw.len() <= super::MAX_RECORD_RAW)
            .ok_or_else(|| AssembleError::Compress {
                path: self.guard.path.clone(),
                source: codec::CodecError::InputTooLarge {
                    method: self.spec.method,
                    len: raw.len(),
                },
            })?;
        let file = &mut self.guard.file;
        file.write_all(&header.encode())
            .and_then(|()| file.write_all(body))
            .map_err(AssembleError::io(&self.guard.path))?;
        let n = (super::RECORD_HEADER_LEN + body.len()) as u64;
        self.guard.len += n;
        Counters::add(&self.guard.counters.disk_bytes, n);
        Counters::add(&self.guard.counters.disk_written_bytes, n);
        Ok(())
    }
}
