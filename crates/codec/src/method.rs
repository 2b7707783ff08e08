//! The compression methods pgcompress knows, their level ranges, and the
//! `bimg_info` method bits PostgreSQL writes for compressed full-page images.

use std::fmt;
use std::ops::RangeInclusive;

/// `BKPIMAGE_COMPRESS_PGLZ` from `src/include/access/xlogrecord.h` (PostgreSQL 15+).
pub const BKPIMAGE_COMPRESS_PGLZ: u8 = 0x04;
/// `BKPIMAGE_COMPRESS_LZ4` from `src/include/access/xlogrecord.h` (PostgreSQL 15+).
pub const BKPIMAGE_COMPRESS_LZ4: u8 = 0x08;
/// `BKPIMAGE_COMPRESS_ZSTD` from `src/include/access/xlogrecord.h` (PostgreSQL 15+).
pub const BKPIMAGE_COMPRESS_ZSTD: u8 = 0x10;
/// All method bits of `bimg_info` (`BKPIMAGE_COMPRESSED()` in `xlogrecord.h`).
pub const BKPIMAGE_COMPRESS_MASK: u8 =
    BKPIMAGE_COMPRESS_PGLZ | BKPIMAGE_COMPRESS_LZ4 | BKPIMAGE_COMPRESS_ZSTD;

/// A `bimg_info` byte with more than one compression-method bit set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("bimg_info 0x{info:02x} has more than one compression method bit set (xlogrecord.h BKPIMAGE_COMPRESS_*)")]
pub struct BimgInfoError {
    /// The offending byte.
    pub info: u8,
}

/// A compression method; chosen through a parsed [`crate::Spec`], never by ad-hoc strings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Method {
    /// No compression: bytes are stored as they are.
    None,
    /// PostgreSQL's own LZ variant (`src/common/pg_lzcompress.c`).
    Pglz,
    /// LZ4 raw block (block API) or LZ4 frame (streaming API).
    Lz4,
    /// Zstandard frame.
    Zstd,
    /// Snappy raw format (block API) or Snappy framing format (streaming API).
    Snappy,
    /// gzip member (RFC 1952).
    Gzip,
    /// `.xz` stream (liblzma).
    Xz,
}

impl Method {
    /// Every method, in the order used by error messages and reports.
    pub const ALL: [Method; 7] = [
        Method::None,
        Method::Pglz,
        Method::Lz4,
        Method::Zstd,
        Method::Snappy,
        Method::Gzip,
        Method::Xz,
    ];

    /// Lowercase name as written in a specification (`zstd`, `lz4`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            Method::None => "none",
            Method::Pglz => "pglz",
            Method::Lz4 => "lz4",
            Method::Zstd => "zstd",
            Method::Snappy => "snappy",
            Method::Gzip => "gzip",
            Method::Xz => "xz",
        }
    }

    /// Looks a method up by its specification name; `off` is accepted as an alias of `none`.
    pub fn from_name(name: &str) -> Option<Method> {
        if name == "off" {
            return Some(Method::None);
        }
        Method::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Accepted compression levels, or `None` when the method takes no level.
    pub fn level_range(&self) -> Option<RangeInclusive<i32>> {
        match self {
            Method::None | Method::Pglz | Method::Snappy => None,
            // zstd's negative "fast" levels down to -7, up to ZSTD_maxCLevel() = 22.
            Method::Zstd => Some(-7..=22),
            // 1 = LZ4_compress_default (what xloginsert.c uses); 2..=12 = LZ4 HC.
            Method::Lz4 => Some(1..=12),
            Method::Gzip => Some(1..=9),
            Method::Xz => Some(0..=9),
        }
    }

    /// Level used when a specification gives none (zstd 3 = `ZSTD_CLEVEL_DEFAULT`).
    pub fn default_level(&self) -> Option<i32> {
        match self {
            Method::None | Method::Pglz | Method::Snappy => None,
            Method::Zstd => Some(3),
            Method::Lz4 => Some(1),
            Method::Gzip => Some(6),
            Method::Xz => Some(6),
        }
    }

    /// True for the methods PostgreSQL's `wal_compression` can write (see `xlog.h` `WalCompression`).
    pub fn is_stock_wal(&self) -> bool {
        matches!(
            self,
            Method::None | Method::Pglz | Method::Lz4 | Method::Zstd
        )
    }

    /// The `bimg_info` bit PostgreSQL sets for an image compressed with this method, if any.
    pub fn bimg_bit(&self) -> Option<u8> {
        match self {
            Method::Pglz => Some(BKPIMAGE_COMPRESS_PGLZ),
            Method::Lz4 => Some(BKPIMAGE_COMPRESS_LZ4),
            Method::Zstd => Some(BKPIMAGE_COMPRESS_ZSTD),
            _ => None,
        }
    }

    /// Decodes the method bits of a `bimg_info` byte: `Ok(None)` = not compressed.
    ///
    /// Other bits (hole, apply, unknown high bits) are ignored, like `xlogreader.c` does;
    /// more than one method bit set is an error.
    pub fn from_bimg_info(info: u8) -> Result<Option<Method>, BimgInfoError> {
        match info & BKPIMAGE_COMPRESS_MASK {
            0 => Ok(None),
            BKPIMAGE_COMPRESS_PGLZ => Ok(Some(Method::Pglz)),
            BKPIMAGE_COMPRESS_LZ4 => Ok(Some(Method::Lz4)),
            BKPIMAGE_COMPRESS_ZSTD => Ok(Some(Method::Zstd)),
            _ => Err(BimgInfoError { info }),
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for m in Method::ALL {
            assert_eq!(Method::from_name(m.name()), Some(m));
            assert_eq!(m.to_string(), m.name());
        }
        assert_eq!(Method::from_name("off"), Some(Method::None));
        assert_eq!(Method::from_name("ZSTD"), None);
    }

    #[test]
    fn default_level_is_in_range() {
        for m in Method::ALL {
            match (m.level_range(), m.default_level()) {
                (Some(r), Some(d)) => assert!(r.contains(&d), "{m}"),
                (None, None) => {}
                _ => panic!("{m}: range and default disagree"),
            }
        }
    }

    #[test]
    fn stock_wal_methods() {
        let stock: Vec<_> = Method::ALL
            .into_iter()
            .filter(|m| m.is_stock_wal())
            .collect();
        assert_eq!(
            stock,
            [Method::None, Method::Pglz, Method::Lz4, Method::Zstd]
        );
    }

    #[test]
    fn bimg_bits() {
        for m in Method::ALL {
            if let Some(bit) = m.bimg_bit() {
                // HAS_HOLE (0x01) | APPLY (0x02) and unknown high bits do not disturb it.
                assert_eq!(
                    Method::from_bimg_info(bit | 0x03 | 0x80).ok(),
                    Some(Some(m))
                );
            }
        }
        assert_eq!(Method::from_bimg_info(0x03).ok(), Some(None));
        assert!(Method::from_bimg_info(0x0C).is_err());
        assert!(Method::from_bimg_info(0x1C).is_err());
    }
}
