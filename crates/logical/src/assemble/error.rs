//! Errors of the transaction assembler and its spill store: where the bad record is (file and
//! offset), which WAL position broke the protocol (LSN), which file operation failed.

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::{DecodeError, Lsn};

/// Why the assembler could not take a message or give a transaction back.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AssembleError {
    /// A pgoutput message did not decode (its LSN is in the error).
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// A well-formed message arrived where the protocol does not allow it.
    #[error("pgoutput stream at LSN {lsn}: {violation}")]
    Protocol {
        /// XLogData start of the message.
        lsn: Lsn,
        /// What was out of place.
        violation: Violation,
    },
    /// A spill record failed its checks: the file was damaged or changed behind our back.
    #[error("spill file {}, offset {offset}: {reason} (the file is corrupt or was changed while in use; the transaction cannot be replayed from it)", path.display())]
    Corrupt {
        /// The spill file.
        path: PathBuf,
        /// Offset of the record (or header) that is wrong.
        offset: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// Creating, writing, truncating, reading or removing a spill file failed.
    #[error("spill file {}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// Compressing a record failed.
    #[error("spill file {}: compressing a record: {source}", path.display())]
    Compress {
        /// The spill file.
        path: PathBuf,
        /// The codec's error.
        #[source]
        source: codec::CodecError,
    },
    /// The spill directory is not private to the account that runs the store: a link, not a
    /// directory, another account's, open to group or others, or below a directory someone
    /// else may change.
    #[error(
        "spill directory {} {problem}: spill files hold rows of transactions not yet committed, \
         so it must be a directory of uid {euid} closed to group and others (chmod 700 if it is \
         yours, or remove it and it is created so), or choose another one (--spill-dir)",
        path.display()
    )]
    UnsafeDir {
        /// The directory.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
        /// The effective user id that runs the store.
        euid: u32,
    },
    /// Another store holds the spill directory's lock: it would remove this one's files.
    #[error(
        "spill directory {} is in use by another consumer: give each consumer its own spill \
         directory (--spill-dir)",
        path.display()
    )]
    DirInUse {
        /// The directory.
        path: PathBuf,
    },
    /// The compression specification cannot be used for spill files.
    #[error("spill compression {spec}: {reason}")]
    Spec {
        /// The specification as displayed.
        spec: String,
        /// Why it is refused.
        reason: String,
    },
}

/// A message that is well-formed but out of place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Violation {
    /// A change, Relation, Type, Origin or transactional Message outside any transaction.
    OutsideTransaction {
        /// Its tag.
        tag: u8,
    },
    /// Begin while the transaction `open` has not committed.
    BeginInsideTransaction {
        /// The open transaction.
        open: u32,
    },
    /// Commit with no Begin before it.
    CommitWithoutBegin,
    /// Stream Start, Stream Commit or Stream Abort while the non-streamed transaction `open`
    /// is being sent.
    StreamInsideTransaction {
        /// The open transaction.
        open: u32,
    },
    /// Stream Commit or Stream Abort inside a streamed block.
    EndInsideBlock {
        /// The xid of the open block.
        open: u32,
    },
    /// A Stream Start that continues (`first_segment` = 0) a transaction this session never
    /// saw begin: its earlier changes are missing.
    UnknownStream {
        /// The transaction.
        xid: u32,
    },
    /// Two-phase commit messages (slot created with `two_phase`) are not assembled.
    TwoPhase {
        /// Its tag.
        tag: u8,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::OutsideTransaction { tag } => write!(
                f,
                "message '{}' outside any transaction or streamed block",
                char::from(*tag)
            ),
            Violation::BeginInsideTransaction { open } => {
                write!(f, "Begin while transaction {open} is still open")
            }
            Violation::CommitWithoutBegin => write!(f, "Commit without a Begin"),
            Violation::StreamInsideTransaction { open } => write!(
                f,
                "streaming message while the non-streamed transaction {open} is open"
            ),
            Violation::EndInsideBlock { open } => write!(
                f,
                "Stream Commit or Abort inside the open streamed block of xid {open}"
            ),
            Violation::UnknownStream { xid } => write!(
                f,
                "Stream Start continues transaction {xid}, whose first block this session never received"
            ),
            Violation::TwoPhase { tag } => write!(
                f,
                "two-phase message '{}' (use a slot without two_phase)",
                char::from(*tag)
            ),
        }
    }
}

impl AssembleError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> AssembleError {
        let path = path.into();
        move |source| AssembleError::Io { path, source }
    }
}
