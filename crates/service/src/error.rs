//! Errors of the shared service parts.

use std::path::PathBuf;

/// Why a shared part of a long-running command could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServiceError {
    /// A configuration problem found before the command starts its work, such as a
    /// `--metrics` address that cannot be bound.
    #[error("{0}")]
    Config(String),
    /// The SIGINT/SIGTERM handler could not be installed.
    #[error("installing the SIGINT/SIGTERM handler: {0}")]
    Signals(String),
    /// A pid or lock file could not be opened, read or locked.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was being done ("opening", "locking").
        what: String,
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

impl ServiceError {
    /// A function that wraps an I/O error as [`ServiceError::Io`].
    pub(crate) fn io(
        what: impl Into<String>,
        path: impl Into<std::path::PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> ServiceError {
        let what = what.into();
        let path = path.into();
        move |source| ServiceError::Io { what, path, source }
    }
}
