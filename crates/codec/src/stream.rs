//! Streaming encoders and decoders: zstd frames, LZ4 frame format, gzip, `.xz`, Snappy
//! framing format. pglz has no streaming form. Encoders need an explicit [`Encoder::finish`];
//! decoders stop with an error once output would exceed their cap.

use std::io::{self, BufReader, Read, Write};

use crate::block::validate;
use crate::error::{CodecError, MAX_DECOMPRESSED_SIZE};
use crate::method::Method;
use crate::spec::Spec;

enum Enc<W: Write> {
    None(W),
    Zstd(zstd::stream::write::Encoder<'static, W>),
    Lz4(lz4::Encoder<W>),
    Gzip(flate2::write::GzEncoder<W>),
    Xz(xz2::write::XzEncoder<W>),
    Snappy(Box<snap::write::FrameEncoder<W>>),
}

/// A streaming compressor writing `spec`'s format into `W`; call [`Encoder::finish`].
pub struct Encoder<W: Write> {
    inner: Enc<W>,
    method: Method,
}

/// How a stream encoder frames its output beyond method and level. [`Framing::default`] is
/// what [`Encoder::new`] writes: the format's usual checksums and, for LZ4, blocks that refer
/// back to earlier blocks.
///
/// Only LZ4 frames have these choices; the other formats ignore them (a zstd stream from
/// [`Encoder`] never carries a checksum).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Framing {
    /// The LZ4 frame's content checksum and per-block checksums (xxHash32). Worth turning off
    /// only when the caller checks the data itself: they cost about as much time as LZ4
    /// compression of very redundant data.
    pub checksums: bool,
    /// LZ4 blocks may match into the previous 64 KiB (linked blocks). Independent blocks
    /// compress faster (no dictionary to carry from block to block) and lose little once
    /// each flush holds tens of kilobytes.
    pub linked_blocks: bool,
}

impl Default for Framing {
    fn default() -> Self {
        Framing {
            checksums: true,
            linked_blocks: true,
        }
    }
}

impl Framing {
    /// Sets [`Framing::checksums`].
    #[must_use]
    pub fn checksums(mut self, on: bool) -> Self {
        self.checksums = on;
        self
    }

    /// Sets [`Framing::linked_blocks`].
    #[must_use]
    pub fn linked_blocks(mut self, on: bool) -> Self {
        self.linked_blocks = on;
        self
    }
}

impl<W: Write> Encoder<W> {
    /// Starts a stream; pglz is [`CodecError::Unsupported`].
    pub fn new(spec: &Spec, writer: W) -> Result<Self, CodecError> {
        Self::with_framing(spec, writer, Framing::default())
    }

    /// Starts a stream framed as `framing` says; pglz is [`CodecError::Unsupported`].
    pub fn with_framing(spec: &Spec, writer: W, framing: Framing) -> Result<Self, CodecError> {
        validate(spec)?;
        let method = spec.method;
        let e = |source| CodecError::Library { method, source };
        let level = spec.effective_level();
        let inner = match method {
            Method::None => Enc::None(writer),
            Method::Pglz => {
                return Err(CodecError::Unsupported {
                    method,
                    what: "streaming",
                })
            }
            Method::Zstd => {
                let mut z =
                    zstd::stream::write::Encoder::new(writer, level.unwrap_or(3)).map_err(e)?;
                if let Some(w) = spec.long {
                    z.long_distance_matching(true).map_err(e)?;
                    z.window_log(w).map_err(e)?;
                }
                if let Some(n) = spec.workers {
                    z.multithread(n).map_err(e)?;
                }
                Enc::Zstd(z)
            }
            Method::Lz4 => {
                // LZ4F level 0 is the fast compressor; HC from level 2 up (lz4frame.h).
                let l = level.unwrap_or(1);
                let l = if l <= 1 { 0 } else { l as u32 };
                let (content, block) = if framing.checksums {
                    (
                        lz4::ContentChecksum::ChecksumEnabled,
                        lz4::liblz4::BlockChecksum::BlockChecksumEnabled,
                    )
                } else {
                    (
                        lz4::ContentChecksum::NoChecksum,
                        lz4::liblz4::BlockChecksum::NoBlockChecksum,
                    )
                };
                let mode = if framing.linked_blocks {
                    lz4::BlockMode::Linked
                } else {
                    lz4::BlockMode::Independent
                };
                Enc::Lz4(
                    lz4::EncoderBuilder::new()
                        .level(l)
                        .checksum(content)
                        .block_checksum(block)
                        .block_mode(mode)
                        .build(writer)
                        .map_err(e)?,
                )
            }
            Method::Gzip => Enc::Gzip(flate2::write::GzEncoder::new(
                writer,
                flate2::Compression::new(level.unwrap_or(6) as u32),
            )),
            Method::Xz => Enc::Xz(xz2::write::XzEncoder::new(
                writer,
                level.unwrap_or(6) as u32,
            )),
            Method::Snappy => Enc::Snappy(Box::new(snap::write::FrameEncoder::new(writer))),
        };
        Ok(Encoder { inner, method })
    }

    /// Writes the stream trailer and returns the writer.
    pub fn finish(self) -> Result<W, CodecError> {
        let method = self.method;
        let e = |source| CodecError::Library { method, source };
        match self.inner {
            Enc::None(w) => Ok(w),
            Enc::Zstd(z) => z.finish().map_err(e),
            Enc::Lz4(z) => {
                let (w, r) = z.finish();
                r.map_err(e)?;
                Ok(w)
            }
            Enc::Gzip(z) => z.finish().map_err(e),
            Enc::Xz(z) => z.finish().map_err(e),
            Enc::Snappy(z) => z.into_inner().map_err(|x| e(x.into_error())),
        }
    }
}

impl<W: Write> Write for Encoder<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.inner {
            Enc::None(w) => w.write(buf),
            Enc::Zstd(z) => z.write(buf),
            Enc::Lz4(z) => z.write(buf),
            Enc::Gzip(z) => z.write(buf),
            Enc::Xz(z) => z.write(buf),
            Enc::Snappy(z) => z.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.inner {
            Enc::None(w) => w.flush(),
            Enc::Zstd(z) => z.flush(),
            Enc::Lz4(z) => z.flush(),
            Enc::Gzip(z) => z.flush(),
            Enc::Xz(z) => z.flush(),
            Enc::Snappy(z) => z.flush(),
        }
    }
}

/// The zstd window log a [`Decoder`] always accepts (128 MiB, the window `long` alone selects
/// and the zstd command's default memory limit); a larger window only when the output cap
/// is larger than that too.
pub const STREAM_WINDOW_LOG_FLOOR: u32 = 27;

/// A streaming decompressor reading `method`'s stream format from `R`, capped in output.
/// A zstd frame whose window is larger than both 128 MiB and the cap is refused (as the
/// zstd command refuses it without `--memory`), and so is an xz or lzma stream whose
/// dictionary needs more memory than that: memory stays bounded by the cap.
pub struct Decoder<R: Read> {
    inner: Box<dyn Read + Send>,
    method: Method,
    produced: usize,
    cap: usize,
    _reader: std::marker::PhantomData<fn() -> R>,
}

impl<R: Read + Send + 'static> Decoder<R> {
    /// Starts decoding; reading more than `cap` bytes of output is an error.
    pub fn new(method: Method, reader: R, cap: usize) -> Result<Self, CodecError> {
        if cap > MAX_DECOMPRESSED_SIZE {
            return Err(CodecError::CapTooLarge {
                requested: cap,
                cap: MAX_DECOMPRESSED_SIZE,
            });
        }
        let e = |source| CodecError::Library { method, source };
        let inner: Box<dyn Read + Send> = match method {
            Method::None => Box::new(reader),
            Method::Pglz => {
                return Err(CodecError::Unsupported {
                    method,
                    what: "streaming",
                })
            }
            Method::Zstd => {
                let mut d =
                    zstd::stream::read::Decoder::with_buffer(BufReader::new(reader)).map_err(e)?;
                // zstd's own command-line default (128 MiB, what `long` alone writes), more
                // only when the cap needs it: a stream's window is allocated whole.
                d.window_log_max(crate::block::window_log_for(cap, STREAM_WINDOW_LOG_FLOOR))
                    .map_err(e)?;
                Box::new(d)
            }
            Method::Lz4 => Box::new(lz4::Decoder::new(reader).map_err(e)?),
            Method::Gzip => Box::new(flate2::read::MultiGzDecoder::new(reader)),
            Method::Xz => Box::new(xz2::read::XzDecoder::new_stream(
                reader,
                crate::block::xz_decoder(cap, true)?,
            )),
            Method::Snappy => Box::new(snap::read::FrameDecoder::new(reader)),
        };
        Ok(Decoder {
            inner,
            method,
            produced: 0,
            cap,
            _reader: std::marker::PhantomData,
        })
    }

    /// Bytes of output produced so far.
    pub fn produced(&self) -> usize {
        self.produced
    }
}

impl<R: Read> Read for Decoder<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // Allow one byte past the cap so that exceeding it is detected, then refuse.
        let room = (self.cap - self.produced.min(self.cap)) + 1;
        let want = buf.len().min(room);
        let n = self.inner.read(&mut buf[..want])?;
        self.produced += n;
        if self.produced > self.cap {
            return Err(io::Error::other(CodecError::OutputTooLarge {
                method: self.method,
                cap: self.cap,
            }));
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests;
