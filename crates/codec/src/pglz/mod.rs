//! pglz, PostgreSQL's LZ compressor, written from the format in `src/common/pg_lzcompress.c`.
//!
//! The stream is groups of one control byte (read LSB first) and up to eight items: a
//! clear bit is a literal byte, a set bit a 2- or 3-byte back-reference tag. The encoder
//! here reproduces PostgreSQL's `pglz_compress` decision for decision so that its output is
//! byte-identical to what a server writes into WAL; see [`compress`] for the details.

mod compress;
mod decompress;
mod strategy;
#[cfg(test)]
mod tests;

pub use compress::{compress, Compressor, HashByte};
pub(crate) use decompress::decode_report_cut;
pub use decompress::{decompress, decompress_into};
pub use strategy::Strategy;

/// `PGLZ_MAX_HISTORY_LISTS` (`pg_lzcompress.c`): largest hash table, a power of two.
pub const MAX_HISTORY_LISTS: usize = 8192;
/// `PGLZ_HISTORY_SIZE` (`pg_lzcompress.c`): history entries, recycled round-robin.
pub const HISTORY_SIZE: usize = 4096;
/// `PGLZ_MAX_MATCH` (`pg_lzcompress.c`): longest match a 3-byte tag can describe.
pub const MAX_MATCH: usize = 273;
/// Hard cap on `rawsize` accepted by the decoder (1 GiB, like PostgreSQL's varlena limit).
pub const MAX_RAWSIZE: usize = crate::limits::MAX_DECOMPRESSED_SIZE;

/// `PGLZ_MAX_OUTPUT(dlen)` (`pg_lzcompress.h`): buffer PostgreSQL gives the encoder.
pub const fn max_output(dlen: usize) -> usize {
    dlen + 4
}

/// Why a pglz stream could not be decoded (each case is a `-1` from `pglz_decompress`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PglzError {
    /// A match tag starting at `at` needs more bytes than the input has.
    #[error("match tag at input offset {at} runs past the end of the {input_len}-byte input")]
    TagPastEnd {
        /// Input offset of the tag's first byte.
        at: usize,
        /// Input length.
        input_len: usize,
    },
    /// A match tag has offset 0.
    #[error("match tag at input offset {at} has offset 0")]
    ZeroOffset {
        /// Input offset of the tag's first byte.
        at: usize,
    },
    /// A match tag points before the start of the output.
    #[error("match tag at input offset {at} points {offset} bytes back but only {written} bytes were written")]
    OffsetBeforeStart {
        /// Input offset of the tag's first byte.
        at: usize,
        /// The tag's offset.
        offset: usize,
        /// Output bytes written so far.
        written: usize,
    },
    /// With `check_complete`, the stream did not produce exactly `rawsize` bytes from all its input.
    #[error("stream produced {written} of {rawsize} bytes and consumed {consumed} of {input_len} input bytes (truncated, corrupt, or wrong raw size)")]
    Incomplete {
        /// Output bytes produced.
        written: usize,
        /// Output bytes required.
        rawsize: usize,
        /// Input bytes consumed.
        consumed: usize,
        /// Input length.
        input_len: usize,
    },
    /// `rawsize` is above [`MAX_RAWSIZE`].
    #[error("raw size {rawsize} exceeds the hard cap of {cap} bytes")]
    RawSizeTooLarge {
        /// Requested raw size.
        rawsize: usize,
        /// The hard cap.
        cap: usize,
    },
}
