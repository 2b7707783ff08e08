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
//! length against what is present before copying or allocating, and fails with a message
//! instead of panicking.

use wal::consts::{
    LONG_PAGE_HEADER_LEN, RECORD_HEADER_LEN, SHORT_PAGE_HEADER_LEN, XLP_FIRST_IS_CONTRECORD,
    XLP_LONG_HEADER,
};
use wal::page::PageHeader;
use wal::record::{decode_body, record_crc, Body};

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

const MAXALIGN: usize = 8;

fn maxalign(n: usize) -> usize {
    n.div_ceil(MAXALIGN) * MAXALIGN
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

    /// LSN of content offset `pos`.
    fn lsn_of(&self, pos: usize) -> u64 {
        let first = self.blcksz - LONG_PAGE_HEADER_LEN;
        let off = if pos < first {
            LONG_PAGE_HEADER_LEN + pos
        } else {
            let q = pos - first;
            let cap = self.blcksz - SHORT_PAGE_HEADER_LEN;
            (1 + q / cap) * self.blcksz + SHORT_PAGE_HEADER_LEN + q % cap
        };
        // Wrapping, as a release build does: a segment start near the top of the address
        // space is nonsense, but split and join must agree on it rather than panic.
        self.start.wrapping_add(off as u64)
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
    let mut content = Vec::with_capacity(content_len);
    for p in 0..npages {
        let off = p * blcksz;
        let hl = Pages::header_len(p);
        let h = &data[off..off + hl];
        if p > 0 {
            let info = u16::from_le_bytes([h[2], h[3]]);
            let addr = u64::from_le_bytes(h[8..16].try_into().ok()?);
            if info & XLP_LONG_HEADER != 0 || addr != seg_start.wrapping_add(off as u64) {
                return None;
            }
        }
        content.extend_from_slice(&data[off + hl..(off + blcksz).min(data.len())]);
    }
    debug_assert_eq!(content.len(), content_len);

    let rem = if first.info & XLP_FIRST_IS_CONTRECORD != 0 {
        first.rem_len as usize
    } else if first.rem_len != 0 {
        return None;
    } else {
        0
    };
    let lead_len = maxalign(rem).min(content.len());
    let mut out = Split::default();
    let mut spans = Vec::new();
    if rem > 0 {
        spans.push((0, rem));
    }
    let mut body = Body::default();
    let mut pos = lead_len;
    let mut prev_pos = None;
    while content.len() - pos >= RECORD_HEADER_LEN {
        let rec_start = &content[pos..];
        let tot = u32::from_le_bytes(rec_start[0..4].try_into().ok()?) as usize;
        if tot < RECORD_HEADER_LEN || tot > rec_start.len() {
            break;
        }
        let rec = &rec_start[..tot];
        let prev = u64::from_le_bytes(rec[8..16].try_into().ok()?);
        let crc = u32::from_le_bytes(rec[20..24].try_into().ok()?);
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
        let pad_end = maxalign(pos + tot).min(content.len());
        if content[pos + tot..pad_end].iter().any(|&b| b != 0) {
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
    let tail = &content[pos..];
    if tail.len() >= 4 {
        spans.push((
            pos,
            u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]) as usize,
        ));
    }
    out.info.lead_len = lead_len as u64;
    let raw = &mut out.streams[Stream::Raw as usize];
    raw.extend_from_slice(&content[..lead_len]);
    raw.extend_from_slice(tail);

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

/// A stream being read back.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    stream: Stream,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.bytes.len() - self.pos < n {
            return Err(format!(
                "{} stream ends early: {} bytes needed at {}, {} present",
                self.stream.name(),
                n,
                self.pos,
                self.bytes.len()
            ));
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn left(&self) -> usize {
        self.bytes.len() - self.pos
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
) -> Result<Vec<u8>, String> {
    let mut r: Vec<Reader<'_>> = Stream::ALL
        .iter()
        .map(|&s| Reader {
            bytes: &streams[s as usize],
            pos: 0,
            stream: s,
        })
        .collect();
    let available: usize = streams.iter().map(Vec::len).sum();
    let first_bytes = r[Stream::PageHeaders as usize].take(LONG_PAGE_HEADER_LEN)?;
    let first = PageHeader::parse(first_bytes).ok_or("first page header does not parse")?;
    let long = first.long.ok_or("first page header is not a long header")?;
    let blcksz = long.xlog_blcksz as usize;
    if !blcksz.is_power_of_two() || !(1024..=65536).contains(&blcksz) {
        return Err(format!("block size {blcksz} is not a WAL block size"));
    }
    if first.pageaddr.0 != seg_start {
        return Err(format!(
            "first page address {:X} is not the segment start {seg_start:X}",
            first.pageaddr.0
        ));
    }
    let pages = Pages {
        start: seg_start,
        blcksz,
    };
    let valid_len = usize::try_from(valid_len).map_err(|_| "valid length too large")?;
    let (npages, content_len) = pages
        .layout(valid_len)
        .ok_or_else(|| format!("valid length {valid_len} ends inside a page header"))?;
    // Content is the streams' bytes plus 12 regenerated bytes per record plus padding: a
    // claimed length far beyond that is refused before anything is reserved.
    let records = usize::try_from(info.records).map_err(|_| "record count too large")?;
    if streams[Stream::RecLen as usize].len() / 4 != records {
        return Err(format!(
            "{records} records claimed, the length stream holds {}",
            streams[Stream::RecLen as usize].len() / 4
        ));
    }
    let bound =
        available.saturating_add(records.saturating_mul(RECORD_HEADER_LEN - 12 + MAXALIGN + 12));
    if content_len > bound {
        return Err(format!(
            "{content_len} bytes of content claimed, the streams hold at most {bound}"
        ));
    }
    let lead_len = usize::try_from(info.lead_len).map_err(|_| "lead length too large")?;
    if lead_len > content_len {
        return Err(format!(
            "lead of {lead_len} bytes is longer than the content"
        ));
    }
    let mut content = Vec::with_capacity(content_len);
    content.extend_from_slice(r[Stream::Raw as usize].take(lead_len)?);
    let rem = if first.info & XLP_FIRST_IS_CONTRECORD != 0 {
        first.rem_len as usize
    } else {
        0
    };
    let mut spans = Vec::new();
    if rem > 0 {
        spans.push((0, rem));
    }
    let mut body = Body::default();
    let mut rec: Vec<u8> = Vec::new();
    let mut prev_pos: Option<usize> = None;
    for i in 0..records {
        let pos = content.len();
        let tot = u32::from_le_bytes(
            r[Stream::RecLen as usize]
                .take(4)?
                .try_into()
                .map_err(|_| "record length")?,
        ) as usize;
        let xid = r[Stream::RecXid as usize].take(4)?;
        let inf = r[Stream::RecInfo as usize].take(4)?;
        if tot < RECORD_HEADER_LEN || tot > content_len - pos {
            return Err(format!(
                "record {i}: length {tot} does not fit the {} bytes of content left",
                content_len - pos
            ));
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
            return Err(format!(
                "record {i}: {tot} bytes long, the streams hold {payload_left}"
            ));
        }
        let prev = match prev_pos {
            None => info.first_prev,
            Some(pp) => pages.lsn_of(pp),
        };
        rec.clear();
        rec.extend_from_slice(&(tot as u32).to_le_bytes());
        rec.extend_from_slice(xid);
        rec.extend_from_slice(&prev.to_le_bytes());
        rec.extend_from_slice(inf);
        rec.extend_from_slice(&[0; 4]);
        // The block headers' length is known once they are parsed: parse them from as many
        // stream bytes as the record could hold, then keep only what they occupy.
        let bh = &r[Stream::BlockHeaders as usize];
        let avail = (tot - RECORD_HEADER_LEN).min(bh.left());
        rec.extend_from_slice(&bh.bytes[bh.pos..bh.pos + avail]);
        rec.resize(tot, 0);
        decode_body(&rec, blcksz, &mut body)
            .map_err(|e| format!("record {i} at content offset {pos}: {e}"))?;
        let payload = payload_start(&body);
        if payload - RECORD_HEADER_LEN > avail {
            return Err(format!("record {i}: block headers run past their stream"));
        }
        rec.truncate(payload);
        r[Stream::BlockHeaders as usize].take(payload - RECORD_HEADER_LEN)?;
        for b in &body.blocks {
            rec.extend_from_slice(r[Stream::Images as usize].take(b.image_range.len())?);
            rec.extend_from_slice(r[Stream::BlockData as usize].take(b.data_range.len())?);
        }
        rec.extend_from_slice(r[Stream::MainData as usize].take(body.main_data.len())?);
        debug_assert_eq!(rec.len(), tot);
        let crc = record_crc(&rec);
        rec[20..24].copy_from_slice(&crc.to_le_bytes());
        content.extend_from_slice(&rec);
        let pad_end = maxalign(pos + tot).min(content_len);
        content.resize(pad_end, 0);
        spans.push((pos, tot));
        prev_pos = Some(pos);
    }
    let pos = content.len();
    let raw = &mut r[Stream::Raw as usize];
    let tail = raw.take(raw.left())?;
    if pos + tail.len() != content_len {
        return Err(format!(
            "content is {} bytes, the valid length needs {content_len}",
            pos + tail.len()
        ));
    }
    content.extend_from_slice(tail);
    if tail.len() >= 4 {
        spans.push((
            pos,
            u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]) as usize,
        ));
    }
    for s in &r {
        if s.stream != Stream::PageHeaders && s.left() != 0 {
            return Err(format!(
                "{} stream has {} bytes left over",
                s.stream.name(),
                s.left()
            ));
        }
    }
    let hdr_left = r[Stream::PageHeaders as usize].left();
    if hdr_left != (npages.max(1) - 1) * SHORT_PAGE_HEADER_LEN {
        return Err(format!(
            "page header stream holds {hdr_left} bytes after page 0 for {npages} pages"
        ));
    }

    let spans = Spans(spans);
    let mut out = Vec::with_capacity(valid_len);
    out.extend_from_slice(first_bytes);
    let mut c = 0;
    let mut cursor = 0;
    for p in 0..npages {
        if p > 0 {
            let stored = r[Stream::PageHeaders as usize].take(SHORT_PAGE_HEADER_LEN)?;
            let predicted =
                predicted_header(&first, &pages, p, spans.rem_at(&pages, p, &mut cursor));
            out.extend(stored.iter().zip(predicted).map(|(a, b)| a ^ b));
        }
        let n = (blcksz - Pages::header_len(p)).min(content_len - c);
        out.extend_from_slice(&content[c..c + n]);
        c += n;
    }
    if out.len() != valid_len {
        return Err(format!("rebuilt {} bytes, expected {valid_len}", out.len()));
    }
    Ok(out)
}
