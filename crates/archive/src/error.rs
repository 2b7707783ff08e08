//! Typed errors of the archive library.

use std::path::PathBuf;

use crate::walsplit::SplitError;

/// Why a container could not be parsed or decoded. Messages are one line and say
/// where (offset, part) the problem is; callers add the file name.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ContainerError {
    /// The first bytes are not the container magic.
    #[error("not a pgcompress archive file (bad magic at offset 0)")]
    BadMagic,
    /// A format version this build does not read.
    #[error("container format version {0} is not supported (this build reads version 1)")]
    UnsupportedVersion(u16),
    /// Flag bits this build does not know.
    #[error("unknown container flags 0x{0:04x} at offset 10")]
    UnknownFlags(u16),
    /// The input ends before the header or payload is complete.
    #[error("container truncated: {need} bytes needed, {have} present")]
    Truncated {
        /// Bytes needed.
        need: u64,
        /// Bytes present.
        have: u64,
    },
    /// The declared header length is impossible.
    #[error("header length {found} is invalid (expected {min}..={max})")]
    HeaderLength {
        /// The declared length.
        found: u32,
        /// Smallest acceptable value.
        min: u32,
        /// Largest acceptable value.
        max: u32,
    },
    /// The header checksum does not match: the header is corrupt.
    #[error("header checksum is 0x{computed:08x}, expected 0x{stored:08x} (header corrupt)")]
    HeaderChecksum {
        /// CRC-32C stored in the header.
        stored: u32,
        /// CRC-32C computed over the header.
        computed: u32,
    },
    /// A header field ends past the header's declared length.
    #[error("header ends early: {source}")]
    HeaderShort {
        /// Where the read began and what it needed.
        source: codec::ShortRead,
    },
    /// A header field holds a value that cannot be right.
    #[error("invalid header field {field}: {detail}")]
    Field {
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        detail: String,
    },
    /// The header's method field is not a method specification this build reads.
    #[error("invalid header field method: {source}")]
    Method {
        /// Why the specification does not parse.
        source: codec::SpecError,
    },
    /// The file is longer or shorter than its header says.
    #[error("container is {actual} bytes, header says {expected} (truncated or extended)")]
    Length {
        /// Size the header implies.
        expected: u64,
        /// Actual size.
        actual: u64,
    },
    /// A part's stored bytes do not match its checksum.
    #[error("part {index} at offset {offset} has checksum 0x{computed:08x}, expected 0x{stored:08x} (payload corrupt)")]
    PartChecksum {
        /// Part number (0-based).
        index: usize,
        /// Offset of the part's bytes in the container.
        offset: u64,
        /// CRC-32C from the header.
        stored: u32,
        /// CRC-32C computed.
        computed: u32,
    },
    /// A part does not decompress to its declared length.
    #[error("part {index} at offset {offset} does not decompress: {source}")]
    Decompress {
        /// Part number (0-based).
        index: usize,
        /// Offset of the part's bytes in the container.
        offset: u64,
        /// The codec's error.
        source: codec::CodecError,
    },
    /// The WAL records transform's streams do not rebuild a segment prefix.
    #[error("WAL streams do not rebuild the segment: {0}")]
    Rebuild(#[from] SplitError),
    /// A word-coded part does not decode.
    #[error("part {index} at offset {offset} is not valid word coding: {source}")]
    Words {
        /// Part number (0-based).
        index: usize,
        /// Offset of the part's bytes in the container.
        offset: u64,
        /// The word decoder's finding.
        source: codec::words::WordsError,
    },
    /// The decoded bytes do not have the original's SHA-256.
    #[error("decoded content has SHA-256 {actual}, expected {expected}")]
    HashMismatch {
        /// Hex SHA-256 from the header.
        expected: String,
        /// Hex SHA-256 of the decoded bytes.
        actual: String,
    },
    /// The decoded bytes do not have the original's XXH3-128 digest.
    #[error("decoded content has {digest} {actual}, expected {expected}")]
    DigestMismatch {
        /// Which digest: "XXH3-128".
        digest: &'static str,
        /// Hex digest from the header.
        expected: String,
        /// Hex digest of the decoded bytes.
        actual: String,
    },
}

/// Errors of packing files and of the repository.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArchiveError {
    /// An I/O operation failed.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was being done ("reading", "renaming ...").
        what: String,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A name that cannot be stored (empty, a path, a leading dot, control characters).
    #[error("invalid archive file name {name:?}: {reason}")]
    InvalidName {
        /// The name given.
        name: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// The file is larger than a container can hold.
    #[error("{name}: {size} bytes is larger than the {max}-byte limit of an archived file")]
    TooLarge {
        /// The file name.
        name: String,
        /// Its size.
        size: u64,
        /// The limit.
        max: u64,
    },
    /// The compression method failed.
    #[error("{name}: compression failed: {source}")]
    Codec {
        /// The file name.
        name: String,
        /// The codec's error.
        source: codec::CodecError,
    },
    /// A stored file is damaged.
    #[error("{name}: {source}")]
    Corrupt {
        /// The archive file name.
        name: String,
        /// What is wrong.
        source: ContainerError,
    },
    /// Push-time self-check: the container did not decode to the original (a bug; nothing was published).
    #[error(
        "{name}: the packed file did not decode to the original ({source}); nothing was archived"
    )]
    SelfCheck {
        /// The file name.
        name: String,
        /// What the check found.
        source: ContainerError,
    },
    /// The repository already holds this name with different content.
    #[error("{name} is already archived with different content (SHA-256 {existing}, this file {new}); not overwritten")]
    Conflict {
        /// The file name.
        name: String,
        /// Hex SHA-256 of the archived original.
        existing: String,
        /// Hex SHA-256 of the file pushed.
        new: String,
    },
    /// The repository holds this name but the stored file is damaged; it is not replaced.
    #[error("{name} is already archived but the archived copy is damaged ({source}); not overwritten, check the repository")]
    ExistingCorrupt {
        /// The file name.
        name: String,
        /// What is wrong with the archived copy.
        source: ContainerError,
    },
    /// `get` of a name the repository does not hold.
    #[error("{name} is not in the archive")]
    NotFound {
        /// The file name.
        name: String,
    },
    /// The repository itself is not there (a directory that does not exist, a missing bucket).
    #[error("repository {location} {reason}")]
    NoRepository {
        /// The repository's location.
        location: String,
        /// What is wrong ("is not a directory", ...).
        reason: String,
    },
    /// A request to an object store failed.
    #[error("{what} {location}: {detail}")]
    Store {
        /// What was being done ("reading NAME from", "listing").
        what: String,
        /// The repository's location.
        location: String,
        /// The store's error and its causes, on one line.
        detail: String,
    },
    /// A repository location or setting that cannot be used.
    #[error("{0}")]
    Config(String),
    /// A backup or timeline history file that retention cannot read; nothing is removed.
    #[error("{name}: {source}; nothing removed")]
    History {
        /// The archived file name.
        name: String,
        /// What is wrong with it.
        source: crate::retention::HistoryError,
    },
    /// Pushing through the spool failed or timed out (the message says which and why).
    #[error("{0}")]
    Spool(String),
    /// The retention asked for cannot be applied.
    #[error(transparent)]
    Retention(#[from] crate::retention::PlanError),
    /// The location holds no initialized repository: nothing is pushed to or restored from
    /// it, and nothing is created there (`pgcompress archive init` creates one on purpose).
    #[error(
        "repository {location} {detail}: nothing was read or written; if this is the right place, \
create it once with `pgcompress archive init --repo {location} --pgdata DATA_DIRECTORY`"
    )]
    NotInitialized {
        /// The repository's location.
        location: String,
        /// What is there instead ("does not exist", "is not initialized").
        detail: String,
    },
    /// A file of another cluster (or with another segment size) than the repository's.
    #[error("{name} is refused by repository {location}: {mismatch}; nothing was written")]
    ForeignFile {
        /// The file name.
        name: String,
        /// The repository's location.
        location: String,
        /// How it differs.
        mismatch: crate::identity::Mismatch,
    },
    /// `archive init` on a repository that belongs to another cluster.
    #[error(
        "repository {location} already belongs to {existing}, not to {wanted}; nothing changed"
    )]
    OtherCluster {
        /// The repository's location.
        location: String,
        /// What it holds or records.
        existing: String,
        /// What init was asked to record.
        wanted: crate::identity::Identity,
    },
    /// Identity bytes (the repository's identity file, a segment header, pg_control) that
    /// cannot be read.
    #[error("{what}: {source}")]
    Identity {
        /// Which file and where.
        what: String,
        /// What is wrong with it.
        source: crate::identity::IdentityError,
    },
    /// A pid or lock file of a long-running command (a spool's `serve.lock`, `fetch.pid`).
    #[error(transparent)]
    Service(#[from] service::ServiceError),
}

impl ArchiveError {
    /// Wraps an I/O error with what was done and where.
    pub(crate) fn io(
        what: impl Into<String>,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> ArchiveError {
        let what = what.into();
        let path = path.into();
        move |source| ArchiveError::Io { what, path, source }
    }
}
