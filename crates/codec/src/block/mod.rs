//! One-shot block compression over every [`Method`], in the exact formats PostgreSQL
//! stores (`xloginsert.c` / `xlogreader.c`): pglz stream, raw LZ4 block (no frame, no size
//! prefix), one zstd frame, raw snappy, a gzip member, an `.xz` stream.

mod compressor;
mod decompressor;
#[cfg(test)]
mod tests;

pub use compressor::{BlockCompressor, CODED_FAST_ABOVE};
pub(crate) use decompressor::{window_log_for, xz_decoder};
pub use decompressor::{BlockDecompressor, PartFeed};

use crate::error::CodecError;
use crate::method::Method;
use crate::spec::Spec;

/// Compresses `src` into `out` (cleared first) with `spec`; pglz uses `Strategy::ALWAYS`.
///
/// pglz output that would not be smaller than the input is replaced by an all-literal
/// pglz stream, so every method always yields something the decoder accepts.
pub fn compress(spec: &Spec, src: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError> {
    BlockCompressor::new(spec)?.compress(src, out)
}

/// Decompresses `src` into `out` (cleared first), which must come out exactly
/// `expected_len` bytes long; never allocates more than `expected_len`.
pub fn decompress(
    method: Method,
    src: &[u8],
    expected_len: usize,
    out: &mut Vec<u8>,
) -> Result<(), CodecError> {
    BlockDecompressor::new()?.decompress(method, src, expected_len, out)
}

/// Decompresses data whose size is unknown, refusing to produce more than `cap` bytes.
///
/// Accepts what [`decompress`] accepts; for zstd any number of frames, for gzip a single
/// member. Output above `cap` (a decompression bomb) is [`CodecError::OutputTooLarge`].
pub fn decompress_capped(method: Method, src: &[u8], cap: usize) -> Result<Vec<u8>, CodecError> {
    decompressor::decompress_capped(method, src, cap)
}

/// Upper bound of the compressed size of `n` input bytes with `method`.
pub fn max_compressed_size(method: Method, n: usize) -> usize {
    match method {
        Method::None => n,
        // All-literal fallback stream: one control byte per 8 literals.
        Method::Pglz => n + n.div_ceil(8),
        // LZ4_COMPRESSBOUND (lz4.h).
        Method::Lz4 => n + n / 255 + 16,
        Method::Zstd => zstd::zstd_safe::compress_bound(n),
        Method::Snappy => 32 + n + n / 6,
        // Stored deflate blocks (5 bytes per 16 KiB) plus zlib's deflateBound slack and
        // the 18-byte gzip header and trailer.
        Method::Gzip => n + 5 * (n / 16383 + 1) + (n >> 12) + (n >> 14) + 13 + 18,
        // Uncompressed LZMA2 chunks (3 bytes per 64 KiB) plus stream/block headers and index.
        Method::Xz => n + 3 * (n / 65536 + 1) + 128,
    }
}

/// Checks that a hand-built spec's level and options are acceptable for its method.
pub(crate) fn validate(spec: &Spec) -> Result<(), CodecError> {
    let bad = |reason: String| CodecError::InvalidSpec {
        spec: spec.to_string(),
        reason,
    };
    if let Some(l) = spec.level {
        match spec.method.level_range() {
            None => return Err(bad(format!("{} does not accept a level", spec.method))),
            Some(r) if !r.contains(&l) => {
                return Err(bad(format!(
                    "level {l} is out of range ({}..{})",
                    r.start(),
                    r.end()
                )))
            }
            _ => {}
        }
    }
    if spec.method != Method::Zstd && (spec.long.is_some() || spec.workers.is_some()) {
        return Err(bad("long and workers are zstd-only".into()));
    }
    if let Some(w) = spec.long {
        if !crate::spec::LONG_WINDOW_LOG_RANGE.contains(&w) {
            return Err(bad(format!("window log {w} is out of range (10..31)")));
        }
    }
    if let Some(w) = spec.workers {
        if !crate::spec::WORKERS_RANGE.contains(&w) {
            return Err(bad(format!("{w} workers is out of range (0..200)")));
        }
    }
    Ok(())
}

/// Wraps a library error for `method`.
pub(crate) fn lib_err(method: Method) -> impl Fn(std::io::Error) -> CodecError {
    move |source| CodecError::Library { method, source }
}
