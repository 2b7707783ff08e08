//! Taking a segment prefix apart into streams.

use std::io;

use codec::cursor::{le_u16_at, le_u32_at, le_u64_at};
use wal::consts::{
    LONG_PAGE_HEADER_LEN, RECORD_CRC_OFFSET, RECORD_HEADER_LEN, SHORT_PAGE_HEADER_LEN,
    XLP_FIRST_IS_CONTRECORD, XLP_LONG_HEADER,
};
use wal::page::PageHeader;
use wal::record::{decode_body, record_crc, Body};

use super::{align, payload_start, predicted_header, Pages, Spans, Split, Stream};
use crate::input::{Input, Reader};

/// A short page header as it is in the segment.
pub type RawPageHeader = [u8; SHORT_PAGE_HEADER_LEN];

/// Where [`split_from`] may put page images instead of their stream, one image at a time.
pub type ImageSink<'a> = &'a mut dyn FnMut(&[u8]);

/// Takes apart `data`, the valid prefix of a segment that starts at `seg_start`. `None` when
/// the prefix is not a run of well-formed pages of one segment (the caller then stores it
/// as it is).
pub fn split(data: &[u8], seg_start: u64) -> Option<Split> {
    let mut src = Input::Bytes(data).reader();
    // A page size split_from refuses gives headers it never looks at.
    let blcksz = PageHeader::parse(data)?.long?.xlog_blcksz as usize;
    let headers = page_headers(&mut src, blcksz).ok()?;
    split_from(&mut src, data.len(), seg_start, &headers, None)
        .ok()
        .flatten()
}

/// The short headers of pages 1 and on of what `src` reads, for pages of `blcksz` bytes:
/// entry `p - 1` is page `p`'s. Pages too short to hold a header are left out, and so is
/// everything when `blcksz` is shorter than a long header (no such page size).
pub fn page_headers(src: &mut Reader<'_>, blcksz: usize) -> io::Result<Vec<RawPageHeader>> {
    if blcksz < LONG_PAGE_HEADER_LEN {
        return Ok(Vec::new());
    }
    let len = src.len();
    let mut headers = Vec::with_capacity(len / blcksz);
    let mut off = blcksz;
    while off + SHORT_PAGE_HEADER_LEN <= len {
        let mut h = [0u8; SHORT_PAGE_HEADER_LEN];
        h.copy_from_slice(src.peek(off, SHORT_PAGE_HEADER_LEN)?);
        headers.push(h);
        off += blcksz;
    }
    Ok(headers)
}

/// [`split`] of the first `len` bytes `src` reads, whose page headers after the first are
/// `headers` (from [`page_headers`]). The page images go to `images`, one at a time, when it
/// is given (the [`Stream::Images`] stream is then left empty). An error only when reading
/// fails.
pub fn split_from(
    src: &mut Reader<'_>,
    len: usize,
    seg_start: u64,
    headers: &[RawPageHeader],
    mut images: Option<ImageSink<'_>>,
) -> io::Result<Option<Split>> {
    let head = src.at(0, LONG_PAGE_HEADER_LEN.min(len))?;
    let Some(first) = PageHeader::parse(head) else {
        return Ok(None);
    };
    let Some(long) = first.long else {
        return Ok(None);
    };
    let mut first_header = [0u8; LONG_PAGE_HEADER_LEN];
    first_header.copy_from_slice(head);
    let blcksz = long.xlog_blcksz as usize;
    if !blcksz.is_power_of_two() || !(1024..=65536).contains(&blcksz) {
        return Ok(None);
    }
    if first.pageaddr.0 != seg_start || first.info & XLP_LONG_HEADER == 0 {
        return Ok(None);
    }
    let pages = Pages {
        start: seg_start,
        blcksz,
    };
    let Some((npages, content_len)) = pages.layout(len) else {
        return Ok(None);
    };
    let Some(headers) = headers.get(..npages.saturating_sub(1)) else {
        return Ok(None);
    };
    for (p, h) in (1..).zip(headers) {
        let off = p * blcksz;
        let (Some(info), Some(addr)) = (le_u16_at(h, 2), le_u64_at(h, 8)) else {
            return Ok(None);
        };
        if info & XLP_LONG_HEADER != 0 || addr != seg_start.wrapping_add(off as u64) {
            return Ok(None);
        }
    }

    let rem = if first.info & XLP_FIRST_IS_CONTRECORD != 0 {
        first.rem_len as usize
    } else if first.rem_len != 0 {
        return Ok(None);
    } else {
        0
    };
    let lead_len = align(rem).min(content_len);
    let mut out = Split::default();
    // Room for the largest streams up front (address space only until written), so that
    // they are never copied as they grow.
    for s in [Stream::BlockData, Stream::MainData, Stream::Images] {
        if s != Stream::Images || images.is_none() {
            out.streams[s as usize].reserve(content_len);
        }
    }
    // The lead comes first in its stream, the tail after it.
    pages.append(src, 0, lead_len, &mut out.streams[Stream::Raw as usize])?;
    let mut spans = Vec::new();
    if rem > 0 {
        spans.push((0, rem));
    }
    let mut body = Body::default();
    let mut scratch = Vec::new();
    let mut pos = lead_len;
    let mut prev_pos = None;
    while content_len - pos >= RECORD_HEADER_LEN {
        let Some(tot) = le_u32_at(pages.read(src, pos, 4, &mut scratch)?, 0) else {
            return Ok(None);
        };
        let tot = tot as usize;
        if tot < RECORD_HEADER_LEN || tot > content_len - pos {
            break;
        }
        // The record and the padding after it, read together.
        let pad_end = align(pos + tot).min(content_len);
        let (rec, padding) = pages
            .read(src, pos, pad_end - pos, &mut scratch)?
            .split_at(tot);
        let (Some(prev), Some(crc)) = (le_u64_at(rec, 8), le_u32_at(rec, RECORD_CRC_OFFSET)) else {
            return Ok(None);
        };
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
        if padding.iter().any(|&b| b != 0) {
            break;
        }
        let payload = payload_start(&body);
        let s = &mut out.streams;
        s[Stream::RecLen as usize].extend_from_slice(&rec[0..4]);
        s[Stream::RecXid as usize].extend_from_slice(&rec[4..8]);
        s[Stream::RecInfo as usize].extend_from_slice(&rec[16..20]);
        s[Stream::BlockHeaders as usize].extend_from_slice(&rec[RECORD_HEADER_LEN..payload]);
        for b in &body.blocks {
            let image = &rec[b.image_range.clone()];
            match images.as_mut() {
                Some(put) if !image.is_empty() => put(image),
                _ => s[Stream::Images as usize].extend_from_slice(image),
            }
            s[Stream::BlockData as usize].extend_from_slice(&rec[b.data_range.clone()]);
        }
        s[Stream::MainData as usize].extend_from_slice(&rec[body.main_data.clone()]);
        spans.push((pos, tot));
        prev_pos = Some(pos);
        pos = pad_end;
        out.info.records += 1;
    }
    if content_len - pos >= 4 {
        let Some(len) = le_u32_at(pages.read(src, pos, 4, &mut scratch)?, 0) else {
            return Ok(None);
        };
        spans.push((pos, len as usize));
    }
    out.info.lead_len = lead_len as u64;
    let raw = &mut out.streams[Stream::Raw as usize];
    pages.append(src, pos, content_len - pos, raw)?;

    let spans = Spans(spans);
    let hdrs = &mut out.streams[Stream::PageHeaders as usize];
    hdrs.extend_from_slice(&first_header);
    let mut cursor = 0;
    for (p, h) in (1..).zip(headers) {
        let predicted = predicted_header(&first, &pages, p, spans.rem_at(&pages, p, &mut cursor));
        hdrs.extend(h.iter().zip(predicted).map(|(a, b)| a ^ b));
    }
    Ok(Some(out))
}
