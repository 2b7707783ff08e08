//! [`BlockDecompressor`] and the capped decoder for data of unknown size.

use std::io::Read;

use super::lib_err;
use crate::error::{CodecError, MAX_DECOMPRESSED_SIZE};
use crate::method::Method;
use crate::pglz;
use crate::spec::Spec;

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
                    let mut reader = stream_reader(method, &mut input, expected_len)?;
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

/// A single-stream decoder over a byte slice that leaves unconsumed input in `input`, for
/// output of at most `cap` bytes.
fn stream_reader<'a>(
    method: Method,
    input: &'a mut &[u8],
    cap: usize,
) -> Result<Box<dyn Read + 'a>, CodecError> {
    Ok(match method {
        Method::Gzip => Box::new(flate2::bufread::GzDecoder::new(input)),
        _ => Box::new(xz2::bufread::XzDecoder::new_stream(
            input,
            xz_decoder(cap, false)?,
        )),
    })
}

/// Least memory an xz decoder may use: `xz -9` needs 65 MiB.
const XZ_MEMLIMIT_FLOOR: u64 = 128 << 20;

/// An xz decoder whose memory is limited to what output of at most `cap` bytes can need,
/// and at least [`XZ_MEMLIMIT_FLOOR`]: a header's dictionary size is allocated whole, so a
/// forged one must not ask for 4 GiB. `multi`: concatenated streams, `.xz` or `.lzma`
/// (what `xz -d` reads); else one `.xz` stream.
pub(crate) fn xz_decoder(cap: usize, multi: bool) -> Result<xz2::stream::Stream, CodecError> {
    use xz2::stream::{Stream, CONCATENATED};
    let limit = XZ_MEMLIMIT_FLOOR.max((cap as u64).saturating_add(1 << 20));
    let stream = if multi {
        Stream::new_auto_decoder(limit, CONCATENATED)
    } else {
        Stream::new_stream_decoder(limit, 0)
    };
    stream.map_err(|x| lib_err(Method::Xz)(std::io::Error::other(x)))
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

/// The largest zstd window log [`decompress_capped`] accepts for output of at most `cap`
/// bytes: enough for the cap, at least 23 (8 MiB), at most 31.
fn capped_window_log(cap: usize) -> u32 {
    window_log_for(cap, 23)
}

/// The largest zstd window log a streaming decoder should accept for output of at most
/// `cap` bytes: enough for the cap, at least `floor`, at most 31. A frame without a content
/// size makes the decoder allocate the whole window it declares, whatever the output.
pub(crate) fn window_log_for(cap: usize, floor: u32) -> u32 {
    let needed = usize::BITS - cap.saturating_sub(1).leading_zeros();
    needed.clamp(floor, 31)
}

/// Least window log [`PartFeed`] accepts for a zstd frame that does not state its size:
/// 8 MiB, the largest window of zstd's levels up to 19 when the size is unknown.
const STREAMED_WINDOW_LOG_FLOOR: u32 = 23;

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
                        // The decoder allocates the window a frame declares: no more than
                        // the cap needs (or 8 MiB, what zstd's levels up to 19 use), so that
                        // a forged header cannot ask for 2 GiB.
                        d.window_log_max(capped_window_log(cap)).map_err(&e)?;
                        Box::new(d)
                    }
                    _ => stream_reader(method, &mut input, cap)?,
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

/// Decompresses a run of parts, each compressed on its own with one method and each of a
/// known size, as one stream that is read a piece at a time: zstd parts are decompressed
/// incrementally (a window's worth of memory instead of the whole part), any other part at
/// once when it is reached. Every part must come out exactly its stated size and consume all
/// its input.
///
/// A zstd frame that states its size must state the part's; one that does not (written by a
/// streaming encoder) may declare a window no larger than the part needs, or 8 MiB (what
/// zstd's levels up to 19 use), so that a forged header cannot make the decoder allocate
/// more than the part's size calls for.
pub struct PartFeed<'a> {
    method: Method,
    /// `(compressed, size)` of the parts not started yet, in reverse order.
    parts: Vec<(&'a [u8], usize)>,
    current: Option<Current<'a>>,
    zstd: Option<zstd::stream::raw::Decoder<'static>>,
    whole: Option<BlockDecompressor>,
    started: usize,
}

impl std::fmt::Debug for PartFeed<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartFeed")
            .field("method", &self.method)
            .field("parts_left", &self.parts.len())
            .finish_non_exhaustive()
    }
}

/// The part being read.
enum Current<'a> {
    /// A zstd frame: its input, how much of it is consumed, the bytes still to come out,
    /// those that came out so far, and whether the frame has ended.
    Zstd {
        src: &'a [u8],
        read: usize,
        left: usize,
        made: usize,
        ended: bool,
    },
    /// A part decompressed at once, and how much of it has been handed out.
    Whole { bytes: Vec<u8>, at: usize },
}

impl<'a> PartFeed<'a> {
    /// A feed over `parts`, `(compressed bytes, decompressed size)` in order.
    pub fn new(method: Method, parts: Vec<(&'a [u8], usize)>) -> PartFeed<'a> {
        let mut parts = parts;
        parts.reverse();
        PartFeed {
            method,
            parts,
            current: None,
            zstd: None,
            whole: None,
            started: 0,
        }
    }

    /// Whether a zstd frame written by a streaming encoder with `spec`, which does not state
    /// its size, stays within the window this feed accepts for it at any part size: zstd up
    /// to level 19 (windows up to 8 MiB when the size is unknown), without long-distance
    /// matching (whose window is the spec's own).
    pub fn reads_streamed(spec: &Spec) -> bool {
        spec.method == Method::Zstd
            && spec.long.is_none()
            && spec.effective_level().unwrap_or(3) <= 19
    }

    /// How many parts have been started (the one that failed, after an error).
    pub fn parts_started(&self) -> usize {
        self.started
    }

    /// Fills `out` with the next bytes, as far as they go; returns how many (0 only at the
    /// end of the last part, or for an empty `out`).
    pub fn read(&mut self, out: &mut [u8]) -> Result<usize, CodecError> {
        let mut n = 0;
        while n < out.len() {
            let Some(cur) = self.current.as_mut() else {
                let Some((src, size)) = self.parts.pop() else {
                    break;
                };
                self.started += 1;
                self.current = Some(self.start(src, size)?);
                continue;
            };
            match cur {
                Current::Whole { bytes, at } => {
                    let k = (bytes.len() - *at).min(out.len() - n);
                    out[n..n + k].copy_from_slice(&bytes[*at..*at + k]);
                    *at += k;
                    n += k;
                    if *at == bytes.len() {
                        self.current = None;
                    }
                }
                Current::Zstd {
                    src,
                    read,
                    left,
                    made,
                    ended,
                } => {
                    let method = self.method;
                    let dec = self.zstd.as_mut().expect("a zstd part has a decoder");
                    let want = (*left).min(out.len() - n);
                    let mut input = zstd::stream::raw::InBuffer::around(src);
                    input.set_pos(*read);
                    let mut output = zstd::stream::raw::OutBuffer::around(&mut out[n..n + want]);
                    let hint = {
                        use zstd::stream::raw::Operation;
                        dec.run(&mut input, &mut output).map_err(lib_err(method))?
                    };
                    let (k, consumed) = (output.pos(), input.pos() - *read);
                    *read = input.pos();
                    *left -= k;
                    *made += k;
                    n += k;
                    *ended |= hint == 0;
                    if *ended || *left == 0 {
                        if !*ended {
                            // All its bytes are out; what input is left must only end
                            // the frame (a checksum).
                            let mut input = zstd::stream::raw::InBuffer::around(src);
                            input.set_pos(*read);
                            let mut none = zstd::stream::raw::OutBuffer::around(&mut [][..]);
                            let hint = {
                                use zstd::stream::raw::Operation;
                                dec.run(&mut input, &mut none).map_err(lib_err(method))?
                            };
                            *read = input.pos();
                            *ended = hint == 0;
                        }
                        if !*ended || *left != 0 {
                            return Err(CodecError::SizeMismatch {
                                method,
                                expected: *made + *left,
                                actual: *made + usize::from(!*ended),
                            });
                        }
                        if *read != src.len() {
                            return Err(CodecError::TrailingData {
                                method,
                                trailing: src.len() - *read,
                            });
                        }
                        self.current = None;
                    } else if k == 0 && consumed == 0 {
                        // No progress with room to write: the input ran out mid-frame.
                        return Err(CodecError::SizeMismatch {
                            method,
                            expected: *made + *left,
                            actual: *made,
                        });
                    }
                }
            }
        }
        Ok(n)
    }

    /// Starts part `src` of `size` bytes.
    fn start(&mut self, src: &'a [u8], size: usize) -> Result<Current<'a>, CodecError> {
        let method = self.method;
        let e = lib_err(method);
        let window_log_max = match zstd::zstd_safe::get_frame_content_size(src) {
            // The frame states its size, so the decoder's window is at most that large.
            Ok(Some(s)) if s == size as u64 => Some(31),
            // A streamed frame: its window is capped by what the part's size needs.
            Ok(None) => Some(window_log_for(size, STREAMED_WINDOW_LOG_FLOOR)),
            _ => None,
        };
        if let (Method::Zstd, true, Some(log)) = (method, size > 0, window_log_max) {
            let d = match self.zstd.as_mut() {
                Some(d) => {
                    zstd::stream::raw::Operation::reinit(d).map_err(&e)?;
                    d
                }
                None => self
                    .zstd
                    .insert(zstd::stream::raw::Decoder::new().map_err(&e)?),
            };
            d.set_parameter(zstd::stream::raw::DParameter::WindowLogMax(log))
                .map_err(&e)?;
            return Ok(Current::Zstd {
                src,
                read: 0,
                left: size,
                made: 0,
                ended: false,
            });
        }
        let dec = match self.whole.as_mut() {
            Some(d) => d,
            None => self.whole.insert(BlockDecompressor::new()?),
        };
        let mut bytes = Vec::new();
        dec.decompress(method, src, size, &mut bytes)?;
        Ok(Current::Whole { bytes, at: 0 })
    }
}
