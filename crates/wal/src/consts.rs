//! Named constants of the WAL format.
//!
//! Every value mirrors a PostgreSQL header: `access/xlog_internal.h` (pages),
//! `access/xlogrecord.h` (records and block references), `catalog/pg_control.h`
//! (RM_XLOG info codes) and `storage/bufpage.h` (data pages).

/// `SizeOfXLogShortPHD`: MAXALIGN(sizeof(XLogPageHeaderData)) (xlog_internal.h).
pub const SHORT_PAGE_HEADER_LEN: usize = 24;
/// `SizeOfXLogLongPHD`: MAXALIGN(sizeof(XLogLongPageHeaderData)) (xlog_internal.h).
pub const LONG_PAGE_HEADER_LEN: usize = 40;

/// `XLP_FIRST_IS_CONTRECORD`: the page starts with the continuation of a record.
pub const XLP_FIRST_IS_CONTRECORD: u16 = 0x0001;
/// `XLP_LONG_HEADER`: the page carries the long header (first page of a segment).
pub const XLP_LONG_HEADER: u16 = 0x0002;
/// `XLP_BKP_REMOVABLE`: backup blocks starting on this page are optional.
pub const XLP_BKP_REMOVABLE: u16 = 0x0004;
/// `XLP_FIRST_IS_OVERWRITE_CONTRECORD`: a missing continuation was overwritten.
pub const XLP_FIRST_IS_OVERWRITE_CONTRECORD: u16 = 0x0008;
/// `XLP_ALL_FLAGS`: any other bit makes the page invalid (15-18).
pub const XLP_ALL_FLAGS: u16 = 0x000F;

/// `SizeOfXLogRecord`: the fixed record header.
pub const RECORD_HEADER_LEN: usize = 24;
/// Offset of `xl_crc` inside the record header.
pub const RECORD_CRC_OFFSET: usize = 20;

/// `XLR_INFO_MASK`: xl_info bits reserved for the WAL machinery.
pub const XLR_INFO_MASK: u8 = 0x0F;
/// `XLR_RMGR_INFO_MASK`: xl_info bits owned by the resource manager.
pub const XLR_RMGR_INFO_MASK: u8 = 0xF0;

/// `XLR_MAX_BLOCK_ID`: highest block reference id.
pub const XLR_MAX_BLOCK_ID: u8 = 32;
/// `XLR_BLOCK_ID_DATA_SHORT`: main data with a 1-byte length follows.
pub const XLR_BLOCK_ID_DATA_SHORT: u8 = 255;
/// `XLR_BLOCK_ID_DATA_LONG`: main data with a 4-byte length follows.
pub const XLR_BLOCK_ID_DATA_LONG: u8 = 254;
/// `XLR_BLOCK_ID_ORIGIN`: a replication origin id (u16) follows.
pub const XLR_BLOCK_ID_ORIGIN: u8 = 253;
/// `XLR_BLOCK_ID_TOPLEVEL_XID`: a top-level transaction id (u32) follows.
pub const XLR_BLOCK_ID_TOPLEVEL_XID: u8 = 252;

/// `BKPBLOCK_FORK_MASK`: fork number bits of fork_flags.
pub const BKPBLOCK_FORK_MASK: u8 = 0x0F;
/// `BKPBLOCK_HAS_IMAGE`: the block reference carries a full-page image.
pub const BKPBLOCK_HAS_IMAGE: u8 = 0x10;
/// `BKPBLOCK_HAS_DATA`: the block reference carries block data.
pub const BKPBLOCK_HAS_DATA: u8 = 0x20;
/// `BKPBLOCK_WILL_INIT`: redo will re-initialise the page.
pub const BKPBLOCK_WILL_INIT: u8 = 0x40;
/// `BKPBLOCK_SAME_REL`: the relation is the previous block's.
pub const BKPBLOCK_SAME_REL: u8 = 0x80;

/// `SizeOfXLogRecordBlockHeader`.
pub const BLOCK_HEADER_LEN: usize = 4;
/// `SizeOfXLogRecordBlockImageHeader`.
pub const BLOCK_IMAGE_HEADER_LEN: usize = 5;
/// `SizeOfXLogRecordBlockCompressHeader`.
pub const BLOCK_COMPRESS_HEADER_LEN: usize = 2;
/// sizeof(RelFileNode) in 15, sizeof(RelFileLocator) in 16+.
pub const REL_FILE_LOCATOR_LEN: usize = 12;

/// `BKPIMAGE_HAS_HOLE`: the page's free space was elided.
pub const BKPIMAGE_HAS_HOLE: u8 = 0x01;
/// `BKPIMAGE_APPLY`: redo restores the image (unset: only for consistency checks).
pub const BKPIMAGE_APPLY: u8 = 0x02;
/// `BKPIMAGE_COMPRESS_PGLZ` (15+).
pub const BKPIMAGE_COMPRESS_PGLZ: u8 = 0x04;
/// `BKPIMAGE_COMPRESS_LZ4` (15+).
pub const BKPIMAGE_COMPRESS_LZ4: u8 = 0x08;
/// `BKPIMAGE_COMPRESS_ZSTD` (15+).
pub const BKPIMAGE_COMPRESS_ZSTD: u8 = 0x10;
/// All compression bits of bimg_info.
pub const BKPIMAGE_COMPRESS_MASK: u8 =
    BKPIMAGE_COMPRESS_PGLZ | BKPIMAGE_COMPRESS_LZ4 | BKPIMAGE_COMPRESS_ZSTD;

/// `RM_XLOG_ID`.
pub const RM_XLOG_ID: u8 = 0;
/// `XLOG_SWITCH` (pg_control.h): the rest of the segment is unused.
pub const XLOG_SWITCH: u8 = 0x40;
/// `RM_MAX_BUILTIN_ID` (rmgr.h, 15-18).
pub const RM_MAX_BUILTIN_ID: u8 = 21;
/// `RM_MIN_CUSTOM_ID` (rmgr.h).
pub const RM_MIN_CUSTOM_ID: u8 = 128;

/// Default data page size (`BLCKSZ`); not recorded in WAL.
pub const DEFAULT_BLCKSZ: usize = 8192;
/// `WalSegMinSize` (xlog_internal.h).
pub const WAL_SEG_MIN_SIZE: u64 = 1024 * 1024;
/// `WalSegMaxSize` (xlog_internal.h).
pub const WAL_SEG_MAX_SIZE: u64 = 1024 * 1024 * 1024;
/// Largest record we accept: PostgreSQL's MaxAllocSize (1 GiB - 1) bounds the reader's buffer.
pub const MAX_RECORD_LEN: u32 = 0x3fff_ffff;
/// `SizeOfPageHeaderData` (bufpage.h).
pub const DATA_PAGE_HEADER_LEN: usize = 24;

/// MAXALIGN for 8-byte alignment (x86-64 and aarch64).
pub const fn maxalign(n: u64) -> u64 {
    (n + 7) & !7
}

#[cfg(test)]
mod tests {
    use super::maxalign;

    #[test]
    fn maxalign_rounds_up_to_eight() {
        assert_eq!(maxalign(0), 0);
        assert_eq!(maxalign(1), 8);
        assert_eq!(maxalign(8), 8);
        assert_eq!(maxalign(8193), 8200);
    }
}
