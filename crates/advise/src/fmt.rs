//! Figures as people read them, shared by the recommendation, the HTML report and the CLI.

/// Bytes as a short figure in binary units (1.5 MiB).
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// How much smaller `value` is than `reference`, in percent (0 when the reference is 0).
pub fn saving(reference: u64, value: f64) -> f64 {
    if reference == 0 {
        0.0
    } else {
        100.0 * (reference as f64 - value) / reference as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_read_as_people_write_them() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(3 << 30), "3.0 GiB");
        assert_eq!(saving(200, 50.0), 75.0);
        assert_eq!(saving(0, 5.0), 0.0);
    }
}
