//! The crate-wide error type for block, stream and page operations.

use std::io;

pub use crate::limits::MAX_DECOMPRESSED_SIZE;
use crate::method::{BimgInfoError, Method};
use crate::pglz::PglzError;

/// Why a compression, decompression or page operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// The pglz stream is corrupt.
    #[error("pglz: {0}")]
    Pglz(#[from] PglzError),
    /// A word-coded buffer does not decode ([`crate::words`]).
    #[error("word coding: {0}")]
    Words(#[from] crate::words::WordsError),
    /// The underlying library (zstd, lz4, snappy, gzip, xz) reported an error.
    #[error("{method}: {source}")]
    Library {
        /// Method whose library failed.
        method: Method,
        /// The library's error.
        #[source]
        source: io::Error,
    },
    /// Decompressed output does not have the length the caller required.
    #[error("{method}: decompressed to {actual} bytes, expected exactly {expected} (input corrupt or wrong length)")]
    SizeMismatch {
        /// Method used.
        method: Method,
        /// Length the caller required.
        expected: usize,
        /// Length actually produced (a lower bound when the output overran).
        actual: usize,
    },
    /// Decompressed output would exceed the caller's cap (a decompression bomb or a wrong cap).
    #[error("{method}: decompressed output exceeds the cap of {cap} bytes")]
    OutputTooLarge {
        /// Method used.
        method: Method,
        /// The cap that was hit.
        cap: usize,
    },
    /// A requested output size is above [`MAX_DECOMPRESSED_SIZE`].
    #[error("requested output size {requested} exceeds the hard cap of {cap} bytes")]
    CapTooLarge {
        /// Size asked for.
        requested: usize,
        /// The hard cap.
        cap: usize,
    },
    /// Bytes follow the end of the compressed data.
    #[error("{method}: {trailing} bytes of trailing data after the compressed stream")]
    TrailingData {
        /// Method used.
        method: Method,
        /// Number of unconsumed bytes.
        trailing: usize,
    },
    /// The input is too large for the method's format (e.g. lz4 and pglz take at most `i32::MAX` bytes).
    #[error("{method}: input of {len} bytes is too large to compress")]
    InputTooLarge {
        /// Method used.
        method: Method,
        /// Input length.
        len: usize,
    },
    /// The operation is not available for this method (e.g. streaming pglz).
    #[error("{method}: {what} is not supported")]
    Unsupported {
        /// Method asked for.
        method: Method,
        /// What was attempted.
        what: &'static str,
    },
    /// A [`crate::Spec`] built by hand carries a level or option its method does not accept.
    #[error("invalid specification {spec}: {reason}")]
    InvalidSpec {
        /// The specification as displayed.
        spec: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A `bimg_info` byte has more than one compression-method bit set.
    #[error(transparent)]
    BimgInfo(#[from] BimgInfoError),
    /// Page image geometry is inconsistent (hole outside the page, body length disagrees).
    #[error("page image: {0}")]
    Page(String),
}
