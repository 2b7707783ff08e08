//! Errors of the async tunnel halves.

use std::path::PathBuf;

use crate::error::{FrameError, LinkError};

/// Why a tunnel half could not start or a connection ended badly.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NetError {
    /// A configuration problem found before serving: a key file that does not load, a bad
    /// method specification, an address that does not parse. The CLI exits 2 on these.
    #[error("{0}")]
    Config(String),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A socket operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The TLS layer refused a peer or failed.
    #[error("TLS: {0}")]
    Tls(String),
    /// The link between the halves broke its protocol (a bad frame, a decompression bomb).
    #[error(transparent)]
    Link(#[from] LinkError),
    /// The application or PostgreSQL broke the v3 protocol.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// The other half refused the link handshake.
    #[error("the server half refused the link: {0}")]
    Refused(String),
    /// Something took longer than its limit.
    #[error("timed out: {0}")]
    Timeout(String),
    /// The peer dropped the connection while the session was still going (no TLS
    /// close_notify, or a link frame cut off): counted as a cut link.
    #[error("{what}: the peer dropped the connection mid-session: {source}")]
    Cut {
        /// What was being done.
        what: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

impl NetError {
    /// True for errors that mean the configuration is wrong (CLI exit code 2).
    pub fn is_config(&self) -> bool {
        matches!(self, NetError::Config(_) | NetError::File { .. })
    }

    /// True for errors caused by the link peer's bytes (a bad frame or chunk): counted as
    /// decompression errors.
    pub fn is_link_data(&self) -> bool {
        matches!(self, NetError::Link(_))
    }

    /// True when the peer dropped the link mid-session: counted as a cut link.
    pub fn is_cut(&self) -> bool {
        matches!(self, NetError::Cut { .. })
    }

    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        NetError::Io {
            what: what.into(),
            source,
        }
    }
}
