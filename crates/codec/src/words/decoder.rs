//! The decoder: a careful path that checks every symbol ([`Header::step`]) and, for long
//! bodies, a fast loop over tables ([`super::fast`]) that hands anything unusual back to it.

use super::fast::{Fast, FAST_SLACK};
use super::header::{Header, CAP, ESC, LIT, ONE_CODE, PREFIX};
use super::WordsError;
use crate::error::MAX_DECOMPRESSED_SIZE;

/// Reverses [`super::encode`]. `max_len` caps the decoded length the header may claim (and
/// [`MAX_DECOMPRESSED_SIZE`] caps `max_len`); the output buffer is allocated only once the
/// header has been checked against the input's length.
pub fn decode(coded: &[u8], max_len: usize) -> Result<Vec<u8>, WordsError> {
    decode_with(coded, max_len, true)
}

/// [`decode`], with the fast loop or (for tests, which compare the two) without it.
pub(super) fn decode_with(
    coded: &[u8],
    max_len: usize,
    fast_loop: bool,
) -> Result<Vec<u8>, WordsError> {
    let (h, body_at) = Header::parse(coded, max_len.min(MAX_DECOMPRESSED_SIZE))?;
    let body = coded.get(body_at..).unwrap_or(&[]);
    let len = h.len;
    // Room after the output for the fixed-size copies of the fast loop.
    let mut out = vec![0u8; len + FAST_SLACK];
    let mut o = 0;
    let mut i = 0;
    if fast_loop {
        if let Some(fast) = Fast::new(&h, body.len()) {
            while i + 1 < body.len() {
                (i, o) = fast.run(body, i, &mut out, o, len);
                if i + 1 < body.len() {
                    (i, o) = h.step(body, body_at, i, &mut out, o)?;
                }
            }
        }
    }
    while i < body.len() {
        (i, o) = h.step(body, body_at, i, &mut out, o)?;
    }
    if o != len {
        return Err(WordsError::Underrun { got: o, len });
    }
    out.truncate(len);
    Ok(out)
}

impl Header<'_> {
    /// Decodes the symbol at `body[i]` (`i` below the body's length) into `out` at `o`
    /// (`out` holds at least `self.len` bytes): the new `i` and `o`. `base` is the body's
    /// offset in the coded input, for errors.
    pub(super) fn step(
        &self,
        body: &[u8],
        base: usize,
        mut i: usize,
        out: &mut [u8],
        o: usize,
    ) -> Result<(usize, usize), WordsError> {
        let offset = base + i;
        let cut = |what| WordsError::CutShort { offset, what };
        let overrun = WordsError::Overrun {
            offset,
            len: self.len,
        };
        let &b = body.get(i).ok_or(cut("symbol"))?;
        i += 1;
        let k = self.kind[usize::from(b)];
        if k == LIT || k == ESC {
            let b = if k == ESC {
                let &next = body.get(i).ok_or(cut("escape"))?;
                i += 1;
                next
            } else {
                b
            };
            match out.get_mut(o) {
                Some(dst) if o < self.len => *dst = b,
                _ => return Err(overrun),
            }
            return Ok((i, o + 1));
        }
        let cap = k == CAP;
        let (k, b) = if cap {
            let &next = body.get(i).ok_or(cut("capital marker"))?;
            i += 1;
            (self.kind[usize::from(next)], next)
        } else {
            (k, b)
        };
        let w = match k {
            ONE_CODE => self.first[usize::from(b)],
            PREFIX => {
                let &second = body.get(i).ok_or(cut("two-byte code"))?;
                i += 1;
                self.first[usize::from(b)] + usize::from(second)
            }
            _ => return Err(WordsError::CapitalNotWord { offset }),
        };
        let &(at, n) = self.words.get(w).ok_or(WordsError::NoSuchWord {
            offset,
            word: w,
            words: self.words.len(),
        })?;
        if n > self.len.saturating_sub(o) {
            return Err(overrun);
        }
        let (Some(dst), Some(src)) = (out.get_mut(o..o + n), self.dict.get(at..at + n)) else {
            return Err(overrun);
        };
        dst.copy_from_slice(src);
        if cap {
            let Some(first) = dst.first_mut() else {
                return Err(WordsError::CapitalEmpty { offset });
            };
            first.make_ascii_uppercase();
        }
        Ok((i, o + n))
    }
}
