//! Typed errors: every one names where it happened (direction, message type, stream offset).

use crate::{tag_name, Direction};

/// A PostgreSQL message stream that breaks the protocol; the connection cannot continue.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{direction} {} at stream offset {offset}: {kind}", what(*.tag))]
#[non_exhaustive]
pub struct FrameError {
    /// The stream the message was read from.
    pub direction: Direction,
    /// The message type byte; `None` for the first packet, which has none.
    pub tag: Option<u8>,
    /// Offset of the message's first byte from the start of the stream.
    pub offset: u64,
    /// What was wrong.
    pub kind: FrameErrorKind,
}

fn what(tag: Option<u8>) -> String {
    match tag {
        Some(t) => format!("message {}", tag_name(t)),
        None => "first packet".to_owned(),
    }
}

/// What was wrong with a PostgreSQL message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameErrorKind {
    /// The length word is below the minimum for this message.
    #[error("length {len} is below the minimum {min}")]
    LengthTooShort {
        /// The length word read.
        len: u32,
        /// The smallest length allowed.
        min: u32,
    },
    /// The length word exceeds PostgreSQL's limit for this message.
    #[error("length {len} exceeds PostgreSQL's limit {max} for it")]
    LengthTooLong {
        /// The length word read.
        len: u32,
        /// The largest length allowed.
        max: u32,
    },
    /// The first packet's code is neither a protocol 3 StartupMessage nor a known request.
    #[error("unknown startup code {code} (protocol {}.{})", code >> 16, code & 0xffff)]
    UnknownCode {
        /// The code read.
        code: u32,
    },
    /// A known request whose length does not fit it.
    #[error("{request} has length {len}, expected {expected}")]
    RequestLength {
        /// Which request.
        request: &'static str,
        /// The length word read.
        len: u32,
        /// The lengths allowed.
        expected: &'static str,
    },
    /// The client began a TLS handshake without an SSLRequest (`sslnegotiation=direct`).
    #[error("a TLS handshake record where a startup packet was expected (direct SSL is not supported here; use sslnegotiation=postgres)")]
    DirectTls,
    /// Bytes arrived after an SSLRequest or GSSENCRequest before it was answered; processing
    /// them would be the CVE-2021-23214 class of injection.
    #[error("{len} bytes arrived after an encryption request before it was answered")]
    BytesBeforeAnswer {
        /// How many bytes were waiting.
        len: usize,
    },
    /// Bytes after a CancelRequest, which ends its connection.
    #[error("{len} bytes after a CancelRequest")]
    AfterCancel {
        /// How many bytes followed.
        len: usize,
    },
    /// The stream ended inside a message.
    #[error("stream ends inside the message: {have} of {need} bytes")]
    Truncated {
        /// Bytes of the message that arrived.
        have: usize,
        /// Bytes the message needs (the header's, when the length is not yet known).
        need: usize,
    },
}

/// The link between the tunnel halves broke its protocol or could not be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LinkError {
    /// A frame header names an unknown type.
    #[error("{direction} link frame at offset {offset}: unknown frame type {}", tag_name(*.frame_type))]
    UnknownFrame {
        /// The stream.
        direction: Direction,
        /// Offset of the frame in the link stream.
        offset: u64,
        /// The type byte.
        frame_type: u8,
    },
    /// A frame is longer than its type allows.
    #[error("{direction} link frame {} at offset {offset}: payload of {len} bytes exceeds the cap {max}", tag_name(*.frame_type))]
    FrameTooLong {
        /// The stream.
        direction: Direction,
        /// Offset of the frame in the link stream.
        offset: u64,
        /// The type byte.
        frame_type: u8,
        /// The payload length read.
        len: u32,
        /// The cap.
        max: u32,
    },
    /// A frame's payload does not have the layout its type requires.
    #[error("{direction} link frame {} at offset {offset}: {reason}", tag_name(*.frame_type))]
    Malformed {
        /// The stream.
        direction: Direction,
        /// Offset of the frame in the link stream.
        offset: u64,
        /// The type byte.
        frame_type: u8,
        /// What was wrong.
        reason: String,
    },
    /// A frame that is not allowed in the current state (a compressed chunk before the
    /// session is authenticated, a handshake frame mid-stream).
    #[error("{direction} link frame {} at offset {offset} is not allowed here: {reason}", tag_name(*.frame_type))]
    Unexpected {
        /// The stream.
        direction: Direction,
        /// Offset of the frame in the link stream.
        offset: u64,
        /// The type byte.
        frame_type: u8,
        /// Why it is not allowed.
        reason: &'static str,
    },
    /// A compressed chunk that is corrupt, inflates past its declared size or cap, or
    /// leaves a partial result (a decompression bomb ends here).
    #[error("{direction} link chunk at offset {offset}: {reason}")]
    Decompress {
        /// The stream.
        direction: Direction,
        /// Offset of the chunk frame in the link stream.
        offset: u64,
        /// What went wrong.
        reason: String,
    },
    /// The link stream ended inside a frame.
    #[error(
        "{direction} link stream ends inside a frame at offset {offset} ({have} of {need} bytes)"
    )]
    Truncated {
        /// The stream.
        direction: Direction,
        /// Offset of the frame.
        offset: u64,
        /// Bytes that arrived.
        have: usize,
        /// Bytes the frame needs.
        need: usize,
    },
    /// The handshake failed: wrong magic, no common version, a refused method.
    #[error("link handshake: {0}")]
    Handshake(String),
    /// A method specification the link cannot use.
    #[error("link method \"{spec}\": {reason}")]
    Method {
        /// The specification as written.
        spec: String,
        /// Why it cannot be used.
        reason: String,
    },
    /// The compression library failed while compressing.
    #[error("{direction} link compressor: {reason}")]
    Compress {
        /// The stream.
        direction: Direction,
        /// The library's message.
        reason: String,
    },
}
