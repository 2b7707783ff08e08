//! Why an advice could not be given.

use wal::source::SourceError;

/// Errors of [`crate::advise`]. Each message is one line that says what and where.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdviseError {
    /// The segment files could not be found or read (missing segment, not WAL, I/O).
    #[error(transparent)]
    Source(#[from] SourceError),
    /// No record could be read at all.
    #[error("no valid WAL record found ({0})")]
    NoRecords(String),
    /// The WAL ends in damage before the end of the files, not at PostgreSQL's ordinary end of WAL.
    #[error(
        "corrupt WAL before the end of the files: {0} (run `pgcompress wal verify` for details)"
    )]
    Corrupt(String),
    /// A stored image could not be restored.
    #[error("segment {segment}: record at {lsn}, block {block}: cannot restore the {method} image: {reason}")]
    Image {
        /// File holding the record.
        segment: String,
        /// The record's LSN, `%X/%X`.
        lsn: String,
        /// Block id in the record.
        block: u8,
        /// Stored method.
        method: &'static str,
        /// What went wrong.
        reason: String,
    },
    /// A candidate could not be set up (invalid level or option in a hand-built spec).
    #[error("candidate {spec}: {reason}")]
    Candidate {
        /// The specification.
        spec: String,
        /// Why.
        reason: String,
    },
    /// A candidate's compressed image did not decompress to the page it came from.
    #[error(
        "candidate {spec}: record at {lsn}: compressed image does not restore the page ({reason})"
    )]
    RoundTrip {
        /// The specification.
        spec: String,
        /// The record's LSN.
        lsn: String,
        /// What went wrong.
        reason: String,
    },
    /// An internal failure (a worker thread panicked).
    #[error("internal error: {0}")]
    Internal(String),
}
