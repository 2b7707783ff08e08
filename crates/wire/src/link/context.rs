//! The persistent streaming contexts of one direction: zstd with a bounded window, LZ4 frames
//! in linked-block mode. A flush emits every byte taken so far without ending the stream, so
//! the next chunk still refers back into the history.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::sync::{Arc, Mutex, MutexGuard};

use codec::{Method, Spec};
use zstd::zstd_safe::zstd_sys::ZSTD_EndDirective;
use zstd::zstd_safe::{self, CCtx, CParameter, DCtx, DParameter, InBuffer, OutBuffer};

use super::{DEFAULT_WINDOW_LOG, MAX_WINDOW_LOG};

const SCRATCH: usize = 16 * 1024;

/// A byte queue shared with an lz4 encoder (as its writer) or decoder (as its reader), since
/// the `lz4` crate only lends its inner stream immutably.
#[derive(Clone, Default)]
pub(crate) struct Shared(Arc<Mutex<VecDeque<u8>>>);

impl Shared {
    fn lock(&self) -> MutexGuard<'_, VecDeque<u8>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.lock().extend(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Read for Shared {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut q = self.lock();
        let n = q.len().min(buf.len());
        for (dst, src) in buf.iter_mut().zip(q.drain(..n)) {
            *dst = src;
        }
        Ok(n)
    }
}

/// The sending side's context.
pub(crate) enum Compressor {
    Zstd(Box<CCtx<'static>>, Box<[u8]>),
    Lz4(Box<lz4::Encoder<Shared>>, Shared),
}

/// Window log for zstd: the spec's `long`, else the link's default (a bounded window keeps
/// each connection's contexts small), never above the link's maximum.
fn window_log(spec: &Spec) -> u32 {
    spec.long.unwrap_or(DEFAULT_WINDOW_LOG).min(MAX_WINDOW_LOG)
}

/// Lowest zstd level whose match tables are bounded by [`table_log`].
const TABLES_CAPPED_FROM: i32 = 9;

/// Hash and chain table log for levels from [`TABLES_CAPPED_FROM`]: one under the window's,
/// within 2^18..=2^20 entries (at or under zstd's own sizes for those levels).
fn table_log(spec: &Spec) -> u32 {
    (window_log(spec) - 1).clamp(18, 20)
}

fn zstd_err(code: usize) -> io::Error {
    io::Error::other(zstd_safe::get_error_name(code))
}

impl Compressor {
    /// A fresh context for `spec`; `None` for method none (everything is sent verbatim).
    pub(crate) fn new(spec: &Spec) -> io::Result<Option<Compressor>> {
        match spec.method {
            Method::Zstd => {
                let level = spec.effective_level().unwrap_or(1);
                let mut enc = CCtx::try_create()
                    .ok_or_else(|| io::Error::other("cannot create a zstd context"))?;
                enc.set_parameter(CParameter::CompressionLevel(level))
                    .map_err(zstd_err)?;
                enc.set_parameter(CParameter::WindowLog(window_log(spec)))
                    .map_err(zstd_err)?;
                if level >= TABLES_CAPPED_FROM {
                    // zstd sizes these levels' match tables for large inputs whatever the
                    // window: bounded by the window, the compressor of a connection stays
                    // small (docs/TUNNEL.md, memory per connection).
                    let log = table_log(spec);
                    enc.set_parameter(CParameter::HashLog(log))
                        .map_err(zstd_err)?;
                    enc.set_parameter(CParameter::ChainLog(log))
                        .map_err(zstd_err)?;
                }
                Ok(Some(Compressor::Zstd(
                    Box::new(enc),
                    vec![0; SCRATCH].into_boxed_slice(),
                )))
            }
            Method::Lz4 => {
                let shared = Shared::default();
                let level = spec.level.map_or(0, |l| l.max(0) as u32);
                let enc = lz4::EncoderBuilder::new()
                    .block_mode(lz4::BlockMode::Linked)
                    .level(level)
                    .build(shared.clone())?;
                Ok(Some(Compressor::Lz4(Box::new(enc), shared)))
            }
            _ => Ok(None),
        }
    }

    /// Compresses `input`, appending whatever output the library releases to `out`.
    pub(crate) fn write(&mut self, input: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        match self {
            Compressor::Zstd(enc, scratch) => {
                let mut inb = InBuffer::around(input);
                while inb.pos() < input.len() {
                    let mut outb = OutBuffer::around(&mut scratch[..]);
                    enc.compress_stream2(&mut outb, &mut inb, ZSTD_EndDirective::ZSTD_e_continue)
                        .map_err(zstd_err)?;
                    out.extend_from_slice(outb.as_slice());
                }
                Ok(())
            }
            Compressor::Lz4(enc, shared) => {
                enc.write_all(input)?;
                out.extend(shared.lock().drain(..));
                Ok(())
            }
        }
    }

    /// Emits everything taken so far without ending the stream.
    pub(crate) fn flush(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        match self {
            Compressor::Zstd(enc, scratch) => loop {
                let mut outb = OutBuffer::around(&mut scratch[..]);
                let left = enc.flush_stream(&mut outb).map_err(zstd_err)?;
                out.extend_from_slice(outb.as_slice());
                if left == 0 {
                    return Ok(());
                }
            },
            Compressor::Lz4(enc, shared) => {
                enc.flush()?;
                out.extend(shared.lock().drain(..));
                Ok(())
            }
        }
    }
}

/// The receiving side's context.
pub(crate) enum Decompressor {
    Zstd(Box<DCtx<'static>>, Box<[u8]>),
    Lz4(Box<lz4::Decoder<Shared>>, Shared, Box<[u8]>),
}

impl Decompressor {
    /// A fresh context for `spec`; `None` for method none.
    pub(crate) fn new(spec: &Spec) -> io::Result<Option<Decompressor>> {
        match spec.method {
            Method::Zstd => {
                let mut dec = DCtx::try_create()
                    .ok_or_else(|| io::Error::other("cannot create a zstd context"))?;
                // A peer's frame asking for a larger window is refused, never allocated.
                dec.set_parameter(DParameter::WindowLogMax(MAX_WINDOW_LOG))
                    .map_err(zstd_err)?;
                Ok(Some(Decompressor::Zstd(
                    Box::new(dec),
                    vec![0; SCRATCH].into_boxed_slice(),
                )))
            }
            Method::Lz4 => {
                let shared = Shared::default();
                let dec = lz4::Decoder::new(shared.clone())?;
                Ok(Some(Decompressor::Lz4(
                    Box::new(dec),
                    shared,
                    vec![0; SCRATCH].into_boxed_slice(),
                )))
            }
            _ => Ok(None),
        }
    }

    /// Decompresses one chunk's bytes, appending to `out` exactly `expected` bytes or failing;
    /// output past `expected` stops the work at once (a bomb never gets further).
    pub(crate) fn chunk(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
        expected: usize,
    ) -> Result<(), String> {
        let start = out.len();
        let over = |out: &Vec<u8>| out.len() - start > expected;
        match self {
            Decompressor::Zstd(dec, scratch) => {
                let mut inb = InBuffer::around(input);
                loop {
                    let mut outb = OutBuffer::around(&mut scratch[..]);
                    dec.decompress_stream(&mut outb, &mut inb)
                        .map_err(|code| zstd_safe::get_error_name(code).to_owned())?;
                    let produced = outb.pos();
                    out.extend_from_slice(outb.as_slice());
                    if over(out) {
                        break;
                    }
                    // Done when all input is taken and the output buffer was not filled (so
                    // nothing is held back inside the context).
                    if inb.pos() == input.len() && produced < scratch.len() {
                        break;
                    }
                }
            }
            Decompressor::Lz4(dec, shared, scratch) => {
                shared.lock().extend(input);
                loop {
                    let n = dec.read(&mut scratch[..]).map_err(|e| e.to_string())?;
                    if n == 0 {
                        break;
                    }
                    out.extend_from_slice(&scratch[..n]);
                    if over(out) {
                        break;
                    }
                }
                let left = shared.lock().len();
                if left != 0 && !over(out) {
                    shared.lock().clear();
                    return Err(format!(
                        "{left} bytes of the chunk were not taken by the lz4 stream"
                    ));
                }
            }
        }
        let got = out.len() - start;
        if got > expected {
            out.truncate(start);
            return Err(format!(
                "inflates past its declared {expected} bytes (a decompression bomb or corrupt data)"
            ));
        }
        if got < expected {
            out.truncate(start);
            return Err(format!(
                "yields {got} bytes, {expected} declared (corrupt or truncated chunk)"
            ));
        }
        Ok(())
    }
}

impl Compressor {
    /// Bytes the context holds (zstd's own count for zstd; lz4's 64 KiB history and its
    /// block buffers are not counted by the crate, so this is 0 for lz4).
    pub(crate) fn memory(&self) -> usize {
        match self {
            Compressor::Zstd(enc, scratch) => enc.sizeof() + scratch.len(),
            Compressor::Lz4(..) => 0,
        }
    }
}

impl Decompressor {
    /// Bytes the context holds (zstd's own count for zstd; 0 for lz4, as for the compressor).
    pub(crate) fn memory(&self) -> usize {
        match self {
            Decompressor::Zstd(dec, scratch) => dec.sizeof() + scratch.len(),
            Decompressor::Lz4(..) => 0,
        }
    }
}

#[cfg(test)]
mod tests;
