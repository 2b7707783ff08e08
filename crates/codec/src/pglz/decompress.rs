//! The pglz decoder, with `pglz_decompress`'s semantics (`src/common/pg_lzcompress.c`).

use super::{PglzError, MAX_RAWSIZE};

/// Most output one input byte can yield: a 3-byte tag expands to at most 273 bytes.
const MAX_EXPANSION: usize = 91;

/// Decodes `src` into a new buffer of at most `rawsize` bytes.
///
/// With `check_complete` (always the case for WAL images) the stream must produce exactly
/// `rawsize` bytes **and** consume every input byte. Without it, decoding stops when either
/// side runs out and the bytes produced so far are returned. `rawsize` above
/// [`MAX_RAWSIZE`] is refused; the allocation is also bounded by what `src` can expand to.
pub fn decompress(src: &[u8], rawsize: usize, check_complete: bool) -> Result<Vec<u8>, PglzError> {
    if rawsize > MAX_RAWSIZE {
        return Err(PglzError::RawSizeTooLarge {
            rawsize,
            cap: MAX_RAWSIZE,
        });
    }
    let bound = src.len().saturating_mul(MAX_EXPANSION).min(rawsize);
    let mut out = vec![0u8; bound];
    let (written, consumed) = decode(src, &mut out)?;
    if check_complete && (written != rawsize || consumed != src.len()) {
        return Err(PglzError::Incomplete {
            written,
            rawsize,
            consumed,
            input_len: src.len(),
        });
    }
    out.truncate(written);
    Ok(out)
}

/// Decodes `src` into `dst` (whose length is `rawsize`) and returns the bytes written.
///
/// Same checks as [`decompress`]; `dst` is never written past its end.
pub fn decompress_into(
    src: &[u8],
    dst: &mut [u8],
    check_complete: bool,
) -> Result<usize, PglzError> {
    let (written, consumed) = decode(src, dst)?;
    if check_complete && (written != dst.len() || consumed != src.len()) {
        return Err(PglzError::Incomplete {
            written,
            rawsize: dst.len(),
            consumed,
            input_len: src.len(),
        });
    }
    Ok(written)
}

/// The decoding loop; returns (bytes written, bytes consumed).
fn decode(src: &[u8], dst: &mut [u8]) -> Result<(usize, usize), PglzError> {
    decode_report_cut(src, dst).map(|(w, c, _)| (w, c))
}

/// [`decode`], also telling whether the last tag was cut short to fit `dst`, which
/// PostgreSQL accepts silently but a strict caller may not.
pub(crate) fn decode_report_cut(
    src: &[u8],
    dst: &mut [u8],
) -> Result<(usize, usize, bool), PglzError> {
    let mut cut = false;
    let (srcend, destend) = (src.len(), dst.len());
    let (mut sp, mut dp) = (0usize, 0usize);
    while sp < srcend && dp < destend {
        let mut ctrl = src[sp];
        sp += 1;
        let mut items = 0;
        while items < 8 && sp < srcend && dp < destend {
            if ctrl & 1 != 0 {
                // Tag: T1 = off[11:8] << 4 | (len - 3), T2 = off[7:0], T3 = extra length when
                // len - 3 == 15. The C code reads the bytes first and then rejects
                // `sp > srcend`; checking before reading gives the same verdict.
                let at = sp;
                if srcend - sp < 2 {
                    return Err(PglzError::TagPastEnd {
                        at,
                        input_len: srcend,
                    });
                }
                let (t1, t2) = (src[sp], src[sp + 1]);
                sp += 2;
                let mut len = usize::from(t1 & 0x0f) + 3;
                let off = (usize::from(t1 & 0xf0) << 4) | usize::from(t2);
                if len == 18 {
                    let Some(&t3) = src.get(sp) else {
                        return Err(PglzError::TagPastEnd {
                            at,
                            input_len: srcend,
                        });
                    };
                    len += usize::from(t3);
                    sp += 1;
                }
                if off == 0 {
                    return Err(PglzError::ZeroOffset { at });
                }
                if off > dp {
                    return Err(PglzError::OffsetBeforeStart {
                        at,
                        offset: off,
                        written: dp,
                    });
                }
                // A tag may ask for more than fits; PostgreSQL truncates it silently.
                cut = len > destend - dp;
                let len = len.min(destend - dp);
                copy_match(dst, dp, off, len);
                dp += len;
            } else {
                dst[dp] = src[sp];
                dp += 1;
                sp += 1;
            }
            ctrl >>= 1;
            items += 1;
        }
    }
    Ok((dp, sp, cut))
}

/// Copies `len` bytes from `dp - off` to `dp`, forward, overlap allowed (LZ77 repeat).
fn copy_match(dst: &mut [u8], dp: usize, off: usize, len: usize) {
    let start = dp - off;
    if off >= len {
        dst.copy_within(start..start + len, dp);
    } else {
        for i in 0..len {
            dst[dp + i] = dst[start + i];
        }
    }
}
