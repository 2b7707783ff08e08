//! Records: the `XLogRecord` header, CRC-32C, and the body's block references
//! (`access/xlogrecord.h`; decoding follows `DecodeXLogRecord` in xlogreader.c).

use crate::consts::*;
use crate::error::{BodyDefect, Defect};
use crate::lsn::Lsn;
use codec::{Cursor, ShortRead};
use std::ops::Range;

/// The fixed 24-byte record header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    /// `xl_tot_len`: header, block headers, images, block data and main data.
    pub tot_len: u32,
    /// `xl_xid`.
    pub xid: u32,
    /// `xl_prev`: start of the previous record.
    pub prev: Lsn,
    /// `xl_info`.
    pub info: u8,
    /// `xl_rmid`.
    pub rmid: u8,
    /// `xl_crc`.
    pub crc: u32,
}

impl RecordHeader {
    /// Parses the header from at least 24 bytes.
    pub fn parse(b: &[u8]) -> Option<RecordHeader> {
        // XLogRecord: tot_len, xid, prev, info, rmid, 2 bytes of padding, crc.
        let mut r = Cursor::new(b.get(..RECORD_HEADER_LEN)?);
        let tot_len = r.u32_le().ok()?;
        let xid = r.u32_le().ok()?;
        let prev = Lsn(r.u64_le().ok()?);
        let info = r.u8().ok()?;
        let rmid = r.u8().ok()?;
        r.skip(2).ok()?;
        let crc = r.u32_le().ok()?;
        Some(RecordHeader {
            tot_len,
            xid,
            prev,
            info,
            rmid,
            crc,
        })
    }

    /// The resource manager's opcode bits (`xl_info & XLR_RMGR_INFO_MASK`).
    pub fn rmgr_info(&self) -> u8 {
        self.info & XLR_RMGR_INFO_MASK
    }

    /// True for `XLOG_SWITCH`, after which the rest of the segment is unused.
    pub fn is_switch(&self) -> bool {
        self.rmid == RM_XLOG_ID && self.rmgr_info() == XLOG_SWITCH
    }
}

/// CRC-32C of a whole record as `ValidXLogRecord` computes it: the body after the
/// header first, then the header up to (not including) `xl_crc`.
pub fn record_crc(record: &[u8]) -> u32 {
    let body = crc32c::crc32c(&record[RECORD_HEADER_LEN..]);
    crc32c::crc32c_append(body, &record[..RECORD_CRC_OFFSET])
}

/// Relation of a block reference (`RelFileNode` in 15, `RelFileLocator` in 16+).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct RelFileLocator {
    /// Tablespace OID.
    pub spc: u32,
    /// Database OID.
    pub db: u32,
    /// Relation file number.
    pub rel: u32,
}

/// How a full-page image is stored (`BKPIMAGE_COMPRESS_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ImageMethod {
    /// Stored raw, hole removed.
    None,
    /// pglz (`BKPIMAGE_COMPRESS_PGLZ`).
    Pglz,
    /// Raw LZ4 block (`BKPIMAGE_COMPRESS_LZ4`).
    Lz4,
    /// zstd frame (`BKPIMAGE_COMPRESS_ZSTD`).
    Zstd,
}

impl ImageMethod {
    /// Every method, in pg_waldump's order.
    pub const ALL: [ImageMethod; 4] = [Self::None, Self::Pglz, Self::Lz4, Self::Zstd];

    /// The method recorded in `bimg_info`; `None` when several method bits are set.
    pub fn from_bimg_info(info: u8) -> Option<ImageMethod> {
        match info & BKPIMAGE_COMPRESS_MASK {
            0 => Some(Self::None),
            BKPIMAGE_COMPRESS_PGLZ => Some(Self::Pglz),
            BKPIMAGE_COMPRESS_LZ4 => Some(Self::Lz4),
            BKPIMAGE_COMPRESS_ZSTD => Some(Self::Zstd),
            _ => None,
        }
    }

    /// The name pg_waldump prints (`none` for raw images).
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Pglz => "pglz",
            Self::Lz4 => "lz4",
            Self::Zstd => "zstd",
        }
    }

    /// Index in [`ImageMethod::ALL`].
    pub fn index(self) -> usize {
        match self {
            Self::None => 0,
            Self::Pglz => 1,
            Self::Lz4 => 2,
            Self::Zstd => 3,
        }
    }
}

/// An image header (`XLogRecordBlockImageHeader` + optional compress header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageHeader {
    /// `length`: image bytes as stored (bimg_len).
    pub length: u16,
    /// `hole_offset`.
    pub hole_offset: u16,
    /// Hole length: from the compress header, or `BLCKSZ - length` for raw images.
    pub hole_length: u16,
    /// `bimg_info`.
    pub info: u8,
}

impl ImageHeader {
    /// True when the image is compressed with any method.
    pub fn is_compressed(&self) -> bool {
        self.info & BKPIMAGE_COMPRESS_MASK != 0
    }

    /// True when replay restores it (`BKPIMAGE_APPLY`).
    pub fn is_apply(&self) -> bool {
        self.info & BKPIMAGE_APPLY != 0
    }

    /// The storage method; decoding already rejected several method bits at once.
    pub fn method(&self) -> ImageMethod {
        ImageMethod::from_bimg_info(self.info).unwrap_or(ImageMethod::None)
    }

    /// Bytes of page data the image restores before the hole is put back.
    pub fn raw_len(&self, blcksz: usize) -> usize {
        blcksz.saturating_sub(usize::from(self.hole_length))
    }

    /// Bytes of header this image adds to the block reference (5, or 7 with the compress header).
    pub fn header_len(&self) -> usize {
        if self.is_compressed() && self.info & BKPIMAGE_HAS_HOLE != 0 {
            BLOCK_IMAGE_HEADER_LEN + BLOCK_COMPRESS_HEADER_LEN
        } else {
            BLOCK_IMAGE_HEADER_LEN
        }
    }
}

/// One decoded block reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockRef {
    /// Block id (0..=32).
    pub id: u8,
    /// `fork_flags`: fork number and `BKPBLOCK_*` bits.
    pub fork_flags: u8,
    /// The image header, if the block carries an image.
    pub image: Option<ImageHeader>,
    /// Relation.
    pub rel: RelFileLocator,
    /// Block number.
    pub blkno: u32,
    /// Where the image bytes are in the record.
    pub image_range: Range<usize>,
    /// Where the block data is in the record.
    pub data_range: Range<usize>,
}

impl BlockRef {
    /// Fork number (0 main, 1 fsm, 2 vm, 3 init).
    pub fn fork(&self) -> u8 {
        self.fork_flags & BKPBLOCK_FORK_MASK
    }
}

/// What the body of a record holds, besides its bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Body {
    /// Block references in ascending id order.
    pub blocks: Vec<BlockRef>,
    /// Replication origin, if recorded.
    pub origin: Option<u16>,
    /// Top-level transaction id, if recorded.
    pub toplevel_xid: Option<u32>,
    /// Where the main data is in the record.
    pub main_data: Range<usize>,
    /// Sum of the stored image lengths (pg_waldump's FPI size of this record).
    pub fpi_len: u32,
}

/// Decodes the block headers and checks every length, as `DecodeXLogRecord` does.
/// `record` is the whole record, header included; `blcksz` the data page size.
pub fn decode_body(record: &[u8], blcksz: usize, body: &mut Body) -> Result<(), Defect> {
    let rest = record
        .get(RECORD_HEADER_LEN..)
        .ok_or(Defect::Body(BodyDefect::ShorterThanHeader))?;
    decode_block_headers(rest, record.len() - RECORD_HEADER_LEN, blcksz, body)
}

/// [`decode_body`] for a record whose bytes are not in one place: `after_header` holds the
/// bytes that follow the 24-byte header, at least as far as the block headers reach (more
/// is ignored), and `rest_len` is `xl_tot_len` less the header. Ranges in `body` are record
/// offsets, as [`decode_body`] gives them. Block headers that would run past `after_header`
/// are an error.
pub fn decode_block_headers(
    after_header: &[u8],
    rest_len: usize,
    blcksz: usize,
    body: &mut Body,
) -> Result<(), Defect> {
    body.blocks.clear();
    body.origin = None;
    body.toplevel_xid = None;
    body.fpi_len = 0;
    let mut main_len: u64 = 0;
    let mut r = Cursor::new(&after_header[..after_header.len().min(rest_len)]);
    let remaining = |r: &Cursor| (rest_len - r.offset()) as u64;
    let mut datatotal: u64 = 0;
    let mut max_block_id: i32 = -1;
    let mut last_rel: Option<RelFileLocator> = None;
    while remaining(&r) > datatotal {
        let id = r.u8().map_err(short)?;
        match id {
            XLR_BLOCK_ID_DATA_SHORT => {
                main_len = u64::from(r.u8().map_err(short)?);
                datatotal += main_len;
                break;
            }
            XLR_BLOCK_ID_DATA_LONG => {
                main_len = u64::from(r.u32_le().map_err(short)?);
                datatotal += main_len;
                break;
            }
            XLR_BLOCK_ID_ORIGIN => body.origin = Some(r.u16_le().map_err(short)?),
            XLR_BLOCK_ID_TOPLEVEL_XID => body.toplevel_xid = Some(r.u32_le().map_err(short)?),
            id if id <= XLR_MAX_BLOCK_ID => {
                if i32::from(id) <= max_block_id {
                    return Err(Defect::Body(BodyDefect::OutOfOrderBlockId(id)));
                }
                max_block_id = i32::from(id);
                let fork_flags = r.u8().map_err(short)?;
                let data_len = r.u16_le().map_err(short)?;
                let has_data = fork_flags & BKPBLOCK_HAS_DATA != 0;
                if has_data && data_len == 0 {
                    return Err(Defect::Body(BodyDefect::DataFlagWithoutData));
                }
                if !has_data && data_len != 0 {
                    return Err(Defect::Body(BodyDefect::DataWithoutFlag(data_len)));
                }
                datatotal += u64::from(data_len);
                let image = if fork_flags & BKPBLOCK_HAS_IMAGE != 0 {
                    let img = read_image_header(&mut r, blcksz)?;
                    datatotal += u64::from(img.length);
                    body.fpi_len += u32::from(img.length);
                    Some(img)
                } else {
                    None
                };
                let rel = if fork_flags & BKPBLOCK_SAME_REL == 0 {
                    let rel = RelFileLocator {
                        spc: r.u32_le().map_err(short)?,
                        db: r.u32_le().map_err(short)?,
                        rel: r.u32_le().map_err(short)?,
                    };
                    last_rel = Some(rel);
                    rel
                } else {
                    last_rel.ok_or(Defect::Body(BodyDefect::SameRelWithoutPrevious))?
                };
                let blkno = r.u32_le().map_err(short)?;
                // Lengths for now; the pass below turns them into positions.
                body.blocks.push(BlockRef {
                    id,
                    fork_flags,
                    image,
                    rel,
                    blkno,
                    image_range: 0..image.map_or(0, |i| usize::from(i.length)),
                    data_range: 0..usize::from(data_len),
                });
            }
            _ => return Err(Defect::Body(BodyDefect::InvalidBlockId(id))),
        }
    }
    if remaining(&r) != datatotal {
        return Err(Defect::Body(BodyDefect::InvalidLength));
    }
    // Payload order: for each block, its image then its data; then the main data.
    let mut at = RECORD_HEADER_LEN + r.offset();
    for blk in body.blocks.iter_mut() {
        let (img, data) = (blk.image_range.end, blk.data_range.end);
        blk.image_range = at..at + img;
        at += img;
        blk.data_range = at..at + data;
        at += data;
    }
    body.main_data = at..at + main_len as usize;
    Ok(())
}

fn read_image_header(r: &mut Cursor<'_>, blcksz: usize) -> Result<ImageHeader, Defect> {
    let length = r.u16_le().map_err(short)?;
    let hole_offset = r.u16_le().map_err(short)?;
    let info = r.u8().map_err(short)?;
    let compressed = info & BKPIMAGE_COMPRESS_MASK != 0;
    let has_hole = info & BKPIMAGE_HAS_HOLE != 0;
    if ImageMethod::from_bimg_info(info).is_none() {
        return Err(Defect::Body(BodyDefect::SeveralImageMethods { info }));
    }
    let hole_length = if compressed {
        if has_hole {
            r.u16_le().map_err(short)?
        } else {
            0
        }
    } else {
        // PostgreSQL computes this in uint16 arithmetic.
        (blcksz as u16).wrapping_sub(length)
    };
    let blcksz16 = blcksz as u32;
    if has_hole && (hole_offset == 0 || hole_length == 0 || u32::from(length) == blcksz16) {
        return Err(Defect::Body(BodyDefect::BadHole {
            hole_offset,
            hole_length,
            length,
        }));
    }
    if !has_hole && (hole_offset != 0 || hole_length != 0) {
        return Err(Defect::Body(BodyDefect::HoleWithoutFlag {
            hole_offset,
            hole_length,
        }));
    }
    if compressed && u32::from(length) == blcksz16 {
        return Err(Defect::Body(BodyDefect::CompressedFullPage(length)));
    }
    if !has_hole && !compressed && u32::from(length) != blcksz16 {
        return Err(Defect::Body(BodyDefect::RawNotAPage(length)));
    }
    Ok(ImageHeader {
        length,
        hole_offset,
        hole_length,
        info,
    })
}

/// Block headers that run past the record: xlogreader.c's "record with invalid length".
fn short(_: ShortRead) -> Defect {
    Defect::Body(BodyDefect::InvalidLength)
}

/// Checks an image's extent against the page: PostgreSQL trusts these, a verifier must not.
pub fn check_image_extent(img: &ImageHeader, blcksz: usize) -> Result<(), Defect> {
    let hole_end = usize::from(img.hole_offset) + usize::from(img.hole_length);
    if hole_end > blcksz {
        return Err(Defect::Image(format!(
            "image hole {}+{} runs past the {blcksz}-byte page",
            img.hole_offset, img.hole_length
        )));
    }
    if !img.is_compressed() && usize::from(img.length) + usize::from(img.hole_length) != blcksz {
        return Err(Defect::Image(format!(
            "raw image of {} bytes with a {}-byte hole does not make a {blcksz}-byte page",
            img.length, img.hole_length
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_record_is_a_typed_body_defect() {
        let mut body = Body::default();
        let r = decode_body(&[0u8; 10], 8192, &mut body);
        assert_eq!(r, Err(Defect::Body(BodyDefect::ShorterThanHeader)));
    }
}
