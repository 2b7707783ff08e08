//! WAL positions and PostgreSQL timestamps as pgoutput sends them.

use std::fmt;

/// Seconds from the Unix epoch to PostgreSQL's epoch, 2000-01-01 00:00:00 UTC
/// (`POSTGRES_EPOCH_JDATE` in `datatype/timestamp.h`); every timestamp in pgoutput and in the
/// replication CopyData messages counts microseconds from there.
pub const PG_EPOCH_UNIX_SECS: i64 = 946_684_800;

/// A WAL position (`XLogRecPtr`), printed as PostgreSQL prints it (`16/B374D848`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Lsn(pub u64);

impl Lsn {
    /// `InvalidXLogRecPtr`: what the walsender puts in XLogData for messages (Relation, Type)
    /// written before the change that triggers them.
    pub const INVALID: Lsn = Lsn(0);

    /// Parses PostgreSQL's `X/X` text form (as `pg_lsn` prints it).
    pub fn parse(s: &str) -> Option<Lsn> {
        let (hi, lo) = s.split_once('/')?;
        let hi = u32::from_str_radix(hi, 16).ok()?;
        let lo = u32::from_str_radix(lo, 16).ok()?;
        Some(Lsn((u64::from(hi) << 32) | u64::from(lo)))
    }
}

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:X}/{:X}", self.0 >> 32, self.0 & 0xffff_ffff)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_form_round_trips() {
        let l = Lsn(0x16_B374_D848);
        assert_eq!(l.to_string(), "16/B374D848");
        assert_eq!(Lsn::parse("16/B374D848"), Some(l));
        assert_eq!(Lsn::parse("0/0"), Some(Lsn::INVALID));
        assert_eq!(Lsn::parse("nope"), None);
        assert_eq!(Lsn::parse("1/G"), None);
    }
}
