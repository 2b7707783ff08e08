//! Turning a file into a container and back: the WAL-aware split, plain compression for
//! everything else, and the push-time self-check.
//!
//! A whole segment gets the WAL records transform ([`records_split`], [`crate::walsplit`]):
//! its streams up to the trailing zeros (after an `XLOG_SWITCH`, or past the insert point of
//! a live segment) or the first page of a recycled segment's older content, compressed on
//! two threads, the largest cut in pieces so both threads have the same work; with zstd,
//! page images that are not text are compressed as the split finds them instead of being
//! gathered first ([`crate::images`]). If that fails,
//! the older WAL transform decodes the segment with [`wal::WalDecoder`] to find the end of
//! valid WAL and compresses the valid prefix and the tail apart (`wal-format.md` §1); anything
//! else is compressed whole. The transforms only affect the ratio, never the bytes: every
//! container is decoded again, and what it decodes to must have the original's XXH3-128 (the
//! digest `archive get` checks) before it is returned; one that fails that check falls back
//! to the next transform, down to plain compression. A segment being pushed is read from its
//! file a window at a time ([`crate::input`]), never held whole.

use std::ops::Range;
use std::path::Path;

use codec::{BlockCompressor, Spec};
use wal::page::{Geometry, PageHeader};
use wal::{DecoderOptions, Next, Stop, WalDecoder};

use crate::container::{self, check_name, Header, Part, PartKind, Role, Transform, WalInfo};
use crate::error::ArchiveError;
use crate::images::{ImageStream, Images};
use crate::input::{Input, Reader};
use crate::walsplit::{self, Stream};
use wal::consts::{LONG_PAGE_HEADER_LEN, SHORT_PAGE_HEADER_LEN};

/// How much of a segment is handed to the WAL decoder at a time.
const FEED_CHUNK: usize = 1 << 20;

/// Most pieces [`build_records`] adds by cutting streams for the two compression threads
/// (a container holds at most [`container::MAX_PARTS`] parts: nine streams, stale bytes and
/// a zero tail leave room for five).
const MAX_EXTRA_PIECES: usize = 2;
/// Smallest piece a stream is cut into: below this the second thread buys nothing.
const MIN_PIECE: usize = 512 << 10;

/// How a file is split: each part's role and the range of the original it covers.
pub type Layout = Vec<(Role, Range<usize>)>;

/// A packed file: its header and the complete container bytes.
#[derive(Debug, Clone)]
pub struct Packed {
    /// The container's header.
    pub header: Header,
    /// The whole container (header and payload).
    pub bytes: Vec<u8>,
}

/// Packs `data`, the content of the file called `name`, with `spec`, and checks that the
/// container decodes to the same bytes. WAL segments get the WAL records transform; anything
/// else (history, backup, partial or unknown files, short or empty files) plain compression.
/// The digests of `data` are computed on a second thread while the segment is taken apart.
pub fn pack(name: &str, data: &[u8], spec: &Spec) -> Result<Packed, ArchiveError> {
    if let Some((packed, hash)) = pack_records(name, Path::new(name), Input::Bytes(data), spec)? {
        if self_check(&packed.bytes, &hash).is_ok() {
            return Ok(packed);
        }
    }
    pack_fallback(name, data, Hash::of(data), spec)
}

/// The digests of a file that its container records.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Hash {
    /// SHA-256: the file's identity (`archive info`, pushes of a name already archived).
    pub(crate) sha256: [u8; 32],
    /// XXH3-128: what `get` checks.
    pub(crate) xxh3: [u8; 16],
}

impl Hash {
    /// Both digests of `data`.
    pub(crate) fn of(data: &[u8]) -> Hash {
        use sha2::Digest;
        Hash {
            sha256: sha2::Sha256::digest(data).into(),
            xxh3: crate::container::xxh3(data),
        }
    }

    /// Both digests of what `input` holds, read a window at a time.
    pub(crate) fn of_input(input: Input<'_>) -> std::io::Result<Hash> {
        use sha2::Digest;
        if let Input::Bytes(data) = input {
            return Ok(Hash::of(data));
        }
        let mut sha = sha2::Sha256::new();
        let mut xxh = twox_hash::XxHash3_128::default();
        input.for_each_window(|w| {
            sha.update(w);
            xxh.write(w);
        })?;
        Ok(Hash {
            sha256: sha.finalize().into(),
            xxh3: xxh.finish_128().to_be_bytes(),
        })
    }
}

/// The WAL records container of `input` and its digests, if it is a whole segment that
/// splits; the container is not yet checked (see [`self_check`]). The digests are computed
/// on a second thread, from a read of their own, while the segment is taken apart: a
/// container that decodes to bytes with those digests is the file as it was hashed, even if
/// the file changed in between. Errors reading `input` name `path`.
pub(crate) fn pack_records(
    name: &str,
    path: &Path,
    input: Input<'_>,
    spec: &Spec,
) -> Result<Option<(Packed, Hash)>, ArchiveError> {
    check_name(name).map_err(|reason| ArchiveError::InvalidName {
        name: name.into(),
        reason,
    })?;
    if input.len() as u64 > container::MAX_ORIGINAL_SIZE {
        return Err(ArchiveError::TooLarge {
            name: name.into(),
            size: input.len() as u64,
            max: container::MAX_ORIGINAL_SIZE,
        });
    }
    let read_err = |e| ArchiveError::io("reading", path)(e);
    let mut head = input.reader();
    let head = head
        .peek(0, LONG_PAGE_HEADER_LEN.min(input.len()))
        .map_err(read_err)?;
    if segment_start(head, input.len()).is_none() {
        return Ok(None);
    }
    // The page images are compressed as the split finds them, on its thread.
    let mut images = ImageStream::new(spec, input.len());
    let (hash, split) = std::thread::scope(|scope| {
        let hasher = scope.spawn(|| Hash::of_input(input));
        let mut put = images.as_mut().map(|i| move |image: &[u8]| i.put(image));
        let split = records_split_from(input, put.as_mut().map(|p| p as walsplit::ImageSink<'_>));
        (hasher.join().expect("hash thread panicked"), split)
    });
    let hash = hash.map_err(read_err)?;
    let Some((info, mut split, zeros_from)) = split.map_err(read_err)? else {
        return Ok(None);
    };
    let codec_err = |source| ArchiveError::Codec {
        name: name.into(),
        source,
    };
    let streamed = match images.map(ImageStream::finish).transpose() {
        Ok(Some(Images::Streamed { frame, len })) => Some((frame, len)),
        Ok(Some(Images::Kept(all))) => {
            split.streams[Stream::Images as usize] = all;
            None
        }
        Ok(None) => None,
        Err(e) => return Err(codec_err(e)),
    };
    let valid_len = info.valid_len as usize;
    let stale = input
        .range(valid_len, zeros_from - valid_len)
        .map_err(read_err)?;
    let packed = build_records(
        name,
        input.len(),
        &stale,
        hash,
        spec,
        (info, split, streamed),
        zeros_from,
    )?;
    Ok(Some((packed, hash)))
}

/// What [`pack`] falls back to when the records transform does not apply or does not check
/// out: the WAL transform for a segment, else plain compression; checked.
pub(crate) fn pack_fallback(
    name: &str,
    data: &[u8],
    hash: Hash,
    spec: &Spec,
) -> Result<Packed, ArchiveError> {
    let mut compressor = BlockCompressor::new(spec).map_err(|source| ArchiveError::Codec {
        name: name.into(),
        source,
    })?;
    if let Some((info, layout)) = wal_layout(data) {
        let packed = build(
            name,
            data,
            hash,
            &mut compressor,
            Transform::Wal(info),
            &layout,
        )?;
        if self_check(&packed.bytes, &hash).is_ok() {
            return Ok(packed);
        }
    }
    let whole = [(Role::Whole, 0..data.len())];
    let layout: &[(Role, Range<usize>)] = if data.is_empty() { &[] } else { &whole };
    let packed = build(name, data, hash, &mut compressor, Transform::Plain, layout)?;
    self_check(&packed.bytes, &hash).map_err(|source| ArchiveError::SelfCheck {
        name: name.into(),
        source,
    })?;
    Ok(packed)
}

/// Decodes the container `bytes` in memory and checks that the result has the digests
/// `hash` (computed by the caller from the original): the XXH3-128 of the rebuilt bytes, as
/// `archive get` checks it, so the container is known to restore before it is kept.
pub(crate) fn self_check(bytes: &[u8], hash: &Hash) -> Result<(), crate::error::ContainerError> {
    // The rebuilt bytes are hashed piece by piece as they come, never gathered.
    let mut xxh = twox_hash::XxHash3_128::default();
    let mut hash_piece = |piece: &[u8]| xxh.write(piece);
    let (header, _) = crate::pipeline::decode_with(bytes, &mut hash_piece, false)?;
    let actual = xxh.finish_128().to_be_bytes();
    if actual != hash.xxh3 || header.xxh3 != hash.xxh3 || header.sha256 != hash.sha256 {
        return Err(crate::error::ContainerError::HashMismatch {
            expected: hex::encode(hash.xxh3),
            actual: hex::encode(actual),
        });
    }
    Ok(())
}

fn build(
    name: &str,
    data: &[u8],
    hash: Hash,
    compressor: &mut BlockCompressor,
    transform: Transform,
    layout: &[(Role, Range<usize>)],
) -> Result<Packed, ArchiveError> {
    let mut parts = Vec::with_capacity(layout.len());
    let mut payload = Vec::new();
    let mut block = Vec::new();
    for (role, range) in layout {
        let raw = &data[range.clone()];
        if *role == Role::ZeroTail {
            parts.push(Part {
                kind: PartKind::Zeros,
                role: *role,
                crc32c: crc32c::crc32c(&[]),
                raw_len: raw.len() as u64,
                stored_len: 0,
                words: false,
            });
            continue;
        }
        compressor
            .compress(raw, &mut block)
            .map_err(|source| ArchiveError::Codec {
                name: name.into(),
                source,
            })?;
        parts.push(Part {
            kind: PartKind::Compressed,
            role: *role,
            crc32c: crc32c::crc32c(&block),
            raw_len: raw.len() as u64,
            stored_len: block.len() as u64,
            words: false,
        });
        payload.extend_from_slice(&block);
    }
    let header = Header {
        name: name.into(),
        original_size: data.len() as u64,
        sha256: hash.sha256,
        spec: *compressor.spec(),
        transform,
        parts,
        xxh3: hash.xxh3,
    };
    let mut bytes = header.encode();
    bytes.extend_from_slice(&payload);
    Ok(Packed { header, bytes })
}

/// The WAL records transform of `data` if it is a whole segment PostgreSQL 15-18 wrote: the
/// streams of its pages up to the trailing zeros or the first page of another incarnation of
/// the segment (a recycled file's stale pages), whichever comes first; the [`WalInfo`] whose
/// `valid_len` is where the streams end; and where the trailing zeros begin. `None` for
/// anything else.
pub fn records_split(data: &[u8]) -> Option<(WalInfo, walsplit::Split, usize)> {
    records_split_from(Input::Bytes(data), None).ok().flatten()
}

/// [`records_split`] of what `input` holds, read forward through a window but for the page
/// headers (read one by one first) and the zeros at the end (looked for backwards). The
/// page images go to `images` when it is given ([`walsplit::split_from`]). An error only
/// when reading fails.
pub(crate) fn records_split_from(
    input: Input<'_>,
    images: Option<walsplit::ImageSink<'_>>,
) -> std::io::Result<Option<(WalInfo, walsplit::Split, usize)>> {
    let len = input.len();
    let mut src = input.reader();
    let Some((first, long)) = segment_start(src.peek(0, LONG_PAGE_HEADER_LEN.min(len))?, len)
    else {
        return Ok(None);
    };
    let blcksz = long.xlog_blcksz as usize;
    let zeros_from = last_non_zero(&mut src)?;
    let headers = walsplit::page_headers(&mut src, blcksz)?;
    // The first page that is not this segment's (zeros, or a recycled segment's old pages).
    let foreign = (1..).zip(&headers).find_map(|(p, h)| {
        let off = p * blcksz;
        let ours = u16::from_le_bytes([h[0], h[1]]) == first.magic
            && u64::from_le_bytes(h[8..16].try_into().unwrap_or_default())
                == first.pageaddr.0 + off as u64;
        (!ours).then_some(off)
    });
    let mut end = zeros_from.min(foreign.unwrap_or(len));
    let page = end / blcksz * blcksz;
    let header = if page == 0 {
        LONG_PAGE_HEADER_LEN
    } else {
        SHORT_PAGE_HEADER_LEN
    };
    if end > page && end < page + header {
        end = (page + header).min(len);
    }
    let Some(split) = walsplit::split_from(&mut src, end, first.pageaddr.0, &headers, images)?
    else {
        return Ok(None);
    };
    let info = WalInfo {
        magic: first.magic,
        tli: first.tli,
        pageaddr: first.pageaddr.0,
        valid_len: end as u64,
    };
    Ok(Some((info, split, zeros_from.max(end))))
}

/// Where the zeros that end what `src` reads begin (0 if it is all zeros), looking for the
/// last byte that is not zero a window at a time from the end.
fn last_non_zero(src: &mut Reader<'_>) -> std::io::Result<usize> {
    let mut hi = src.len();
    while hi > 0 {
        let lo = hi.saturating_sub(crate::input::WINDOW);
        if let Some(i) = src.at(lo, hi - lo)?.iter().rposition(|&b| b != 0) {
            return Ok(lo + i + 1);
        }
        hi = lo;
    }
    Ok(0)
}

/// Builds a WAL records container: the streams (and any stale pages after them) compressed
/// on up to two threads, the page images as already compressed when they were streamed
/// (`(frame, length)`, [`crate::images`]), then the zero tail.
fn build_records(
    name: &str,
    original_size: usize,
    stale: &[u8],
    hash: Hash,
    spec: &Spec,
    (info, split, streamed): (WalInfo, walsplit::Split, Option<(Vec<u8>, usize)>),
    zeros_from: usize,
) -> Result<Packed, ArchiveError> {
    let codec_err = |source| ArchiveError::Codec {
        name: name.into(),
        source,
    };
    let mut inputs: Vec<(Role, &[u8])> = Stream::ALL
        .iter()
        .map(|&s| (Role::WalStream(s), split.streams[s as usize].as_slice()))
        .filter(|(_, b)| !b.is_empty())
        .collect();
    if !stale.is_empty() {
        inputs.push((Role::WalStale, stale));
    }
    // A big stream is cut in pieces (stored as consecutive parts) so both cores compress.
    let inputs = crate::lanes::balance(&inputs, MAX_EXTRA_PIECES, MIN_PIECE);
    let mut blocks = compress_parallel(spec, &inputs).map_err(codec_err)?;
    let mut inputs: Vec<(Role, usize)> = inputs.iter().map(|(r, raw)| (*r, raw.len())).collect();
    // The streamed images come last of the streams, before any stale pages.
    if let Some((frame, len)) = streamed {
        let at = inputs
            .iter()
            .position(|(r, _)| *r == Role::WalStale)
            .unwrap_or(inputs.len());
        inputs.insert(at, (Role::WalStream(Stream::Images), len));
        blocks.insert(at, (frame, None));
    }
    let mut parts = Vec::with_capacity(inputs.len() + 1);
    for ((role, raw_len), (block, coded)) in inputs.iter().zip(&blocks) {
        parts.push(Part {
            kind: PartKind::Compressed,
            role: *role,
            crc32c: crc32c::crc32c(block),
            raw_len: coded.map_or(*raw_len, |n| n) as u64,
            stored_len: block.len() as u64,
            words: coded.is_some(),
        });
    }
    let tail = (original_size - zeros_from) as u64;
    if tail > 0 {
        parts.push(Part {
            kind: PartKind::Zeros,
            role: Role::ZeroTail,
            crc32c: crc32c::crc32c(&[]),
            raw_len: tail,
            stored_len: 0,
            words: false,
        });
    }
    let header = Header {
        name: name.into(),
        original_size: original_size as u64,
        sha256: hash.sha256,
        spec: *spec,
        transform: Transform::WalRecords(info, split.info),
        parts,
        xxh3: hash.xxh3,
    };
    // The blocks go straight after the header, in one buffer of the container's size: no
    // payload gathered first (a copy, and fresh memory the kernel has to zero).
    let mut bytes = Vec::with_capacity(header.container_len() as usize);
    bytes.extend_from_slice(&header.encode());
    for (block, _) in blocks {
        bytes.extend_from_slice(&block);
    }
    Ok(Packed { header, bytes })
}

/// Streams where text lives: they are word-coded first when that pays ([`crate::words`]).
fn may_hold_text(role: Role) -> bool {
    matches!(
        role,
        Role::WalStream(Stream::BlockData | Stream::MainData | Stream::Images)
    )
}

/// A compressed block, with the word-coded length when the input was word-coded first.
type Block = (Vec<u8>, Option<usize>);

/// Compresses each input into one block (word-coding the text streams first when that
/// pays; the coded length is returned with the block) on two threads.
fn compress_parallel(
    spec: &Spec,
    inputs: &[(Role, &[u8])],
) -> Result<Vec<Block>, codec::CodecError> {
    crate::lanes::two_lanes(
        inputs.to_vec(),
        |(_, raw)| raw.len(),
        || BlockCompressor::new(spec),
        |c, (role, raw)| {
            let coded = if may_hold_text(role) {
                crate::words::encode(raw)
            } else {
                None
            };
            let mut out = Vec::new();
            match &coded {
                Some(coded) => c.compress_coded(coded, &mut out)?,
                None => c.compress(raw, &mut out)?,
            }
            Ok((out, coded.map(|c| c.len())))
        },
    )
}

/// The first page header of a file of `len` bytes that starts with `head` and its long
/// fields, if the file is a whole segment PostgreSQL 15-18 wrote (its size is the segment
/// size the header states, its address is segment-aligned, its geometry is valid).
fn segment_start(head: &[u8], len: usize) -> Option<(PageHeader, wal::page::LongFields)> {
    let first = PageHeader::parse(head)?;
    let long = first.long?;
    let len = len as u64;
    if u64::from(long.seg_size) != len || first.pageaddr.0 % len != 0 {
        return None;
    }
    Geometry::from_first_page(&first).ok()?;
    Some((first, long))
}

/// The WAL split of `data` if it is a whole segment PostgreSQL 15-18 wrote: valid prefix,
/// stale bytes, zero tail (empty ranges left out). `None` for anything else.
pub fn wal_layout(data: &[u8]) -> Option<(WalInfo, Layout)> {
    let (first, _) = segment_start(data, data.len())?;
    let len = data.len();
    let end = valid_end(data, &first)?;
    let zeros_from = data[end..]
        .iter()
        .rposition(|&b| b != 0)
        .map_or(end, |i| end + i + 1);
    let mut layout = Vec::with_capacity(3);
    for (role, range) in [
        (Role::WalValid, 0..end),
        (Role::WalStale, end..zeros_from),
        (Role::ZeroTail, zeros_from..len),
    ] {
        if !range.is_empty() {
            layout.push((role, range));
        }
    }
    let info = WalInfo {
        magic: first.magic,
        tli: first.tli,
        pageaddr: first.pageaddr.0,
        valid_len: end as u64,
    };
    Some((info, layout))
}

/// Offset in the segment where valid WAL ends: after the last complete record before
/// invalid data or the zeros a switch record leaves, or the whole segment when the last
/// record continues into the next one. `None` when not a single byte of the segment decodes.
fn valid_end(data: &[u8], first: &PageHeader) -> Option<usize> {
    let start = first.pageaddr.0;
    let len = data.len() as u64;
    let opts = DecoderOptions {
        tli: first.tli.max(1),
        ..DecoderOptions::default()
    };
    let mut dec = WalDecoder::new(first.pageaddr, opts);
    let mut fed = 0usize;
    let mut records = 0u64;
    let mut last_end = 0u64;
    let mut last_was_switch = false;
    let end = loop {
        match dec.next_record() {
            Next::Record(r) => {
                records += 1;
                last_end = (r.next_lsn.0 - r.switch_tail_bytes).saturating_sub(start);
                last_was_switch = r.switch_tail_bytes > 0;
            }
            Next::NeedInput => {
                if fed < data.len() {
                    let to = (fed + FEED_CHUNK).min(data.len());
                    dec.feed(&data[fed..to]);
                    fed = to;
                } else {
                    dec.finish_input();
                }
            }
            Next::Stopped(Stop::EndOfInput { .. }) => {
                // Out of input without invalid data: the rest is the start of a record that
                // continues in the next segment, unless a switch record zero-filled it.
                break if last_was_switch { last_end } else { len };
            }
            Next::Stopped(stop) => {
                if records == 0 {
                    let at = stop.lsn().0.saturating_sub(start);
                    if at == 0 {
                        return None;
                    }
                    break at;
                }
                break last_end;
            }
        }
    };
    Some(end.min(len) as usize)
}
