//! The sending side of one direction: PostgreSQL messages in, link frames out.

use codec::Spec;

use super::context::Compressor;
use super::frame::{self, put_frame, put_header, HEADER_LEN};
use super::{
    check_spec, Counters, CHUNK_RAW_MAX, COLUMNS_FROM_LEVEL, DEFAULT_THRESHOLD, MAX_SPEC_LEN,
};
use crate::backend::READY_FOR_QUERY;
use crate::error::LinkError;
use crate::framer::{Message, Piece};
use crate::{backend, frontend, Direction};

/// Fewest bytes of a batch compressed in a warm zstd context: a repeat costs about 19 link
/// bytes (frame 5, raw length 4, zstd block about 10), so a shorter batch ("BEGIN;" is 12
/// bytes, "END;" 10) is cheaper verbatim.
const WARM_THRESHOLD: usize = 15;

/// A set of message type bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TagSet([bool; 256]);

impl TagSet {
    /// The set of the given type bytes.
    pub fn from_tags(tags: &[u8]) -> Self {
        let mut set = [false; 256];
        for &t in tags {
            set[usize::from(t)] = true;
        }
        TagSet(set)
    }

    /// True if `tag` is in the set.
    pub fn contains(&self, tag: u8) -> bool {
        self.0[usize::from(tag)]
    }
}

impl TagSet {
    /// Every message type: what both halves compress unless told otherwise, since a run of
    /// short messages (narrow DataRows, OLTP's CommandComplete and ReadyForQuery) compresses
    /// in the persistent context as well as one long message does.
    pub fn all() -> Self {
        TagSet([true; 256])
    }

    /// CopyData, DataRow and Query: bulk data and long statements.
    pub fn bulk() -> Self {
        TagSet::from_tags(&[frontend::COPY_DATA, backend::DATA_ROW, frontend::QUERY])
    }
}

impl Default for TagSet {
    /// Every message type ([`TagSet::all`]).
    fn default() -> Self {
        TagSet::all()
    }
}

/// What the sender of one direction compresses, and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SenderConfig {
    /// The method (agreed in the handshake).
    pub spec: Spec,
    /// Message types that are compressed.
    pub compress: TagSet,
    /// Fewest bytes ready to send at once (the messages read in one go, of the types in
    /// `compress`) that are compressed while the context is cold; a smaller batch travels
    /// verbatim, since a chunk's headers and a zstd frame's would outweigh what it saves.
    /// Once a zstd context holds earlier batches, every batch of 15 bytes or more is.
    pub threshold: usize,
    /// Chunks may be column-coded (link version 2 and later): at zstd levels from
    /// [`COLUMNS_FROM_LEVEL`], a chunk that looks like rows of delimited text travels as a
    /// Columns frame.
    pub columns: bool,
}

impl SenderConfig {
    /// `spec` with the default set (every type) and threshold (60 bytes).
    pub fn new(spec: Spec) -> Self {
        SenderConfig {
            spec,
            compress: TagSet::default(),
            threshold: DEFAULT_THRESHOLD,
            columns: false,
        }
    }
}

/// Running totals of the traffic one encoder could compress, for `--method auto`
/// ([`super::auto::Observation`] takes their differences).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Compressible {
    /// Bytes of messages of a compressible type after the session became ready, whatever
    /// the method.
    pub eligible: u64,
    /// PostgreSQL bytes that went into compressed chunks.
    pub chunk_raw: u64,
    /// Link bytes of those chunks (frame headers included).
    pub chunk_link: u64,
}

/// Turns one direction's PostgreSQL messages into link frames.
///
/// Call [`LinkEncoder::push`] for every message the framer yields and [`LinkEncoder::flush`]
/// when the source has nothing more ready; write out [`LinkEncoder::output`] and
/// [`LinkEncoder::consume`] what was written. After the session is ready, the messages pushed
/// between two flushes make one batch, whatever their sizes: a batch of at least the
/// threshold goes into one persistent context and out as one chunk (or several, at the chunk
/// cap); a shorter one travels verbatim until a zstd context exists, and is compressed after
/// from 15 bytes (it mostly repeats what the context holds). A message of a type outside the compressed set
/// closes the batch and travels verbatim.
pub struct LinkEncoder {
    direction: Direction,
    config: SenderConfig,
    /// The context, created at the first compressed message (never for method none).
    ctx: Option<Compressor>,
    ready: bool,
    out: Vec<u8>,
    /// Index in `out` of the verbatim frame still open for appending.
    verbatim_at: Option<usize>,
    chunk: Vec<u8>,
    chunk_raw: usize,
    /// The chunk's PostgreSQL bytes, kept whole while chunks may be column-coded (they are
    /// compressed when the chunk ends); empty otherwise, each piece then going straight
    /// into the context.
    raw: Vec<u8>,
    /// The link is the limit (`--method auto` measured it): chunks are column-coded at every
    /// zstd level, not only from [`COLUMNS_FROM_LEVEL`].
    link_bound: bool,
    /// The current message belongs to the batch (compressed unless the batch stays under
    /// the threshold).
    in_run: bool,
    /// The start of the batch while it is under the threshold and nothing of it went into
    /// the context yet: sent verbatim if the batch ends this short (at most `threshold`
    /// bytes).
    pending: Vec<u8>,
    /// The current message is of a compressible type (after the session became ready).
    eligible: bool,
    /// A message was started and not ended yet (its pieces are still coming).
    mid_message: bool,
    counters: Counters,
    compressible: Compressible,
}

impl LinkEncoder {
    /// An encoder for `direction` with `config`; nothing is compressed before the session is
    /// ready (see [`LinkEncoder::session_ready`]). The compression context is created only
    /// when the first message is compressed, so a connection that never has anything to
    /// compress never allocates one.
    pub fn new(direction: Direction, config: SenderConfig) -> Result<Self, LinkError> {
        check_spec(&config.spec)?;
        Ok(LinkEncoder {
            direction,
            config,
            ctx: None,
            ready: false,
            out: Vec::new(),
            verbatim_at: None,
            chunk: Vec::new(),
            chunk_raw: 0,
            raw: Vec::new(),
            link_bound: false,
            in_run: false,
            pending: Vec::new(),
            eligible: false,
            mid_message: false,
            counters: Counters::default(),
            compressible: Compressible::default(),
        })
    }

    /// The direction this encoder sends.
    pub fn direction(&self) -> Direction {
        self.direction
    }

    /// The method in use.
    pub fn spec(&self) -> &Spec {
        &self.config.spec
    }

    /// True once compression is allowed: after the first ReadyForQuery (backend->frontend) or
    /// [`LinkEncoder::session_ready`] (frontend->backend).
    pub fn is_ready(&self) -> bool {
        self.ready
    }

    /// The event that lets the frontend->backend direction compress: the other direction's
    /// decoder returned [`super::Event::SessionReady`]. The backend->frontend encoder finds
    /// the first ReadyForQuery itself and ignores this.
    pub fn session_ready(&mut self) {
        if self.direction == Direction::FrontendToBackend {
            self.ready = true;
        }
    }

    /// Counters of this direction so far.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// What this encoder could compress and did, so far.
    pub fn compressible(&self) -> Compressible {
        self.compressible
    }

    /// Bytes the compression context holds (zstd's own count; 0 without a context and for
    /// lz4, whose crate does not tell).
    pub fn context_memory(&self) -> usize {
        self.ctx.as_ref().map_or(0, Compressor::memory)
    }

    /// True between messages: a method switch is possible (not while the pieces of a long
    /// message are still coming).
    pub fn at_message_boundary(&self) -> bool {
        !self.mid_message
    }

    /// True once a compression context exists (after the first compressed message of the
    /// current method).
    pub fn has_context(&self) -> bool {
        self.ctx.is_some()
    }

    /// Frames ready to be written. Closes the open verbatim frame, so later bytes start a
    /// new one.
    pub fn output(&mut self) -> &[u8] {
        self.verbatim_at = None;
        &self.out
    }

    /// Bytes of frames ready to be written: the caller stops reading its source while this
    /// is above its bound.
    pub fn pending(&self) -> usize {
        self.out.len()
    }

    /// Drops the first `n` bytes of [`LinkEncoder::output`], which were written.
    pub fn consume(&mut self, n: usize) {
        self.verbatim_at = None;
        self.out.drain(..n.min(self.out.len()));
    }

    fn compress_err(&self, e: std::io::Error) -> LinkError {
        LinkError::Compress {
            direction: self.direction,
            reason: e.to_string(),
        }
    }

    fn emit(&mut self, frame_type: u8, payload: &[u8]) {
        self.verbatim_at = None;
        put_frame(&mut self.out, frame_type, payload);
        self.counters.frames += 1;
        self.counters.link_bytes += (HEADER_LEN + payload.len()) as u64;
    }

    /// Adds one message from the framer.
    pub fn push(&mut self, msg: &Message<'_>) -> Result<(), LinkError> {
        self.push_bytes(msg.tag(), msg.bytes)
    }

    /// Adds one whole message given as its type byte (`None` for a first packet) and bytes.
    pub fn push_bytes(&mut self, tag: Option<u8>, bytes: &[u8]) -> Result<(), LinkError> {
        self.start_message(tag)?;
        self.append(bytes)?;
        self.end_message(tag)
    }

    /// Adds one piece from [`crate::Framer::poll_piece`]: a long message passes through in
    /// pieces, never held whole, and is compressed or sent verbatim as a whole message would.
    pub fn push_piece(&mut self, piece: &Piece<'_>) -> Result<(), LinkError> {
        if piece.first {
            self.start_message(piece.tag())?;
        }
        self.append(piece.bytes)?;
        if piece.last {
            self.end_message(piece.tag())?;
        }
        Ok(())
    }

    /// Decides whether the message starting now joins the batch.
    fn start_message(&mut self, tag: Option<u8>) -> Result<(), LinkError> {
        self.counters.messages += 1;
        self.mid_message = true;
        self.eligible = self.ready && tag.is_some_and(|t| self.config.compress.contains(t));
        // Whether the batch is compressed is decided by the bytes ready together when it
        // ends (see `finish_chunk`), not by this message's size.
        let batch = self.eligible && self.config.spec.method != codec::Method::None;
        if !batch {
            self.finish_chunk()?;
        }
        self.in_run = batch;
        Ok(())
    }

    /// Adds bytes of the current message, compressed or verbatim as decided at its start.
    fn append(&mut self, bytes: &[u8]) -> Result<(), LinkError> {
        self.counters.raw_bytes += bytes.len() as u64;
        if self.eligible {
            self.compressible.eligible += bytes.len() as u64;
        }
        if !self.in_run {
            self.put_verbatim(bytes);
            return Ok(());
        }
        let threshold = if self.warm() {
            WARM_THRESHOLD.min(self.config.threshold)
        } else {
            self.config.threshold
        };
        if self.chunk_raw == 0 && self.pending.len() + bytes.len() < threshold {
            self.pending.extend_from_slice(bytes);
            return Ok(());
        }
        if !self.pending.is_empty() {
            let pending = std::mem::take(&mut self.pending);
            let r = self.compress_bytes(&pending);
            self.pending = pending;
            self.pending.clear();
            r?;
        }
        self.compress_bytes(bytes)
    }

    /// True once a zstd context holds earlier batches: from then on a batch of
    /// [`WARM_THRESHOLD`] bytes or more is compressed, since a short one that repeats them
    /// (OLTP's "UPDATE 1" and ReadyForQuery, 20 bytes) costs about 10 bytes of zstd block,
    /// under the 5 bytes of frame header plus its own length that it would cost verbatim.
    /// Not for lz4: its block header (4 bytes) and its rule that a block's last 5 bytes are
    /// literals keep a 20-byte chunk over that.
    fn warm(&self) -> bool {
        self.ctx.is_some() && self.config.spec.method == codec::Method::Zstd
    }

    /// Adds bytes of the batch to the chunk in progress, closing it at the chunk cap.
    fn compress_bytes(&mut self, bytes: &[u8]) -> Result<(), LinkError> {
        self.verbatim_at = None;
        let mut rest = bytes;
        while !rest.is_empty() {
            let n = rest.len().min(CHUNK_RAW_MAX - self.chunk_raw);
            let (piece, tail) = rest.split_at(n);
            if self.ctx.is_none() {
                // A switch inside this message dropped the context.
                self.ctx = Compressor::new(&self.config.spec).map_err(|e| self.compress_err(e))?;
            }
            if self.columns_now() {
                self.raw.extend_from_slice(piece);
            } else if let Some(ctx) = self.ctx.as_mut() {
                ctx.write(piece, &mut self.chunk)
                    .map_err(|e| LinkError::Compress {
                        direction: self.direction,
                        reason: e.to_string(),
                    })?;
            }
            self.chunk_raw += n;
            rest = tail;
            if self.chunk_raw == CHUNK_RAW_MAX {
                self.finish_chunk()?;
            }
        }
        Ok(())
    }

    /// The current message has ended.
    fn end_message(&mut self, tag: Option<u8>) -> Result<(), LinkError> {
        self.mid_message = false;
        if !self.in_run
            && self.direction == Direction::BackendToFrontend
            && !self.ready
            && tag == Some(READY_FOR_QUERY)
        {
            // Authentication is over: from here on both directions may compress.
            self.emit(frame::READY, &[]);
            self.ready = true;
        }
        Ok(())
    }

    fn put_verbatim(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let at = match self.verbatim_at {
                Some(at) if self.out.len() - at - HEADER_LEN < CHUNK_RAW_MAX => at,
                _ => {
                    let at = put_header(&mut self.out, frame::VERBATIM, 0);
                    self.counters.frames += 1;
                    self.counters.link_bytes += HEADER_LEN as u64;
                    self.verbatim_at = Some(at);
                    at
                }
            };
            let len = self.out.len() - at - HEADER_LEN;
            let n = bytes.len().min(CHUNK_RAW_MAX - len);
            self.out.extend_from_slice(&bytes[..n]);
            self.counters.link_bytes += n as u64;
            let new_len = ((len + n) as u32).to_be_bytes();
            self.out[at + 1..at + HEADER_LEN].copy_from_slice(&new_len);
            bytes = &bytes[n..];
        }
    }

    /// Whether the chunk in progress is kept whole to be column-coded when it ends.
    fn columns_now(&self) -> bool {
        let spec = &self.config.spec;
        self.config.columns
            && spec.method == codec::Method::Zstd
            && (self.link_bound
                || spec
                    .effective_level()
                    .is_some_and(|l| l >= COLUMNS_FROM_LEVEL))
    }

    /// Tells the encoder whether the link is the limit (`--method auto` measures it each
    /// interval): while it is, chunks are column-coded at every zstd level, so that a short
    /// transfer on a slow link gains from its first rungs. A change closes the chunk in
    /// progress first, so that no chunk mixes coded and plain bytes.
    pub fn set_link_bound(&mut self, link_bound: bool) -> Result<(), LinkError> {
        if link_bound != self.link_bound {
            self.finish_chunk()?;
            self.link_bound = link_bound;
            if !self.columns_now() {
                self.raw = Vec::new();
            }
        }
        Ok(())
    }

    fn finish_chunk(&mut self) -> Result<(), LinkError> {
        if self.chunk_raw == 0 {
            // A batch under the threshold: verbatim, without touching the context.
            if !self.pending.is_empty() {
                let pending = std::mem::take(&mut self.pending);
                self.put_verbatim(&pending);
                self.pending = pending;
                self.pending.clear();
            }
            return Ok(());
        }
        let mut chunk = std::mem::take(&mut self.chunk);
        // A whole chunk kept for the column coding: the coding if it applies and fits,
        // else the bytes as they are, into the same context.
        let raw = std::mem::take(&mut self.raw);
        let coded = if raw.is_empty() {
            None
        } else {
            codec::columns::encode(&raw).filter(|c| c.len() <= frame::MAX_COLUMNS_CODED)
        };
        if let Some(ctx) = self.ctx.as_mut() {
            let input = coded.as_deref().unwrap_or(&raw);
            let r = ctx
                .write(input, &mut chunk)
                .and_then(|()| ctx.flush(&mut chunk));
            if let Err(e) = r {
                return Err(self.compress_err(e));
            }
        }
        let (frame_type, lengths, cap) = match &coded {
            Some(_) => (frame::COLUMNS, 8, frame::MAX_COLUMNS_PAYLOAD),
            None => (frame::CHUNK, 4, frame::MAX_CHUNK_PAYLOAD),
        };
        let payload_len = lengths + chunk.len();
        if payload_len > cap as usize {
            return Err(LinkError::Compress {
                direction: self.direction,
                reason: format!("chunk of {payload_len} bytes exceeds the frame cap"),
            });
        }
        self.verbatim_at = None;
        put_header(&mut self.out, frame_type, payload_len);
        self.out
            .extend_from_slice(&(self.chunk_raw as u32).to_be_bytes());
        if let Some(c) = &coded {
            self.out.extend_from_slice(&(c.len() as u32).to_be_bytes());
        }
        self.out.extend_from_slice(&chunk);
        let mut raw = raw;
        raw.clear();
        self.raw = raw;
        self.counters.frames += 1;
        self.counters.chunks += 1;
        self.counters.column_chunks += u64::from(coded.is_some());
        self.counters.link_bytes += (HEADER_LEN + payload_len) as u64;
        self.compressible.chunk_raw += self.chunk_raw as u64;
        self.compressible.chunk_link += (HEADER_LEN + payload_len) as u64;
        chunk.clear();
        self.chunk = chunk;
        self.chunk_raw = 0;
        Ok(())
    }

    /// The source has nothing more ready: emit the chunk in progress (the context is flushed,
    /// not reset) so the peer can deliver everything pushed so far.
    pub fn flush(&mut self) -> Result<(), LinkError> {
        self.finish_chunk()?;
        self.verbatim_at = None;
        Ok(())
    }

    /// Switches to `spec` at the current message boundary: flushes, sends a Method frame and
    /// drops the context (a fresh one starts with the next compressed message); the peer's
    /// decoder follows. Inside a long message (see [`LinkEncoder::at_message_boundary`]) the
    /// switch falls between two of its chunks, which a decoder handles alike (it sees bytes,
    /// not messages): `--method auto` stops compressing a 300 MB incompressible value
    /// without waiting for its end.
    pub fn switch_method(&mut self, spec: Spec) -> Result<(), LinkError> {
        check_spec(&spec)?;
        let text = spec.to_string();
        if text.len() > MAX_SPEC_LEN {
            return Err(LinkError::Method {
                spec: text,
                reason: "specification too long".to_owned(),
            });
        }
        self.finish_chunk()?;
        // The next compressed message starts a fresh context, as the peer's decoder does.
        self.ctx = None;
        // A switch to a compressing method puts the rest of the current message in a new
        // batch if its type is compressed; the rest of a message not eligible stays verbatim.
        self.in_run = self.eligible && spec.method != codec::Method::None;
        self.emit(frame::METHOD, text.as_bytes());
        self.config.spec = spec;
        if !self.columns_now() {
            // Down from the column-coded levels: the chunk buffer is not needed any more.
            self.raw = Vec::new();
        }
        Ok(())
    }
}
