//! Errors of the replication connection.

use std::io;

/// Why the connection or a replication command failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnError {
    /// The connection string or environment is unusable.
    #[error("connection settings: {0}")]
    Config(String),
    /// A socket operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The server sent an ErrorResponse.
    #[error("server: {severity} {code}: {message}{}", detail.as_ref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Server {
        /// `ERROR`, `FATAL`, …
        severity: String,
        /// SQLSTATE, e.g. `42710` (duplicate object).
        code: String,
        /// The primary message.
        message: String,
        /// The DETAIL field, if any.
        detail: Option<String>,
    },
    /// Authentication could not proceed.
    #[error("authentication: {0}")]
    Auth(String),
    /// The server sent something this client did not expect at this point.
    #[error("protocol: {0}")]
    Protocol(String),
    /// A server message declared a length over the cap.
    #[error("server message '{tag}' of {len} bytes exceeds the {cap}-byte cap")]
    TooLarge {
        /// The message tag.
        tag: char,
        /// Its declared length.
        len: usize,
        /// The cap.
        cap: usize,
    },
    /// The server closed the connection.
    #[error("the server closed the connection")]
    Closed,
}

impl ConnError {
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(io::Error) -> ConnError {
        let context = context.into();
        move |source| ConnError::Io { context, source }
    }

    /// The SQLSTATE of a server error.
    pub fn sqlstate(&self) -> Option<&str> {
        match self {
            ConnError::Server { code, .. } => Some(code),
            _ => None,
        }
    }
}
