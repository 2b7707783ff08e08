//! Log sequence numbers and WAL segment file names (xlog_internal.h `XLogFileName`).

use std::fmt;
use std::str::FromStr;

/// A WAL position (`XLogRecPtr`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Lsn(pub u64);

impl Lsn {
    /// `InvalidXLogRecPtr`.
    pub const INVALID: Lsn = Lsn(0);

    /// Offset of this position inside its segment.
    pub fn segment_offset(self, seg_size: u64) -> u64 {
        self.0 % seg_size
    }

    /// Segment number holding this position.
    pub fn segno(self, seg_size: u64) -> u64 {
        self.0 / seg_size
    }

    /// Offset of this position inside its WAL page.
    pub fn page_offset(self, blcksz: u64) -> u64 {
        self.0 % blcksz
    }

    /// Start of the WAL page holding this position.
    pub fn page_start(self, blcksz: u64) -> Lsn {
        Lsn(self.0 - self.0 % blcksz)
    }
}

impl fmt::Display for Lsn {
    /// PostgreSQL's `%X/%X` form, as pg_waldump prints it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:X}/{:X}", self.0 >> 32, self.0 & 0xffff_ffff)
    }
}

impl FromStr for Lsn {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (hi, lo) = s
            .split_once('/')
            .ok_or_else(|| format!("invalid LSN {s:?}: expected the form 16/B374D848"))?;
        let hi = u32::from_str_radix(hi, 16).map_err(|_| format!("invalid LSN {s:?}"))?;
        let lo = u32::from_str_radix(lo, 16).map_err(|_| format!("invalid LSN {s:?}"))?;
        Ok(Lsn((u64::from(hi) << 32) | u64::from(lo)))
    }
}

/// The name of a WAL segment file: timeline and segment number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SegmentName {
    /// Timeline id.
    pub tli: u32,
    /// Segment number (LSN / segment size).
    pub segno: u64,
}

impl SegmentName {
    /// Parses a 24-hex-digit file name for segments of `seg_size` bytes.
    pub fn parse(name: &str, seg_size: u64) -> Option<SegmentName> {
        let (tli, log, seg) = split_name(name)?;
        let per_log = 0x1_0000_0000u64 / seg_size;
        if u64::from(seg) >= per_log {
            return None;
        }
        Some(SegmentName {
            tli,
            segno: u64::from(log) * per_log + u64::from(seg),
        })
    }

    /// The file name, `%08X%08X%08X` of timeline, log and segment.
    pub fn file_name(&self, seg_size: u64) -> String {
        let per_log = 0x1_0000_0000u64 / seg_size;
        format!(
            "{:08X}{:08X}{:08X}",
            self.tli,
            self.segno / per_log,
            self.segno % per_log
        )
    }

    /// The LSN where this segment starts.
    pub fn start_lsn(&self, seg_size: u64) -> Lsn {
        Lsn(self.segno * seg_size)
    }

    /// The segment holding `lsn` on timeline `tli`.
    pub fn containing(tli: u32, lsn: Lsn, seg_size: u64) -> SegmentName {
        SegmentName {
            tli,
            segno: lsn.segno(seg_size),
        }
    }
}

/// True for a name made of exactly 24 upper- or lower-case hex digits.
pub fn is_segment_file_name(name: &str) -> bool {
    split_name(name).is_some()
}

fn split_name(name: &str) -> Option<(u32, u32, u32)> {
    if name.len() != 24 || !name.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let tli = u32::from_str_radix(&name[0..8], 16).ok()?;
    let log = u32::from_str_radix(&name[8..16], 16).ok()?;
    let seg = u32::from_str_radix(&name[16..24], 16).ok()?;
    Some((tli, log, seg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lsn_formats_like_postgres() {
        assert_eq!(Lsn(0x0000_0000_0700_0210).to_string(), "0/7000210");
        assert_eq!(Lsn(0x16_B374_D848).to_string(), "16/B374D848");
        assert_eq!("16/B374D848".parse::<Lsn>(), Ok(Lsn(0x16_B374_D848)));
        assert!("16B374D848".parse::<Lsn>().is_err());
    }

    #[test]
    fn names_round_trip_for_every_segment_size() {
        let mut size = 1u64 << 20;
        while size <= 1 << 30 {
            let s = SegmentName {
                tli: 3,
                segno: 5 * (0x1_0000_0000 / size) + 7,
            };
            let name = s.file_name(size);
            assert_eq!(SegmentName::parse(&name, size), Some(s));
            size <<= 1;
        }
        let s = SegmentName::parse("00000001000000000000005E", 16 << 20).unwrap();
        assert_eq!(s.start_lsn(16 << 20), Lsn(0x5E00_0000));
        // 1 MB segments: 4096 per "log"; 16 MB: 256, so 0x100 is not a valid seg part.
        assert!(SegmentName::parse("000000010000000000000100", 16 << 20).is_none());
        assert!(SegmentName::parse("000000010000000000000100", 1 << 20).is_some());
        assert!(!is_segment_file_name("00000001.history"));
    }
}
