//! PostgreSQL timestamps (µs since 2000-01-01 UTC) in the text form `timestamptz_out` gives
//! with `TimeZone = UTC`: `2026-11-23 23:14:01.5+00`.

use crate::PG_EPOCH_UNIX_SECS;

const US_PER_SEC: i64 = 1_000_000;
const SECS_PER_DAY: i64 = 86_400;

/// (year, month, day) of a day count from 1970-01-01, in the proleptic Gregorian calendar.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    // Shift to eras of 400 years starting 0000-03-01, so leap days fall at the end of a year.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `pg_us` as PostgreSQL prints a `timestamptz` in UTC (trailing fractional zeros dropped).
pub fn format_timestamp(pg_us: i64) -> String {
    let unix_secs = pg_us.div_euclid(US_PER_SEC) + PG_EPOCH_UNIX_SECS;
    let frac = pg_us.rem_euclid(US_PER_SEC);
    let (y, mo, d) = civil_from_days(unix_secs.div_euclid(SECS_PER_DAY));
    let sod = unix_secs.rem_euclid(SECS_PER_DAY);
    let mut s = format!(
        "{y:04}-{mo:02}-{d:02} {:02}:{:02}:{:02}",
        sod / 3600,
        sod / 60 % 60,
        sod % 60
    );
    if frac != 0 {
        let f = format!(".{frac:06}");
        s.push_str(f.trim_end_matches('0'));
    }
    s.push_str("+00");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        assert_eq!(format_timestamp(0), "2000-01-01 00:00:00+00");
        assert_eq!(format_timestamp(-1), "1999-12-31 23:59:59.999999+00");
        // 2024-02-29 12:34:56.5 UTC is Unix 1709210096.5.
        let us = (1_709_210_096 - PG_EPOCH_UNIX_SECS) * US_PER_SEC + 500_000;
        assert_eq!(format_timestamp(us), "2024-02-29 12:34:56.5+00");
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }
}
