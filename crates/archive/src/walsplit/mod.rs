//! The WAL records transform: a segment's valid prefix taken apart into streams that compress
//! far better than the segment itself, and put back together byte for byte.
//!
//! A general-purpose compressor sees a segment as one byte string. Three things in it cost
//! a lot and carry no information, and one thing hides structure:
//!
//! - every record's `xl_prev` is the start of the record before it, and its `xl_crc` is the
//!   CRC-32C of the record: twelve bytes per record that look random to a compressor, and
//!   that can be computed again on restore;
//! - every page starts with a header whose address grows by one page and whose
//!   `xlp_rem_len` follows from the record that crosses into it: stored as the difference to
//!   that prediction, they are nearly all zero;
//! - record headers, block headers, block data, main data and full-page images are
//!   interleaved, so like never sits next to like. Each goes to its own stream (the record
//!   header's fields to one column each), where similar bytes meet.
//!
//! The *content* of a segment is its bytes without page headers; records sit in it at
//! MAXALIGN positions (page headers are multiples of 8). It is: the *lead* (the end of a
//! record that began in an earlier segment, with its padding), then whole records each
//! followed by zero padding, then the *tail* (anything after the last record taken apart,
//! typically the start of a record that continues in the next segment). Lead and tail are
//! kept as they are. [`split`] stops taking records apart at the first thing that does not
//! fit this picture (a bad CRC, an unlinked `xl_prev`, non-zero padding, a body that does not
//! decode); the rest becomes tail, so the transform never refuses input, it only compresses
//! less. The caller still decodes the result and compares hashes before trusting it.
//!
//! [`join`] reverses it. It is fed bytes from outside (a container), so it checks every
//! length against what is present before copying or allocating, and fails with a
//! [`SplitError`] that says what and where instead of panicking.

mod error;

use codec::cursor::{le_u16_at, le_u32_at, le_u64_at, Cursor};
use std::sync::Arc;
use wal::consts::{
    LONG_PAGE_HEADER_LEN, RECORD_HEADER_LEN, SHORT_PAGE_HEADER_LEN, XLP_FIRST_IS_CONTRECORD,
    XLP_LONG_HEADER,
};
use wal::page::PageHeader;

use wal::consts::{maxalign, RECORD_CRC_OFFSET};
use wal::record::{decode_block_headers, decode_body, record_crc, Body};

pub use error::{FeedError, SplitError};

/// Number of streams.
pub const STREAMS: usize = 9;

/// The streams, in the order they are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Page 0's long header as it is, then every other page header XOR its prediction.
    PageHeaders = 0,
    /// The lead, then the tail: content kept as it is.
    Raw = 1,
    /// `xl_tot_len` of every record taken apart (u32 each).
    RecLen = 2,
    /// `xl_xid` (u32 each).
    RecXid = 3,
    /// `xl_info`, `xl_rmid` and the two padding bytes after them (4 bytes each).
    RecInfo = 4,
    /// Everything between the record header and the first payload byte: block headers,
    /// image headers, relation, block number, origin, top-level xid, main data length.
    BlockHeaders = 5,
    /// Block data (the per-block payload that is not an image).
    BlockData = 6,
    /// Main data.
    MainData = 7,
    /// Full-page images, as stored in the record.
    Images = 8,
}

impl Stream {
    /// All streams, in storage order.
    pub const ALL: [Stream; STREAMS] = [
        Stream::PageHeaders,
        Stream::Raw,
        Stream::RecLen,
        Stream::RecXid,
        Stream::RecInfo,
        Stream::BlockHeaders,
        Stream::BlockData,
        Stream::MainData,
        Stream::Images,
    ];

    /// A short name for listings.
    pub fn name(self) -> &'static str {
        match self {
            Stream::PageHeaders => "page headers",
            Stream::Raw => "lead and tail",
            Stream::RecLen => "record lengths",
            Stream::RecXid => "record xids",
            Stream::RecInfo => "record info",
            Stream::BlockHeaders => "block headers",
            Stream::BlockData => "block data",
            Stream::MainData => "main data",
            Stream::Images => "page images",
        }
    }
}

/// The few numbers [`join`] needs besides the streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SplitInfo {
    /// `xl_prev` of the first record taken apart (it points into an earlier segment).
    pub first_prev: u64,
    /// Records taken apart.
    pub records: u64,
    /// Bytes of content before the first record (the lead).
    pub lead_len: u64,
}

/// A split segment prefix.
#[derive(Debug, Clone, Default)]
pub struct Split {
    /// The numbers [`join`] needs.
    pub info: SplitInfo,
    /// The streams, indexed by [`Stream`].
    pub streams: [Vec<u8>; STREAMS],
}

/// MAXALIGN as a length: the most padding a record is followed by.
const MAXALIGN: usize = 8;

/// [`maxalign`] of a content offset or length (at most a segment's size, so it fits both
/// ways).
fn align(n: usize) -> usize {
    maxalign(n as u64) as usize
}

/// Where pages and content meet, for one block size.
#[derive(Debug, Clone, Copy)]
struct Pages {
    start: u64,
    blcksz: usize,
}

impl Pages {
    fn header_len(p: usize) -> usize {
        if p == 0 {
            LONG_PAGE_HEADER_LEN
        } else {
            SHORT_PAGE_HEADER_LEN
        }
    }

    /// Content offset at which page `p` (>= 1) begins.
    fn content_start(&self, p: usize) -> usize {
        (self.blcksz - LONG_PAGE_HEADER_LEN) + (p - 1) * (self.blcksz - SHORT_PAGE_HEADER_LEN)
    }

    /// Offset in the segment of content offset `pos`.
    fn data_offset(&self, pos: usize) -> usize {
        let first = self.blcksz - LONG_PAGE_HEADER_LEN;
        if pos < first {
            LONG_PAGE_HEADER_LEN + pos
        } else {
            let q = pos - first;
            let cap = self.blcksz - SHORT_PAGE_HEADER_LEN;
            (1 + q / cap) * self.blcksz + SHORT_PAGE_HEADER_LEN + q % cap
        }
    }

    /// LSN of content offset `pos`.
    fn lsn_of(&self, pos: usize) -> u64 {
        // Wrapping, as a release build does: a segment start near the top of the address
        // space is nonsense, but split and join must agree on it rather than panic.
        self.start.wrapping_add(self.data_offset(pos) as u64)
    }

    /// Calls `f(segment offset, length)` for each run of segment bytes that the content
    /// range `pos..pos + len` occupies, in order (one per page it touches).
    fn runs(&self, pos: usize, len: usize, f: impl FnMut(usize, usize)) {
        if len > 0 {
            self.runs_from(self.data_offset(pos), len, f);
        }
    }

    /// [`Pages::runs`] from segment offset `off` (that of a content offset), returning the
    /// segment offset of the content byte after the range. `blcksz` is a power of two, and
    /// every page after the first starts with a short header, so after the first run each
    /// run starts a header's length into the next page; no division is needed.
    fn runs_from(&self, mut off: usize, len: usize, mut f: impl FnMut(usize, usize)) -> usize {
        let mask = self.blcksz - 1;
        let mut left = len;
        loop {
            let n = (self.blcksz - (off & mask)).min(left);
            if n > 0 {
                f(off, n);
            }
            left -= n;
            off += n;
            if off & mask == 0 {
                off += SHORT_PAGE_HEADER_LEN;
            }
            if left == 0 {
                return off;
            }
        }
    }

    /// Content bytes `pos..pos + len` of the segment `data`: borrowed when they lie in one
    /// page, else gathered into `scratch`. The range must lie within the content.
    fn read<'a>(
        &self,
        data: &'a [u8],
        pos: usize,
        len: usize,
        scratch: &'a mut Vec<u8>,
    ) -> &'a [u8] {
        let off = self.data_offset(pos);
        if off % self.blcksz + len <= self.blcksz {
            return &data[off..off + len];
        }
        scratch.clear();
        self.runs(pos, len, |o, n| scratch.extend_from_slice(&data[o..o + n]));
        scratch
    }

    /// Appends content bytes `pos..pos + len` of the segment `data` to `out`.
    fn append(&self, data: &[u8], pos: usize, len: usize, out: &mut Vec<u8>) {
        self.runs(pos, len, |o, n| out.extend_from_slice(&data[o..o + n]));
    }

    /// Pages a prefix of `len` bytes touches and the content bytes it holds; `None` if it
    /// ends inside a page header.
    fn layout(&self, len: usize) -> Option<(usize, usize)> {
        if len == 0 {
            return Some((0, 0));
        }
        let pages = len.div_ceil(self.blcksz);
        let last = len - (pages - 1) * self.blcksz;
        if last < Pages::header_len(pages - 1) {
            return None;
        }
        let headers = LONG_PAGE_HEADER_LEN + (pages - 1) * SHORT_PAGE_HEADER_LEN;
        Some((pages, len - headers))
    }
}

/// Predicted short header of page `p` (>= 1): the first page's magic and timeline, the page's
/// own address, and the remaining length of the span that crosses its start.
fn predicted_header(first: &PageHeader, pages: &Pages, p: usize, rem: u32) -> [u8; 24] {
    let mut h = [0u8; SHORT_PAGE_HEADER_LEN];
    h[0..2].copy_from_slice(&first.magic.to_le_bytes());
    let info = if rem > 0 { XLP_FIRST_IS_CONTRECORD } else { 0 };
    h[2..4].copy_from_slice(&info.to_le_bytes());
    h[4..8].copy_from_slice(&first.tli.to_le_bytes());
    let addr = pages.start.wrapping_add((p * pages.blcksz) as u64);
    h[8..16].copy_from_slice(&addr.to_le_bytes());
    h[16..20].copy_from_slice(&rem.to_le_bytes());
    h
}

/// Spans of content (start, length) that page headers may report as continuing: the lead,
/// every record taken apart, and the record the tail starts with. Sorted, non-overlapping
/// except possibly the tail's, which only ever comes last.
struct Spans(Vec<(usize, usize)>);

impl Spans {
    /// The `xlp_rem_len` to predict for page `p`, advancing `cursor` through the spans.
    fn rem_at(&self, pages: &Pages, p: usize, cursor: &mut usize) -> u32 {
        let c = pages.content_start(p);
        while *cursor < self.0.len() && self.0[*cursor].0 + self.0[*cursor].1 <= c {
            *cursor += 1;
        }
        match self.0.get(*cursor) {
            Some(&(s, l)) if s < c && c < s + l => u32::try_from(s + l - c).unwrap_or(0),
            _ => 0,
        }
    }
}

/// Takes apart `data`, the valid prefix of a segment that starts at `seg_start`. `None` when
/// the prefix is not a run of well-formed pages of one segment (the caller then stores it
/// as it is).
pub fn split(data: &[u8], seg_start: u64) -> Option<Split> {
    let first = PageHeader::parse(data)?;
    let long = first.long?;
    let blcksz = long.xlog_blcksz as usize;
    if !blcksz.is_power_of_two() || !(1024..=65536).contains(&blcksz) {
        return None;
    }
    if first.pageaddr.0 != seg_start || first.info & XLP_LONG_HEADER == 0 {
        return None;
    }
    let pages = Pages {
        start: seg_start,
        blcksz,
    };
    let (npages, content_len) = pages.layout(data.len())?;
    for p in 1..npages {
        let off = p * blcksz;
        let info = le_u16_at(data, off + 2)?;
        let addr = le_u64_at(data, off + 8)?;
        if info & XLP_LONG_HEADER != 0 || addr != seg_start.wrapping_add(off as u64) {
            return None;
        }
    }

    let rem = if first.info & XLP_FIRST_IS_CONTRECORD != 0 {
        first.rem_len as usize
    } else if first.rem_len != 0 {
        return None;
    } else {
        0
    };
    let lead_len = align(rem).min(content_len);
    let mut out = Split::default();
    // Room for the largest streams up front (address space only until written), so that
    // they are never copied as they grow.
    for s in [Stream::BlockData, Stream::MainData, Stream::Images] {
        out.streams[s as usize].reserve(content_len);
    }
    let mut spans = Vec::new();
    if rem > 0 {
        spans.push((0, rem));
    }
    let mut body = Body::default();
    let mut scratch = Vec::new();
    let mut pos = lead_len;
    let mut prev_pos = None;
    while content_len - pos >= RECORD_HEADER_LEN {
        let tot = le_u32_at(pages.read(data, pos, 4, &mut scratch), 0)? as usize;
        if tot < RECORD_HEADER_LEN || tot > content_len - pos {
            break;
        }
        let rec = pages.read(data, pos, tot, &mut scratch);
        let prev = le_u64_at(rec, 8)?;
        let crc = le_u32_at(rec, RECORD_CRC_OFFSET)?;
        if record_crc(rec) != crc {
            break;
        }
        match prev_pos {
            None => out.info.first_prev = prev,
            Some(pp) if pages.lsn_of(pp) == prev => {}
            Some(_) => break,
        }
        if decode_body(rec, blcksz, &mut body).is_err() {
            break;
        }
        let pad_end = align(pos + tot).min(content_len);
        let mut padding_is_zero = true;
        pages.runs(pos + tot, pad_end - pos - tot, |o, n| {
            padding_is_zero &= data[o..o + n].iter().all(|&b| b == 0);
        });
        if !padding_is_zero {
            break;
        }
        let payload = payload_start(&body);
        let s = &mut out.streams;
        s[Stream::RecLen as usize].extend_from_slice(&rec[0..4]);
        s[Stream::RecXid as usize].extend_from_slice(&rec[4..8]);
        s[Stream::RecInfo as usize].extend_from_slice(&rec[16..20]);
        s[Stream::BlockHeaders as usize].extend_from_slice(&rec[RECORD_HEADER_LEN..payload]);
        for b in &body.blocks {
            s[Stream::Images as usize].extend_from_slice(&rec[b.image_range.clone()]);
            s[Stream::BlockData as usize].extend_from_slice(&rec[b.data_range.clone()]);
        }
        s[Stream::MainData as usize].extend_from_slice(&rec[body.main_data.clone()]);
        spans.push((pos, tot));
        prev_pos = Some(pos);
        pos = pad_end;
        out.info.records += 1;
    }
    if content_len - pos >= 4 {
        let len = le_u32_at(pages.read(data, pos, 4, &mut scratch), 0)?;
        spans.push((pos, len as usize));
    }
    out.info.lead_len = lead_len as u64;
    let raw = &mut out.streams[Stream::Raw as usize];
    pages.append(data, 0, lead_len, raw);
    pages.append(data, pos, content_len - pos, raw);

    let spans = Spans(spans);
    let hdrs = &mut out.streams[Stream::PageHeaders as usize];
    hdrs.extend_from_slice(&data[..LONG_PAGE_HEADER_LEN]);
    let mut cursor = 0;
    for p in 1..npages {
        let off = p * blcksz;
        let predicted = predicted_header(&first, &pages, p, spans.rem_at(&pages, p, &mut cursor));
        hdrs.extend(
            data[off..off + SHORT_PAGE_HEADER_LEN]
                .iter()
                .zip(predicted)
                .map(|(a, b)| a ^ b),
        );
    }
    Some(out)
}

/// Offset of the first payload byte: the end of the block headers.
fn payload_start(body: &Body) -> usize {
    body.blocks
        .first()
        .map_or(body.main_data.start, |b| b.image_range.start)
}

/// Where a stream's bytes come from while [`join_sources`] reads it back.
pub enum Source<'a> {
    /// The whole stream, at hand.
    Bytes(&'a [u8]),
    /// Read as it is decompressed, and the stream's length.
    Feed(Box<dyn Feed + 'a>, usize),
}

/// The reading end of a stream being decompressed, for [`Source::Feed`]: buffers of it in
/// order. A buffer's bytes start at an offset; what comes before is room for the reader to
/// put the unread end of the previous buffer in front of them, so that a read across two
/// buffers copies only that end.
pub trait Feed {
    /// The next buffer and the offset at which its bytes start, or `None` at the end.
    fn next(&mut self) -> Result<Option<(Vec<u8>, usize)>, FeedError>;
    /// Gives back a buffer whose bytes have all been read, to be filled again.
    fn recycle(&mut self, buf: Vec<u8>);
}

/// A stream being read back.
struct Reader<'a> {
    src: Src<'a>,
    stream: Stream,
    /// The stream's length.
    total: usize,
    /// Bytes not taken yet.
    left: usize,
}

enum Src<'a> {
    Bytes {
        bytes: &'a [u8],
        pos: usize,
    },
    /// `buf[pos..filled]` is decompressed and not taken yet.
    /// `buf[pos..]` is decompressed and not taken yet.
    Feed {
        feed: Box<dyn Feed + 'a>,
        buf: Vec<u8>,
        pos: usize,
    },
}

impl<'a> Reader<'a> {
    fn new(source: Source<'a>, stream: Stream) -> Reader<'a> {
        let (src, total) = match source {
            Source::Bytes(bytes) => (Src::Bytes { bytes, pos: 0 }, bytes.len()),
            Source::Feed(feed, total) => (
                Src::Feed {
                    feed,
                    buf: Vec::new(),
                    pos: 0,
                },
                total,
            ),
        };
        Reader {
            src,
            stream,
            total,
            left: total,
        }
    }

    /// The next `n` bytes (at most what is left), without taking them.
    fn peek(&mut self, n: usize) -> Result<&[u8], SplitError> {
        let n = n.min(self.left);
        let (stream, total, offset) = (self.stream, self.total, self.total - self.left);
        match &mut self.src {
            Src::Bytes { bytes, pos } => Cursor::at(bytes, *pos)
                .take(n)
                .map_err(|source| SplitError::StreamShort { stream, source }),
            Src::Feed { feed, buf, pos } => {
                while buf.len() - *pos < n {
                    let read = offset + (buf.len() - *pos);
                    let next = feed.next().map_err(|source| SplitError::Feed {
                        stream,
                        offset: read,
                        source,
                    })?;
                    let Some((mut next, start)) = next else {
                        return Err(SplitError::FeedShort {
                            stream,
                            offset: read,
                            total,
                        });
                    };
                    // The unread end of this buffer goes in front of the next one's bytes:
                    // into its free room when it fits, else both are copied together.
                    let left = buf.len() - *pos;
                    if left <= start {
                        next[start - left..start].copy_from_slice(&buf[*pos..]);
                        *pos = start - left;
                        let old = std::mem::replace(buf, next);
                        feed.recycle(old);
                    } else {
                        // A long read: this buffer grows to hold it (once moved to the front,
                        // every later buffer is appended).
                        buf.drain(..*pos);
                        *pos = 0;
                        buf.reserve(n.saturating_sub(buf.len()));
                        buf.extend_from_slice(&next[start..]);
                        feed.recycle(next);
                    }
                }
                Ok(&buf[*pos..*pos + n])
            }
        }
    }

    fn take(&mut self, n: usize) -> Result<&[u8], SplitError> {
        if self.left < n {
            return Err(SplitError::StreamShort {
                stream: self.stream,
                source: codec::ShortRead {
                    offset: self.total - self.left,
                    needed: n,
                    remaining: self.left,
                },
            });
        }
        self.peek(n)?;
        self.left -= n;
        let (src, pos) = match &mut self.src {
            Src::Bytes { bytes, pos } => (*bytes, pos),
            Src::Feed { buf, pos, .. } => (buf.as_slice(), pos),
        };
        let s = &src[*pos..*pos + n];
        *pos += n;
        Ok(s)
    }

    /// The next `N` bytes as an array (a fixed-width column value).
    fn array<const N: usize>(&mut self) -> Result<[u8; N], SplitError> {
        let stream = self.stream;
        Cursor::new(self.take(N)?)
            .array()
            .map_err(|source| SplitError::StreamShort { stream, source })
    }

    fn left(&self) -> usize {
        self.left
    }
}

/// Rebuilds the valid prefix, `valid_len` bytes of a segment that starts at `seg_start`.
/// `streams` are indexed by [`Stream`]. Every length is checked; nothing is allocated beyond
/// what the streams hold.
pub fn join(
    seg_start: u64,
    valid_len: u64,
    info: &SplitInfo,
    streams: &[Vec<u8>; STREAMS],
) -> Result<Vec<u8>, SplitError> {
    let mut out = Vec::new();
    join_into(
        seg_start,
        valid_len,
        info,
        streams,
        |piece| out.extend_from_slice(&piece),
        || false,
    )?;
    Ok(out)
}

/// Bytes of the segment in one [`Piece`]: a multiple of every WAL block size.
const CHUNK: usize = 256 << 10;

/// Chunks [`join_into`] keeps before it waits for its consumers to let one go, unless a
/// record needs more.
const CHUNKS_IN_FLIGHT: usize = 12;

/// A finished piece of a rebuilt segment, shared with the consumers it is handed to. Its
/// memory goes back to [`join_into`] for the next piece once every copy is dropped.
#[derive(Clone, Debug)]
pub struct Piece {
    chunk: Arc<Vec<u8>>,
    len: usize,
}

impl Piece {
    /// A piece that owns `bytes` (for what follows the rebuilt prefix).
    pub fn from_vec(bytes: Vec<u8>) -> Piece {
        let len = bytes.len();
        Piece {
            chunk: Arc::new(bytes),
            len,
        }
    }

    /// The first `len` bytes of `self` (at most its length), sharing its memory.
    pub fn prefix(&self, len: usize) -> Piece {
        Piece {
            chunk: Arc::clone(&self.chunk),
            len: len.min(self.len),
        }
    }
}

impl std::ops::Deref for Piece {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.chunk[..self.len]
    }
}

/// [`join`], handing the prefix to `ready` in order, in finished pieces that start on page
/// boundaries (together `valid_len` bytes), instead of building it in one buffer: a
/// consumer on another thread can hash or write the start of the segment while the rest is
/// rebuilt, and the memory of a piece is used again once every copy of it is dropped. When
/// [`CHUNKS_IN_FLIGHT`] pieces are still held, `wait` is called until one is let go (it
/// should block until a consumer drops a piece). On an error some pieces may have been
/// handed on already; the caller must then discard what it made of them.
pub fn join_into(
    seg_start: u64,
    valid_len: u64,
    info: &SplitInfo,
    streams: &[Vec<u8>; STREAMS],
    ready: impl FnMut(Piece),
    wait: impl FnMut() -> bool,
) -> Result<(), SplitError> {
    let sources = std::array::from_fn(|i| Source::Bytes(&streams[i]));
    join_sources(seg_start, valid_len, info, sources, ready, wait)
}

/// [`join_into`] from streams that may be decompressed as they are read.
pub fn join_sources(
    seg_start: u64,
    valid_len: u64,
    info: &SplitInfo,
    sources: [Source<'_>; STREAMS],
    mut ready: impl FnMut(Piece),
    mut wait: impl FnMut() -> bool,
) -> Result<(), SplitError> {
    let mut r: Vec<Reader<'_>> = sources
        .into_iter()
        .zip(Stream::ALL)
        .map(|(source, s)| Reader::new(source, s))
        .collect();
    let available: usize = r.iter().map(|s| s.total).sum();
    let first_bytes: [u8; LONG_PAGE_HEADER_LEN] = r[Stream::PageHeaders as usize].array()?;
    let first_bytes = &first_bytes[..];
    let first = PageHeader::parse(first_bytes).ok_or(SplitError::FirstHeader)?;
    let long = first.long.ok_or(SplitError::FirstHeader)?;
    let blcksz = long.xlog_blcksz as usize;
    if !blcksz.is_power_of_two() || !(1024..=65536).contains(&blcksz) {
        return Err(SplitError::BlockSize { blcksz });
    }
    if first.pageaddr.0 != seg_start {
        return Err(SplitError::PageAddress {
            found: first.pageaddr.0,
            seg_start,
        });
    }
    let pages = Pages {
        start: seg_start,
        blcksz,
    };
    let too_large = |what, value| move |_| SplitError::TooLarge { what, value };
    let valid_len = usize::try_from(valid_len).map_err(too_large("valid length", valid_len))?;
    let (npages, content_len) = pages
        .layout(valid_len)
        .ok_or(SplitError::EndsInHeader { valid_len })?;
    // Content is the streams' bytes plus 12 regenerated bytes per record plus padding: a
    // claimed length far beyond that is refused before anything is reserved.
    let records = usize::try_from(info.records).map_err(too_large("record count", info.records))?;
    if r[Stream::RecLen as usize].total / 4 != records {
        return Err(SplitError::RecordCount {
            claimed: records,
            held: r[Stream::RecLen as usize].total / 4,
        });
    }
    let bound =
        available.saturating_add(records.saturating_mul(RECORD_HEADER_LEN - 12 + MAXALIGN + 12));
    if content_len > bound {
        return Err(SplitError::ContentBound { content_len, bound });
    }
    let lead_len =
        usize::try_from(info.lead_len).map_err(too_large("lead length", info.lead_len))?;
    if lead_len > content_len {
        return Err(SplitError::LeadTooLong {
            lead_len,
            content_len,
        });
    }
    // The segment is written chunk by chunk: content at its offsets between the page
    // headers, whose slots are filled as the pages are finished. Chunks are used again, so
    // every byte is written: lead, records, their padding, tail and page headers.
    let mut w = Window {
        chunks: std::collections::VecDeque::new(),
        first: 0,
        end: valid_len,
        lent: Vec::new(),
        next_page: 1,
        cursor: 0,
        spans: Spans(Vec::new()),
        after: (0, LONG_PAGE_HEADER_LEN),
    };
    w.put(0, first_bytes, &mut wait);
    let lead = r[Stream::Raw as usize].take(lead_len)?;
    w.write(&pages, 0, lead, &mut wait);
    let rem = if first.info & XLP_FIRST_IS_CONTRECORD != 0 {
        first.rem_len as usize
    } else {
        0
    };
    if rem > 0 {
        w.spans.0.push((0, rem));
    }
    let mut body = Body::default();
    // Segment offset of the previous record's header (its LSN less the segment start).
    let mut prev_off: Option<usize> = None;
    let mut pos = lead_len;
    for i in 0..records {
        let tot = u32::from_le_bytes(r[Stream::RecLen as usize].array()?) as usize;
        let xid: [u8; 4] = r[Stream::RecXid as usize].array()?;
        let inf: [u8; 4] = r[Stream::RecInfo as usize].array()?;
        // Only errors need the record's LSN: a division the loop otherwise does without.
        let lsn = || wal::Lsn(pages.lsn_of(pos));
        if tot < RECORD_HEADER_LEN || tot > content_len - pos {
            return Err(SplitError::RecordLength {
                record: i,
                lsn: lsn(),
                len: tot,
                left: content_len - pos,
            });
        }
        let payload_left: usize = [
            Stream::BlockHeaders,
            Stream::BlockData,
            Stream::MainData,
            Stream::Images,
        ]
        .iter()
        .map(|&s| r[s as usize].left())
        .sum();
        if tot - RECORD_HEADER_LEN > payload_left {
            return Err(SplitError::RecordPayload {
                record: i,
                lsn: lsn(),
                len: tot,
                held: payload_left,
            });
        }
        let prev = match prev_off {
            None => info.first_prev,
            Some(o) => pages.start.wrapping_add(o as u64),
        };
        // The block headers' length is known once they are parsed: parse them from as many
        // stream bytes as the record could hold, then take only what they occupy.
        let headers = r[Stream::BlockHeaders as usize].peek(tot - RECORD_HEADER_LEN)?;
        let avail = headers.len();
        decode_block_headers(headers, tot - RECORD_HEADER_LEN, blcksz, &mut body).map_err(
            |source| SplitError::BlockHeaders {
                record: i,
                lsn: lsn(),
                pos,
                source,
            },
        )?;
        let payload = payload_start(&body);
        if payload - RECORD_HEADER_LEN > avail {
            return Err(SplitError::HeadersPastStream {
                record: i,
                lsn: lsn(),
            });
        }
        // The header goes first, its CRC-32C left zero; the body follows it, the CRC
        // computed on the way, and the CRC (which ends with the header's first 20 bytes)
        // goes in last. Every write continues the one before it, so none needs a division
        // to find its place.
        let mut header = [0u8; RECORD_HEADER_LEN];
        header[0..4].copy_from_slice(&(tot as u32).to_le_bytes());
        header[4..8].copy_from_slice(&xid);
        header[8..16].copy_from_slice(&prev.to_le_bytes());
        header[16..20].copy_from_slice(&inf);
        let header_off = w.write(&pages, pos, &header, &mut wait);
        let mut at = pos + RECORD_HEADER_LEN;
        let mut crc = 0;
        let mut put = |bytes: &[u8], w: &mut Window| {
            w.write(&pages, at, bytes, &mut wait);
            crc = crc32c::crc32c_append(crc, bytes);
            at += bytes.len();
        };
        put(
            r[Stream::BlockHeaders as usize].take(payload - RECORD_HEADER_LEN)?,
            &mut w,
        );
        for b in &body.blocks {
            put(
                r[Stream::Images as usize].take(b.image_range.len())?,
                &mut w,
            );
            put(
                r[Stream::BlockData as usize].take(b.data_range.len())?,
                &mut w,
            );
        }
        put(
            r[Stream::MainData as usize].take(body.main_data.len())?,
            &mut w,
        );
        debug_assert_eq!(at, pos + tot);
        let crc = crc32c::crc32c_append(crc, &header[..RECORD_CRC_OFFSET]);
        let crc_off = pages.runs_from(header_off, RECORD_CRC_OFFSET, |_, _| {});
        w.write_at(&pages, crc_off, &crc.to_le_bytes(), &mut wait);
        w.spans.0.push((pos, tot));
        prev_off = Some(header_off);
        let next = align(pos + tot).min(content_len);
        w.write(
            &pages,
            pos + tot,
            &[0; MAXALIGN][..next - pos - tot],
            &mut wait,
        );
        pos = next;
        // Everything before the page the next record starts in is final.
        let upto = w.offset_of(&pages, pos) & !(blcksz - 1);
        if upto >= w.first + CHUNK {
            w.release(
                &pages,
                &first,
                upto,
                &mut r[Stream::PageHeaders as usize],
                &mut ready,
                &mut wait,
            )?;
        }
    }
    let raw = &mut r[Stream::Raw as usize];
    let tail = raw.take(raw.left())?;
    if pos + tail.len() != content_len {
        return Err(SplitError::ContentLength {
            content: pos + tail.len(),
            needed: content_len,
        });
    }
    w.write(&pages, pos, tail, &mut wait);
    if let Some(len) = le_u32_at(tail, 0) {
        w.spans.0.push((pos, len as usize));
    }
    for s in &r {
        if s.stream != Stream::PageHeaders && s.left() != 0 {
            return Err(SplitError::LeftOver {
                stream: s.stream,
                left: s.left(),
            });
        }
    }
    let pages_left = npages.max(1) - w.next_page;
    let hdr_left = r[Stream::PageHeaders as usize].left();
    if hdr_left != pages_left * SHORT_PAGE_HEADER_LEN {
        return Err(SplitError::PageHeaders {
            held: hdr_left,
            pages_left,
            pages: npages,
        });
    }
    w.release(
        &pages,
        &first,
        valid_len,
        &mut r[Stream::PageHeaders as usize],
        &mut ready,
        &mut wait,
    )?;
    Ok(())
}

/// The part of the segment [`join_into`] is still writing, in chunks of [`CHUNK`] bytes,
/// and what it needs to finish pages: page headers are filled in order as the content before
/// them is final.
struct Window {
    /// Chunks from segment offset `first` on (not shared until they are handed out).
    chunks: std::collections::VecDeque<Vec<u8>>,
    /// Segment offset of `chunks[0]` (a multiple of [`CHUNK`]).
    first: usize,
    /// The valid length: the last chunk is cut there.
    end: usize,
    /// Chunks handed out in pieces, to use again once every copy is dropped.
    lent: Vec<Arc<Vec<u8>>>,
    /// The first page whose header is not filled yet (page 0's is copied at the start).
    next_page: usize,
    /// [`Spans::rem_at`]'s cursor.
    cursor: usize,
    /// Lead, records and tail so far.
    spans: Spans,
    /// The content offset the last [`Window::write`] ended at, and its segment offset: most
    /// writes continue where the last one ended, and then need no division.
    after: (usize, usize),
}

impl Window {
    /// A chunk to write into: one whose pieces have all been dropped, else a new one while
    /// fewer than [`CHUNKS_IN_FLIGHT`] are out (or none is out: a record may need more),
    /// else the first to come back after `wait` (or a new one if `wait` says none will).
    fn fresh_chunk(&mut self, wait: &mut impl FnMut() -> bool) -> Vec<u8> {
        loop {
            if let Some(i) = self.lent.iter().position(|c| Arc::strong_count(c) == 1) {
                // Only this window holds it (no weak references are ever made), and only
                // this window makes copies, so the count cannot go up again.
                if let Ok(chunk) = Arc::try_unwrap(self.lent.swap_remove(i)) {
                    return chunk;
                }
                continue;
            }
            if self.lent.len() + self.chunks.len() < CHUNKS_IN_FLIGHT
                || self.lent.is_empty()
                || !wait()
            {
                return vec![0u8; CHUNK];
            }
        }
    }

    /// Writes `bytes` at segment offset `off` (at or after `first`, before `end`).
    fn put(&mut self, off: usize, bytes: &[u8], wait: &mut impl FnMut() -> bool) {
        let (mut off, mut bytes) = (off - self.first, bytes);
        while !bytes.is_empty() {
            let (c, o) = (off / CHUNK, off % CHUNK);
            while self.chunks.len() <= c {
                let chunk = self.fresh_chunk(wait);
                self.chunks.push_back(chunk);
            }
            let n = (CHUNK - o).min(bytes.len());
            self.chunks[c][o..o + n].copy_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
            off += n;
        }
    }

    /// Writes content bytes at content offset `pos`.
    /// Returns the segment offset of `pos`.
    fn write(
        &mut self,
        pages: &Pages,
        pos: usize,
        bytes: &[u8],
        wait: &mut impl FnMut() -> bool,
    ) -> usize {
        let off = self.offset_of(pages, pos);
        if !bytes.is_empty() {
            let end = self.write_at(pages, off, bytes, wait);
            self.after = (pos + bytes.len(), end);
        }
        off
    }

    /// Writes content bytes at segment offset `off` (that of a content offset), and returns
    /// the segment offset of the content byte after them.
    fn write_at(
        &mut self,
        pages: &Pages,
        off: usize,
        bytes: &[u8],
        wait: &mut impl FnMut() -> bool,
    ) -> usize {
        let mut at = 0;
        pages.runs_from(off, bytes.len(), |o, n| {
            self.put(o, &bytes[at..at + n], wait);
            at += n;
        })
    }

    /// The segment offset of content offset `pos`: without a division when the last write
    /// ended there.
    fn offset_of(&self, pages: &Pages, pos: usize) -> usize {
        if self.after.0 == pos {
            self.after.1
        } else {
            pages.data_offset(pos)
        }
    }

    /// Fills the headers of the pages that start before `upto` (a page boundary, or the end)
    /// and hands every chunk that is then finished to `ready` (the last one cut at `end`).
    fn release(
        &mut self,
        pages: &Pages,
        first: &PageHeader,
        upto: usize,
        headers: &mut Reader<'_>,
        ready: &mut impl FnMut(Piece),
        wait: &mut impl FnMut() -> bool,
    ) -> Result<(), SplitError> {
        while self.next_page * pages.blcksz < upto {
            let p = self.next_page;
            let stored = headers.take(SHORT_PAGE_HEADER_LEN)?;
            let predicted = predicted_header(
                first,
                pages,
                p,
                self.spans.rem_at(pages, p, &mut self.cursor),
            );
            let mut h = [0u8; SHORT_PAGE_HEADER_LEN];
            for ((o, a), b) in h.iter_mut().zip(stored).zip(predicted) {
                *o = a ^ b;
            }
            self.put(p * pages.blcksz, &h, wait);
            self.next_page += 1;
        }
        while self.first < upto && (self.first + CHUNK <= upto || upto == self.end) {
            let Some(chunk) = self.chunks.pop_front() else {
                break;
            };
            let len = CHUNK.min(self.end - self.first);
            let chunk = Arc::new(chunk);
            ready(Piece {
                chunk: Arc::clone(&chunk),
                len,
            });
            self.lent.push(chunk);
            self.first += CHUNK;
        }
        Ok(())
    }
}
