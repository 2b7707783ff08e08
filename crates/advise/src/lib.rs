//! `wal advise`: what each compression method and level would have written for the
//! full-page images of a recording of real WAL, compared with what was written.
//!
//! For every image, [`advise`] restores the page without its hole (decompressing
//! with the stored method) and stores it again as PostgreSQL's
//! `XLogCompressBackupBlock` would for each candidate ([`codec::page::compress_backup_block`]:
//! hole elided, 2-byte compress header when compressed with a hole, kept only when
//! smaller, pglz's default strategy). Each record's `xl_tot_len` changes by the
//! difference of its images' stored bytes and compress headers:
//!
//! ```text
//! new xl_tot_len       = old xl_tot_len − Σ old (bimg_len + hdr) + Σ new (bimg_len + hdr)
//! predicted FPI bytes  = Σ new bimg_len                          (pg_waldump "FPI size")
//! predicted combined   = Σ new xl_tot_len                        (pg_waldump "Combined size", exact)
//! aligned              = Σ MAXALIGN(new xl_tot_len)              (records start 8-aligned)
//! predicted WAL bytes  = aligned
//!                      + page_header_bytes × aligned / actual aligned   (headers scale with WAL)
//! ```
//!
//! "WAL bytes" ([`WAL_BYTES_MEANING`]) are what PostgreSQL writes for the records:
//! the records, the page headers they cross and their alignment padding. The
//! unused space after an `XLOG_SWITCH` (zeros up to the segment's end, often most of
//! a segment file) is not counted: it depends on when segments were switched, not
//! on the method, and counting it hid most of every saving. `actual_wal_bytes` is
//! exactly `actual aligned + page_header_bytes` (the span from the first record to
//! the end of the last, minus [`Advice::switch_tail_bytes`]), so the candidate equal
//! to what was written predicts it exactly. Only the page-header share is an
//! approximation (a 24-byte header per 8 KB WAL page, 40 per segment).
//!
//! Slow, non-stock candidates may be sampled ([`estimate`]); stock ones never are
//! unless [`Options::sample_rate`] says so.
#![deny(missing_docs)]

pub mod candidate;
mod error;
pub mod estimate;
pub mod fmt;
pub mod html;
mod recommend;
mod work;

pub use candidate::{default_candidates, is_stock, wal_compression_setting};
pub use error::AdviseError;
pub use recommend::{recommend, Recommendation, MAX_COST_FACTOR, NEAR_BEST_SHARE};

use codec::{Method, Spec};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};
use wal::source::SegmentSet;
use wal::stats::WalStats;
use wal::{DecoderOptions, Stop};
use work::{Acc, Batch, Plan, Worker};

/// What every "WAL bytes" figure of the advice counts, for the outputs to say so.
pub const WAL_BYTES_MEANING: &str = "WAL bytes = records, page headers and alignment padding \
     as PostgreSQL writes them, not the unused segment space after a switch";

/// How to advise.
#[derive(Debug, Clone)]
pub struct Options {
    /// Decoder options (BLCKSZ).
    pub decoder: DecoderOptions,
    /// Candidates in the order given; duplicates are dropped ([`candidate::dedup`]).
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
    /// True when stock PostgreSQL can write it ([`is_stock`]).
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
    /// Bytes of compression context, when knowable ([`candidate::context_bytes`]).
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

/// Where [`advise`] is, for a progress bar.
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

/// Reads `set` twice (totals, then every image) and predicts each candidate.
///
/// Errors: unreadable input and missing segments ([`AdviseError::Source`]), no
/// record at all, WAL that ends in damage before the end of the files (judged as
/// `pgcompress wal verify` does), an image that cannot be restored.
pub fn advise(
    set: &SegmentSet,
    opts: &Options,
    progress: &mut dyn FnMut(Progress),
) -> Result<Advice, AdviseError> {
    let started = Instant::now();
    let dopts = opts.decoder;
    let threads = opts.threads.max(1);
    progress(Progress::Scanning);
    let read = set.read_parallel(
        dopts,
        threads,
        |_| WalStats::new(set.geometry, dopts.blcksz),
        |s, r| s.add(r),
    )?;
    let mut stats = WalStats::new(set.geometry, dopts.blcksz);
    for p in &read.parts {
        stats.merge(p);
    }
    let stop = read.summary.stop;
    if stats.start_lsn == wal::Lsn::INVALID {
        return Err(AdviseError::NoRecords(stop.to_string()));
    }
    if let Stop::Invalid(_) = stop {
        // Ordinary end of WAL, or damage? Ask the verifier, which tells them apart.
        if let Err(c) = wal::verify::verify(set, dopts, threads)? {
            return Err(AdviseError::Corrupt(c.to_string()));
        }
    }
    let specs = candidate::dedup(opts.candidates.clone());
    let images: u64 = stats.images.iter().map(|i| i.count).sum();
    let page_bytes: u64 = stats.images.iter().map(|i| i.raw_bytes).sum();
    let rates: Vec<f64> = specs
        .iter()
        .map(|s| sampling_rate(s, opts, images, page_bytes))
        .collect();
    let aux: Vec<Option<usize>> = (0..specs.len())
        .map(|c| auxiliary(&specs, &rates, c))
        .collect();
    let mut order: Vec<usize> = (0..specs.len()).collect();
    order.sort_by_key(|&c| rates[c] < 1.0);
    let plan = Plan {
        specs: specs.clone(),
        rates: rates.clone(),
        aux: aux.clone(),
        order,
        blcksz: dopts.blcksz,
        tli: set.tli,
        seg_size: set.geometry.seg_size,
    };
    let acc = run_workers(set, dopts, &plan, threads, &stats, progress)?;
    let total = stats.total();
    let actual_combined = total.record_bytes + total.fpi_bytes;
    let actual_aligned = actual_combined + stats.padding_bytes;
    // Records, headers and padding: the span without the unused space after switches.
    let actual_wal = actual_aligned + stats.page_header_bytes;
    debug_assert_eq!(
        actual_wal + stats.switch_tail_bytes,
        stats.end_lsn.0 - stats.start_lsn.0
    );
    // What records without images contribute, unchanged for every candidate.
    let other_tot = actual_combined - acc.old_tot;
    let other_aligned = actual_aligned - acc.old_aligned;
    let candidates = specs
        .iter()
        .zip(&rates)
        .zip(&acc.cands)
        .zip(&aux)
        .map(|(((spec, &rate), ca), aux)| {
            let exact = rate >= 1.0 || spec.method == Method::None;
            let (fpi, stored, ci) = if exact {
                (ca.fpi.y as u64, ca.stored.y as u64, None)
            } else {
                // Population totals of the auxiliary variable: exact, every image measured.
                let (tx, ts) = match aux {
                    Some(a) => (acc.cands[*a].fpi.y as u64, acc.cands[*a].stored.y as u64),
                    None => (acc.raw_bytes, acc.raw_bytes),
                };
                let f = ca.fpi.estimate(tx, rate);
                let s = ca.stored.estimate(ts, rate);
                (
                    f.value.round() as u64,
                    s.value.round() as u64,
                    Some((f.low.floor() as u64, f.high.ceil() as u64)),
                )
            };
            let (combined, aligned) = if exact {
                (other_tot + ca.new_tot, other_aligned + ca.new_aligned)
            } else {
                let combined = other_tot + (acc.old_tot - acc.old_stored) + stored;
                // Padding of the records not fully measured: the mean of those that were.
                let mean_pad = if ca.full_records > 0 {
                    ca.full_pad as f64 / ca.full_records as f64
                } else {
                    3.5
                };
                let pad = (mean_pad * acc.image_records as f64).round() as u64;
                (combined, other_aligned + (combined - other_tot) + pad)
            };
            let headers = if actual_aligned == 0 {
                0
            } else {
                (stats.page_header_bytes as f64 * aligned as f64 / actual_aligned as f64).round()
                    as u64
            };
            let measured = ca.fpi.n;
            let measured_mb = ca.measured_bytes as f64 / 1e6;
            let per_mb = |ns: u64| {
                if measured_mb > 0.0 {
                    ns as f64 / measured_mb
                } else {
                    0.0
                }
            };
            let images_compressed = if exact || measured == 0 {
                ca.compressed
            } else {
                (ca.compressed as f64 * acc.images as f64 / measured as f64).round() as u64
            };
            CandidateAdvice {
                spec: *spec,
                stock: is_stock(spec),
                predicted_fpi_bytes: fpi,
                predicted_combined_bytes: combined,
                predicted_wal_bytes: aligned + headers,
                images_compressed,
                images_measured: measured,
                compress_ns_per_mb: per_mb(ca.compress_ns),
                decompress_ns_per_mb: per_mb(ca.decompress_ns),
                sampled: !exact,
                sample_rate: if exact { 1.0 } else { rate },
                ci_low: ci.map(|c| c.0),
                ci_high: ci.map(|c| c.1),
                context_bytes: candidate::context_bytes(spec),
            }
        })
        .collect();
    Ok(Advice {
        pg_version: set.geometry.version.major(),
        segments: read.summary.files_read,
        start_lsn: stats.start_lsn,
        end_lsn: stats.end_lsn,
        end: stop.to_string(),
        records: total.records,
        images,
        image_page_bytes: page_bytes,
        images_by_method: stats.images.map(|i| i.count),
        actual_fpi_bytes: total.fpi_bytes,
        actual_combined_bytes: actual_combined,
        actual_wal_bytes: actual_wal,
        switch_tail_bytes: stats.switch_tail_bytes,
        candidates,
        lz4_version: candidate::lz4_version(),
        zstd_version: candidate::zstd_version(),
        threads,
        elapsed: started.elapsed(),
    })
}

/// The sampling rate of one candidate: 1 for `off`, stock candidates and
/// `--exhaustive`; otherwise 1 unless compressing every image is expected to take
/// more than [`Options::budget_secs`] of CPU (at [`candidate::assumed_mb_per_s`]),
/// in which case the rate fits the budget, but measures at least
/// [`Options::min_sample_images`] images. Rates above 1/2 become 1.
fn sampling_rate(spec: &Spec, opts: &Options, images: u64, page_bytes: u64) -> f64 {
    if spec.method == Method::None {
        return 1.0;
    }
    if opts.exhaustive || is_stock(spec) || images == 0 {
        return 1.0;
    }
    if let Some(r) = opts.sample_rate {
        return r.clamp(f64::MIN_POSITIVE, 1.0);
    }
    let cpu_secs = page_bytes as f64 / 1e6 / candidate::assumed_mb_per_s(spec);
    if cpu_secs <= opts.budget_secs {
        return 1.0;
    }
    let rate = (opts.budget_secs / cpu_secs).max(opts.min_sample_images as f64 / images as f64);
    if rate > 0.5 {
        1.0
    } else {
        rate
    }
}

/// The auxiliary variable of sampled candidate `c`: the exhaustive candidate of the
/// same method with the nearest level (zstd:19 → zstd:9), else the first exhaustive
/// compressing candidate, else none (page bytes). Stored sizes of two levels of one
/// method are nearly proportional image by image, which makes the ratio estimator
/// tight; page bytes are a poorer but always available stand-in.
fn auxiliary(specs: &[Spec], rates: &[f64], c: usize) -> Option<usize> {
    if rates[c] >= 1.0 {
        return None;
    }
    let exhaustive = |i: &usize| rates[*i] >= 1.0 && specs[*i].method != Method::None && *i != c;
    let level = |i: usize| specs[i].effective_level().unwrap_or(0);
    (0..specs.len())
        .filter(exhaustive)
        .filter(|&i| specs[i].method == specs[c].method)
        .min_by_key(|&i| ((level(i) - level(c)).abs(), level(i)))
        .or_else(|| (0..specs.len()).find(exhaustive))
}

/// Reads the WAL on this thread and spreads records with images over `threads` workers.
fn run_workers(
    set: &SegmentSet,
    dopts: DecoderOptions,
    plan: &Plan,
    threads: usize,
    stats: &WalStats,
    progress: &mut dyn FnMut(Progress),
) -> Result<Acc, AdviseError> {
    /// Bytes of stored images per batch: enough to amortise the channel.
    const BATCH_BYTES: usize = 256 << 10;
    // Build every context once up front, so a bad candidate fails before any work.
    let mut workers = (0..threads)
        .map(|_| Worker::new(plan))
        .collect::<Result<Vec<_>, _>>()?;
    let (tx, rx) = mpsc::sync_channel::<Batch>(threads * 2);
    // Only workers hold the receiver: if they all die, sending fails and reading stops.
    let rx = Arc::new(Mutex::new(rx));
    let (start, total) = (stats.start_lsn.0, stats.end_lsn.0 - stats.start_lsn.0);
    let results: Vec<Result<Acc, AdviseError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = workers
            .drain(..)
            .map(|mut w| {
                let rx = Arc::clone(&rx);
                scope.spawn(move || {
                    loop {
                        let next = rx.lock().unwrap_or_else(|e| e.into_inner()).recv();
                        match next {
                            Ok(b) => w.run(&b),
                            Err(_) => break,
                        }
                    }
                    w.acc
                })
            })
            .collect();
        drop(rx);
        let mut batch = Batch::default();
        let mut last_report = 0u64;
        let mut closed = false;
        let read = set.read(dopts, |r, _| {
            if closed {
                return;
            }
            let done = r.lsn.0.saturating_sub(start);
            if done - last_report >= 4 << 20 {
                last_report = done;
                progress(Progress::Compressing { done, total });
            }
            if r.body.blocks.iter().any(|b| b.image.is_some()) {
                batch.push(r);
                if batch.data.len() >= BATCH_BYTES {
                    closed = tx.send(std::mem::take(&mut batch)).is_err();
                }
            }
        });
        if !batch.records.is_empty() && !closed {
            let _ = tx.send(batch);
        }
        drop(tx);
        let mut out: Vec<Result<Acc, AdviseError>> = handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| AdviseError::Internal("a worker thread panicked".into()))
            })
            .collect();
        if let Err(e) = read {
            out.push(Err(e.into()));
        }
        out
    });
    progress(Progress::Compressing { done: total, total });
    let mut sum = Acc {
        cands: vec![Default::default(); plan.specs.len()],
        ..Acc::default()
    };
    let mut first_error: Option<(u64, AdviseError)> = None;
    for r in results {
        let a = r?;
        if let Some((lsn, e)) = a.error {
            if first_error.as_ref().is_none_or(|(l, _)| lsn < *l) {
                first_error = Some((lsn, e));
            }
            continue;
        }
        merge(&mut sum, &a);
    }
    if let Some((_, e)) = first_error {
        return Err(e);
    }
    Ok(sum)
}

fn merge(sum: &mut Acc, a: &Acc) {
    sum.image_records += a.image_records;
    sum.old_tot += a.old_tot;
    sum.old_aligned += a.old_aligned;
    sum.images += a.images;
    sum.raw_bytes += a.raw_bytes;
    sum.old_fpi += a.old_fpi;
    sum.old_stored += a.old_stored;
    for (s, c) in sum.cands.iter_mut().zip(&a.cands) {
        s.new_tot += c.new_tot;
        s.new_aligned += c.new_aligned;
        s.full_records += c.full_records;
        s.full_pad += c.full_pad;
        s.fpi.merge(&c.fpi);
        s.stored.merge(&c.stored);
        s.compressed += c.compressed;
        s.measured_bytes += c.measured_bytes;
        s.compress_ns += c.compress_ns;
        s.decompress_ns += c.decompress_ns;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampling_plan() {
        let o = Options::default();
        let zstd22: Spec = "zstd:22".parse().expect("valid");
        let zstd: Spec = "zstd".parse().expect("valid");
        // 200 MB of page data in 30 000 images: zstd:22 is sampled, stock zstd never.
        let r = sampling_rate(&zstd22, &o, 30_000, 200_000_000);
        assert!((300.0 / 30_000.0..0.5).contains(&r), "{r}");
        assert_eq!(sampling_rate(&zstd, &o, 30_000, 200_000_000), 1.0);
        // Little WAL: everything measured.
        assert_eq!(sampling_rate(&zstd22, &o, 300, 2_000_000), 1.0);
        let ex = Options {
            exhaustive: true,
            ..Options::default()
        };
        assert_eq!(sampling_rate(&zstd22, &ex, 30_000, 200_000_000), 1.0);
    }
}
