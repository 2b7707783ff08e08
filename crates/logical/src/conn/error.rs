//! Errors of the replication connection.

use std::io;
use std::time::Duration;

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
    /// TLS could not be set up, or the server's certificate did not verify.
    #[error("TLS: {0}")]
    Tls(String),
    /// Both attempts that `sslmode=allow` or `prefer` make failed: the error of the second,
    /// with the first's for context.
    #[error("{second} (the first attempt, {first_tls}, failed too: {first})")]
    BothAttempts {
        /// What the first attempt was: "with TLS" or "without TLS".
        first_tls: &'static str,
        /// The first attempt's error.
        first: Box<ConnError>,
        /// The second attempt's error.
        second: Box<ConnError>,
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
    /// The server did not answer in time: `connect_timeout` passed while connecting and
    /// logging in, or a command before streaming went unanswered.
    #[error("timeout: {what}: no answer within {} s{}", after.as_secs(), setting.map(|s| format!(" ({s})")).unwrap_or_default())]
    Timeout {
        /// What was being waited for.
        what: String,
        /// How long it waited.
        after: Duration,
        /// The setting that bounds the wait, when the user gave one.
        setting: Option<&'static str>,
    },
    /// The stop flag was raised (SIGINT, SIGTERM) while waiting for the server; a command in
    /// progress was cancelled.
    #[error("stopped by a signal ({0})")]
    Stopped(String),
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
            ConnError::BothAttempts { second, .. } => second.sqlstate(),
            _ => None,
        }
    }
}
