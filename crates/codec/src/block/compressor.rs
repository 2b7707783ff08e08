//! [`BlockCompressor`]: per-method contexts reused across many blocks.

use std::io::Write;

use super::{lib_err, validate};
use crate::error::CodecError;
use crate::method::Method;
use crate::pglz;
use crate::spec::Spec;

/// A reusable compressor for one [`Spec`] (holds the zstd CCtx, pglz tables, snappy encoder).
pub struct BlockCompressor {
    spec: Spec,
    zstd: Option<zstd::bulk::Compressor<'static>>,
    /// The context [`BlockCompressor::compress_coded`] uses, made on first use.
    zstd_coded: Option<zstd::bulk::Compressor<'static>>,
    pglz: pglz::Compressor,
    snappy: snap::raw::Encoder,
}

impl std::fmt::Debug for BlockCompressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockCompressor")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

impl BlockCompressor {
    /// Builds the contexts `spec` needs; fails if the spec's level or options are invalid.
    pub fn new(spec: &Spec) -> Result<Self, CodecError> {
        validate(spec)?;
        let zstd = if spec.method == Method::Zstd {
            Some(zstd_context(spec, None)?)
        } else {
            None
        };
        Ok(BlockCompressor {
            spec: *spec,
            zstd,
            zstd_coded: None,
            pglz: pglz::Compressor::new(),
            snappy: snap::raw::Encoder::new(),
        })
    }

    /// The specification this compressor applies.
    pub fn spec(&self) -> &Spec {
        &self.spec
    }

    /// The pglz tables, for callers that need a strategy other than `ALWAYS`.
    pub fn pglz(&mut self) -> &mut pglz::Compressor {
        &mut self.pglz
    }

    /// Compresses `src` into `out` (cleared first); see [`super::compress`].
    pub fn compress(&mut self, src: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError> {
        out.clear();
        let method = self.spec.method;
        let e = lib_err(method);
        match method {
            Method::None => out.extend_from_slice(src),
            Method::Pglz => {
                if src.len() > i32::MAX as usize {
                    return Err(CodecError::InputTooLarge {
                        method,
                        len: src.len(),
                    });
                }
                if !self.pglz.compress_into(src, &pglz::Strategy::ALWAYS, out) {
                    literal_pglz(src, out);
                }
            }
            Method::Lz4 => self.lz4(src, out, self.spec.effective_level().unwrap_or(1))?,
            Method::Zstd => {
                let c = self.zstd.as_mut().ok_or(CodecError::Unsupported {
                    method,
                    what: "zstd without a context",
                })?;
                zstd_into(c, src, out)?;
            }
            Method::Snappy => {
                let bound = snap::raw::max_compress_len(src.len());
                if bound == 0 && !src.is_empty() {
                    return Err(CodecError::InputTooLarge {
                        method,
                        len: src.len(),
                    });
                }
                out.resize(bound.max(1), 0);
                let n = self
                    .snappy
                    .compress(src, out)
                    .map_err(|x| e(std::io::Error::other(x)))?;
                out.truncate(n);
            }
            Method::Gzip => {
                let level = self.spec.effective_level().unwrap_or(6) as u32;
                let mut enc = flate2::write::GzEncoder::new(out, flate2::Compression::new(level));
                enc.write_all(src).map_err(&e)?;
                enc.finish().map_err(&e)?;
            }
            Method::Xz => {
                let level = self.spec.effective_level().unwrap_or(6) as u32;
                let mut enc = xz2::write::XzEncoder::new(out, level);
                enc.write_all(src).map_err(&e)?;
                enc.finish().map_err(&e)?;
            }
        }
        Ok(())
    }

    /// Compresses bytes that [`crate::words::encode`] wrote into `out` (cleared first): what
    /// [`BlockCompressor::compress`] does, except for more than [`CODED_FAST_ABOVE`] bytes at
    /// zstd level 3 without long-distance matching, which get zstd's fast strategy instead of
    /// the level's double-fast one. Coded text has few long repeats left for double-fast's
    /// second hash table to find: on the word-coded streams of text WAL the fast strategy
    /// stored a little less in much less time, and decompressed as fast (docs/BENCHMARKS.md,
    /// `bench archive`).
    /// Any zstd decoder reads the result; the container records the same method.
    pub fn compress_coded(&mut self, src: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError> {
        let s = &self.spec;
        if s.method != Method::Zstd
            || s.effective_level() != Some(3)
            || s.long.is_some()
            || src.len() <= CODED_FAST_ABOVE
        {
            return self.compress(src, out);
        }
        let c = match &mut self.zstd_coded {
            Some(c) => c,
            none => none.insert(zstd_context(s, Some(zstd::zstd_safe::Strategy::ZSTD_fast))?),
        };
        out.clear();
        zstd_into(c, src, out)
    }

    /// Raw LZ4 block: level 1 = `LZ4_compress_default` (what `xloginsert.c` calls),
    /// 2..=12 = `LZ4_compress_HC` at that level.
    pub(crate) fn lz4(
        &mut self,
        src: &[u8],
        out: &mut Vec<u8>,
        level: i32,
    ) -> Result<(), CodecError> {
        let method = Method::Lz4;
        out.clear();
        if src.is_empty() {
            // What LZ4_compress_default writes for empty input: one token, no literals.
            out.push(0);
            return Ok(());
        }
        if src.len() > i32::MAX as usize / 2 {
            return Err(CodecError::InputTooLarge {
                method,
                len: src.len(),
            });
        }
        out.resize(super::max_compressed_size(method, src.len()), 0);
        let mode = if level <= 1 {
            None
        } else {
            Some(lz4::block::CompressionMode::HIGHCOMPRESSION(level))
        };
        let n = lz4::block::compress_to_buffer(src, mode, false, out).map_err(lib_err(method))?;
        out.truncate(n);
        Ok(())
    }
}

/// Coded bytes up to this length are compressed as any bytes: it is where zstd's parameters
/// for large inputs begin, and below it the fast strategy stored more on pieces of the same
/// coded text (docs/BENCHMARKS.md).
pub const CODED_FAST_ABOVE: usize = 256 << 10;

/// Appends the zstd frame of `src` that `c` makes to `out`, room for the worst case reserved
/// first.
fn zstd_into(
    c: &mut zstd::bulk::Compressor<'static>,
    src: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), CodecError> {
    out.reserve(zstd::zstd_safe::compress_bound(src.len()));
    c.compress_to_buffer(src, out)
        .map_err(lib_err(Method::Zstd))?;
    Ok(())
}

/// A zstd context for `spec` (its level, long-distance matching and workers), with
/// `strategy` instead of the level's when one is given.
fn zstd_context(
    spec: &Spec,
    strategy: Option<zstd::zstd_safe::Strategy>,
) -> Result<zstd::bulk::Compressor<'static>, CodecError> {
    use zstd::stream::raw::CParameter;
    let e = lib_err(Method::Zstd);
    let mut c = zstd::bulk::Compressor::new(spec.effective_level().unwrap_or(3)).map_err(&e)?;
    if let Some(w) = spec.long {
        c.set_parameter(CParameter::EnableLongDistanceMatching(true))
            .map_err(&e)?;
        c.set_parameter(CParameter::WindowLog(w)).map_err(&e)?;
    }
    if let Some(n) = spec.workers {
        c.set_parameter(CParameter::NbWorkers(n)).map_err(&e)?;
    }
    if let Some(st) = strategy {
        c.set_parameter(CParameter::Strategy(st)).map_err(&e)?;
    }
    Ok(c)
}

/// A valid pglz stream of literals only: a zero control byte before every 8 bytes.
fn literal_pglz(src: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.reserve(src.len() + src.len().div_ceil(8));
    for chunk in src.chunks(8) {
        out.push(0);
        out.extend_from_slice(chunk);
    }
}
