//! Why streams do not join back into a segment prefix: what did not fit, and where (the
//! stream and its byte offset, the record and its LSN).

use super::Stream;

/// A part of a fed stream ([`super::Feed`]) that did not decompress: which part of the
/// container, and where its bytes start.
#[derive(Debug, thiserror::Error)]
#[error("part {part} at offset {offset} does not decompress: {source}")]
pub struct FeedError {
    /// Part number in the container (0-based).
    pub part: usize,
    /// Offset of the part's bytes in the container.
    pub offset: u64,
    /// The codec's error.
    #[source]
    pub source: codec::CodecError,
}

/// Why [`super::join`] could not rebuild a segment prefix from its streams. The streams
/// come from outside (a container), so every one of these is a damaged or forged input,
/// never a panic.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SplitError {
    /// A stream ends before a read it must satisfy.
    #[error("{} stream ends early: {source}", stream.name())]
    StreamShort {
        /// The stream.
        stream: Stream,
        /// Where the read began (an offset in the stream), what it needed and what was left.
        #[source]
        source: codec::ShortRead,
    },
    /// A fed stream's parts decompress to fewer bytes than its declared length.
    #[error("{} stream: its parts end at byte {offset}, before its length {total}", stream.name())]
    FeedShort {
        /// The stream.
        stream: Stream,
        /// Bytes the parts gave.
        offset: usize,
        /// The stream's declared length.
        total: usize,
    },
    /// A fed stream's part did not decompress.
    #[error("{} stream at byte {offset}: {source}", stream.name())]
    Feed {
        /// The stream.
        stream: Stream,
        /// Bytes of the stream read before the failure.
        offset: usize,
        /// The part and the codec's error.
        #[source]
        source: FeedError,
    },
    /// The first page header in the page header stream does not parse as a long header.
    #[error("first page header does not parse as a long page header")]
    FirstHeader,
    /// The first page header claims a block size WAL cannot have.
    #[error("block size {blcksz} is not a WAL block size")]
    BlockSize {
        /// The claimed `xlp_xlog_blcksz`.
        blcksz: usize,
    },
    /// The first page header's address is not the segment's start.
    #[error("first page address {found:X} is not the segment start {seg_start:X}")]
    PageAddress {
        /// `xlp_pageaddr` of the first page.
        found: u64,
        /// The segment's start LSN.
        seg_start: u64,
    },
    /// A count or length from the container does not fit this machine's address space.
    #[error("{what} {value} is too large")]
    TooLarge {
        /// Which number ("valid length", "record count", "lead length").
        what: &'static str,
        /// Its value.
        value: u64,
    },
    /// The valid length ends inside a page header.
    #[error("valid length {valid_len} ends inside a page header")]
    EndsInHeader {
        /// The valid length.
        valid_len: usize,
    },
    /// The record count disagrees with the record length stream.
    #[error("{claimed} records claimed, the length stream holds {held}")]
    RecordCount {
        /// Records the container claims.
        claimed: usize,
        /// Lengths the stream holds.
        held: usize,
    },
    /// More content is claimed than the streams could rebuild.
    #[error("{content_len} bytes of content claimed, the streams hold at most {bound}")]
    ContentBound {
        /// Content bytes the valid length implies.
        content_len: usize,
        /// The most the streams could rebuild.
        bound: usize,
    },
    /// The lead is longer than the content.
    #[error("lead of {lead_len} bytes is longer than the content ({content_len} bytes)")]
    LeadTooLong {
        /// The claimed lead length.
        lead_len: usize,
        /// Content bytes the valid length implies.
        content_len: usize,
    },
    /// A record's length does not fit the content that is left.
    #[error(
        "record {record} at {lsn}: length {len} does not fit the {left} bytes of content left"
    )]
    RecordLength {
        /// Record number in the segment (0-based).
        record: usize,
        /// The record's LSN.
        lsn: wal::Lsn,
        /// Its `xl_tot_len`.
        len: usize,
        /// Content bytes left.
        left: usize,
    },
    /// A record is longer than what its payload streams still hold.
    #[error("record {record} at {lsn}: {len} bytes long, the streams hold {held}")]
    RecordPayload {
        /// Record number in the segment (0-based).
        record: usize,
        /// The record's LSN.
        lsn: wal::Lsn,
        /// Its `xl_tot_len`.
        len: usize,
        /// Payload bytes the streams hold.
        held: usize,
    },
    /// A record's block headers do not decode.
    #[error("record {record} at {lsn} (content offset {pos}): {source}")]
    BlockHeaders {
        /// Record number in the segment (0-based).
        record: usize,
        /// The record's LSN.
        lsn: wal::Lsn,
        /// Its offset in the segment's content.
        pos: usize,
        /// The decoder's finding.
        #[source]
        source: wal::Defect,
    },
    /// A record's block headers run past the end of their stream.
    #[error("record {record} at {lsn}: block headers run past their stream")]
    HeadersPastStream {
        /// Record number in the segment (0-based).
        record: usize,
        /// The record's LSN.
        lsn: wal::Lsn,
    },
    /// Records and tail do not add up to the content the valid length needs.
    #[error("content is {content} bytes, the valid length needs {needed}")]
    ContentLength {
        /// Content bytes the streams gave.
        content: usize,
        /// Content bytes the valid length needs.
        needed: usize,
    },
    /// A stream holds bytes no record used.
    #[error("{} stream has {left} bytes left over", stream.name())]
    LeftOver {
        /// The stream.
        stream: Stream,
        /// Bytes not used.
        left: usize,
    },
    /// The page header stream does not hold one header for every page left.
    #[error("page header stream holds {held} bytes for the last {pages_left} of {pages} pages")]
    PageHeaders {
        /// Bytes left in the stream.
        held: usize,
        /// Pages whose headers are not written yet.
        pages_left: usize,
        /// Pages in the prefix.
        pages: usize,
    },
}
