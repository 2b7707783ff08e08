//! WAL page headers (`XLogPageHeaderData`, `XLogLongPageHeaderData`, xlog_internal.h)
//! and their validation (`XLogReaderValidatePageHeader`, xlogreader.c).

use crate::consts::*;
use crate::error::Defect;
use crate::lsn::Lsn;
use crate::version::{describe_magic, PgVersion};
use codec::cursor::{le_u16_at, Cursor};

/// A parsed page header; the long fields are set on a segment's first page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageHeader {
    /// `xlp_magic`.
    pub magic: u16,
    /// `xlp_info` flag bits.
    pub info: u16,
    /// `xlp_tli`.
    pub tli: u32,
    /// `xlp_pageaddr`.
    pub pageaddr: Lsn,
    /// `xlp_rem_len`.
    pub rem_len: u32,
    /// Long-header fields, present when `XLP_LONG_HEADER` is set.
    pub long: Option<LongFields>,
}

/// Fields only the long header carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LongFields {
    /// `xlp_sysid`: the cluster's system identifier.
    pub sysid: u64,
    /// `xlp_seg_size`.
    pub seg_size: u32,
    /// `xlp_xlog_blcksz`.
    pub xlog_blcksz: u32,
}

impl PageHeader {
    /// Bytes this header occupies (24 or 40).
    pub fn len(&self) -> usize {
        if self.info & XLP_LONG_HEADER != 0 {
            LONG_PAGE_HEADER_LEN
        } else {
            SHORT_PAGE_HEADER_LEN
        }
    }

    /// Always false: a header is never empty (satisfies clippy's `len` convention).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// True when the page starts with continuation data.
    pub fn is_contrecord(&self) -> bool {
        self.info & XLP_FIRST_IS_CONTRECORD != 0
    }

    /// Parses the short header from at least 24 bytes, and the long fields when the
    /// flag is set and 40 bytes are given. Returns `None` if too few bytes are given.
    pub fn parse(b: &[u8]) -> Option<PageHeader> {
        // XLogPageHeaderData: magic, info, tli, pageaddr, rem_len, 4 bytes of padding.
        let mut r = Cursor::new(b.get(..SHORT_PAGE_HEADER_LEN)?);
        let magic = r.u16_le().ok()?;
        let info = r.u16_le().ok()?;
        let tli = r.u32_le().ok()?;
        let pageaddr = Lsn(r.u64_le().ok()?);
        let rem_len = r.u32_le().ok()?;
        let long = if info & XLP_LONG_HEADER != 0 {
            // XLogLongPageHeaderData: sysid, seg_size, xlog_blcksz after the short header.
            let mut r = Cursor::new(b.get(SHORT_PAGE_HEADER_LEN..LONG_PAGE_HEADER_LEN)?);
            Some(LongFields {
                sysid: r.u64_le().ok()?,
                seg_size: r.u32_le().ok()?,
                xlog_blcksz: r.u32_le().ok()?,
            })
        } else {
            None
        };
        Some(PageHeader {
            magic,
            info,
            tli,
            pageaddr,
            rem_len,
            long,
        })
    }

    /// Bytes needed to parse the header that starts with these bytes (24 or 40).
    pub fn needed_len(first: &[u8]) -> usize {
        if le_u16_at(first, 2).is_some_and(|info| info & XLP_LONG_HEADER != 0) {
            LONG_PAGE_HEADER_LEN
        } else {
            SHORT_PAGE_HEADER_LEN
        }
    }
}

/// What every page of one WAL stream shares, learnt from its first long header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// Major version, from the page magic.
    pub version: PgVersion,
    /// Segment size in bytes.
    pub seg_size: u64,
    /// WAL page size (`XLOG_BLCKSZ`).
    pub page_size: u32,
    /// System identifier of the cluster.
    pub sysid: u64,
}

impl Geometry {
    /// Learns the geometry from a segment's first page header.
    pub fn from_first_page(h: &PageHeader) -> Result<Geometry, Defect> {
        let version = PgVersion::from_magic(h.magic).ok_or_else(|| Defect::UnsupportedVersion {
            found: h.magic,
            what: describe_magic(h.magic),
        })?;
        let long = h.long.ok_or(Defect::MissingLongHeader(h.info))?;
        let seg = u64::from(long.seg_size);
        if !seg.is_power_of_two() || !(WAL_SEG_MIN_SIZE..=WAL_SEG_MAX_SIZE).contains(&seg) {
            return Err(Defect::SegmentSizeMismatch {
                found: long.seg_size,
                expected: 0,
            });
        }
        let ps = long.xlog_blcksz;
        if !ps.is_power_of_two() || !(1024..=65536).contains(&ps) || u64::from(ps) > seg {
            return Err(Defect::PageSizeMismatch {
                found: ps,
                expected: 8192,
            });
        }
        Ok(Geometry {
            version,
            seg_size: seg,
            page_size: ps,
            sysid: long.sysid,
        })
    }

    /// Size of the header of the page starting at `page`.
    pub fn header_len_at(&self, page: Lsn) -> usize {
        if page.0 % self.seg_size == 0 {
            LONG_PAGE_HEADER_LEN
        } else {
            SHORT_PAGE_HEADER_LEN
        }
    }

    /// Checks a page header as `XLogReaderValidatePageHeader` does, plus the system
    /// identifier of every long header (PostgreSQL checks it against pg_control).
    pub fn validate(&self, page: Lsn, h: &PageHeader) -> Result<(), Defect> {
        if h.magic != self.version.magic() {
            return Err(Defect::BadMagic {
                found: h.magic,
                expected: self.version.magic(),
            });
        }
        if h.info & !XLP_ALL_FLAGS != 0 {
            return Err(Defect::BadInfoBits(h.info));
        }
        if let Some(long) = h.long {
            if long.sysid != self.sysid {
                return Err(Defect::SystemIdMismatch {
                    found: long.sysid,
                    expected: self.sysid,
                });
            }
            if u64::from(long.seg_size) != self.seg_size {
                return Err(Defect::SegmentSizeMismatch {
                    found: long.seg_size,
                    expected: self.seg_size,
                });
            }
            if long.xlog_blcksz != self.page_size {
                return Err(Defect::PageSizeMismatch {
                    found: long.xlog_blcksz,
                    expected: self.page_size,
                });
            }
        } else if page.0 % self.seg_size == 0 {
            return Err(Defect::MissingLongHeader(h.info));
        }
        if h.pageaddr != page {
            return Err(Defect::UnexpectedPageAddr { found: h.pageaddr });
        }
        Ok(())
    }
}
