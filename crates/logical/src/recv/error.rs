//! Errors of the consumer loop: what failed, with the step or the transaction it belonged to.

use std::path::PathBuf;

use crate::conn::ConnError;
use crate::output::OutputError;
use crate::{AssembleError, DecodeError};

/// Why [`crate::recv::Recv`] could not start or stopped.
///
/// Each variant's message says what was being done; the underlying error is its
/// [`std::error::Error::source`], so a chain printer (`{:#}` of `anyhow`) shows both.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecvError {
    /// The connection or a replication command failed.
    #[error("{context}")]
    Conn {
        /// What was being done (`connecting for replication`, `START_REPLICATION on slot s`, …).
        context: String,
        /// The connection error.
        #[source]
        source: ConnError,
    },
    /// The spill store failed: a spill file could not be written or read back, or a message
    /// did not fit the stream (a protocol violation).
    #[error("{context}")]
    Assemble {
        /// The message or transaction concerned.
        context: String,
        /// The store's error (a corrupt record names its file and offset).
        #[source]
        source: AssembleError,
    },
    /// A stored message could not be decoded.
    #[error("{context}")]
    Decode {
        /// The message or transaction concerned.
        context: String,
        /// The decoder's error.
        #[source]
        source: DecodeError,
    },
    /// Output could not be written, made durable or produced.
    #[error("{context}")]
    Output {
        /// What was being done.
        context: String,
        /// The output error.
        #[source]
        source: OutputError,
    },
    /// The pgoutput protocol version asked for is one the server (or this decoder) does not
    /// speak.
    #[error(
        "pgoutput protocol version {asked} is not one PostgreSQL {server_major} speaks \
         (1 to {highest}): leave --proto-version out for the highest"
    )]
    ProtoVersion {
        /// The version asked for.
        asked: u32,
        /// The server's major version.
        server_major: u32,
        /// The highest version the server speaks.
        highest: u32,
    },
    /// The spill directory could not be created.
    #[error("creating spill directory {}", path.display())]
    SpillDir {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl RecvError {
    pub(crate) fn conn(context: impl Into<String>) -> impl FnOnce(ConnError) -> RecvError {
        let context = context.into();
        move |source| RecvError::Conn { context, source }
    }

    pub(crate) fn assemble(context: impl Into<String>) -> impl FnOnce(AssembleError) -> RecvError {
        let context = context.into();
        move |source| RecvError::Assemble { context, source }
    }

    pub(crate) fn decode(context: impl Into<String>) -> impl FnOnce(DecodeError) -> RecvError {
        let context = context.into();
        move |source| RecvError::Decode { context, source }
    }

    pub(crate) fn output(context: impl Into<String>) -> impl FnOnce(OutputError) -> RecvError {
        let context = context.into();
        move |source| RecvError::Output { context, source }
    }
}
