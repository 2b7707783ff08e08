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
    #[error("WAL page magic {found:#06X} is {what}")]
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
    Body(BodyDefect),
    /// The decoder broke one of its own invariants (a bug, not bad WAL).
    #[error("internal error: {0}")]
    Internal(Internal),
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

/// What is wrong in a record's block headers, in `DecodeXLogRecord`'s words
/// (xlogreader.c).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BodyDefect {
    /// `xl_tot_len` leaves no room for the 24-byte record header.
    #[error("record shorter than its header")]
    ShorterThanHeader,
    /// Block headers, lengths and `xl_tot_len` do not add up.
    #[error("record with invalid length")]
    InvalidLength,
    /// A block id not above the previous one.
    #[error("out-of-order block_id {0}")]
    OutOfOrderBlockId(u8),
    /// A block id that is neither a block nor a known special id.
    #[error("invalid block_id {0}")]
    InvalidBlockId(u8),
    /// `BKPBLOCK_HAS_DATA` with a zero data length.
    #[error("BKPBLOCK_HAS_DATA set, but no data included")]
    DataFlagWithoutData,
    /// A data length without `BKPBLOCK_HAS_DATA`.
    #[error("BKPBLOCK_HAS_DATA not set, but data length is {0}")]
    DataWithoutFlag(u16),
    /// `BKPBLOCK_SAME_REL` on the record's first block reference.
    #[error("BKPBLOCK_SAME_REL set but no previous rel")]
    SameRelWithoutPrevious,
    /// `bimg_info` names more than one compression method.
    #[error("block image has several compression methods (bimg_info {info:#04x})")]
    SeveralImageMethods {
        /// The image's `bimg_info`.
        info: u8,
    },
    /// `BKPIMAGE_HAS_HOLE` with an empty hole or a full-page image.
    #[error("BKPIMAGE_HAS_HOLE set, but hole offset {hole_offset} length {hole_length} block image length {length}")]
    BadHole {
        /// `hole_offset`.
        hole_offset: u16,
        /// The hole's length.
        hole_length: u16,
        /// `bimg_len`.
        length: u16,
    },
    /// A hole without `BKPIMAGE_HAS_HOLE`.
    #[error("BKPIMAGE_HAS_HOLE not set, but hole offset {hole_offset} length {hole_length}")]
    HoleWithoutFlag {
        /// `hole_offset`.
        hole_offset: u16,
        /// The hole's length.
        hole_length: u16,
    },
    /// A compressed image as long as a page.
    #[error("BKPIMAGE_COMPRESSED set, but block image length {0}")]
    CompressedFullPage(u16),
    /// A raw image without a hole that is not a whole page.
    #[error(
        "neither BKPIMAGE_HAS_HOLE nor BKPIMAGE_COMPRESSED set, but block image length is {0}"
    )]
    RawNotAPage(u16),
}

/// An invariant of the decoder that did not hold; reported rather than panicking.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Internal {
    /// Bytes fed to the decoder were not kept in one piece.
    #[error("{len} bytes at {at} are not contiguous in the input")]
    NotContiguous {
        /// Bytes asked for.
        len: usize,
        /// Where they start.
        at: Lsn,
    },
    /// A reader thread of a parallel read ended before its partition did.
    #[error("a reader thread stopped early")]
    ReaderStoppedEarly,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The typed body defects print what the former message strings said.
    #[test]
    fn body_defects_keep_xlogreader_wording() {
        let cases = [
            (BodyDefect::OutOfOrderBlockId(3), "out-of-order block_id 3"),
            (
                BodyDefect::DataWithoutFlag(12),
                "BKPBLOCK_HAS_DATA not set, but data length is 12",
            ),
            (
                BodyDefect::SeveralImageMethods { info: 0x1c },
                "block image has several compression methods (bimg_info 0x1c)",
            ),
            (
                BodyDefect::BadHole {
                    hole_offset: 0,
                    hole_length: 5,
                    length: 100,
                },
                "BKPIMAGE_HAS_HOLE set, but hole offset 0 length 5 block image length 100",
            ),
        ];
        for (d, text) in cases {
            assert_eq!(Defect::Body(d).to_string(), text);
        }
        let e = Defect::Internal(Internal::NotContiguous {
            len: 24,
            at: Lsn(0x0300_0028),
        });
        assert_eq!(
            e.to_string(),
            "internal error: 24 bytes at 0/3000028 are not contiguous in the input"
        );
    }
}
