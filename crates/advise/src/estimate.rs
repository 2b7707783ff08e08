//! The sampling plan and the ratio estimator behind sampled figures.
//!
//! An image is in the sample of a candidate with rate `p` when a hash of its
//! position (record LSN and block id) maps below `p` in [0, 1): a deterministic
//! Bernoulli sample that does not depend on threads or on the order of work, and
//! whose samples are nested (a smaller rate picks a subset of a larger one).
//!
//! For a sampled candidate, with `y_i` what it would store and `x_i` an auxiliary
//! figure known for every image — what an exhaustively measured candidate of the
//! same method stores (zstd:9 for zstd:19), or else the page bytes (BLCKSZ minus the
//! hole) — over the sample `s`:
//!
//! ```text
//! R  = Σ_s y_i / Σ_s x_i                       ratio of stored to page bytes
//! Ŷ  = R · X                                   X = Σ x_i over all images (known)
//! V̂  = (1 − p) / p² · Σ_s (y_i − R·x_i)²       linearised variance under Bernoulli(p)
//! CI = Ŷ ± 3.29 · √V̂                           99.9 %, normal approximation
//! ```
//!
//! The ratio estimator uses what is known exactly (the auxiliary total) and only
//! estimates the ratio of the candidate to it, so its error comes from how much that
//! ratio varies between images, not from how many images there are; two levels of
//! one method vary together, which is why a same-method auxiliary is preferred. With `p = 1` the
//! variance term vanishes and the figure is exact.

/// Position of an image in [0, 1), from its record's LSN and block id (splitmix64).
pub fn sample_point(lsn: u64, block_id: u8) -> f64 {
    let mut z = lsn
        .wrapping_mul(64)
        .wrapping_add(u64::from(block_id))
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// Sums over the sampled images of one candidate, kept exactly (integers).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RatioSums {
    /// Images in the sample.
    pub n: u64,
    /// Σ x.
    pub x: u128,
    /// Σ y.
    pub y: u128,
    /// Σ x².
    pub xx: u128,
    /// Σ x·y.
    pub xy: u128,
    /// Σ y².
    pub yy: u128,
}

impl RatioSums {
    /// Adds one sampled image.
    pub fn add(&mut self, x: u64, y: u64) {
        let (x, y) = (u128::from(x), u128::from(y));
        self.n += 1;
        self.x += x;
        self.y += y;
        self.xx += x * x;
        self.xy += x * y;
        self.yy += y * y;
    }

    /// Adds another partial sum.
    pub fn merge(&mut self, o: &RatioSums) {
        self.n += o.n;
        self.x += o.x;
        self.y += o.y;
        self.xx += o.xx;
        self.xy += o.xy;
        self.yy += o.yy;
    }

    /// The estimate of Σ y over all images and its 99.9 % interval, given the
    /// population total `total_x` of x and the sampling rate `p` (see the module docs).
    pub fn estimate(&self, total_x: u64, p: f64) -> Estimate {
        if self.x == 0 {
            // Nothing sampled: no information, the widest honest interval is [0, X].
            return Estimate {
                value: total_x as f64,
                low: 0.0,
                high: total_x as f64,
            };
        }
        let r = self.y as f64 / self.x as f64;
        let value = r * total_x as f64;
        // Σ (y − r x)² = Σy² − 2r Σxy + r² Σx², clamped against rounding.
        let sse = (self.yy as f64 - 2.0 * r * self.xy as f64 + r * r * self.xx as f64).max(0.0);
        let p = p.clamp(f64::MIN_POSITIVE, 1.0);
        let var = (1.0 - p) / (p * p) * sse;
        // 99.9 %: a stated interval a user can rely on, even across many candidates.
        let half = Z_999 * var.sqrt();
        Estimate {
            value,
            low: (value - half).max(0.0),
            high: value + half,
        }
    }
}

/// Two-sided normal quantile for a 99.9 % interval.
const Z_999: f64 = 3.29;

/// An estimated total with its 99.9 % confidence interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// Point estimate.
    pub value: f64,
    /// Lower bound.
    pub low: f64,
    /// Upper bound.
    pub high: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_are_uniform_enough() {
        let n = 100_000u64;
        let below = (0..n)
            .filter(|i| sample_point(0x1000_0000 + i * 56, (i % 3) as u8) < 0.1)
            .count() as f64;
        assert!((below / n as f64 - 0.1).abs() < 0.005, "{below}");
    }

    #[test]
    fn full_sample_is_exact() {
        let mut s = RatioSums::default();
        for (x, y) in [(8000, 2000), (4000, 3000), (8192, 8192)] {
            s.add(x, y);
        }
        let e = s.estimate(20192, 1.0);
        assert!((e.value - 13192.0).abs() < 1e-6);
        assert_eq!(e.low, e.value);
        assert_eq!(e.high, e.value);
    }

    #[test]
    fn interval_covers_truth_in_most_trials() {
        // Population of images with varied ratios; many independent hash-based samples.
        let pop: Vec<(u64, u64)> = (0..20_000u64)
            .map(|i| {
                let x = 4000 + (i * 7919) % 4192;
                let y = x / (2 + (i * 31) % 5) + (i * 13) % 97;
                (x, y)
            })
            .collect();
        let total_x: u64 = pop.iter().map(|p| p.0).sum();
        let total_y: u64 = pop.iter().map(|p| p.1).sum();
        let mut covered = 0;
        for trial in 0..100u64 {
            let mut s = RatioSums::default();
            for (i, &(x, y)) in pop.iter().enumerate() {
                if sample_point(trial << 40 | (i as u64) << 3, 0) < 0.05 {
                    s.add(x, y);
                }
            }
            let e = s.estimate(total_x, 0.05);
            if e.low <= total_y as f64 && total_y as f64 <= e.high {
                covered += 1;
            }
        }
        assert!(covered >= 88, "covered {covered} of 100");
    }
}
