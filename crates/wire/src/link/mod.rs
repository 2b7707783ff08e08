//! The link protocol between the two tunnel halves (docs/TUNNEL.md).
//!
//! Each direction is a stream of frames (`type: u8`, `payload length: u32` big-endian,
//! payload). After the handshake ([`handshake`]), a [`LinkEncoder`] turns PostgreSQL messages
//! into frames and a [`LinkDecoder`] turns frames back into the PostgreSQL byte stream.

pub mod auto;
mod context;
pub mod decoder;
pub mod encoder;
pub mod frame;
pub mod handshake;

pub use auto::{AutoPolicy, Observation, Tuning};
pub use decoder::{Decoded, Event, LinkDecoder};
pub use encoder::{Compressible, LinkEncoder, SenderConfig, TagSet};
pub use handshake::{Accept, Hello, Reply};

use codec::{Method, Spec};

use crate::error::LinkError;

/// Newest version of the link protocol this crate speaks. Version 2 adds column-coded
/// chunks ([`frame::COLUMNS`]); a version-1 peer never receives one.
pub const VERSION: u8 = 2;
/// Oldest version of the link protocol this crate speaks.
pub const MIN_VERSION: u8 = 1;
/// First link version with column-coded chunks.
pub const COLUMNS_VERSION: u8 = 2;
/// Lowest zstd level whose chunks are column-coded when the link version allows it and the
/// chunk looks like rows of delimited text ([`codec::columns`]): the levels a slow link is
/// worth (`auto` climbs to them only when the link, not the CPU, is the limit). The transform
/// costs a pass over the chunk each way; what it saves is in docs/TUNNEL.md.
pub const COLUMNS_FROM_LEVEL: i32 = 6;
/// The first bytes of a Hello and an Accept, so a stray client is told apart at once.
pub const MAGIC: &[u8; 8] = b"PGCZLINK";
/// Most PostgreSQL bytes one compressed chunk or verbatim frame carries: bounds the memory a
/// receiver needs per frame and the data a flush has to wait for.
pub const CHUNK_RAW_MAX: usize = 128 * 1024;
/// Largest zstd window (log2) either side uses; a decoder refuses larger ones (8 MiB, as in
/// the PostgreSQL compression patches).
pub const MAX_WINDOW_LOG: u32 = 23;
/// zstd window (log2) a sender uses unless the spec says `long=N`: 2^17 = 128 KiB keeps a
/// half's contexts small while a whole chunk still fits in the history (memory per
/// connection: docs/TUNNEL.md).
pub const DEFAULT_WINDOW_LOG: u32 = 17;
/// Longest method specification carried in a frame.
pub const MAX_SPEC_LEN: usize = 255;
/// Default smallest message worth compressing (`ZPQ_COMPRESS_THRESHOLD` of the patches).
pub const DEFAULT_THRESHOLD: usize = 60;

/// Per-direction counters, kept by the encoder and the decoder of that direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// PostgreSQL bytes: pushed into an encoder, or written out by a decoder.
    pub raw_bytes: u64,
    /// Link bytes: frames an encoder produced, or frames a decoder consumed.
    pub link_bytes: u64,
    /// Compressed chunks produced or decoded.
    pub chunks: u64,
    /// Of those, the chunks that travelled column-coded (frame `K`).
    pub column_chunks: u64,
    /// PostgreSQL messages pushed into an encoder (a decoder leaves this 0: it never frames).
    pub messages: u64,
    /// Link frames produced or decoded.
    pub frames: u64,
}

/// The methods the link supports.
pub const METHODS: [Method; 3] = [Method::None, Method::Lz4, Method::Zstd];

/// Checks that `spec` is a method the link supports: `none`, `lz4` or `zstd` without workers
/// and with a window of at most [`MAX_WINDOW_LOG`].
pub fn check_spec(spec: &Spec) -> Result<(), LinkError> {
    let bad = |reason: &str| {
        Err(LinkError::Method {
            spec: spec.to_string(),
            reason: reason.to_owned(),
        })
    };
    match spec.method {
        Method::None | Method::Lz4 => Ok(()),
        Method::Zstd if spec.workers.is_some_and(|w| w > 0) => {
            bad("zstd workers are not supported on the link (each flush would wait for them)")
        }
        Method::Zstd if spec.long.is_some_and(|l| l > MAX_WINDOW_LOG) => {
            bad("zstd window above 2^23 (long=23) is not allowed on the link")
        }
        Method::Zstd => Ok(()),
        _ => bad("the link supports none, lz4 and zstd"),
    }
}

/// Parses and checks a link method specification (`zstd:1`, `lz4`, `none`).
pub fn parse_spec(text: &str) -> Result<Spec, LinkError> {
    let spec: Spec = text
        .parse()
        .map_err(|e: codec::SpecError| LinkError::Method {
            spec: text.to_owned(),
            reason: e.to_string(),
        })?;
    check_spec(&spec)?;
    Ok(spec)
}
