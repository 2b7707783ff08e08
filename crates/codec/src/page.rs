//! Full-page-image codec of `src/backend/access/transam/xloginsert.c`
//! (`XLogRecordAssemble` hole detection, `XLogCompressBackupBlock`) and
//! `xlogreader.c` `RestoreBlockImage`.

use crate::block::BlockCompressor;
use crate::error::CodecError;
use crate::method::Method;
use crate::pglz::Strategy;
use crate::spec::Spec;

/// `SizeOfPageHeaderData` (`src/include/storage/bufpage.h`).
pub const SIZE_OF_PAGE_HEADER: usize = 24;
/// `SizeOfXLogRecordBlockCompressHeader` (`xlogrecord.h`): the stored `hole_length`.
pub const SIZE_OF_COMPRESS_HEADER: usize = 2;

/// Where the unused gap between `pd_lower` and `pd_upper` lies in a page.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PageLayout {
    /// Offset of the hole (`pd_lower`), 0 when there is none.
    pub hole_offset: u16,
    /// Length of the hole (`pd_upper - pd_lower`), 0 when there is none.
    pub hole_length: u16,
}

/// Finds the hole like `XLogRecordAssemble` does with `REGBUF_STANDARD`.
///
/// With `standard == false`, or when `page` is shorter than a page header or than
/// `blcksz`, there is no hole.
pub fn detect_hole(page: &[u8], blcksz: usize, standard: bool) -> PageLayout {
    if !standard || page.len() < SIZE_OF_PAGE_HEADER || page.len() < blcksz {
        return PageLayout::default();
    }
    let lower = u16::from_le_bytes([page[12], page[13]]);
    let upper = u16::from_le_bytes([page[14], page[15]]);
    if usize::from(lower) >= SIZE_OF_PAGE_HEADER && upper > lower && usize::from(upper) <= blcksz {
        PageLayout {
            hole_offset: lower,
            hole_length: upper - lower,
        }
    } else {
        PageLayout::default()
    }
}

fn check_layout(page_len: usize, layout: PageLayout) -> Result<(usize, usize), CodecError> {
    let off = usize::from(layout.hole_offset);
    let end = off + usize::from(layout.hole_length);
    if end > page_len {
        return Err(CodecError::Page(format!(
            "hole {off}..{end} does not fit in a {page_len}-byte page"
        )));
    }
    Ok((off, end))
}

/// Removes the hole: bytes `[0, hole_offset)` then `[hole_offset + hole_length, len)`.
pub fn elide_hole(page: &[u8], layout: PageLayout) -> Result<Vec<u8>, CodecError> {
    let (off, end) = check_layout(page.len(), layout)?;
    let mut v = Vec::with_capacity(page.len() - (end - off));
    v.extend_from_slice(&page[..off]);
    v.extend_from_slice(&page[end..]);
    Ok(v)
}

/// Rebuilds a page from its hole-less body, zero-filling the hole (`RestoreBlockImage`).
pub fn restore_page(body: &[u8], layout: PageLayout, blcksz: usize) -> Result<Vec<u8>, CodecError> {
    let (off, end) = check_layout(blcksz, layout)?;
    let want = blcksz - (end - off);
    if body.len() != want {
        return Err(CodecError::Page(format!(
            "image body is {} bytes, expected {want} (BLCKSZ {blcksz} minus hole {})",
            body.len(),
            layout.hole_length
        )));
    }
    let mut page = vec![0u8; blcksz];
    page[..off].copy_from_slice(&body[..off]);
    page[end..].copy_from_slice(&body[off..]);
    Ok(page)
}

/// An image as `XLogCompressBackupBlock` would store it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredImage {
    /// Method used, or `None` when the raw (hole-less) bytes are stored.
    pub compressed: Option<Method>,
    /// The stored bytes: compressed data, or the raw page without its hole.
    pub bytes: Vec<u8>,
    /// `bimg_len`: the length of `bytes`.
    pub stored_len: usize,
    /// Extra header bytes: 2 (`hole_length`) when compressed with a hole, else 0.
    pub header_extra: usize,
}

/// Compresses a hole-less page exactly as `XLogCompressBackupBlock` does.
///
/// pglz uses `Strategy::DEFAULT` and falls back to raw when it refuses; the compressed
/// form is kept only if `len + extra_bytes < orig_len` (extra = 2 when there is a hole).
/// The compressor's own spec is ignored: the method and level come from `spec`.
pub fn compress_backup_block(
    page_without_hole: &[u8],
    hole_length: u16,
    spec: &Spec,
    compressor: &mut BlockCompressor,
) -> StoredImage {
    let orig_len = page_without_hole.len();
    let extra = if hole_length != 0 {
        SIZE_OF_COMPRESS_HEADER
    } else {
        0
    };
    let raw = || StoredImage {
        compressed: None,
        bytes: page_without_hole.to_vec(),
        stored_len: orig_len,
        header_extra: 0,
    };
    let mut out = Vec::new();
    let ok = match spec.method {
        Method::None => false,
        Method::Pglz => {
            compressor
                .pglz()
                .compress_into(page_without_hole, &Strategy::DEFAULT, &mut out)
        }
        Method::Lz4 => compressor
            .lz4(
                page_without_hole,
                &mut out,
                spec.effective_level().unwrap_or(1),
            )
            .is_ok(),
        _ if compressor.spec() == spec => compressor.compress(page_without_hole, &mut out).is_ok(),
        _ => match BlockCompressor::new(spec) {
            Ok(mut c) => c.compress(page_without_hole, &mut out).is_ok(),
            Err(_) => false,
        },
    };
    // lz4: `len <= 0` is failure (xloginsert.c); empty output cannot happen for a page.
    if !ok || out.is_empty() || out.len() + extra >= orig_len {
        return raw();
    }
    StoredImage {
        compressed: Some(spec.method),
        stored_len: out.len(),
        bytes: out,
        header_extra: extra,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::BlockDecompressor;

    fn heap_page(lower: u16, upper: u16) -> Vec<u8> {
        let mut p = vec![0u8; 8192];
        p[12..14].copy_from_slice(&lower.to_le_bytes());
        p[14..16].copy_from_slice(&upper.to_le_bytes());
        p[18..20].copy_from_slice(&0x2004u16.to_le_bytes());
        for (i, b) in p[usize::from(upper)..].iter_mut().enumerate() {
            *b = (i % 61) as u8;
        }
        for (i, b) in p[24..usize::from(lower).max(24)].iter_mut().enumerate() {
            *b = (i * 13) as u8;
        }
        p
    }

    #[test]
    fn hole_rules() {
        let p = heap_page(100, 4000);
        assert_eq!(
            detect_hole(&p, 8192, true),
            PageLayout {
                hole_offset: 100,
                hole_length: 3900
            }
        );
        assert_eq!(detect_hole(&p, 8192, false), PageLayout::default());
        // A new all-zero page: pd_lower 0, no hole.
        assert_eq!(detect_hole(&[0u8; 8192], 8192, true), PageLayout::default());
        // lower < 24, upper <= lower, upper > BLCKSZ: no hole.
        assert_eq!(
            detect_hole(&heap_page(20, 4000), 8192, true),
            PageLayout::default()
        );
        let mut q = p.clone();
        q[14..16].copy_from_slice(&100u16.to_le_bytes());
        assert_eq!(detect_hole(&q, 8192, true), PageLayout::default());
        q[14..16].copy_from_slice(&8193u16.to_le_bytes());
        assert_eq!(detect_hole(&q, 8192, true), PageLayout::default());
        q[14..16].copy_from_slice(&8192u16.to_le_bytes());
        assert_eq!(detect_hole(&q, 8192, true).hole_length, 8092);
        assert_eq!(detect_hole(&p[..10], 8192, true), PageLayout::default());
    }

    #[test]
    fn elide_and_restore() {
        let p = heap_page(100, 4000);
        let l = detect_hole(&p, 8192, true);
        let body = elide_hole(&p, l).expect("fits");
        assert_eq!(body.len(), 8192 - 3900);
        assert_eq!(restore_page(&body, l, 8192).expect("ok"), p);
        assert!(restore_page(&body[1..], l, 8192).is_err());
        assert!(elide_hole(
            &p,
            PageLayout {
                hole_offset: 8000,
                hole_length: 500
            }
        )
        .is_err());
        assert!(restore_page(
            &body,
            PageLayout {
                hole_offset: 8000,
                hole_length: 500
            },
            8192
        )
        .is_err());
    }

    #[test]
    fn backup_block_rules() {
        let p = heap_page(100, 4000);
        let l = detect_hole(&p, 8192, true);
        let body = elide_hole(&p, l).expect("fits");
        let mut dec = BlockDecompressor::new().expect("ctx");
        for s in ["pglz", "lz4", "zstd", "none", "gzip"] {
            let spec: Spec = s.parse().expect("valid");
            let mut c = BlockCompressor::new(&Spec::new(Method::Zstd)).expect("ctx");
            let img = compress_backup_block(&body, l.hole_length, &spec, &mut c);
            assert_eq!(img.stored_len, img.bytes.len());
            match img.compressed {
                Some(m) => {
                    assert_eq!(m, spec.method);
                    assert_eq!(img.header_extra, 2);
                    assert!(img.stored_len + 2 < body.len());
                    let mut out = Vec::new();
                    dec.decompress(m, &img.bytes, body.len(), &mut out)
                        .expect("decodes");
                    assert_eq!(out, body);
                }
                None => {
                    assert_eq!(spec.method, Method::None, "{s}");
                    assert_eq!(img.bytes, body);
                    assert_eq!(img.header_extra, 0);
                }
            }
        }
        // pglz with the default strategy matches the pglz module's output.
        let mut c = BlockCompressor::new(&Spec::new(Method::Pglz)).expect("ctx");
        let img = compress_backup_block(&body, l.hole_length, &Spec::new(Method::Pglz), &mut c);
        assert_eq!(
            Some(img.bytes),
            crate::pglz::compress(&body, &Strategy::DEFAULT)
        );
        // Incompressible input falls back to raw for every method.
        let mut x = 1u32;
        let noise: Vec<u8> = (0..8192)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                (x >> 16) as u8
            })
            .collect();
        for m in [Method::Pglz, Method::Lz4, Method::Zstd] {
            let img = compress_backup_block(&noise, 0, &Spec::new(m), &mut c);
            assert_eq!(img.compressed, None, "{m}");
            assert_eq!(img.stored_len, 8192);
        }
    }
}
