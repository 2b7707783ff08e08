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
mod feed;
mod join;
mod split;

use wal::consts::{maxalign, LONG_PAGE_HEADER_LEN, SHORT_PAGE_HEADER_LEN, XLP_FIRST_IS_CONTRECORD};
use wal::page::PageHeader;
use wal::record::Body;

use crate::input::Reader;

pub use error::{FeedError, SplitError};
pub use feed::{Feed, Source};
pub use join::{join, join_into, join_sources, Piece};
pub use split::{page_headers, split, split_from, ImageSink, RawPageHeader};

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

    /// Content bytes `pos..pos + len` of what `src` reads: borrowed when they lie in one
    /// page, else gathered into `scratch`. The range must lie within the content.
    fn read<'a>(
        &self,
        src: &'a mut Reader<'_>,
        pos: usize,
        len: usize,
        scratch: &'a mut Vec<u8>,
    ) -> std::io::Result<&'a [u8]> {
        let off = self.data_offset(pos);
        if off % self.blcksz + len <= self.blcksz {
            return src.at(off, len);
        }
        scratch.clear();
        self.append(src, pos, len, scratch)?;
        Ok(scratch)
    }

    /// Appends content bytes `pos..pos + len` of what `src` reads to `out`.
    fn append(
        &self,
        src: &mut Reader<'_>,
        pos: usize,
        len: usize,
        out: &mut Vec<u8>,
    ) -> std::io::Result<()> {
        let mut result = Ok(());
        self.runs(pos, len, |o, n| {
            if result.is_ok() {
                result = src.at(o, n).map(|b| out.extend_from_slice(b));
            }
        });
        result
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

/// Offset of the first payload byte: the end of the block headers.
fn payload_start(body: &Body) -> usize {
    body.blocks
        .first()
        .map_or(body.main_data.start, |b| b.image_range.start)
}
