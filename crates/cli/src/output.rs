//! Small helpers for human-readable output.

/// Bytes as a short human figure: 1.5 MiB.
pub use advise::fmt::bytes;

/// A share as a percentage, 0 when the whole is 0.
pub fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}
