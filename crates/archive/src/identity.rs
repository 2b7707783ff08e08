//! Which cluster a repository belongs to. Sans-IO: it reads the bytes of a repository's
//! identity file, of a WAL segment's first page header and of `global/pg_control`, and says
//! whether they agree; [`crate::Repository::init`] writes the file and every push and get
//! checks against it.
//!
//! The identity is what PostgreSQL itself refuses to mix (`XLogReaderValidatePageHeader` and
//! `ValidateXLOGDirectoryStructure`): the system identifier `initdb` chose, carried in the
//! long header of every segment's first page (`XLogLongPageHeaderData.xlp_sysid`,
//! `access/xlog_internal.h`) and in the first field of `pg_control`
//! (`ControlFileData.system_identifier`, `catalog/pg_control.h`), and the WAL segment size
//! fixed at `initdb`. The major version is recorded too, for people reading the file: a new
//! major is a new `initdb` (or `pg_upgrade`, which makes a new system identifier), so the
//! system identifier already tells the majors apart.

use std::fmt;

use wal::page::{Geometry, PageHeader};

/// The repository's identity file: its key in the store, beside the `.pgcz` containers.
pub const IDENTITY_KEY: &str = "pgcompress-repository";
/// Largest identity file read back (it holds a handful of short lines).
pub const MAX_IDENTITY_LEN: usize = 4096;
/// Bytes of a segment's first page that hold the long page header.
pub const FIRST_PAGE_HEADER_LEN: usize = 40;
/// The first line of an identity file of this format.
const MAGIC: &str = "pgcompress-repository 1";

/// The cluster a repository belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    /// The system identifier `initdb` chose (`pg_controldata`'s "Database system identifier").
    pub system_identifier: u64,
    /// The WAL segment size in bytes (`wal_segment_size`).
    pub wal_segment_size: u32,
    /// The major version whose WAL the repository was initialized with.
    pub pg_major: u32,
}

/// Why identity bytes could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IdentityError {
    /// The bytes are not a WAL segment's first page of PostgreSQL 15 to 18.
    #[error("not the first page of a WAL segment of PostgreSQL 15 to 18: {0}")]
    NotASegment(String),
    /// The identity file is not one this build reads.
    #[error("not a pgcompress repository identity file: {0}")]
    BadFile(String),
    /// `pg_control` is shorter than its first field.
    #[error("pg_control is {0} bytes, too short to hold a system identifier")]
    ShortControlFile(usize),
}

impl Identity {
    /// The identity a WAL segment carries in its first page's long header (40 bytes are
    /// enough).
    pub fn of_segment(first_page: &[u8]) -> Result<Identity, IdentityError> {
        let not = |why: String| IdentityError::NotASegment(why);
        let header = PageHeader::parse(first_page).ok_or_else(|| {
            not(format!(
                "{} bytes, a page header needs 40",
                first_page.len()
            ))
        })?;
        let geometry = Geometry::from_first_page(&header).map_err(|d| not(d.to_string()))?;
        Ok(Identity {
            system_identifier: geometry.sysid,
            wal_segment_size: u32::try_from(geometry.seg_size)
                .map_err(|_| not(format!("segment size {}", geometry.seg_size)))?,
            pg_major: geometry.version.major(),
        })
    }

    /// The identity file's text.
    pub fn render(&self) -> String {
        format!(
            "{MAGIC}\n\
             # Written by `pgcompress archive init`: the cluster whose WAL this repository holds.\n\
             system_identifier {}\n\
             wal_segment_size {}\n\
             pg_major {}\n",
            self.system_identifier, self.wal_segment_size, self.pg_major
        )
    }

    /// Reads an identity file.
    pub fn parse(bytes: &[u8]) -> Result<Identity, IdentityError> {
        let bad = |why: &str| IdentityError::BadFile(why.to_owned());
        if bytes.len() > MAX_IDENTITY_LEN {
            return Err(bad("larger than 4 KiB"));
        }
        let text = std::str::from_utf8(bytes).map_err(|_| bad("not UTF-8"))?;
        let mut lines = text.lines();
        if lines.next() != Some(MAGIC) {
            return Err(bad("the first line is not `pgcompress-repository 1`"));
        }
        let (mut sysid, mut seg, mut major) = (None, None, None);
        for line in lines.filter(|l| !l.is_empty() && !l.starts_with('#')) {
            let (key, value) = line
                .split_once(' ')
                .ok_or_else(|| bad("a line without a value"))?;
            let slot = match key {
                "system_identifier" => &mut sysid,
                "wal_segment_size" => &mut seg,
                "pg_major" => &mut major,
                _ => return Err(bad("an unknown key")),
            };
            if slot.is_some() {
                return Err(bad("a key given twice"));
            }
            *slot = Some(
                value
                    .parse::<u64>()
                    .map_err(|_| bad("a value that is not a number"))?,
            );
        }
        let (Some(system_identifier), Some(seg), Some(major)) = (sysid, seg, major) else {
            return Err(bad(
                "system_identifier, wal_segment_size or pg_major missing",
            ));
        };
        let wal_segment_size = u32::try_from(seg)
            .ok()
            .filter(|s| s.is_power_of_two() && (1 << 20..=1 << 30).contains(s))
            .ok_or_else(|| bad("wal_segment_size is not a power of two from 1 MB to 1 GB"))?;
        let pg_major = u32::try_from(major).map_err(|_| bad("pg_major is out of range"))?;
        Ok(Identity {
            system_identifier,
            wal_segment_size,
            pg_major,
        })
    }

    /// `Ok` when `other` (a segment's identity) may go into a repository of `self`.
    pub fn admits(&self, other: &Identity) -> Result<(), Mismatch> {
        if other.system_identifier != self.system_identifier {
            return Err(Mismatch::System {
                expected: self.system_identifier,
                found: other.system_identifier,
            });
        }
        if other.wal_segment_size != self.wal_segment_size {
            return Err(Mismatch::SegmentSize {
                expected: self.wal_segment_size,
                found: other.wal_segment_size,
            });
        }
        Ok(())
    }
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "system {}, PostgreSQL {}, {} MB segments",
            self.system_identifier,
            self.pg_major,
            self.wal_segment_size >> 20
        )
    }
}

/// How a file's identity differs from its repository's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Mismatch {
    /// Another cluster: another system identifier.
    #[error("it belongs to system {found}, the repository to system {expected}")]
    System {
        /// The repository's.
        expected: u64,
        /// The file's.
        found: u64,
    },
    /// The same system identifier with another segment size (a damaged or forged header).
    #[error("its segments are {found} bytes, the repository's {expected}")]
    SegmentSize {
        /// The repository's.
        expected: u32,
        /// The file's.
        found: u32,
    },
}

/// The system identifier in the first field of `pg_control` (native byte order, as the
/// server writes it; this build reads little-endian files, as the WAL decoder does).
pub fn control_file_system_identifier(pg_control: &[u8]) -> Result<u64, IdentityError> {
    let first: [u8; 8] = pg_control
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .ok_or(IdentityError::ShortControlFile(pg_control.len()))?;
    Ok(u64::from_le_bytes(first))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity() -> Identity {
        Identity {
            system_identifier: 7_312_345_678_901_234_567,
            wal_segment_size: 16 << 20,
            pg_major: 15,
        }
    }

    #[test]
    fn the_file_reads_back_what_it_was_written_from() {
        let id = identity();
        assert_eq!(Identity::parse(id.render().as_bytes()), Ok(id));
    }

    #[test]
    fn a_damaged_file_is_refused() {
        let text = identity().render();
        for bad in [
            text.replace("pgcompress-repository 1", "pgcompress-repository 2"),
            text.replace("pg_major 15\n", ""),
            text.replace("16777216", "16777215"),
            text.replace("system_identifier 7", "system_identifier x"),
            format!("{text}pg_major 16\n"),
            format!("{text}colour blue\n"),
            "x".repeat(MAX_IDENTITY_LEN + 1),
        ] {
            assert!(
                matches!(
                    Identity::parse(bad.as_bytes()),
                    Err(IdentityError::BadFile(_))
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn another_system_or_segment_size_is_a_mismatch() {
        let id = identity();
        let other = Identity {
            system_identifier: 1,
            ..id
        };
        assert_eq!(
            id.admits(&other),
            Err(Mismatch::System {
                expected: id.system_identifier,
                found: 1
            })
        );
        let wide = Identity {
            wal_segment_size: 64 << 20,
            ..id
        };
        assert!(matches!(
            id.admits(&wide),
            Err(Mismatch::SegmentSize { .. })
        ));
        assert_eq!(id.admits(&id), Ok(()));
    }

    #[test]
    fn short_input_is_an_error_not_a_panic() {
        assert!(Identity::of_segment(&[0; 20]).is_err());
        assert!(Identity::of_segment(&[0; 40]).is_err());
        assert_eq!(
            control_file_system_identifier(&[1, 2, 3]),
            Err(IdentityError::ShortControlFile(3))
        );
        assert_eq!(control_file_system_identifier(&42u64.to_le_bytes()), Ok(42));
    }
}
