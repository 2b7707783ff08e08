//! PostgreSQL timestamps (µs since 2000-01-01 UTC) in the text form `timestamptz_out` gives
//! with `TimeZone = UTC`: `2026-11-23 23:14:01.5+00`. The calendar is the `time` crate's.

use crate::PG_EPOCH_UNIX_SECS;
use time::OffsetDateTime;

const NS_PER_US: i128 = 1_000;
const US_PER_SEC: i128 = 1_000_000;

/// `pg_us` as PostgreSQL prints a `timestamptz` in UTC: trailing fractional zeros dropped,
/// `infinity` and `-infinity` for the two reserved values (`DT_NOEND`, `DT_NOBEGIN` in
/// `datatype/timestamp.h`), and ` BC` after years before 1 (`EncodeDateTime` in
/// `utils/adt/datetime.c`).
pub fn format_timestamp(pg_us: i64) -> String {
    match pg_us {
        i64::MAX => return "infinity".to_owned(),
        i64::MIN => return "-infinity".to_owned(),
        _ => {}
    }
    let unix_us = i128::from(pg_us) + i128::from(PG_EPOCH_UNIX_SECS) * US_PER_SEC;
    // With `large-dates` every i64 of microseconds is in range; were it not, the count
    // itself is better than a panic.
    let Ok(t) = OffsetDateTime::from_unix_timestamp_nanos(unix_us * NS_PER_US) else {
        return format!("{pg_us} µs after 2000-01-01 00:00:00+00");
    };
    // PostgreSQL counts no year 0: the year before 1 is 1 BC.
    let (year, era) = match t.year() {
        y if y > 0 => (y, ""),
        y => (1 - y, " BC"),
    };
    let mut s = format!(
        "{year:04}-{:02}-{:02} {:02}:{:02}:{:02}",
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    );
    let frac = t.microsecond();
    if frac != 0 {
        let f = format!(".{frac:06}");
        s.push_str(f.trim_end_matches('0'));
    }
    s.push_str("+00");
    s.push_str(era);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: i64 = 1_000_000;

    #[test]
    fn known_instants() {
        assert_eq!(format_timestamp(0), "2000-01-01 00:00:00+00");
        assert_eq!(format_timestamp(-1), "1999-12-31 23:59:59.999999+00");
        // 2024-02-29 12:34:56.5 UTC is Unix 1709210096.5.
        let us = (1_709_210_096 - PG_EPOCH_UNIX_SECS) * US + 500_000;
        assert_eq!(format_timestamp(us), "2024-02-29 12:34:56.5+00");
        // The Unix epoch and the day before it.
        assert_eq!(
            format_timestamp(-PG_EPOCH_UNIX_SECS * US),
            "1970-01-01 00:00:00+00"
        );
        assert_eq!(
            format_timestamp((-PG_EPOCH_UNIX_SECS - 1) * US),
            "1969-12-31 23:59:59+00"
        );
    }

    #[test]
    fn the_reserved_values_and_the_far_ends() {
        assert_eq!(format_timestamp(i64::MAX), "infinity");
        assert_eq!(format_timestamp(i64::MIN), "-infinity");
        // Unix -62135596800 is 0001-01-01 00:00:00; a second before it is 1 BC.
        let year_1 = (-62_135_596_800 - PG_EPOCH_UNIX_SECS) * US;
        assert_eq!(format_timestamp(year_1), "0001-01-01 00:00:00+00");
        assert_eq!(format_timestamp(year_1 - US), "0001-12-31 23:59:59+00 BC");
        // Unix 253402300800 is 10000-01-01 00:00:00.
        let year_10000 = (253_402_300_800 - PG_EPOCH_UNIX_SECS) * US;
        assert_eq!(format_timestamp(year_10000), "10000-01-01 00:00:00+00");
    }
}
