//! What [`crate::advise()`] is told and what it answers: the options, the figures of
//! what was written and of each candidate, and the progress it reports. Plain data, so
//! the renderers (`fmt`, `html`, `recommend`) depend on it and not on the advisor.

use crate::candidate::default_candidates;
use codec::Spec;
use std::time::Duration;
use wal::DecoderOptions;

/// What every "WAL bytes" figure of the advice counts, for the outputs to say so.
pub const WAL_BYTES_MEANING: &str = "WAL bytes = records, page headers and alignment padding \
     as PostgreSQL writes them, not the unused space after a segment switch";

/// How to advise.
#[derive(Debug, Clone)]
pub struct Options {
    /// Decoder options (BLCKSZ).
    pub decoder: DecoderOptions,
    /// Candidates in the order given; duplicates are dropped ([`crate::candidate::dedup`]).
    pub candidates: Vec<Spec>,
    /// Worker threads (at least 1).
    pub threads: usize,
    /// Measure every image with every candidate.
    pub exhaustive: bool,
    /// CPU seconds one non-stock candidate may spend before it is sampled.
    pub budget_secs: f64,
    /// Fewest images a sampled candidate measures (all when there are fewer).
    pub min_sample_images: u64,
    /// Forces this sampling rate (0, 1] on every non-stock candidate (for tests and
    /// studies); `exhaustive` still wins.
    pub sample_rate: Option<f64>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            decoder: DecoderOptions::default(),
            candidates: default_candidates(),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            exhaustive: false,
            budget_secs: 1.5,
            min_sample_images: 300,
            sample_rate: None,
        }
    }
}

/// What one candidate would have written.
#[derive(Debug, Clone)]
pub struct CandidateAdvice {
    /// The candidate.
    pub spec: Spec,
    /// True when stock PostgreSQL can write it ([`crate::is_stock`]).
    pub stock: bool,
    /// Predicted Σ bimg_len.
    pub predicted_fpi_bytes: u64,
    /// Predicted Σ xl_tot_len (pg_waldump's combined size).
    pub predicted_combined_bytes: u64,
    /// Predicted records, page headers and padding ([`WAL_BYTES_MEANING`], crate docs).
    pub predicted_wal_bytes: u64,
    /// Images it would keep compressed (scaled from the sample when sampled).
    pub images_compressed: u64,
    /// Images actually compressed to measure it.
    pub images_measured: u64,
    /// CPU nanoseconds of `XLogCompressBackupBlock` per MB (10^6 B) of page data.
    pub compress_ns_per_mb: f64,
    /// CPU nanoseconds of restoring its images per MB of page data (raw images cost 0).
    pub decompress_ns_per_mb: f64,
    /// True when only a sample of images was measured.
    pub sampled: bool,
    /// The sampling rate (1.0 when every image was measured).
    pub sample_rate: f64,
    /// 99.9 % interval of `predicted_fpi_bytes` when sampled.
    pub ci_low: Option<u64>,
    /// See `ci_low`.
    pub ci_high: Option<u64>,
    /// Bytes of compression context, when knowable ([`crate::candidate::context_bytes`]).
    pub context_bytes: Option<u64>,
}

/// The advice: what was written, and what each candidate would have written.
#[derive(Debug, Clone)]
pub struct Advice {
    /// Major version of the server that wrote the WAL.
    pub pg_version: u32,
    /// Segment files read.
    pub segments: usize,
    /// First record.
    pub start_lsn: wal::Lsn,
    /// End of the last record.
    pub end_lsn: wal::Lsn,
    /// How reading ended, in words.
    pub end: String,
    /// Records read.
    pub records: u64,
    /// Full-page images.
    pub images: u64,
    /// Page bytes of the images (BLCKSZ minus holes): what every candidate compresses.
    pub image_page_bytes: u64,
    /// Images per stored method, in [`wal::ImageMethod::ALL`] order.
    pub images_by_method: [u64; 4],
    /// Σ bimg_len as stored in the WAL read (pg_waldump's FPI size).
    pub actual_fpi_bytes: u64,
    /// Σ xl_tot_len (pg_waldump's combined size).
    pub actual_combined_bytes: u64,
    /// Records, page headers and padding from the first record to the end of the
    /// last ([`WAL_BYTES_MEANING`]): the span without `switch_tail_bytes`.
    pub actual_wal_bytes: u64,
    /// Unused segment space after `XLOG_SWITCH` records, in the span but in no WAL
    /// bytes figure.
    pub switch_tail_bytes: u64,
    /// Per candidate, in the order given.
    pub candidates: Vec<CandidateAdvice>,
    /// liblz4 linked.
    pub lz4_version: String,
    /// libzstd linked.
    pub zstd_version: String,
    /// Worker threads used.
    pub threads: usize,
    /// Wall time of the whole advice.
    pub elapsed: Duration,
}

/// Where [`crate::advise()`] is, for a progress bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Progress {
    /// Reading the WAL for its totals.
    Scanning,
    /// Compressing: `done` of `total` WAL bytes read.
    Compressing {
        /// Bytes of WAL passed.
        done: u64,
        /// Bytes of WAL in all.
        total: u64,
    },
}

/// Advice around given candidates, for the unit tests of the renderers.
#[cfg(test)]
pub(crate) mod tests_support {
    use super::*;

    /// Advice over `candidates` with plausible totals (5 000 images, 40 MB of page data).
    pub fn advice(candidates: Vec<CandidateAdvice>) -> Advice {
        Advice {
            pg_version: 18,
            segments: 35,
            start_lsn: wal::Lsn(0x700210),
            end_lsn: wal::Lsn(0x2A00000),
            end: "end of input".into(),
            records: 32_000,
            images: 5_000,
            image_page_bytes: 40_000_000,
            images_by_method: [5_000, 0, 0, 0],
            actual_fpi_bytes: 40_000_000,
            actual_combined_bytes: 50_000_000,
            actual_wal_bytes: 51_000_000,
            switch_tail_bytes: 0,
            candidates,
            lz4_version: "1.10.0".into(),
            zstd_version: "1.5.7".into(),
            threads: 1,
            elapsed: Duration::from_secs(1),
        }
    }
}
