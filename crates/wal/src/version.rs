//! PostgreSQL major versions, told apart by `XLOG_PAGE_MAGIC` (xlog_internal.h).

use std::fmt;

/// A PostgreSQL major version whose WAL this crate reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum PgVersion {
    /// PostgreSQL 15, magic 0xD110.
    V15,
    /// PostgreSQL 16, magic 0xD113.
    V16,
    /// PostgreSQL 17, magic 0xD116.
    V17,
    /// PostgreSQL 18, magic 0xD118.
    V18,
}

impl PgVersion {
    /// Every supported version, oldest first.
    pub const ALL: [PgVersion; 4] = [Self::V15, Self::V16, Self::V17, Self::V18];

    /// The version whose pages carry this magic, if supported.
    pub fn from_magic(magic: u16) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.magic() == magic)
    }

    /// `XLOG_PAGE_MAGIC` of this version.
    pub fn magic(self) -> u16 {
        match self {
            Self::V15 => 0xD110,
            Self::V16 => 0xD113,
            Self::V17 => 0xD116,
            Self::V18 => 0xD118,
        }
    }

    /// The major version number (15, 16, ...).
    pub fn major(self) -> u32 {
        match self {
            Self::V15 => 15,
            Self::V16 => 16,
            Self::V17 => 17,
            Self::V18 => 18,
        }
    }
}

impl fmt::Display for PgVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.major())
    }
}

/// Names of the magic values of unsupported versions, for error messages.
pub fn describe_magic(magic: u16) -> String {
    match magic {
        0xD10D => "PostgreSQL 14 (unsupported: image flags differ before 15)".into(),
        0xD106 => "PostgreSQL 13 (unsupported)".into(),
        0xD120 => "PostgreSQL 19devel (unsupported)".into(),
        _ => "no known PostgreSQL version".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magic_round_trips() {
        for v in PgVersion::ALL {
            assert_eq!(PgVersion::from_magic(v.magic()), Some(v));
        }
        assert_eq!(PgVersion::from_magic(0xD10D), None);
        assert_eq!(PgVersion::V18.major(), 18);
    }
}
