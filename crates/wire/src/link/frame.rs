//! Link frame layout: `type: u8`, `length: u32` big-endian (payload bytes, header excluded),
//! payload. Every type has a hard payload cap, checked before the payload is awaited.

use codec::Cursor;

use super::CHUNK_RAW_MAX;
use crate::error::LinkError;
use crate::Direction;

/// Bytes of a frame header.
pub const HEADER_LEN: usize = 5;

/// Hello ('H'): the client half's versions and methods, the first frame of a link.
pub const HELLO: u8 = b'H';
/// Accept ('A'): the server half's chosen version and methods.
pub const ACCEPT: u8 = b'A';
/// Refuse ('E'): the server half's reason for refusing the handshake; the link then closes.
pub const REFUSE: u8 = b'E';
/// Verbatim ('V'): PostgreSQL bytes as they are.
pub const VERBATIM: u8 = b'V';
/// Chunk ('Z'): `raw length: u32` then the output of the stream's compression context.
pub const CHUNK: u8 = b'Z';
/// Columns ('K', link version 2): `raw length: u32`, `coded length: u32`, then the output of
/// the stream's compression context for the column coding ([`codec::columns`]) of `raw
/// length` PostgreSQL bytes, `coded length` bytes long. It shares the context of the chunks.
pub const COLUMNS: u8 = b'K';
/// Method ('M'): the following chunks use a fresh context of this method specification.
pub const METHOD: u8 = b'M';
/// Ready ('R'), backend->frontend only: the first ReadyForQuery has passed, so the
/// frontend->backend direction may compress from now on.
pub const READY: u8 = b'R';

/// Largest payload of a handshake frame.
pub const MAX_HANDSHAKE_PAYLOAD: u32 = 1024;
/// Largest payload of a chunk: the raw cap plus the worst expansion of zstd and lz4
/// (`ZSTD_compressBound`, `LZ4F_compressBound`: under 1/255 plus a frame header).
pub const MAX_CHUNK_PAYLOAD: u32 = (4 + CHUNK_RAW_MAX + CHUNK_RAW_MAX / 64 + 1024) as u32;

/// Longest column coding a Columns frame carries: an encoder sends a chunk's coding only up
/// to this length (the runs of field counts cost 6 bytes each), a decoder refuses longer.
pub const MAX_COLUMNS_CODED: usize = CHUNK_RAW_MAX + CHUNK_RAW_MAX / 8;
/// Largest payload of a Columns frame: both lengths, then the coding's worst expansion.
pub const MAX_COLUMNS_PAYLOAD: u32 = (8 + MAX_COLUMNS_CODED + MAX_COLUMNS_CODED / 64 + 1024) as u32;

/// The payload cap of a frame type; `None` for an unknown type.
pub const fn max_payload(frame_type: u8) -> Option<u32> {
    match frame_type {
        HELLO | ACCEPT | REFUSE => Some(MAX_HANDSHAKE_PAYLOAD),
        VERBATIM => Some(CHUNK_RAW_MAX as u32),
        CHUNK => Some(MAX_CHUNK_PAYLOAD),
        COLUMNS => Some(MAX_COLUMNS_PAYLOAD),
        METHOD => Some(super::MAX_SPEC_LEN as u32),
        READY => Some(0),
        _ => None,
    }
}

/// A frame header read from the front of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// The frame type.
    pub frame_type: u8,
    /// Payload bytes after the header.
    pub payload_len: usize,
}

impl Header {
    /// The whole frame's length.
    pub fn frame_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }
}

/// Reads and checks the frame header at the front of `buf`; `Ok(None)` if it is incomplete.
/// `offset` is the frame's position in the link stream, for errors.
pub fn parse_header(
    direction: Direction,
    offset: u64,
    buf: &[u8],
) -> Result<Option<Header>, LinkError> {
    let mut c = Cursor::new(buf);
    let Ok(frame_type) = c.u8() else {
        return Ok(None);
    };
    let Some(max) = max_payload(frame_type) else {
        return Err(LinkError::UnknownFrame {
            direction,
            offset,
            frame_type,
        });
    };
    let Ok(len) = c.u32_be() else {
        return Ok(None);
    };
    if len > max {
        return Err(LinkError::FrameTooLong {
            direction,
            offset,
            frame_type,
            len,
            max,
        });
    }
    Ok(Some(Header {
        frame_type,
        payload_len: len as usize,
    }))
}

/// Appends a frame header; the payload follows. Returns the header's index in `out`.
pub(crate) fn put_header(out: &mut Vec<u8>, frame_type: u8, payload_len: usize) -> usize {
    let at = out.len();
    out.push(frame_type);
    out.extend_from_slice(&(payload_len as u32).to_be_bytes());
    at
}

/// Appends a whole frame.
pub(crate) fn put_frame(out: &mut Vec<u8>, frame_type: u8, payload: &[u8]) {
    put_header(out, frame_type, payload.len());
    out.extend_from_slice(payload);
}
