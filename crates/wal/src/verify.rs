//! `wal verify`: every page header, record CRC, block header and image, and a
//! judgement of where the WAL ends.
//!
//! PostgreSQL treats the first invalid record as the end of WAL. A verifier must
//! tell that ordinary end (zeros past the insert point, pages of a recycled
//! segment) from damage, so it demands, after the stop: a zero-filled rest of the
//! page, pages that are blank or stale (an older address at the same offset in its
//! segment), and no later page or segment that is valid WAL for its own address.

use crate::consts::*;
use crate::decoder::{DecoderOptions, Record, Stop};
use crate::error::{Defect, WalError};
use crate::lsn::{Lsn, SegmentName};
use crate::page::PageHeader;
use crate::record::{check_image_extent, ImageMethod};
use crate::source::{SegmentSet, SourceError};
use codec::cursor::le_u16_at;
use codec::{BlockDecompressor, Method};
use std::io::Read;

/// What a successful verification saw.
#[derive(Debug, Clone, Default)]
pub struct VerifyReport {
    /// Records checked.
    pub records: u64,
    /// Images decompressed and checked, per method ([`ImageMethod::index`]).
    pub images: [u64; 4],
    /// First record.
    pub start_lsn: Lsn,
    /// End of the last record.
    pub end_lsn: Lsn,
    /// Segment files given.
    pub segments: usize,
    /// How the WAL ends.
    pub end: String,
}

/// Why verification failed: the first corruption found.
#[derive(Debug, Clone)]
pub struct Corruption {
    /// File holding it.
    pub file: String,
    /// Position.
    pub lsn: Lsn,
    /// What was expected.
    pub what: String,
}

impl std::fmt::Display for Corruption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "segment {}: at {}: {}", self.file, self.lsn, self.what)
    }
}

/// Outcome of [`verify`].
pub type VerifyResult = Result<VerifyReport, Corruption>;

/// Verifies a run of segments, on `threads` threads (the result does not depend on
/// it). I/O and input-selection problems are the outer error; the inner result says
/// whether the WAL is sound.
pub fn verify(
    set: &SegmentSet,
    opts: DecoderOptions,
    threads: usize,
) -> Result<VerifyResult, SourceError> {
    verify_with_progress(set, opts, threads, &|_| {})
}

/// [`verify`], calling `on_file` (from any thread) as each file is opened.
pub fn verify_with_progress(
    set: &SegmentSet,
    opts: DecoderOptions,
    threads: usize,
    on_file: &(dyn Fn(usize) + Sync),
) -> Result<VerifyResult, SourceError> {
    let seg = set.geometry.seg_size;
    let read = set.read_parallel_with_progress(
        opts,
        threads,
        |_| Acc {
            dec: BlockDecompressor::new().ok(),
            scratch: Vec::new(),
            report: VerifyReport::default(),
            first_bad: None,
        },
        |acc, r| {
            if acc.first_bad.is_some() {
                return;
            }
            if acc.report.records == 0 {
                acc.report.start_lsn = r.lsn;
            }
            acc.report.records += 1;
            acc.report.end_lsn = r.next_lsn;
            let Some(dec) = acc.dec.as_mut() else {
                acc.first_bad = Some(Corruption {
                    file: String::new(),
                    lsn: r.lsn,
                    what: "cannot create decompressors".into(),
                });
                return;
            };
            if let Err(d) = check_images(r, opts.blcksz, dec, &mut acc.scratch, &mut acc.report) {
                acc.first_bad = Some(Corruption {
                    file: SegmentName::containing(r.tli, r.lsn, seg).file_name(seg),
                    lsn: r.lsn,
                    what: d.to_string(),
                });
            }
        },
        on_file,
    )?;
    let mut report = VerifyReport {
        segments: set.files.len(),
        ..VerifyReport::default()
    };
    for part in read.parts {
        if let Some(c) = part.first_bad {
            return Ok(Err(c));
        }
        if report.records == 0 {
            report.start_lsn = part.report.start_lsn;
        }
        if part.report.records > 0 {
            report.end_lsn = part.report.end_lsn;
        }
        report.records += part.report.records;
        for (a, b) in report.images.iter_mut().zip(part.report.images) {
            *a += b;
        }
    }
    match read.summary.stop {
        Stop::EndOfInput { lsn } => {
            report.end = format!("end of input at {lsn}");
            Ok(Ok(report))
        }
        Stop::Invalid(e) => match judge_end(set, &e)? {
            None => {
                report.end = format!("end of WAL at {}: {}", e.lsn, e.defect);
                Ok(Ok(report))
            }
            Some(c) => Ok(Err(c)),
        },
    }
}

/// What each partition of a parallel verification keeps.
struct Acc {
    dec: Option<BlockDecompressor>,
    scratch: Vec<u8>,
    report: VerifyReport,
    first_bad: Option<Corruption>,
}

fn to_codec(m: ImageMethod) -> Method {
    match m {
        ImageMethod::Pglz => Method::Pglz,
        ImageMethod::Lz4 => Method::Lz4,
        ImageMethod::Zstd => Method::Zstd,
        _ => Method::None,
    }
}

/// Restores every image of a record and checks it is a page of the right size whose
/// pd_lower/pd_upper (when a hole was elided) agree with the hole.
fn check_images(
    r: &Record<'_>,
    blcksz: usize,
    dec: &mut BlockDecompressor,
    scratch: &mut Vec<u8>,
    report: &mut VerifyReport,
) -> Result<(), Defect> {
    for b in &r.body.blocks {
        let Some(img) = b.image else { continue };
        check_image_extent(&img, blcksz)?;
        let raw_len = img.raw_len(blcksz);
        let method = img.method();
        let src = r.image_bytes(b);
        let restored = if method == ImageMethod::Pglz {
            // Exactly pglz_decompress(..., check_complete = true), as RestoreBlockImage calls it.
            scratch.clear();
            scratch.resize(raw_len, 0);
            codec::pglz::decompress_into(src, scratch, true)
                .map(|_| ())
                .map_err(|e| e.to_string())
        } else {
            dec.decompress(to_codec(method), src, raw_len, scratch)
                .map_err(|e| e.to_string())
        };
        restored.map_err(|e| {
            Defect::Image(format!(
                "block {} ({}) image of rel {}/{}/{} blk {} does not restore: {e}",
                b.id,
                method.name(),
                b.rel.spc,
                b.rel.db,
                b.rel.rel,
                b.blkno
            ))
        })?;
        if img.info & BKPIMAGE_HAS_HOLE != 0 {
            let off = usize::from(img.hole_offset);
            // PageHeaderData's pd_lower and pd_upper (bufpage.h).
            let bounds = le_u16_at(scratch, 12).zip(le_u16_at(scratch, 14));
            let whole_header = off >= DATA_PAGE_HEADER_LEN && scratch.len() >= DATA_PAGE_HEADER_LEN;
            if let (true, Some((lower, upper))) = (whole_header, bounds) {
                let hole_end = img.hole_offset.wrapping_add(img.hole_length);
                if lower != img.hole_offset || upper != hole_end {
                    return Err(Defect::Image(format!(
                        "block {} image of blk {}: restored page has pd_lower {lower} and pd_upper {upper}, expected {} and {hole_end} from its hole",
                        b.id, b.blkno, img.hole_offset
                    )));
                }
            }
        }
        report.images[method.index()] += 1;
    }
    Ok(())
}

/// Decides whether a stop is the ordinary end of WAL (`None`) or corruption, by what
/// follows it alone (the module docs): a reader that already checked every record up to
/// the stop, as `wal stats` does, needs only this, not a second read.
pub fn judge_end(set: &SegmentSet, e: &WalError) -> Result<Option<Corruption>, SourceError> {
    let g = set.geometry;
    let seg = g.seg_size;
    let ps = u64::from(g.page_size);
    let bad = |lsn: Lsn, what: String| {
        Some(Corruption {
            file: SegmentName::containing(set.tli, lsn, seg).file_name(seg),
            lsn,
            what,
        })
    };
    let marker_ok = match &e.defect {
        Defect::RecordTooShort(0) | Defect::BadMagic { found: 0, .. } => true,
        Defect::UnexpectedPageAddr { found } => {
            let page = e.lsn.0;
            found.0 < page && found.0 % seg == page % seg
        }
        _ => false,
    };
    if !marker_ok {
        return Ok(bad(e.lsn, e.defect.to_string()));
    }
    let index = (e.lsn.0 / seg).saturating_sub(set.start.0 / seg) as usize;
    let Some(path) = set.files.get(index) else {
        return Ok(None);
    };
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|source| SourceError::Io {
            path: path.clone(),
            source,
        })?;
    let seg_start = set.start.0 + index as u64 * seg;
    let at = (e.lsn.0 - seg_start) as usize;
    let page_end = ((at as u64 / ps + 1) * ps) as usize;
    if matches!(
        e.defect,
        Defect::RecordTooShort(0) | Defect::BadMagic { .. }
    ) {
        let end = page_end.min(bytes.len());
        if let Some(p) = bytes[at.min(end)..end].iter().position(|&b| b != 0) {
            let lsn = Lsn(e.lsn.0 + p as u64);
            return Ok(bad(
                lsn,
                format!(
                "WAL ends at {} ({}), but the rest of the page is not zero: nonzero byte at {lsn}",
                e.lsn, e.defect
            ),
            ));
        }
    }
    // No later page of this file, nor any later file, may be valid WAL for its address.
    let mut page = page_end;
    while page + SHORT_PAGE_HEADER_LEN <= bytes.len() {
        let lsn = Lsn(seg_start + page as u64);
        if page_is_live(&bytes[page..], lsn, g.version.magic()) {
            return Ok(bad(
                e.lsn,
                format!(
                    "{}, but valid WAL follows at {lsn}: damaged or missing data here",
                    e.defect
                ),
            ));
        }
        page += ps as usize;
    }
    for (i, path) in set.files.iter().enumerate().skip(index + 1) {
        let mut head = [0u8; LONG_PAGE_HEADER_LEN];
        let n = std::fs::File::open(path)
            .and_then(|mut f| f.read(&mut head))
            .map_err(|source| SourceError::Io {
                path: path.clone(),
                source,
            })?;
        let lsn = Lsn(set.start.0 + i as u64 * seg);
        if page_is_live(&head[..n], lsn, g.version.magic()) {
            return Ok(bad(
                e.lsn,
                format!(
                "{}, but a later segment holds valid WAL from {lsn}: damaged or missing data here",
                e.defect
            ),
            ));
        }
    }
    Ok(None)
}

fn page_is_live(b: &[u8], lsn: Lsn, magic: u16) -> bool {
    PageHeader::parse(b).is_some_and(|h| h.magic == magic && h.pageaddr == lsn)
}
