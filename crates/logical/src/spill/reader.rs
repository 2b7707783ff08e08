//! Reads a spill file back change by change, one record in memory at a time, every size
//! checked against a cap before use and every record against its checksum.

use std::collections::VecDeque;
use std::io::{self, Read};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use codec::{BlockDecompressor, Method};

use super::{
    change_at, max_stored, parse_file_header, FileHeader, RecordHeader, FILE_HEADER_LEN,
    FRAME_MAX_RAW, MAX_RECORD_RAW, RECORD_HEADER_LEN, STRATEGY_ONE_SHOT, STRATEGY_RAW,
    STRATEGY_STREAM, STRATEGY_STREAM_NEW, STREAM_RECORD_MAX,
};
use crate::AssembleError;

/// Stored bytes handed to the stream decoder, record by record.
#[derive(Clone, Default)]
struct Feed(Arc<Mutex<VecDeque<u8>>>);

impl Feed {
    fn push(&self, bytes: &[u8]) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(bytes);
    }
}

impl Read for Feed {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).read(buf)
    }
}

/// Reads the changes of one spill file in order.
///
/// Usable on any bytes (a fuzz target feeds it arbitrary input): the worst outcome is
/// [`AssembleError::Corrupt`] naming `path` and the offset of the bad header or record.
pub struct SpillReader<R: Read> {
    src: R,
    path: PathBuf,
    header: FileHeader,
    /// Offset of the next unread byte of the file.
    offset: u64,
    max_record: usize,
    stream: Option<codec::Decoder<Feed>>,
    feed: Feed,
    block: Option<BlockDecompressor>,
    stored: Vec<u8>,
    raw: Vec<u8>,
    pos: usize,
    record_at: u64,
}

impl<R: Read> std::fmt::Debug for SpillReader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpillReader")
            .field("path", &self.path)
            .field("header", &self.header)
            .field("offset", &self.offset)
            .finish_non_exhaustive()
    }
}

impl<R: Read> SpillReader<R> {
    /// Reads and checks the file header of `src`; `path` names the file in errors.
    pub fn new(src: R, path: impl Into<PathBuf>) -> Result<Self, AssembleError> {
        let mut src = src;
        let path = path.into();
        let mut h = [0u8; FILE_HEADER_LEN];
        let got = read_full(&mut src, &mut h).map_err(AssembleError::io(&path))?;
        let corrupt = |reason: String| AssembleError::Corrupt {
            path: path.clone(),
            offset: 0,
            reason,
        };
        if got < FILE_HEADER_LEN {
            return Err(corrupt(format!(
                "file is {got} bytes, shorter than its {FILE_HEADER_LEN}-byte header"
            )));
        }
        let header = parse_file_header(&h).map_err(corrupt)?;
        Ok(SpillReader {
            src,
            path,
            header,
            offset: FILE_HEADER_LEN as u64,
            max_record: MAX_RECORD_RAW,
            stream: None,
            feed: Feed::default(),
            block: None,
            stored: Vec::new(),
            raw: Vec::new(),
            pos: 0,
            record_at: 0,
        })
    }

    /// Lowers the largest raw record size accepted (default [`MAX_RECORD_RAW`]).
    #[must_use]
    pub fn with_max_record(mut self, max: usize) -> Self {
        self.max_record = max.min(MAX_RECORD_RAW);
        self
    }

    /// What the file header says.
    pub fn header(&self) -> FileHeader {
        self.header
    }

    /// Bytes of the file consumed so far (the end of the last record read).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Copies the next change (a pgoutput payload as received) into `buf`; false at the end
    /// of the file, which must fall on a record boundary.
    pub fn next_change(&mut self, buf: &mut Vec<u8>) -> Result<bool, AssembleError> {
        loop {
            match change_at(&self.raw, self.pos) {
                Ok(Some(r)) => {
                    buf.clear();
                    buf.extend_from_slice(&self.raw[r.clone()]);
                    self.pos = r.end;
                    return Ok(true);
                }
                Ok(None) => {}
                Err(()) => {
                    return Err(self.corrupt_at(
                        self.record_at,
                        format!(
                            "a change length at byte {} of the record runs past its {} raw bytes",
                            self.pos,
                            self.raw.len()
                        ),
                    ))
                }
            }
            if !self.next_record()? {
                return Ok(false);
            }
        }
    }

    fn corrupt_at(&self, offset: u64, reason: String) -> AssembleError {
        AssembleError::Corrupt {
            path: self.path.clone(),
            offset,
            reason,
        }
    }

    /// Loads the next record's raw bytes; false at a clean end of file.
    fn next_record(&mut self) -> Result<bool, AssembleError> {
        let at = self.offset;
        self.record_at = at;
        self.raw.clear();
        self.pos = 0;
        let mut hb = [0u8; RECORD_HEADER_LEN];
        let got = read_full(&mut self.src, &mut hb).map_err(AssembleError::io(&self.path))?;
        if got == 0 {
            return Ok(false);
        }
        if got < RECORD_HEADER_LEN {
            return Err(self.corrupt_at(
                at,
                format!("file ends {got} bytes into a {RECORD_HEADER_LEN}-byte record header"),
            ));
        }
        let h = RecordHeader::decode(&hb);
        let raw_len = h.raw as usize;
        let stored_len = h.stored as usize;
        let method = self.header.method;
        let cap = match h.strategy {
            STRATEGY_STREAM | STRATEGY_STREAM_NEW => STREAM_RECORD_MAX.min(self.max_record),
            STRATEGY_RAW | STRATEGY_ONE_SHOT => self.max_record,
            s => return Err(self.corrupt_at(at, format!("unknown record strategy {s}"))),
        };
        if raw_len > cap {
            return Err(self.corrupt_at(
                at,
                format!("record claims {raw_len} raw bytes, more than the {cap} allowed"),
            ));
        }
        let stream_ok = matches!(method, Method::Lz4 | Method::Zstd);
        let strategy_ok = match h.strategy {
            STRATEGY_RAW => stored_len == raw_len,
            STRATEGY_ONE_SHOT => method != Method::None,
            _ => stream_ok,
        };
        if !strategy_ok || stored_len > max_stored(method, h.strategy, raw_len) {
            return Err(self.corrupt_at(
                at,
                format!(
                    "record header (strategy {}, {stored_len} stored, {raw_len} raw) is impossible for {method}",
                    h.strategy
                ),
            ));
        }
        // Read what is there, at most the stored size: a lying size cannot allocate more
        // than the file holds.
        self.stored.clear();
        let got = (&mut self.src)
            .take(stored_len as u64)
            .read_to_end(&mut self.stored)
            .map_err(AssembleError::io(&self.path))?;
        if got < stored_len {
            return Err(self.corrupt_at(
                at,
                format!("file ends {got} bytes into a record of {stored_len} stored bytes"),
            ));
        }
        self.offset = at + (RECORD_HEADER_LEN + stored_len) as u64;
        let decoded = self.decode_body(h.strategy, raw_len);
        if let Err(reason) = decoded {
            self.stream = None;
            return Err(self.corrupt_at(at, reason));
        }
        let want = h.checksum(&self.raw);
        if want != h.crc {
            return Err(self.corrupt_at(
                at,
                format!(
                    "record has CRC 0x{:08x}, its bytes give 0x{want:08x}",
                    h.crc
                ),
            ));
        }
        Ok(true)
    }

    fn decode_body(&mut self, strategy: u8, raw_len: usize) -> Result<(), String> {
        let method = self.header.method;
        match strategy {
            STRATEGY_RAW => {
                std::mem::swap(&mut self.raw, &mut self.stored);
                Ok(())
            }
            STRATEGY_ONE_SHOT => {
                if self.block.is_none() {
                    self.block = Some(BlockDecompressor::new().map_err(|e| e.to_string())?);
                }
                let Some(block) = self.block.as_mut() else {
                    return Err("no block decompressor".into());
                };
                block
                    .decompress(method, &self.stored, raw_len, &mut self.raw)
                    .map_err(|e| e.to_string())
            }
            _ => {
                if strategy == STRATEGY_STREAM_NEW {
                    self.feed = Feed::default();
                    // The frame never holds more than FRAME_MAX_RAW; one record of slack.
                    let cap = FRAME_MAX_RAW + STREAM_RECORD_MAX;
                    self.stream = Some(
                        codec::Decoder::new(method, self.feed.clone(), cap)
                            .map_err(|e| e.to_string())?,
                    );
                }
                let Some(dec) = self.stream.as_mut() else {
                    return Err("stream record continues a frame that never began".into());
                };
                self.feed.push(&self.stored);
                let got = dec
                    .take(raw_len as u64)
                    .read_to_end(&mut self.raw)
                    .map_err(|e| format!("{method} stream: {e}"))?;
                if got != raw_len {
                    return Err(format!(
                        "{method} stream gave {got} bytes for a record of {raw_len}"
                    ));
                }
                Ok(())
            }
        }
    }
}

/// Reads until `buf` is full or the source ends; returns the bytes read.
fn read_full(src: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match src.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}
