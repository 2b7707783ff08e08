//! Which candidates the advice can rank, and where: one home for the order the
//! text, JSON and HTML outputs list candidates in.
//!
//! An exhaustively measured candidate has an exact figure. A sampled one has an
//! estimate and a 99.9 % interval ([`crate::estimate`]); the interval is
//! *informative* when it spans at most [`INFORMATIVE_WIDTH`] of the estimate. A thin
//! sample dominated by a few images gives intervals like -100 %/+229 %, which place
//! the candidate nowhere: such candidates are not ranked but listed after the ranked
//! ones, as estimates, with what was measured.
//!
//! Among the ranked candidates, each gets the span of ranks its interval allows
//! (WAL bytes, fewest first): `best = 1 + #(others surely fewer)`,
//! `worst = n − #(others surely more)`, "surely" meaning the two intervals do not
//! meet. Exact candidates with distinct figures get one rank; overlapping
//! intervals share a span ("2-4"), so no order is claimed that the sample does not
//! establish.

use crate::advice::{Advice, CandidateAdvice};

/// The widest interval, from low to high as a share of the estimate, that places a
/// sampled candidate (about ±10 %): wider, and it says nothing a reader can act on.
pub const INFORMATIVE_WIDTH: f64 = 0.2;

/// The 99.9 % interval of a candidate's predicted WAL bytes: its figure when exact.
/// The FPI interval moves WAL bytes one for one (the page headers it would also move,
/// about 0.3 % of that, are left out).
pub fn wal_interval(c: &CandidateAdvice) -> (u64, u64) {
    let w = c.predicted_wal_bytes;
    match (c.sampled, c.ci_low, c.ci_high) {
        (true, Some(lo), Some(hi)) => (
            w.saturating_sub(c.predicted_fpi_bytes.saturating_sub(lo)),
            w + hi.saturating_sub(c.predicted_fpi_bytes),
        ),
        _ => (w, w),
    }
}

/// True when the candidate's figure can be ranked: exact, or sampled with an
/// interval no wider than [`INFORMATIVE_WIDTH`] of its estimate.
pub fn informative(c: &CandidateAdvice) -> bool {
    if !c.sampled {
        return true;
    }
    match (c.ci_low, c.ci_high) {
        (Some(lo), Some(hi)) => {
            hi.saturating_sub(lo) as f64 <= INFORMATIVE_WIDTH * c.predicted_fpi_bytes as f64
        }
        _ => false,
    }
}

/// One candidate in the order of the outputs.
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    /// The candidate.
    pub candidate: &'a CandidateAdvice,
    /// Its index in [`Advice::candidates`].
    pub index: usize,
    /// Best and worst rank its interval allows (1 = fewest WAL bytes), or `None`
    /// when it is an estimate too uncertain to rank.
    pub rank: Option<(usize, usize)>,
}

impl Place<'_> {
    /// The rank as people read it: "3", "2-4", or "-" when not ranked.
    pub fn rank_text(&self) -> String {
        match self.rank {
            Some((b, w)) if b == w => b.to_string(),
            Some((b, w)) => format!("{b}-{w}"),
            None => "-".into(),
        }
    }
}

/// Every candidate: the ranked ones by predicted WAL bytes (fewest first), then
/// those that cannot be ranked, by estimate.
pub fn ranking(a: &Advice) -> Vec<Place<'_>> {
    let mut v: Vec<(usize, &CandidateAdvice)> = a.candidates.iter().enumerate().collect();
    v.sort_by_key(|(_, c)| {
        (
            !informative(c),
            c.predicted_wal_bytes,
            c.predicted_fpi_bytes,
        )
    });
    let ranges: Vec<Option<(u64, u64)>> = v
        .iter()
        .map(|(_, c)| informative(c).then(|| wal_interval(c)))
        .collect();
    let n = ranges.iter().flatten().count();
    v.iter()
        .zip(&ranges)
        .map(|(&(index, candidate), r)| Place {
            candidate,
            index,
            rank: r.map(|(lo, hi)| {
                let ahead = ranges.iter().flatten().filter(|o| o.1 < lo).count();
                let behind = ranges.iter().flatten().filter(|o| o.0 > hi).count();
                (1 + ahead, n - behind)
            }),
        })
        .collect()
}

/// What was measured of an estimate that cannot be ranked, in words.
pub fn unranked_note(c: &CandidateAdvice, images: u64) -> String {
    format!(
        "estimate from {} of {} images ({:.1}%); its 99.9% interval is wider than {:.0}% of it, \
         too wide to rank",
        c.images_measured,
        images,
        100.0 * c.sample_rate,
        100.0 * INFORMATIVE_WIDTH
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(spec: &str, wal: u64, ci: Option<(u64, u64)>) -> CandidateAdvice {
        CandidateAdvice {
            spec: codec::parse_spec_list(spec).expect("spec")[0],
            stock: false,
            predicted_fpi_bytes: 10_000,
            predicted_combined_bytes: 0,
            predicted_wal_bytes: wal,
            images_compressed: 0,
            images_measured: 0,
            compress_ns_per_mb: 0.0,
            decompress_ns_per_mb: 0.0,
            sampled: ci.is_some(),
            sample_rate: if ci.is_some() { 0.1 } else { 1.0 },
            ci_low: ci.map(|c| c.0),
            ci_high: ci.map(|c| c.1),
            context_bytes: None,
        }
    }

    #[test]
    fn overlapping_intervals_share_ranks_and_wide_ones_are_not_ranked() {
        let cands = vec![
            cand("lz4", 50_000, None),
            cand("zstd:19", 40_000, Some((9_500, 10_400))),
            cand("zstd:22", 40_100, Some((9_600, 10_500))),
            cand("zstd", 45_000, None),
            cand("lz4:9", 49_000, Some((0, 30_000))),
        ];
        let a = crate::advice::tests_support::advice(cands);
        let r = ranking(&a);
        let got: Vec<(String, String)> = r
            .iter()
            .map(|p| (p.candidate.spec.to_string(), p.rank_text()))
            .collect();
        let want = [
            ("zstd:19", "1-2"),
            ("zstd:22", "1-2"),
            ("zstd", "3"),
            ("lz4", "4"),
            ("lz4:9", "-"),
        ];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(s, k)| (s.to_string(), k.to_string()))
            .collect();
        assert_eq!(got, want);
    }
}
