//! The header of a word-coded buffer: decoded length, escape byte, capital marker, code
//! values, prefixes and dictionary, read with checked reads and checked against each other.

use super::WordsError;
use crate::cursor::Cursor;

/// A byte copied as it is.
pub(super) const LIT: u8 = 0;
/// The escape: the next byte is copied as it is.
pub(super) const ESC: u8 = 1;
/// The capital marker: the next code's word, first letter upper-cased.
pub(super) const CAP: u8 = 2;
/// A one-byte code.
pub(super) const ONE_CODE: u8 = 3;
/// The first byte of a two-byte code.
pub(super) const PREFIX: u8 = 4;

/// What the header of a coded stream says.
pub(super) struct Header<'a> {
    /// The decoded length.
    pub(super) len: usize,
    /// What each byte value is in the body.
    pub(super) kind: [u8; 256],
    /// For a one-byte code, its word; for a prefix, the word of its second byte 0.
    pub(super) first: [usize; 256],
    /// The escape byte.
    pub(super) escape: u8,
    /// The capital marker.
    pub(super) capital: u8,
    /// The prefixes of two-byte codes, in code order.
    pub(super) prefixes: &'a [u8],
    /// The dictionary: each word followed by a zero byte.
    pub(super) dict: &'a [u8],
    /// Each word as (start, length) in `dict`.
    pub(super) words: Vec<(usize, usize)>,
}

impl<'a> Header<'a> {
    /// Reads the header at the start of `coded` and returns it with the offset where the
    /// body starts. The decoded length must be at most `max_len` and within what the body
    /// could decode to, so that an output buffer sized from it is bounded by the input.
    pub(super) fn parse(coded: &'a [u8], max_len: usize) -> Result<(Self, usize), WordsError> {
        let mut r = Cursor::new(coded);
        let claimed = r.u64_le()?;
        let len = match usize::try_from(claimed) {
            Ok(len) if len <= max_len => len,
            _ => {
                return Err(WordsError::TooLong {
                    len: claimed,
                    cap: max_len,
                })
            }
        };
        let mut kind = [LIT; 256];
        let mut first = [0usize; 256];
        let escape = r.u8()?;
        let capital = r.u8()?;
        if escape == capital {
            return Err(WordsError::SameMarker { byte: escape });
        }
        kind[usize::from(escape)] = ESC;
        kind[usize::from(capital)] = CAP;
        let n1 = usize::from(r.u8()?);
        let at = r.offset();
        for (i, &b) in r.take(n1)?.iter().enumerate() {
            if kind[usize::from(b)] != LIT {
                return Err(WordsError::CodeTwice {
                    offset: at + i,
                    byte: b,
                });
            }
            kind[usize::from(b)] = ONE_CODE;
            first[usize::from(b)] = i;
        }
        let n2 = usize::from(r.u8()?);
        let at = r.offset();
        let prefixes = r.take(n2)?;
        for (i, &b) in prefixes.iter().enumerate() {
            if kind[usize::from(b)] != LIT {
                return Err(WordsError::CodeTwice {
                    offset: at + i,
                    byte: b,
                });
            }
            kind[usize::from(b)] = PREFIX;
            first[usize::from(b)] = n1 + i * 256;
        }
        let dict_len = r.u32_le()?;
        let dict = r.take(usize::try_from(dict_len).unwrap_or(usize::MAX))?;
        if dict.last().is_some_and(|&b| b != 0) {
            return Err(WordsError::Unterminated {
                offset: r.offset() - 1,
            });
        }
        let count = dict.iter().filter(|&&b| b == 0).count();
        let codes = n1 + n2 * 256;
        if count > codes {
            return Err(WordsError::TooManyWords {
                words: count,
                codes,
            });
        }
        let mut words = Vec::with_capacity(count);
        let mut start = 0;
        let mut longest = 1;
        for (i, &b) in dict.iter().enumerate() {
            if b == 0 {
                words.push((start, i - start));
                longest = longest.max(i - start);
                start = i + 1;
            }
        }
        let body = r.remaining();
        if len > body.saturating_mul(longest) {
            return Err(WordsError::Implausible { len, body, longest });
        }
        let h = Header {
            len,
            kind,
            first,
            escape,
            capital,
            prefixes,
            dict,
            words,
        };
        Ok((h, r.offset()))
    }
}
