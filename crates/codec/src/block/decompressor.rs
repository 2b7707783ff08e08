//! [`BlockDecompressor`] and the capped decoder for data of unknown size.

use std::io::Read;

use super::lib_err;
use crate::error::{CodecError, MAX_DECOMPRESSED_SIZE};
use crate::method::Method;
use crate::pglz;

/// Largest expansion of a raw LZ4 block: a 255-run of length bytes per 255 output bytes.
const LZ4_MAX_RATIO: usize = 255;
/// Largest expansion of a pglz stream: a 3-byte tag yields up to 273 bytes.
const PGLZ_MAX_RATIO: usize = 91;

/// A reusable decompressor for all methods (holds the zstd DCtx and snappy decoder).
pub struct BlockDecompressor {
    zstd: zstd::bulk::Decompressor<'static>,
    snappy: snap::raw::Decoder,
}

impl std::fmt::Debug for BlockDecompressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockDecompressor").finish_non_exhaustive()
    }
}

impl BlockDecompressor {
    /// Creates the contexts; zstd accepts long-distance frames up to a 2 GiB window.
    pub fn new() -> Result<Self, CodecError> {
        let e = lib_err(Method::Zstd);
        let mut zstd = zstd::bulk::Decompressor::new().map_err(&e)?;
        zstd.set_parameter(zstd::stream::raw::DParameter::WindowLogMax(31))
            .map_err(&e)?;
        Ok(BlockDecompressor {
            zstd,
            snappy: snap::raw::Decoder::new(),
        })
    }

    /// Decompresses `src` into `out` (cleared first), requiring exactly `expected_len` bytes;
    /// see [`super::decompress`].
    pub fn decompress(
        &mut self,
        method: Method,
        src: &[u8],
        expected_len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), CodecError> {
        out.clear();
        if expected_len > MAX_DECOMPRESSED_SIZE {
            return Err(CodecError::CapTooLarge {
                requested: expected_len,
                cap: MAX_DECOMPRESSED_SIZE,
            });
        }
        let mismatch = |actual| CodecError::SizeMismatch {
            method,
            expected: expected_len,
            actual,
        };
        let e = lib_err(method);
        match method {
            Method::None => {
                if src.len() != expected_len {
                    return Err(mismatch(src.len()));
                }
                out.extend_from_slice(src);
            }
            Method::Pglz => {
                // Refuse before allocating when the input cannot possibly expand that far.
                if expected_len > src.len().saturating_mul(PGLZ_MAX_RATIO) {
                    return Err(mismatch(0));
                }
                out.resize(expected_len, 0);
                // Stricter than pglz_decompress: a final tag that reaches past
                // `expected_len` means the stream is longer, so it is a size mismatch.
                let (written, consumed, cut) = pglz::decode_report_cut(src, out)?;
                if written != expected_len || consumed != src.len() || cut {
                    out.clear();
                    return Err(mismatch(written + usize::from(cut)));
                }
            }
            Method::Lz4 => {
                if expected_len == 0 {
                    // lz4's binding refuses a zero-sized destination; LZ4_decompress_safe
                    // accepts exactly the empty block (a single zero token).
                    return if src == [0] { Ok(()) } else { Err(mismatch(0)) };
                }
                if expected_len > src.len().saturating_mul(LZ4_MAX_RATIO)
                    || src.len() > i32::MAX as usize
                {
                    return Err(mismatch(0));
                }
                out.resize(expected_len, 0);
                let n = lz4::block::decompress_to_buffer(src, Some(expected_len as i32), out)
                    .map_err(&e)?;
                if n != expected_len {
                    out.clear();
                    return Err(mismatch(n));
                }
            }
            Method::Zstd => {
                if let Ok(Some(size)) = zstd::zstd_safe::get_frame_content_size(src) {
                    if size != expected_len as u64 {
                        return Err(mismatch(usize::try_from(size).unwrap_or(usize::MAX)));
                    }
                }
                // Decompressed straight into the spare capacity: no zero-filling first.
                out.reserve_exact(expected_len);
                let n = self.zstd.decompress_to_buffer(src, out).map_err(&e)?;
                if n != expected_len {
                    out.clear();
                    return Err(mismatch(n));
                }
            }
            Method::Snappy => {
                let n = snap::raw::decompress_len(src).map_err(|x| e(std::io::Error::other(x)))?;
                if n != expected_len {
                    return Err(mismatch(n));
                }
                out.resize(expected_len, 0);
                let n = self
                    .snappy
                    .decompress(src, out)
                    .map_err(|x| e(std::io::Error::other(x)))?;
                if n != expected_len {
                    out.clear();
                    return Err(mismatch(n));
                }
            }
            Method::Gzip | Method::Xz => {
                out.resize(expected_len, 0);
                let mut input = src;
                let trailing = {
                    let mut reader = stream_reader(method, &mut input);
                    let filled = fill(&mut *reader, out).map_err(&e)?;
                    if filled != expected_len {
                        out.clear();
                        return Err(mismatch(filled));
                    }
                    let mut probe = [0u8; 1];
                    if read_some(&mut *reader, &mut probe).map_err(&e)? != 0 {
                        out.clear();
                        return Err(mismatch(expected_len + 1));
                    }
                    drop(reader);
                    input.len()
                };
                if trailing != 0 {
                    out.clear();
                    return Err(CodecError::TrailingData { method, trailing });
                }
            }
        }
        Ok(())
    }

    /// Decompresses `src` into exactly the whole of `dst`: zstd writes there directly, other
    /// methods go through [`BlockDecompressor::decompress`] and a copy. Lets two threads fill
    /// disjoint pieces of one buffer.
    pub fn decompress_into(
        &mut self,
        method: Method,
        src: &[u8],
        dst: &mut [u8],
    ) -> Result<(), CodecError> {
        if method != Method::Zstd {
            let mut out = Vec::new();
            self.decompress(method, src, dst.len(), &mut out)?;
            dst.copy_from_slice(&out);
            return Ok(());
        }
        let expected = dst.len();
        let mismatch = |actual| CodecError::SizeMismatch {
            method,
            expected,
            actual,
        };
        if let Ok(Some(size)) = zstd::zstd_safe::get_frame_content_size(src) {
            if size != expected as u64 {
                return Err(mismatch(usize::try_from(size).unwrap_or(usize::MAX)));
            }
        }
        let n = self
            .zstd
            .decompress_to_buffer(src, dst)
            .map_err(lib_err(method))?;
        if n != expected {
            return Err(mismatch(n));
        }
        Ok(())
    }
}

/// A single-stream decoder over a byte slice that leaves unconsumed input in `input`.
fn stream_reader<'a>(method: Method, input: &'a mut &[u8]) -> Box<dyn Read + 'a> {
    match method {
        Method::Gzip => Box::new(flate2::bufread::GzDecoder::new(input)),
        _ => Box::new(xz2::bufread::XzDecoder::new(input)),
    }
}

/// Reads until `buf` is full or EOF; returns the bytes read.
fn fill(r: &mut dyn Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match read_some(r, &mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

fn read_some(r: &mut dyn Read, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match r.read(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// See [`super::decompress_capped`].
pub(super) fn decompress_capped(
    method: Method,
    src: &[u8],
    cap: usize,
) -> Result<Vec<u8>, CodecError> {
    if cap > MAX_DECOMPRESSED_SIZE {
        return Err(CodecError::CapTooLarge {
            requested: cap,
            cap: MAX_DECOMPRESSED_SIZE,
        });
    }
    let too_large = CodecError::OutputTooLarge { method, cap };
    let e = lib_err(method);
    match method {
        Method::None => {
            if src.len() > cap {
                return Err(too_large);
            }
            Ok(src.to_vec())
        }
        Method::Pglz => {
            // One byte of room past the cap: a final tag is silently cut to fit, so only
            // overrunning the cap reveals that the stream is longer.
            let limit = (cap + 1).min(src.len().saturating_mul(PGLZ_MAX_RATIO));
            let mut out = vec![0u8; limit];
            let (written, consumed, _) = pglz::decode_report_cut(src, &mut out)?;
            if consumed != src.len() || written > cap {
                return Err(too_large);
            }
            out.truncate(written);
            Ok(out)
        }
        Method::Lz4 => {
            if src == [0] {
                return Ok(Vec::new());
            }
            let limit = cap.min(src.len().saturating_mul(LZ4_MAX_RATIO));
            if limit == 0 || src.len() > i32::MAX as usize {
                return Err(too_large);
            }
            let mut out = vec![0u8; limit];
            // LZ4_decompress_safe fails both on corrupt input and on output above the
            // limit; the two cannot be told apart here.
            let n =
                lz4::block::decompress_to_buffer(src, Some(limit as i32), &mut out).map_err(&e)?;
            out.truncate(n);
            Ok(out)
        }
        Method::Snappy => {
            let n = snap::raw::decompress_len(src).map_err(|x| e(std::io::Error::other(x)))?;
            if n > cap {
                return Err(too_large);
            }
            snap::raw::Decoder::new()
                .decompress_vec(src)
                .map_err(|x| e(std::io::Error::other(x)))
        }
        Method::Zstd | Method::Gzip | Method::Xz => {
            let mut input = src;
            let out = {
                let mut reader: Box<dyn Read + '_> = match method {
                    Method::Zstd => {
                        let mut d =
                            zstd::stream::read::Decoder::with_buffer(&mut input).map_err(&e)?;
                        d.window_log_max(31).map_err(&e)?;
                        Box::new(d)
                    }
                    _ => stream_reader(method, &mut input),
                };
                let mut out = Vec::new();
                (&mut reader)
                    .take(cap as u64 + 1)
                    .read_to_end(&mut out)
                    .map_err(&e)?;
                if out.len() > cap {
                    return Err(too_large);
                }
                out
            };
            if !input.is_empty() {
                return Err(CodecError::TrailingData {
                    method,
                    trailing: input.len(),
                });
            }
            Ok(out)
        }
    }
}
