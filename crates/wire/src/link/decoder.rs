//! The receiving side of one direction: link frames in, the PostgreSQL byte stream out.

use codec::{Cursor, Spec};

use super::context::Decompressor;
use super::frame::{self, parse_header, HEADER_LEN, MAX_COLUMNS_CODED};
use super::{parse_spec, Counters, CHUNK_RAW_MAX};
use crate::error::LinkError;
use crate::Direction;

/// Something the caller must act on besides the bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// The peer passed the first ReadyForQuery (backend->frontend only): call
    /// [`super::LinkEncoder::session_ready`] on this half's frontend->backend encoder.
    SessionReady,
    /// The peer switched its method; later chunks use it.
    MethodSwitched(Spec),
}

/// The result of decoding one frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// Link bytes the frame took; drop them from the input.
    pub consumed: usize,
    /// An event, if the frame was a control frame.
    pub event: Option<Event>,
}

/// Turns one direction's link frames back into PostgreSQL bytes.
pub struct LinkDecoder {
    direction: Direction,
    spec: Spec,
    /// The context, created at the first chunk of the current method.
    ctx: Option<Decompressor>,
    compressed_allowed: bool,
    offset: u64,
    counters: Counters,
    failed: bool,
    /// Columns frames are accepted (link version 2 and later).
    columns: bool,
    /// A Columns frame's decompressed coding, reused.
    coded: Vec<u8>,
}

impl LinkDecoder {
    /// A decoder for `direction` starting with the method agreed in the handshake.
    /// Compressed chunks are refused until the session is ready: for backend->frontend, a
    /// Ready frame; for frontend->backend, [`LinkDecoder::session_ready`]. The decompression
    /// context is created at the first chunk, so a connection that never receives one never
    /// allocates it.
    pub fn new(direction: Direction, spec: Spec) -> Result<Self, LinkError> {
        super::check_spec(&spec)?;
        Ok(LinkDecoder {
            direction,
            spec,
            ctx: None,
            compressed_allowed: false,
            offset: 0,
            counters: Counters::default(),
            failed: false,
            columns: false,
            coded: Vec::new(),
        })
    }

    /// Accepts Columns frames (the link version agreed is 2 or later); a decoder refuses
    /// them otherwise.
    pub fn with_columns(mut self, columns: bool) -> Self {
        self.columns = columns;
        self
    }

    /// The method of the chunks now.
    pub fn spec(&self) -> &Spec {
        &self.spec
    }

    /// Counters of this direction so far.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// True once a decompression context exists (after the first chunk of the current
    /// method).
    pub fn has_context(&self) -> bool {
        self.ctx.is_some()
    }

    /// Bytes the decompression context holds (zstd's own count; 0 without a context and for
    /// lz4, whose crate does not tell).
    pub fn context_memory(&self) -> usize {
        self.ctx.as_ref().map_or(0, Decompressor::memory)
    }

    /// Offset in the link stream of the next frame.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The server half's frontend->backend decoder may accept chunks: its own
    /// backend->frontend encoder has passed the first ReadyForQuery.
    pub fn session_ready(&mut self) {
        self.compressed_allowed = true;
    }

    /// The length of the frame at the front of `input` once its header is there, checked
    /// against its cap; `Ok(None)` while the header is incomplete.
    pub fn peek_len(&self, input: &[u8]) -> Result<Option<usize>, LinkError> {
        Ok(parse_header(self.direction, self.offset, input)?.map(|h| h.frame_len()))
    }

    /// Decodes the frame at the front of `input`, appending its PostgreSQL bytes (at most
    /// [`CHUNK_RAW_MAX`]) to `out`. `Ok(None)` if the frame is incomplete. After an error the
    /// stream is unusable and every later call fails.
    pub fn decode(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<Option<Decoded>, LinkError> {
        if self.failed {
            return Err(self.unexpected(0, "the link stream already failed"));
        }
        let r = self.decode_inner(input, out);
        if r.is_err() {
            self.failed = true;
        }
        r
    }

    fn unexpected(&self, frame_type: u8, reason: &'static str) -> LinkError {
        LinkError::Unexpected {
            direction: self.direction,
            offset: self.offset,
            frame_type,
            reason,
        }
    }

    fn malformed(&self, frame_type: u8, reason: String) -> LinkError {
        LinkError::Malformed {
            direction: self.direction,
            offset: self.offset,
            frame_type,
            reason,
        }
    }

    fn decode_inner(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<Option<Decoded>, LinkError> {
        let Some(h) = parse_header(self.direction, self.offset, input)? else {
            return Ok(None);
        };
        let Some(payload) = input.get(HEADER_LEN..h.frame_len()) else {
            return Ok(None);
        };
        let mut event = None;
        let before = out.len();
        match h.frame_type {
            frame::VERBATIM => out.extend_from_slice(payload),
            frame::CHUNK | frame::COLUMNS => {
                if !self.compressed_allowed {
                    return Err(self.unexpected(
                        h.frame_type,
                        "a compressed chunk before the session finished authentication",
                    ));
                }
                let columns = h.frame_type == frame::COLUMNS;
                if columns && !self.columns {
                    return Err(self.unexpected(
                        h.frame_type,
                        "a column-coded chunk on a link version without them",
                    ));
                }
                let mut c = Cursor::new(payload);
                let raw = c
                    .u32_be()
                    .map_err(|e| self.malformed(h.frame_type, e.to_string()))?
                    as usize;
                if raw == 0 || raw > CHUNK_RAW_MAX {
                    return Err(LinkError::Decompress {
                        direction: self.direction,
                        offset: self.offset,
                        reason: format!("declares {raw} bytes, outside 1..={CHUNK_RAW_MAX}"),
                    });
                }
                let coded_len = if columns {
                    let n = c
                        .u32_be()
                        .map_err(|e| self.malformed(h.frame_type, e.to_string()))?
                        as usize;
                    if n == 0 || n > MAX_COLUMNS_CODED {
                        return Err(LinkError::Decompress {
                            direction: self.direction,
                            offset: self.offset,
                            reason: format!(
                                "declares a column coding of {n} bytes, outside 1..={MAX_COLUMNS_CODED}"
                            ),
                        });
                    }
                    Some(n)
                } else {
                    None
                };
                let (direction, offset) = (self.direction, self.offset);
                if self.ctx.is_none() {
                    self.ctx = Decompressor::new(&self.spec).map_err(|e| LinkError::Method {
                        spec: self.spec.to_string(),
                        reason: e.to_string(),
                    })?;
                }
                let Some(ctx) = self.ctx.as_mut() else {
                    return Err(self
                        .unexpected(h.frame_type, "a compressed chunk while the method is none"));
                };
                let failed = |reason| LinkError::Decompress {
                    direction,
                    offset,
                    reason,
                };
                match coded_len {
                    None => ctx.chunk(c.rest(), out, raw).map_err(failed)?,
                    Some(n) => {
                        self.coded.clear();
                        ctx.chunk(c.rest(), &mut self.coded, n).map_err(failed)?;
                        let start = out.len();
                        codec::columns::decode_into(&self.coded, raw, out)
                            .map_err(|e| failed(format!("column coding: {e}")))?;
                        let got = out.len() - start;
                        if got != raw {
                            out.truncate(start);
                            return Err(failed(format!(
                                "column coding yields {got} bytes, {raw} declared"
                            )));
                        }
                    }
                }
                self.counters.chunks += 1;
                self.counters.column_chunks += u64::from(columns);
            }
            frame::METHOD => {
                let text = std::str::from_utf8(payload)
                    .map_err(|e| self.malformed(h.frame_type, e.to_string()))?;
                let spec = parse_spec(text)?;
                // A fresh context starts with the next chunk, as the encoder's does.
                self.ctx = None;
                self.spec = spec;
                event = Some(Event::MethodSwitched(spec));
            }
            frame::READY => {
                if self.direction != Direction::BackendToFrontend {
                    return Err(
                        self.unexpected(h.frame_type, "Ready only travels backend->frontend")
                    );
                }
                if self.compressed_allowed {
                    return Err(self.unexpected(h.frame_type, "a second Ready frame"));
                }
                self.compressed_allowed = true;
                event = Some(Event::SessionReady);
            }
            t => return Err(self.unexpected(t, "a handshake frame after the handshake")),
        }
        self.counters.raw_bytes += (out.len() - before) as u64;
        self.counters.link_bytes += h.frame_len() as u64;
        self.counters.frames += 1;
        self.offset += h.frame_len() as u64;
        Ok(Some(Decoded {
            consumed: h.frame_len(),
            event,
        }))
    }

    /// Call when the link stream has ended with `rest` unread: an error if a frame was cut.
    pub fn finish(&self, rest: &[u8]) -> Result<(), LinkError> {
        if rest.is_empty() {
            return Ok(());
        }
        let need = self.peek_len(rest)?.unwrap_or(HEADER_LEN);
        Err(LinkError::Truncated {
            direction: self.direction,
            offset: self.offset,
            have: rest.len(),
            need,
        })
    }
}
