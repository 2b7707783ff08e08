//! The one-line recommendation: which `wal_compression` to set today, and what a
//! level PostgreSQL cannot choose yet would add.
//!
//! Rule, on predicted WAL bytes (`W`) and compression CPU per MB of page data:
//! 1. Among stock candidates, take the one with the smallest `W`.
//! 2. CPU sanity: a stock candidate whose `W` is within [`NEAR_BEST_SHARE`] of the
//!    `off` figure from the best, and that costs less CPU, wins instead (a saving
//!    nobody can notice is not worth the CPU). This also picks `off` when no method
//!    saves more than that share.
//! 3. What a level would add: the non-stock candidate with the smallest `W` whose
//!    CPU per MB is at most [`MAX_COST_FACTOR`] times that of the setting from 2
//!    (or of the cheapest compressing stock candidate, when 2 chose `off`); a sampled
//!    one only when its whole interval is below the setting's `W` ([`crate::rank`]).

use crate::advice::{Advice, CandidateAdvice};
use codec::Method;

/// Savings closer than this share of the `off` WAL bytes count as equal.
pub const NEAR_BEST_SHARE: f64 = 0.01;
/// A non-stock level may cost at most this many times the recommended setting's CPU.
pub const MAX_COST_FACTOR: f64 = 4.0;

/// What to set, and what a level choice would add.
#[derive(Debug, Clone, PartialEq)]
pub struct Recommendation {
    /// Index in [`Advice::candidates`] of the stock candidate to use.
    pub stock: usize,
    /// The `wal_compression` value that writes it.
    pub setting: &'static str,
    /// Index of the best non-stock candidate within the CPU rule, if any beats `stock`.
    pub level: Option<usize>,
}

/// Applies the rule of this module; `None` when no stock candidate was measured.
pub fn recommend(a: &Advice) -> Option<Recommendation> {
    let c = &a.candidates;
    let off_w = c
        .iter()
        .find(|x| x.spec.method == Method::None)
        .map_or(a.actual_wal_bytes, |x| x.predicted_wal_bytes);
    let stock: Vec<usize> = (0..c.len()).filter(|&i| c[i].stock).collect();
    let best = *stock.iter().min_by_key(|&&i| c[i].predicted_wal_bytes)?;
    let slack = (NEAR_BEST_SHARE * off_w as f64) as u64;
    let chosen = stock
        .iter()
        .copied()
        .filter(|&i| c[i].predicted_wal_bytes <= c[best].predicted_wal_bytes + slack)
        .min_by(|&i, &j| {
            c[i].compress_ns_per_mb
                .total_cmp(&c[j].compress_ns_per_mb)
                .then(c[i].predicted_wal_bytes.cmp(&c[j].predicted_wal_bytes))
        })
        .unwrap_or(best);
    let setting = crate::wal_compression_setting(&c[chosen].spec)?;
    let cost_ref = if c[chosen].spec.method == Method::None {
        stock
            .iter()
            .filter(|&&i| c[i].spec.method != Method::None)
            .map(|&i| c[i].compress_ns_per_mb)
            .fold(f64::INFINITY, f64::min)
    } else {
        c[chosen].compress_ns_per_mb
    };
    let level = (0..c.len())
        .filter(|&i| !c[i].stock)
        .filter(|&i| c[i].compress_ns_per_mb <= MAX_COST_FACTOR * cost_ref)
        // A sampled level counts only when its whole interval is below: a saving the
        // sample does not establish is not advice.
        .filter(|&i| {
            crate::rank::informative(&c[i])
                && crate::rank::wal_interval(&c[i]).1 < c[chosen].predicted_wal_bytes
        })
        .min_by_key(|&i| c[i].predicted_wal_bytes);
    Some(Recommendation {
        stock: chosen,
        setting,
        level,
    })
}

impl Recommendation {
    /// The recommendation as one line of text.
    pub fn sentence(&self, a: &Advice) -> String {
        let c = &a.candidates;
        let s = &c[self.stock];
        let off_w = c
            .iter()
            .find(|x| x.spec.method == Method::None)
            .map_or(a.actual_wal_bytes, |x| x.predicted_wal_bytes);
        let mut line = format!(
            "Recommendation: wal_compression = {} ({} WAL bytes than off, {:.1}%)",
            self.setting,
            signed(off_w, s.predicted_wal_bytes),
            crate::fmt::saving(off_w, s.predicted_wal_bytes as f64)
        );
        match self.level {
            Some(i) => {
                let l: &CandidateAdvice = &c[i];
                let factor = if s.compress_ns_per_mb > 0.0 {
                    format!(
                        "{:.1}x the CPU",
                        l.compress_ns_per_mb / s.compress_ns_per_mb
                    )
                } else {
                    format!("{:.0} MB/s", 1e9 / l.compress_ns_per_mb.max(1.0))
                };
                line.push_str(&format!(
                    "; a level choice would add: {} saves {}{} more ({:.1}% of off) at {factor} (not in stock PostgreSQL)",
                    l.spec,
                    if l.sampled { "an estimated " } else { "" },
                    crate::fmt::bytes(s.predicted_wal_bytes.saturating_sub(l.predicted_wal_bytes)),
                    crate::fmt::saving(s.predicted_wal_bytes, l.predicted_wal_bytes as f64) * s.predicted_wal_bytes as f64
                        / off_w.max(1) as f64,
                ));
            }
            None => line
                .push_str("; no level PostgreSQL cannot choose yet does better within 4x its CPU"),
        }
        line
    }
}

fn signed(reference: u64, value: u64) -> String {
    if value <= reference {
        format!("{} fewer", crate::fmt::bytes(reference - value))
    } else {
        format!("{} more", crate::fmt::bytes(value - reference))
    }
}
