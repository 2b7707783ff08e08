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

mod advice;
pub mod candidate;
mod error;
pub mod estimate;
pub mod fmt;
pub mod html;
pub mod rank;
mod recommend;
mod work;

pub use advice::{Advice, CandidateAdvice, Options, Progress, WAL_BYTES_MEANING};
pub use candidate::{default_candidates, is_stock, wal_compression_setting};
pub use error::AdviseError;
pub use recommend::{recommend, Recommendation, MAX_COST_FACTOR, NEAR_BEST_SHARE};

use codec::{Method, Spec};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Instant;
use wal::source::SegmentSet;
use wal::stats::WalStats;
use wal::{DecoderOptions, Stop};
use work::{Acc, Batch, Plan, Worker};

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
                // Certain bounds: what the sample measured, plus at most the page bytes
                // of every image it did not (a stored image is never larger).
                let unmeasured = acc.raw_bytes.saturating_sub(ca.measured_bytes) as f64;
                let measured = ca.fpi.y as f64;
                let f = ca
                    .fpi
                    .estimate(tx, rate)
                    .within(measured, measured + unmeasured);
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
