//! Sans-IO core of the pgcompress tunnel.
//!
//! Two layers, neither of which touches a socket:
//!
//! * [`framer`]: splits the PostgreSQL v3 byte stream of one direction into messages with
//!   checked lengths (the first packet, then typed messages up to PostgreSQL's own limits),
//!   described in [`startup`], [`frontend`] and [`backend`].
//! * [`link`]: the protocol between the two tunnel halves (docs/TUNNEL.md): a version and
//!   method handshake, then per direction a stream of frames that carry PostgreSQL bytes
//!   verbatim or, for the compressible messages after the first ReadyForQuery, in chunks of
//!   one persistent, flushed streaming compression context.
//!
//! The async layer reads bytes from a socket, feeds them here and writes out what comes back.
#![deny(missing_docs)]

pub mod backend;
pub mod error;
pub mod framer;
pub mod frontend;
pub mod link;
#[cfg(feature = "net")]
pub mod net;
pub mod startup;

pub use error::{FrameError, FrameErrorKind, LinkError};
pub use framer::{Framer, Kind, Message, Piece};

use std::fmt;

/// Which way a byte stream flows between the application and PostgreSQL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Application (frontend) to PostgreSQL (backend).
    FrontendToBackend,
    /// PostgreSQL (backend) to the application (frontend).
    BackendToFrontend,
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Direction::FrontendToBackend => "frontend->backend",
            Direction::BackendToFrontend => "backend->frontend",
        })
    }
}

/// Renders a message type byte for error messages: `'Q'` or `0x00`.
pub(crate) fn tag_name(tag: u8) -> String {
    if tag.is_ascii_graphic() {
        format!("'{}'", tag as char)
    } else {
        format!("0x{tag:02x}")
    }
}
