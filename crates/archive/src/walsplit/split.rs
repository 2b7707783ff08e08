//! Taking a segment prefix apart into streams.

use codec::cursor::{le_u16_at, le_u32_at, le_u64_at};
use wal::consts::{
    LONG_PAGE_HEADER_LEN, RECORD_CRC_OFFSET, RECORD_HEADER_LEN, SHORT_PAGE_HEADER_LEN,
    XLP_FIRST_IS_CONTRECORD, XLP_LONG_HEADER,
};
use wal::page::PageHeader;
use wal::record::{decode_body, record_crc, Body};

use super::{align, payload_start, predicted_header, Pages, Spans, Split, Stream};

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
