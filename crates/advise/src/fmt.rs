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

/// How a sampled figure's interval reads: "±0.50% (20.0% of images)" when it is
/// symmetric to the shown precision, else "-2.73%/+1.53% (...)" (the interval widens
/// towards the side images missed by the sample would pull the figure); "exact"
/// when every image was measured; no figure when the interval is too wide to mean
/// anything ([`crate::rank::informative`]).
pub fn interval(c: &crate::advice::CandidateAdvice) -> String {
    match (c.ci_low, c.ci_high) {
        _ if c.sampled && !crate::rank::informative(c) => format!(
            "estimate, interval too wide to rank ({:.1}% of images)",
            100.0 * c.sample_rate
        ),
        (Some(lo), Some(hi)) if c.sampled => {
            let v = c.predicted_fpi_bytes.max(1) as f64;
            let below = 100.0 * c.predicted_fpi_bytes.saturating_sub(lo) as f64 / v;
            let above = 100.0 * hi.saturating_sub(c.predicted_fpi_bytes) as f64 / v;
            let rate = 100.0 * c.sample_rate;
            if format!("{below:.2}") == format!("{above:.2}") {
                format!("\u{b1}{above:.2}% ({rate:.1}% of images)")
            } else {
                format!("-{below:.2}%/+{above:.2}% ({rate:.1}% of images)")
            }
        }
        _ => "exact".into(),
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

    #[test]
    fn intervals_read_symmetric_or_as_two_sides() {
        let mut c = crate::advice::CandidateAdvice {
            spec: codec::parse_spec_list("zstd:19").expect("spec")[0],
            stock: false,
            predicted_fpi_bytes: 10_000,
            predicted_combined_bytes: 0,
            predicted_wal_bytes: 0,
            images_compressed: 0,
            images_measured: 0,
            compress_ns_per_mb: 0.0,
            decompress_ns_per_mb: 0.0,
            sampled: true,
            sample_rate: 0.2,
            ci_low: Some(9_950),
            ci_high: Some(10_050),
            context_bytes: None,
        };
        assert_eq!(interval(&c), "\u{b1}0.50% (20.0% of images)");
        c.ci_low = Some(9_727);
        c.ci_high = Some(10_153);
        assert_eq!(interval(&c), "-2.73%/+1.53% (20.0% of images)");
        c.ci_low = Some(0);
        c.ci_high = Some(32_900);
        assert_eq!(
            interval(&c),
            "estimate, interval too wide to rank (20.0% of images)"
        );
        c.sampled = false;
        assert_eq!(interval(&c), "exact");
    }
}
