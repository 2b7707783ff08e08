//! The one parser of every size flag: bytes, or a number with kB, MB, GB or TB. Units are
//! powers of 1024, as in PostgreSQL's memory settings (`work_mem = 64MB`); the case and an
//! `i` (`MiB`) are free, so a value copied from postgresql.conf or from another tool's
//! output reads the same everywhere.

/// Units by their lower-case spellings, as a power of 1024.
const UNITS: [(&[&str], u32); 5] = [
    (&["", "b"], 0),
    (&["k", "kb", "kib"], 1),
    (&["m", "mb", "mib"], 2),
    (&["g", "gb", "gib"], 3),
    (&["t", "tb", "tib"], 4),
];

/// Parses a size in bytes: `1048576`, `1024kB`, `64MB`, `1GiB`, `2t`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let bad = || format!("{s:?} is not a size: give bytes or a number with kB, MB, GB or TB");
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    if digits.is_empty() {
        return Err(bad());
    }
    let unit = unit.trim().to_ascii_lowercase();
    let &(_, power) = UNITS
        .iter()
        .find(|(names, _)| names.contains(&unit.as_str()))
        .ok_or_else(bad)?;
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1024u64.pow(power)))
        .ok_or_else(|| format!("{s:?} is too large"))
}

/// [`parse_size`] for a size held in memory.
pub fn parse_memory_size(s: &str) -> Result<usize, String> {
    usize::try_from(parse_size(s)?).map_err(|_| format!("{s:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_in_every_spelling() {
        for (text, bytes) in [
            ("100", 100),
            ("100B", 100),
            ("64kB", 64 << 10),
            ("64KiB", 64 << 10),
            ("64k", 64 << 10),
            ("64MB", 64 << 20),
            ("64mib", 64 << 20),
            ("2GB", 2 << 30),
            ("1TB", 1 << 40),
            (" 8 MB ", 8 << 20),
        ] {
            assert_eq!(parse_size(text), Ok(bytes), "{text}");
        }
        for bad in ["", "MB", "1XB", "1.5MB", "-1MB", "1 M B"] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
        assert!(parse_size("99999999999TB").is_err());
    }
}
