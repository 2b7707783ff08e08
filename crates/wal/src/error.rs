//! Errors of the WAL decoder: every defect carries where it happened.

use crate::lsn::Lsn;
use std::fmt;

/// What is wrong with the WAL at a position. Messages follow xlogreader.c's wording
/// so a DBA can match them with PostgreSQL's own reports.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Defect {
    /// `xlp_magic` is not the version's `XLOG_PAGE_MAGIC`.
    #[error("invalid magic number {found:04X} in page header (expected {expected:04X})")]
    BadMagic {
        /// Magic found.
        found: u16,
        /// Magic of the version detected on the first page.
        expected: u16,
    },
    /// The first page carries a magic of no supported version.
    #[error(
        "unsupported WAL page magic {found:04X}: {what}; pgcompress reads PostgreSQL 15 to 18"
    )]
    UnsupportedVersion {
        /// Magic found.
        found: u16,
        /// What that magic is known to be.
        what: String,
    },
    /// `xlp_info` has bits outside `XLP_ALL_FLAGS`.
    #[error("invalid info bits {0:04X} in page header")]
    BadInfoBits(u16),
    /// The first page of a segment lacks `XLP_LONG_HEADER`.
    #[error("first page of segment has no long header (info bits {0:04X})")]
    MissingLongHeader(u16),
    /// The long header names another database system.
    #[error("WAL file is from a different database system: system identifier {found}, expected {expected}")]
    SystemIdMismatch {
        /// Identifier in this segment.
        found: u64,
        /// Identifier of the first segment read.
        expected: u64,
    },
    /// The long header's segment size is not the stream's or not valid.
    #[error("incorrect segment size {found} in page header (expected {expected})")]
    SegmentSizeMismatch {
        /// Size in the header.
        found: u32,
        /// Size expected.
        expected: u64,
    },
    /// The long header's `xlp_xlog_blcksz` is not valid or differs.
    #[error("incorrect XLOG_BLCKSZ {found} in page header (expected {expected})")]
    PageSizeMismatch {
        /// Size in the header.
        found: u32,
        /// Size expected.
        expected: u32,
    },
    /// `xlp_pageaddr` is not the page's own position: stale data of a recycled segment, or a misplaced file.
    #[error("unexpected pageaddr {found} in page header")]
    UnexpectedPageAddr {
        /// Address found.
        found: Lsn,
    },
    /// The timeline went backwards between pages.
    #[error("out-of-sequence timeline ID {found} (after {previous})")]
    TimelineBackwards {
        /// Timeline on this page.
        found: u32,
        /// Timeline of the previous page.
        previous: u32,
    },
    /// A record pointer points into a page header.
    #[error("invalid record offset: expected at least {min}, got {got}")]
    InvalidRecordOffset {
        /// Header size of the page.
        min: u32,
        /// Offset in the page.
        got: u32,
    },
    /// A record was expected where the page holds continuation data.
    #[error("contrecord is requested")]
    ContrecordRequested,
    /// `xl_tot_len` is below the header size (0 marks the end of WAL).
    #[error("invalid record length: wanted 24, got {0}")]
    RecordTooShort(u32),
    /// `xl_tot_len` beyond what PostgreSQL can allocate.
    #[error("record length {0} too long")]
    RecordTooLong(u32),
    /// `xl_rmid` is neither built-in nor custom.
    #[error("invalid resource manager ID {0}")]
    BadRmgr(u8),
    /// `xl_prev` does not point at the previous record.
    #[error("record with incorrect prev-link {found} (expected {expected})")]
    BadPrevLink {
        /// The prev-link found.
        found: Lsn,
        /// The previous record's position (or "below this record" after a random start).
        expected: Lsn,
    },
    /// A page that should continue a record lacks `XLP_FIRST_IS_CONTRECORD`.
    #[error("there is no contrecord flag on the page continuing the record")]
    NoContrecordFlag,
    /// `xlp_rem_len` does not agree with the record's length.
    #[error("invalid contrecord length {found} (expected {expected})")]
    BadContrecordLength {
        /// `xlp_rem_len` found.
        found: u32,
        /// Bytes still expected.
        expected: u64,
    },
    /// The record's CRC-32C does not match its bytes.
    #[error(
        "incorrect resource manager data checksum: CRC {found:#010x}, expected {expected:#010x}"
    )]
    BadCrc {
        /// CRC stored in the record.
        found: u32,
        /// CRC computed from its bytes.
        expected: u32,
    },
    /// The record body's block references or lengths are inconsistent.
    #[error("{0}")]
    Body(String),
    /// A full-page image does not restore to a page.
    #[error("{0}")]
    Image(String),
    /// A segment file is shorter or longer than the segment size.
    #[error("file is {found} bytes, expected the segment size {expected} (truncated or padded)")]
    FileSize {
        /// Bytes in the file.
        found: u64,
        /// Segment size.
        expected: u64,
    },
}

impl Defect {
    /// True for the defects that mark PostgreSQL's ordinary end of WAL: a zero length
    /// where the next record would start, or a page of a recycled or never-written segment.
    pub fn is_end_of_wal_marker(&self) -> bool {
        matches!(
            self,
            Defect::RecordTooShort(0)
                | Defect::UnexpectedPageAddr { .. }
                | Defect::BadMagic { found: 0, .. }
        )
    }
}

/// A defect located in the WAL stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalError {
    /// Position of the record or page at fault.
    pub lsn: Lsn,
    /// File name of the segment holding `lsn` (empty before the geometry is known).
    pub segment: String,
    /// What is wrong.
    pub defect: Defect,
}

impl fmt::Display for WalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.segment.is_empty() {
            write!(f, "at {}: {}", self.lsn, self.defect)
        } else {
            write!(
                f,
                "segment {}: at {}: {}",
                self.segment, self.lsn, self.defect
            )
        }
    }
}

impl std::error::Error for WalError {}
