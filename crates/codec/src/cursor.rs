//! One checked reader for every parser of outside bytes: WAL pages and records, archive
//! containers, wire messages, link frames and pgoutput.
//!
//! WAL and our own containers are little-endian; the PostgreSQL wire protocol and pgoutput
//! are big-endian (network order). Every read checks the bytes that remain first and returns
//! [`ShortRead`] instead of panicking, so a length read from input can never index past the
//! end. Lengths that size an allocation are checked with [`Cursor::take`] against what
//! remains before anything is allocated.

use std::fmt;

/// Input ended before a read could complete, or a string had no terminator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShortRead {
    /// Offset, from the start of the cursor's input, where the read began.
    pub offset: usize,
    /// Bytes the read needed (for a missing NUL terminator, the bytes that were searched).
    pub needed: usize,
    /// Bytes that remained at `offset`.
    pub remaining: usize,
}

impl fmt::Display for ShortRead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "input ends at offset {}: {} bytes needed, {} left",
            self.offset, self.needed, self.remaining
        )
    }
}

impl std::error::Error for ShortRead {}

/// A position in a byte slice with checked little- and big-endian reads.
#[derive(Debug, Clone)]
pub struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

macro_rules! int_reads {
    ($($le:ident $be:ident $t:ty;)*) => {$(
        #[doc = concat!("Reads a little-endian `", stringify!($t), "`.")]
        pub fn $le(&mut self) -> Result<$t, ShortRead> {
            Ok(<$t>::from_le_bytes(self.array()?))
        }
        #[doc = concat!("Reads a big-endian (network order) `", stringify!($t), "`.")]
        pub fn $be(&mut self) -> Result<$t, ShortRead> {
            Ok(<$t>::from_be_bytes(self.array()?))
        }
    )*};
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, pos: 0 }
    }

    /// A cursor at offset `at` of `buf`; reads past the end fail, as they would after a skip.
    pub fn at(buf: &'a [u8], at: usize) -> Self {
        Cursor { buf, pos: at }
    }

    /// The offset of the next read from the start of the input.
    pub fn offset(&self) -> usize {
        self.pos
    }

    /// Bytes left to read.
    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// True when every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The bytes not read yet, without consuming them.
    pub fn rest(&self) -> &'a [u8] {
        self.buf.get(self.pos..).unwrap_or(&[])
    }

    fn short(&self, needed: usize) -> ShortRead {
        ShortRead {
            offset: self.pos,
            needed,
            remaining: self.remaining(),
        }
    }

    /// The next `n` bytes, borrowed; fails without moving when fewer remain.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], ShortRead> {
        let end = self.pos.checked_add(n).ok_or_else(|| self.short(n))?;
        let out = self.buf.get(self.pos..end).ok_or_else(|| self.short(n))?;
        self.pos = end;
        Ok(out)
    }

    /// Skips `n` bytes; fails without moving when fewer remain.
    pub fn skip(&mut self, n: usize) -> Result<(), ShortRead> {
        self.take(n).map(|_| ())
    }

    /// The next `N` bytes as an array.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], ShortRead> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    /// Reads one byte.
    pub fn u8(&mut self) -> Result<u8, ShortRead> {
        Ok(self.take(1)?[0])
    }

    int_reads! {
        u16_le u16_be u16;
        u32_le u32_be u32;
        u64_le u64_be u64;
        i16_le i16_be i16;
        i32_le i32_be i32;
        i64_le i64_be i64;
    }

    /// A NUL-terminated string's bytes (without the NUL), as the wire protocol and pgoutput
    /// send names; the cursor moves past the NUL.
    pub fn cstr(&mut self) -> Result<&'a [u8], ShortRead> {
        let rest = self.rest();
        match rest.iter().position(|&b| b == 0) {
            Some(n) => {
                let s = &rest[..n];
                self.pos += n + 1;
                Ok(s)
            }
            None => Err(self.short(rest.len() + 1)),
        }
    }
}

/// A little-endian `u16` at `at`, or `None` past the end.
pub fn le_u16_at(b: &[u8], at: usize) -> Option<u16> {
    Cursor::at(b, at).u16_le().ok()
}

/// A little-endian `u32` at `at`, or `None` past the end.
pub fn le_u32_at(b: &[u8], at: usize) -> Option<u32> {
    Cursor::at(b, at).u32_le().ok()
}

/// A little-endian `u64` at `at`, or `None` past the end.
pub fn le_u64_at(b: &[u8], at: usize) -> Option<u64> {
    Cursor::at(b, at).u64_le().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_byte_orders_and_reports_short_input_where_it_began() {
        let b = [1u8, 2, 3, 4, 5, 6, 7, 8, 9];
        let mut c = Cursor::new(&b);
        assert_eq!(c.u16_le().unwrap(), 0x0201);
        assert_eq!(c.u16_be().unwrap(), 0x0304);
        assert_eq!(c.u32_be().unwrap(), 0x05060708);
        assert_eq!(c.offset(), 8);
        let e = c.u32_le().unwrap_err();
        assert_eq!(
            e,
            ShortRead {
                offset: 8,
                needed: 4,
                remaining: 1
            }
        );
        // A failed read does not move the cursor.
        assert_eq!(c.u8().unwrap(), 9);
        assert!(c.is_empty());
        assert!(c.u8().is_err());
    }

    #[test]
    fn a_huge_length_is_refused_before_anything_is_allocated() {
        let b = [0u8; 16];
        let mut c = Cursor::new(&b);
        assert!(c.take(usize::MAX).is_err());
        assert!(c.skip(17).is_err());
        assert_eq!(c.offset(), 0);
        let mut far = Cursor::at(&b, usize::MAX);
        assert_eq!(far.remaining(), 0);
        assert!(far.u8().is_err());
        assert!(far.take(0).is_err());
        assert_eq!(far.rest(), &[] as &[u8]);
    }

    #[test]
    fn cstr_stops_at_the_nul_and_fails_without_one() {
        let b = b"user\0postgres\0x";
        let mut c = Cursor::new(b);
        assert_eq!(c.cstr().unwrap(), b"user");
        assert_eq!(c.cstr().unwrap(), b"postgres");
        assert_eq!(c.offset(), 14);
        assert!(c.cstr().is_err());
        assert_eq!(c.offset(), 14);
    }

    #[test]
    fn positional_reads_are_none_past_the_end() {
        let b = 0x1122_3344_5566_7788u64.to_le_bytes();
        assert_eq!(le_u64_at(&b, 0), Some(0x1122_3344_5566_7788));
        assert_eq!(le_u32_at(&b, 4), Some(0x1122_3344));
        assert_eq!(le_u16_at(&b, 6), Some(0x1122));
        assert_eq!(le_u16_at(&b, 7), None);
        assert_eq!(le_u32_at(&b, usize::MAX), None);
    }
}
