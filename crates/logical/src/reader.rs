//! A [`Cursor`] that reports failures as [`DecodeError`]s naming the message tag.

use codec::{Cursor, ShortRead};

use crate::{DecodeError, ErrorKind, Lsn};

/// Checked big-endian reads over one message, for the message with tag `tag`.
pub(crate) struct Reader<'a> {
    cur: Cursor<'a>,
    tag: u8,
}

impl<'a> Reader<'a> {
    /// A reader positioned after the tag byte of `msg` (whose first byte is `tag`).
    pub(crate) fn after_tag(msg: &'a [u8], tag: u8) -> Self {
        Reader {
            cur: Cursor::at(msg, 1),
            tag,
        }
    }

    fn short(&self, e: ShortRead) -> DecodeError {
        DecodeError::new(
            Some(self.tag),
            e.offset,
            ErrorKind::Truncated {
                needed: e.needed,
                remaining: e.remaining,
            },
        )
    }

    /// An error of `kind` at offset `at`.
    pub(crate) fn err_at(&self, at: usize, kind: ErrorKind) -> DecodeError {
        DecodeError::new(Some(self.tag), at, kind)
    }

    pub(crate) fn offset(&self) -> usize {
        self.cur.offset()
    }

    pub(crate) fn remaining(&self) -> usize {
        self.cur.remaining()
    }

    pub(crate) fn u8(&mut self) -> Result<u8, DecodeError> {
        self.cur.u8().map_err(|e| self.short(e))
    }

    pub(crate) fn u16(&mut self) -> Result<u16, DecodeError> {
        self.cur.u16_be().map_err(|e| self.short(e))
    }

    pub(crate) fn u32(&mut self) -> Result<u32, DecodeError> {
        self.cur.u32_be().map_err(|e| self.short(e))
    }

    pub(crate) fn i32(&mut self) -> Result<i32, DecodeError> {
        self.cur.i32_be().map_err(|e| self.short(e))
    }

    pub(crate) fn i64(&mut self) -> Result<i64, DecodeError> {
        self.cur.i64_be().map_err(|e| self.short(e))
    }

    pub(crate) fn lsn(&mut self) -> Result<Lsn, DecodeError> {
        self.cur.u64_be().map(Lsn).map_err(|e| self.short(e))
    }

    pub(crate) fn cstr(&mut self) -> Result<&'a [u8], DecodeError> {
        self.cur.cstr().map_err(|e| self.short(e))
    }

    /// `n` bytes, borrowed; the length comes from input, so it is checked against what remains.
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        self.cur.take(n).map_err(|e| self.short(e))
    }

    /// A count read at `at` (columns, relations), each item needing at least `min_item` bytes:
    /// refused before anything is allocated when the bytes left cannot hold that many items.
    pub(crate) fn check_count(
        &self,
        at: usize,
        count: i64,
        min_item: usize,
    ) -> Result<usize, DecodeError> {
        let remaining = self.remaining();
        let fits = usize::try_from(count)
            .ok()
            .filter(|&n| n.checked_mul(min_item).is_some_and(|b| b <= remaining));
        fits.ok_or_else(|| self.err_at(at, ErrorKind::CountTooLarge { count, remaining }))
    }

    /// A length-prefixed byte string (`Int32 len` then `len` bytes), length checked first.
    pub(crate) fn len_bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let at = self.offset();
        let len = self.i32()?;
        let n = self.check_count(at, i64::from(len), 1)?;
        self.take(n)
    }

    /// Fails unless every byte was read: a message with more fields than the format is not the
    /// message we think it is.
    pub(crate) fn finish(&self) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(self.err_at(self.offset(), ErrorKind::TrailingBytes(n))),
        }
    }
}
