//! Decoding errors: what was wrong, in which message (tag) and where (offset in the payload);
//! the caller, who knows the XLogData position, adds the LSN with [`DecodeError::with_lsn`].

use std::fmt;

use crate::Lsn;

/// A pgoutput or replication CopyData message that could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub struct DecodeError {
    /// The message's tag byte (`b'I'`, `b'w'`, …), or `None` for an empty message.
    pub tag: Option<u8>,
    /// Offset from the start of the message (the tag is at 0) where the problem was found.
    pub offset: usize,
    /// The WAL position of the message, when the caller knows it.
    pub lsn: Option<Lsn>,
    /// What was wrong.
    pub kind: ErrorKind,
}

/// The ways a message can be malformed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The message is empty: not even a tag.
    Empty,
    /// The message ended before a field was complete (or a string had no NUL).
    Truncated {
        /// Bytes the field needed.
        needed: usize,
        /// Bytes that were left.
        remaining: usize,
    },
    /// A tag this decoder does not know.
    UnknownTag,
    /// A tuple column kind other than `n`, `u`, `t` or `b`.
    UnknownColumnKind(u8),
    /// A tuple marker other than the one the format allows here (`N`, `K`, `O`).
    UnexpectedTupleMarker(u8),
    /// A count (columns, relations) or length larger than the bytes that remain could hold.
    CountTooLarge {
        /// The count or length read.
        count: i64,
        /// Bytes that were left.
        remaining: usize,
    },
    /// Bytes were left after the last field.
    TrailingBytes(usize),
    /// A Stream Start arrived while a streamed block for another (or the same) xid was open.
    NestedStreamStart {
        /// The xid whose block is open.
        open: u32,
    },
    /// A Stream Stop arrived with no streamed block open.
    StreamStopOutsideStream,
    /// A protocol version outside 1..=4 was asked for.
    UnsupportedVersion(u32),
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::Empty => write!(f, "empty message"),
            ErrorKind::Truncated { needed, remaining } => {
                write!(f, "truncated: {needed} bytes needed, {remaining} left")
            }
            ErrorKind::UnknownTag => write!(f, "unknown message tag"),
            ErrorKind::UnknownColumnKind(k) => {
                write!(f, "unknown tuple column kind {}", show_byte(*k))
            }
            ErrorKind::UnexpectedTupleMarker(k) => {
                write!(f, "unexpected tuple marker {}", show_byte(*k))
            }
            ErrorKind::CountTooLarge { count, remaining } => {
                write!(
                    f,
                    "count or length {count} cannot fit in the {remaining} bytes left"
                )
            }
            ErrorKind::TrailingBytes(n) => write!(f, "{n} bytes left after the last field"),
            ErrorKind::NestedStreamStart { open } => {
                write!(f, "Stream Start while the block of xid {open} is open")
            }
            ErrorKind::StreamStopOutsideStream => write!(f, "Stream Stop with no open block"),
            ErrorKind::UnsupportedVersion(v) => {
                write!(f, "pgoutput protocol version {v} is not supported (1 to 4)")
            }
        }
    }
}

fn show_byte(b: u8) -> String {
    if b.is_ascii_graphic() {
        format!("'{}'", b as char)
    } else {
        format!("0x{b:02x}")
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.tag {
            Some(t) => write!(f, "pgoutput message {}", show_byte(t))?,
            None => write!(f, "pgoutput message")?,
        }
        if let Some(lsn) = self.lsn {
            write!(f, " at LSN {lsn}")?;
        }
        write!(f, ", offset {}: {}", self.offset, self.kind)
    }
}

impl DecodeError {
    pub(crate) fn new(tag: Option<u8>, offset: usize, kind: ErrorKind) -> Self {
        DecodeError {
            tag,
            offset,
            lsn: None,
            kind,
        }
    }

    /// The same error, located at WAL position `lsn` (the XLogData start of the message).
    #[must_use]
    pub fn with_lsn(mut self, lsn: Lsn) -> Self {
        self.lsn = Some(lsn);
        self
    }
}
