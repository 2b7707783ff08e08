//! The decoder: a careful path that checks every symbol ([`Header::step`]) and, for long
//! bodies, a fast loop over tables ([`super::fast`]) that hands anything unusual back to it.

use super::fast::{Fast, FAST_SLACK};
use super::header::{Header, CAP, ESC, LIT, ONE_CODE, PREFIX};
use super::WordsError;
use crate::limits::MAX_DECOMPRESSED_SIZE;

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
                    (i, o) = h.step(body, body_at, i, &mut out, o, len)?;
                }
            }
        }
    }
    while i < body.len() {
        (i, o) = h.step(body, body_at, i, &mut out, o, len)?;
    }
    if o != len {
        return Err(WordsError::Underrun { got: o, len });
    }
    out.truncate(len);
    Ok(out)
}

impl Header<'_> {
    /// Decodes the symbol at `body[i]` (`i` below the body's length) into `out` at `o`
    /// (`out` holds at least `end` bytes): the new `i` and `o`. A symbol that would go past
    /// `end` is an overrun. `base` is the body's offset in the coded input, for errors.
    pub(super) fn step(
        &self,
        body: &[u8],
        base: usize,
        mut i: usize,
        out: &mut [u8],
        o: usize,
        end: usize,
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
                Some(dst) if o < end => *dst = b,
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
        if n > end.saturating_sub(o) {
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

/// Decodes a coded buffer a window at a time, for a reader that wants the text in pieces
/// instead of in one buffer of its whole length: the same checks and the same result as
/// [`decode`], in as many [`Reader::read`] calls as the caller likes.
pub struct Reader<'a> {
    h: Header<'a>,
    body: &'a [u8],
    body_at: usize,
    fast: Option<Fast>,
    /// Next body byte.
    i: usize,
    /// Bytes decoded so far (handed out or pending).
    o: usize,
    /// A symbol decoded the careful way, for the part that did not fit the caller's window.
    scratch: Vec<u8>,
    pending: std::ops::Range<usize>,
}

impl<'a> Reader<'a> {
    /// Checks the header of `coded` as [`decode`] does (`max_len` caps the decoded length).
    pub fn new(coded: &'a [u8], max_len: usize) -> Result<Reader<'a>, WordsError> {
        let (h, body_at) = Header::parse(coded, max_len.min(MAX_DECOMPRESSED_SIZE))?;
        let body = coded.get(body_at..).unwrap_or(&[]);
        let fast = Fast::new(&h, body.len());
        // The longest symbol: a word of the dictionary (bounded by the input) or one byte.
        let longest = h.words.iter().map(|&(_, n)| n).max().unwrap_or(0).max(1);
        Ok(Reader {
            h,
            body,
            body_at,
            fast,
            i: 0,
            o: 0,
            scratch: vec![0; longest],
            pending: 0..0,
        })
    }

    /// The decoded length the header states.
    pub fn len(&self) -> usize {
        self.h.len
    }

    /// Whether the decoded text is empty.
    pub fn is_empty(&self) -> bool {
        self.h.len == 0
    }

    /// Decodes into `out`: fills it, or ends at the end of the text. Returns the bytes
    /// written: 0 once everything was read (or when `out` is empty, as `std::io::Read`
    /// does). A body that decodes to a different length than its header states is an
    /// error, at the read that finds it.
    pub fn read(&mut self, out: &mut [u8]) -> Result<usize, WordsError> {
        if out.is_empty() {
            return Ok(0);
        }
        let mut w = self.drain(out);
        while w < out.len() && self.i < self.body.len() {
            if let Some(fast) = &self.fast {
                // The fast loop writes up to FAST_SLACK bytes past what it keeps.
                let room = (out.len() - w).saturating_sub(FAST_SLACK);
                let limit = room.min(self.h.len - self.o);
                let (i, n) = fast.run(self.body, self.i, &mut out[w..], 0, limit);
                (self.i, self.o, w) = (i, self.o + n, w + n);
                if w == out.len() || self.i >= self.body.len() {
                    break;
                }
            }
            let end = self.h.len - self.o;
            let (i, n) = self
                .h
                .step(self.body, self.body_at, self.i, &mut self.scratch, 0, end)?;
            self.i = i;
            self.o += n;
            self.pending = 0..n;
            w += self.drain(&mut out[w..]);
        }
        if w == 0 && self.o != self.h.len {
            return Err(WordsError::Underrun {
                got: self.o,
                len: self.h.len,
            });
        }
        Ok(w)
    }

    /// Copies what is pending into `out`; the bytes copied.
    fn drain(&mut self, out: &mut [u8]) -> usize {
        let n = self.pending.len().min(out.len());
        let from = self.pending.start;
        out[..n].copy_from_slice(&self.scratch[from..from + n]);
        self.pending.start += n;
        n
    }
}
