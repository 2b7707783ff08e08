//! Errors of the shared service parts.

/// Why a shared part of a long-running command could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServiceError {
    /// A configuration problem found before the command starts its work, such as a
    /// `--metrics` address that cannot be bound.
    #[error("{0}")]
    Config(String),
}
