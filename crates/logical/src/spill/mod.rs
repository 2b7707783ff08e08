//! The spill file: where one in-progress transaction's changes go once memory is short.
//!
//! PostgreSQL's reorderbuffer writes spilled changes uncompressed (`pg_replslot/<slot>/xid-*.spill`,
//! `ReorderBufferSerializeChange` in `replication/logical/reorderbuffer.c`) and so does its apply
//! worker for streamed transactions (`<subid>-<xid>.changes`, `worker.c`). This file holds the
//! same thing, the pgoutput payloads of one transaction, compressed the way the uncommitted
//! "Compress ReorderBuffer spill files" patch proposed: a stream context per file for small
//! changes, one-shot compression for large ones, raw bytes when compression does not help, and
//! a small header per record.
//!
//! # Layout (all integers little-endian)
//!
//! File header, [`FILE_HEADER_LEN`] bytes:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `PGCSPILL` |
//! | 8 | 1 | format version, [`VERSION`] |
//! | 9 | 1 | method: 0 none, 1 pglz, 2 lz4, 3 zstd |
//! | 10 | 1 | 1 when a level follows, else 0 |
//! | 11 | 1 | level (signed) |
//! | 12 | 1 | zstd long window log, 0 = off |
//! | 13 | 3 | zero |
//! | 16 | 4 | top-level xid |
//! | 20 | 4 | CRC-32C of bytes 0..20 |
//!
//! Then records, each a [`RECORD_HEADER_LEN`]-byte header and `stored` bytes:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 1 | strategy: 0 raw, 1 one-shot, 2 stream (new frame), 3 stream (same frame) |
//! | 1 | 4 | stored size (bytes after the header) |
//! | 5 | 4 | raw size |
//! | 9 | 4 | CRC-32C of the raw bytes followed by header bytes 0..9 |
//!
//! The raw bytes of a record are whole changes, each a LEB128 varint length (7 bits a byte,
//! low bits first, at most 5 bytes) and the pgoutput payload as received. Small changes are batched into records of about [`RECORD_TARGET`] raw bytes so
//! that the per-record header costs nothing; a change of [`LARGE_CHANGE`] bytes or more gets a
//! record of its own.
//!
//! # Strategies
//!
//! - **stream** (lz4, zstd): the record is what a streaming encoder (an LZ4 frame, a zstd
//!   frame) emitted for its raw bytes up to a flush. The zstd encoder keeps its history, so the
//!   next record's matches reach back into earlier changes; the LZ4 frame is written with
//!   independent blocks and without its own checksums (see `writer.rs`: a record is one LZ4
//!   block's worth of changes and has its CRC-32C), but a reader takes any LZ4 frame, linked
//!   and checksummed ones included. Strategy 2 opens a
//!   new, independent frame: the writer starts one at the file's first stream record, at each
//!   subtransaction boundary (so that truncating the file there, for a subtransaction abort,
//!   leaves a valid file), after a raw fallback, and every [`FRAME_MAX_RAW`] raw bytes (which
//!   bounds a reader's stream decoder).
//! - **one-shot**: one block of the method (pglz always, large changes with lz4 and zstd),
//!   independent of the stream.
//! - **raw**: the bytes as they are, when compression did not make them smaller (and always
//!   with `none`).
//!
//! A reader checks every size against hard caps before using it and every record against its
//! checksum; anything wrong is [`crate::AssembleError::Corrupt`] naming the file and offset.
//!
//! # The directory
//!
//! Spill files hold rows of transactions that have not committed, and whoever can swap one for
//! a file of valid records puts rows in the output: the directory is private, as PostgreSQL's
//! `pg_replslot` (0700, files 0600). It is created 0700; one that exists must be a directory
//! (not a link) of the effective user with no permission for group or others, and every
//! directory above it must belong to root or to that user and be writable by nobody else
//! unless sticky (`/tmp`), as OpenSSH's `StrictModes` checks a home; otherwise the store is
//! refused with [`crate::AssembleError::UnsafeDir`] naming it. Files are created 0600 with
//! `O_EXCL | O_NOFOLLOW` (a name already taken is passed over) and read back through the
//! descriptor they were written with. A lock (`flock` on `pgcompress-spill.lock`) keeps a second
//! store out of a directory in use ([`crate::AssembleError::DirInUse`]), since a store removes
//! the leftover spill files it finds when it starts.

pub(crate) mod counters;
pub(crate) mod dir;
mod reader;
pub(crate) mod writer;

pub use reader::SpillReader;

use codec::{Method, Spec};

/// Prefix of every spill file name this store writes (and the only files it removes).
pub const FILE_PREFIX: &str = "pgcompress-spill-";
/// Suffix of every spill file name this store writes.
pub const FILE_SUFFIX: &str = ".spill";

/// First bytes of every spill file.
pub const MAGIC: [u8; 8] = *b"PGCSPILL";
/// Format version written and read.
pub const VERSION: u8 = 1;
/// Size of the file header.
pub const FILE_HEADER_LEN: usize = 24;
/// Size of a record header.
pub const RECORD_HEADER_LEN: usize = 13;
/// Raw bytes of small changes batched into one stream record (the LZ4 window, and the block
/// the seed patch closed its zstd frames at).
pub const RECORD_TARGET: usize = 64 * 1024;
/// Changes this large or larger are compressed one-shot in a record of their own (as the seed
/// patch sent large changes past its streaming ring buffer).
pub const LARGE_CHANGE: usize = 8 * 1024;
/// Largest raw size of a stream record a reader accepts: a batch never passes
/// [`RECORD_TARGET`] by more than one small change.
pub const STREAM_RECORD_MAX: usize = RECORD_TARGET + LARGE_CHANGE + 5;
/// A stream frame is closed after this many raw bytes, so a reader's stream decoder never
/// has to produce more than this from one frame.
pub const FRAME_MAX_RAW: usize = 64 << 20;
/// Largest raw size of any record: one pgoutput message (PostgreSQL allocates at most 1 GB - 1,
/// `MaxAllocSize`) with its length prefix, within codec's decompression cap.
pub const MAX_RECORD_RAW: usize = codec::MAX_DECOMPRESSED_SIZE;

/// Record strategy: raw bytes.
pub const STRATEGY_RAW: u8 = 0;
/// Record strategy: one independent block of the file's method.
pub const STRATEGY_ONE_SHOT: u8 = 1;
/// Record strategy: first record of a new stream frame.
pub const STRATEGY_STREAM_NEW: u8 = 2;
/// Record strategy: next record of the current stream frame.
pub const STRATEGY_STREAM: u8 = 3;

/// Methods a spill file can use, and their ids in the file header.
const METHOD_IDS: [(Method, u8); 4] = [
    (Method::None, 0),
    (Method::Pglz, 1),
    (Method::Lz4, 2),
    (Method::Zstd, 3),
];

/// The methods a spill file can use, for the options that choose one.
pub fn methods() -> Vec<Method> {
    METHOD_IDS.iter().map(|(m, _)| *m).collect()
}

/// Why a spec cannot be used for spill files, or `None` when it can.
pub(crate) fn unsupported_reason(spec: &Spec) -> Option<&'static str> {
    if !METHOD_IDS.iter().any(|(m, _)| *m == spec.method) {
        return Some("spill files take none, pglz, lz4 or zstd");
    }
    if spec.workers.is_some() {
        return Some("zstd workers are not used for spill files (records are small)");
    }
    None
}

/// Encodes the file header of a spill file for `xid` written with `spec`.
pub fn file_header(spec: &Spec, xid: u32) -> [u8; FILE_HEADER_LEN] {
    let mut h = [0u8; FILE_HEADER_LEN];
    h[..8].copy_from_slice(&MAGIC);
    h[8] = VERSION;
    h[9] = METHOD_IDS
        .iter()
        .find(|(m, _)| *m == spec.method)
        .map_or(0, |(_, id)| *id);
    if let Some(l) = spec.level {
        h[10] = 1;
        // Levels of the accepted methods are within -7..=22.
        h[11] = i8::try_from(l).unwrap_or(0) as u8;
    }
    h[12] = spec.long.and_then(|w| u8::try_from(w).ok()).unwrap_or(0);
    h[16..20].copy_from_slice(&xid.to_le_bytes());
    let crc = crc32c::crc32c(&h[..20]);
    h[20..].copy_from_slice(&crc.to_le_bytes());
    h
}

/// What a file header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileHeader {
    /// The compression the file was written with.
    pub method: Method,
    /// The top-level xid whose changes the file holds.
    pub xid: u32,
}

/// Decodes a file header, or says what is wrong with it.
pub(crate) fn parse_file_header(h: &[u8; FILE_HEADER_LEN]) -> Result<FileHeader, String> {
    if h[..8] != MAGIC {
        return Err("not a pgcompress spill file (bad magic)".into());
    }
    let want = crc32c::crc32c(&h[..20]);
    let got = u32::from_le_bytes([h[20], h[21], h[22], h[23]]);
    if want != got {
        return Err(format!(
            "file header has CRC 0x{got:08x}, expected 0x{want:08x}"
        ));
    }
    if h[8] != VERSION {
        return Err(format!(
            "spill format version {} (this build reads {VERSION})",
            h[8]
        ));
    }
    let method = METHOD_IDS
        .iter()
        .find(|(_, id)| *id == h[9])
        .map(|(m, _)| *m)
        .ok_or_else(|| format!("unknown method id {}", h[9]))?;
    Ok(FileHeader {
        method,
        xid: u32::from_le_bytes([h[16], h[17], h[18], h[19]]),
    })
}

/// A record header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecordHeader {
    pub strategy: u8,
    pub stored: u32,
    pub raw: u32,
    pub crc: u32,
}

impl RecordHeader {
    /// The header for `raw` stored as `stored` bytes with `strategy`.
    pub(crate) fn new(strategy: u8, stored: usize, raw: &[u8]) -> Option<RecordHeader> {
        let mut h = RecordHeader {
            strategy,
            stored: u32::try_from(stored).ok()?,
            raw: u32::try_from(raw.len()).ok()?,
            crc: 0,
        };
        h.crc = h.checksum(raw);
        Some(h)
    }

    /// CRC-32C of the raw bytes, then of the header fields before the checksum, so a flipped
    /// strategy or size is caught as surely as a flipped data byte.
    pub(crate) fn checksum(&self, raw: &[u8]) -> u32 {
        let crc = crc32c::crc32c(raw);
        crc32c::crc32c_append(crc, &self.encode()[..9])
    }

    pub(crate) fn encode(&self) -> [u8; RECORD_HEADER_LEN] {
        let mut b = [0u8; RECORD_HEADER_LEN];
        b[0] = self.strategy;
        b[1..5].copy_from_slice(&self.stored.to_le_bytes());
        b[5..9].copy_from_slice(&self.raw.to_le_bytes());
        b[9..13].copy_from_slice(&self.crc.to_le_bytes());
        b
    }

    pub(crate) fn decode(b: &[u8; RECORD_HEADER_LEN]) -> RecordHeader {
        let u = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        RecordHeader {
            strategy: b[0],
            stored: u(1),
            raw: u(5),
            crc: u(9),
        }
    }
}

/// Largest stored size a record of `raw` bytes can have with `method` and `strategy`; a header
/// that claims more is corrupt (and is refused before anything is read or allocated).
pub(crate) fn max_stored(method: Method, strategy: u8, raw: usize) -> usize {
    match strategy {
        STRATEGY_RAW => raw,
        // A flush may add a frame header, block headers and checksums around the bound.
        STRATEGY_STREAM | STRATEGY_STREAM_NEW => {
            codec::block::max_compressed_size(method, raw) + 256
        }
        _ => codec::block::max_compressed_size(method, raw),
    }
}

/// Appends one change (length prefix and payload) to a batch of raw record bytes. The length is
/// a LEB128 varint: one byte for the typical row change instead of four, which is 8% of a
/// 50-byte change when stored raw.
pub(crate) fn push_change(batch: &mut Vec<u8>, payload: &[u8]) {
    // Payloads come from one CopyData message, which PostgreSQL caps at 1 GB.
    let mut len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    while len >= 0x80 {
        batch.push((len as u8) | 0x80);
        len >>= 7;
    }
    batch.push(len as u8);
    batch.extend_from_slice(payload);
}

/// The change at `pos` in raw record bytes: `Ok(None)` at the end, `Err(())` when the length
/// is malformed or runs past the end.
#[allow(clippy::result_unit_err)]
pub(crate) fn change_at(raw: &[u8], pos: usize) -> Result<Option<std::ops::Range<usize>>, ()> {
    if pos == raw.len() {
        return Ok(None);
    }
    let mut len: u64 = 0;
    for (at, shift) in (pos..).zip((0..35).step_by(7)) {
        let b = *raw.get(at).ok_or(())?;
        len |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            let start = at + 1;
            let end = usize::try_from(len)
                .ok()
                .and_then(|n| start.checked_add(n))
                .filter(|&e| e <= raw.len())
                .ok_or(())?;
            return Ok(Some(start..end));
        }
    }
    Err(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn change_framing_round_trips_and_refuses_bad_lengths() {
        let mut batch = Vec::new();
        let payloads: Vec<Vec<u8>> = [0usize, 1, 127, 128, 300, 16_384, 70_000]
            .iter()
            .map(|&n| vec![7u8; n])
            .collect();
        for p in &payloads {
            push_change(&mut batch, p);
        }
        let mut pos = 0;
        for p in &payloads {
            let r = change_at(&batch, pos).expect("ok").expect("some");
            assert_eq!(&batch[r.clone()], &p[..]);
            pos = r.end;
        }
        assert_eq!(change_at(&batch, pos), Ok(None));
        // Runs past the end; unterminated; six continuation bytes.
        assert_eq!(change_at(&[5, 1, 2], 0), Err(()));
        assert_eq!(change_at(&[0x80], 0), Err(()));
        assert_eq!(change_at(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01], 0), Err(()));
        let mut one = Vec::new();
        push_change(&mut one, b"abc");
        assert_eq!(one, [3, b'a', b'b', b'c']);
    }
}
