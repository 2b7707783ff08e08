//! The per-image work: restore each stored page, store it as each candidate would,
//! and add up what changes in each record. Records are independent, so batches of
//! them go to any worker and the sums do not depend on which.

use crate::error::AdviseError;
use crate::estimate::{sample_point, RatioSums};
use codec::page::compress_backup_block;
use codec::{BlockCompressor, BlockDecompressor, Method, Spec};
use std::ops::Range;
use std::time::Instant;
use wal::consts::maxalign;
use wal::record::check_image_extent;
use wal::{ImageMethod, Lsn, SegmentName};

/// What every worker needs to know, shared read-only.
#[derive(Debug)]
pub(crate) struct Plan {
    pub specs: Vec<Spec>,
    /// Sampling rate per candidate; 1.0 = every image.
    pub rates: Vec<f64>,
    /// Auxiliary variable of each sampled candidate: an exhaustive candidate whose
    /// stored size stands in for x ([`crate::estimate`]); `None` = page bytes.
    pub aux: Vec<Option<usize>>,
    /// Candidates in the order an image is stored: exhaustive ones first, so a
    /// sampled candidate finds its auxiliary's figure.
    pub order: Vec<usize>,
    pub blcksz: usize,
    pub tli: u32,
    pub seg_size: u64,
}

/// One image of a record in a batch.
#[derive(Debug, Clone)]
pub(crate) struct ImgJob {
    pub block: u8,
    pub method: ImageMethod,
    pub hole_offset: u16,
    pub hole_length: u16,
    pub length: u16,
    pub info: u8,
    /// Where the stored bytes are in the batch's data.
    pub data: Range<usize>,
}

/// One record that carries images.
#[derive(Debug, Clone)]
pub(crate) struct RecJob {
    pub lsn: u64,
    pub tot_len: u32,
    pub images: Range<usize>,
}

/// Records with images, copied out of the decoder.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    pub data: Vec<u8>,
    pub images: Vec<ImgJob>,
    pub records: Vec<RecJob>,
}

impl Batch {
    /// Copies the images of `r`; records without images are not batched.
    pub fn push(&mut self, r: &wal::Record<'_>) {
        let first = self.images.len();
        for b in &r.body.blocks {
            let Some(img) = b.image else { continue };
            let bytes = r.image_bytes(b);
            let at = self.data.len();
            self.data.extend_from_slice(bytes);
            self.images.push(ImgJob {
                block: b.id,
                method: img.method(),
                hole_offset: img.hole_offset,
                hole_length: img.hole_length,
                length: img.length,
                info: img.info,
                data: at..self.data.len(),
            });
        }
        self.records.push(RecJob {
            lsn: r.lsn.0,
            tot_len: r.header.tot_len,
            images: first..self.images.len(),
        });
    }
}

/// Sums of one candidate over the records a worker saw.
#[derive(Debug, Clone, Default)]
pub(crate) struct CandAcc {
    /// Σ new `xl_tot_len` of records with images (meaningful when every image was measured).
    pub new_tot: u64,
    /// Σ MAXALIGN(new `xl_tot_len`) of the same records.
    pub new_aligned: u64,
    /// Records all of whose images were measured, and their new alignment padding.
    pub full_records: u64,
    pub full_pad: u64,
    /// y = bimg_len.
    pub fpi: RatioSums,
    /// y = bimg_len + the 2-byte compress header when present.
    pub stored: RatioSums,
    /// Measured images kept compressed.
    pub compressed: u64,
    /// Page bytes of the images measured (the denominator of the CPU figures).
    pub measured_bytes: u64,
    pub compress_ns: u64,
    pub decompress_ns: u64,
}

/// What one worker accumulates.
#[derive(Debug, Default)]
pub(crate) struct Acc {
    pub cands: Vec<CandAcc>,
    /// Records with images, and their old Σ xl_tot_len and Σ MAXALIGN(xl_tot_len).
    pub image_records: u64,
    pub old_tot: u64,
    pub old_aligned: u64,
    /// Images and their page bytes (BLCKSZ minus hole).
    pub images: u64,
    pub raw_bytes: u64,
    /// Σ old bimg_len, and Σ old (bimg_len + compress header).
    pub old_fpi: u64,
    pub old_stored: u64,
    /// The first failure seen, by LSN.
    pub error: Option<(u64, AdviseError)>,
}

/// A worker's contexts: one compressor per candidate, one decompressor, buffers.
pub(crate) struct Worker<'p> {
    plan: &'p Plan,
    compressors: Vec<BlockCompressor>,
    dec: BlockDecompressor,
    page: Vec<u8>,
    check: Vec<u8>,
    new_tot: Vec<u64>,
    full: Vec<bool>,
    /// This image's (bimg_len, compress header) per candidate.
    ys: Vec<(u64, u64)>,
    pub acc: Acc,
}

impl<'p> Worker<'p> {
    pub fn new(plan: &'p Plan) -> Result<Worker<'p>, AdviseError> {
        let compressors = plan
            .specs
            .iter()
            .map(|s| {
                BlockCompressor::new(s).map_err(|e| AdviseError::Candidate {
                    spec: s.to_string(),
                    reason: e.to_string(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let dec = BlockDecompressor::new().map_err(|e| AdviseError::Internal(e.to_string()))?;
        let n = plan.specs.len();
        Ok(Worker {
            plan,
            compressors,
            dec,
            page: Vec::new(),
            check: Vec::new(),
            new_tot: vec![0; n],
            full: vec![true; n],
            ys: vec![(0, 0); n],
            acc: Acc {
                cands: vec![CandAcc::default(); n],
                ..Acc::default()
            },
        })
    }

    /// Processes a batch; after the first error, later batches are skipped.
    pub fn run(&mut self, batch: &Batch) {
        if self.acc.error.is_some() {
            return;
        }
        for rec in &batch.records {
            if let Err(e) = self.record(batch, rec) {
                self.acc.error = Some((rec.lsn, e));
                return;
            }
        }
    }

    fn record(&mut self, batch: &Batch, rec: &RecJob) -> Result<(), AdviseError> {
        let images = &batch.images[rec.images.clone()];
        let old: u64 = images
            .iter()
            .map(|i| u64::from(i.length) + old_extra(i))
            .sum();
        let base = u64::from(rec.tot_len).saturating_sub(old);
        self.new_tot.fill(base);
        self.full.fill(true);
        let a = &mut self.acc;
        a.image_records += 1;
        a.old_tot += u64::from(rec.tot_len);
        a.old_aligned += maxalign(u64::from(rec.tot_len));
        for img in images {
            self.restore(batch, rec, img)?;
            let x = self.page.len() as u64;
            let u = sample_point(rec.lsn, img.block);
            let a = &mut self.acc;
            a.images += 1;
            a.raw_bytes += x;
            a.old_fpi += u64::from(img.length);
            a.old_stored += u64::from(img.length) + old_extra(img);
            for &c in &self.plan.order {
                let spec = self.plan.specs[c];
                let (y, extra) = if spec.method == Method::None {
                    (x, 0)
                } else if u < self.plan.rates[c] {
                    self.store(c, rec, img.hole_length)?
                } else {
                    self.full[c] = false;
                    continue;
                };
                self.ys[c] = (y, extra);
                let (xa, xs) = match self.plan.aux[c] {
                    Some(a) => (self.ys[a].0, self.ys[a].0 + self.ys[a].1),
                    None => (x, x),
                };
                let ca = &mut self.acc.cands[c];
                ca.fpi.add(xa, y);
                ca.stored.add(xs, y + extra);
                ca.measured_bytes += x;
                self.new_tot[c] += y + extra;
            }
        }
        for (c, ca) in self.acc.cands.iter_mut().enumerate() {
            let t = self.new_tot[c];
            let al = maxalign(t);
            ca.new_tot += t;
            ca.new_aligned += al;
            if self.full[c] {
                ca.full_records += 1;
                ca.full_pad += al - t;
            }
        }
        Ok(())
    }

    /// Restores the page without its hole into `self.page`, exactly `BLCKSZ − hole` bytes.
    fn restore(&mut self, batch: &Batch, rec: &RecJob, img: &ImgJob) -> Result<(), AdviseError> {
        let blcksz = self.plan.blcksz;
        let src = &batch.data[img.data.clone()];
        let header = wal::ImageHeader {
            length: img.length,
            hole_offset: img.hole_offset,
            hole_length: img.hole_length,
            info: img.info,
        };
        let raw_len = header.raw_len(blcksz);
        let plan = self.plan;
        let fail = |reason: String| image_error(plan, rec, img, reason);
        check_image_extent(&header, blcksz).map_err(|d| fail(d.to_string()))?;
        match img.method {
            ImageMethod::Pglz => {
                // pglz_decompress with check_complete, as RestoreBlockImage calls it.
                self.page =
                    codec::pglz::decompress(src, raw_len, true).map_err(|e| fail(e.to_string()))?;
            }
            ImageMethod::Lz4 | ImageMethod::Zstd => {
                let m = if img.method == ImageMethod::Lz4 {
                    Method::Lz4
                } else {
                    Method::Zstd
                };
                let mut out = std::mem::take(&mut self.page);
                let r = self.dec.decompress(m, src, raw_len, &mut out);
                self.page = out;
                r.map_err(|e| fail(e.to_string()))?;
            }
            _ => {
                self.page.clear();
                self.page.extend_from_slice(src);
            }
        }
        if self.page.len() != raw_len {
            return Err(fail(format!(
                "restored {} bytes, expected {raw_len}",
                self.page.len()
            )));
        }
        Ok(())
    }

    /// Stores the page as candidate `c` would, timing it and the restore of what it
    /// stored; returns (bimg_len, compress-header bytes).
    fn store(&mut self, c: usize, rec: &RecJob, hole: u16) -> Result<(u64, u64), AdviseError> {
        let spec = self.plan.specs[c];
        let t0 = Instant::now();
        let img = compress_backup_block(&self.page, hole, &spec, &mut self.compressors[c]);
        let t1 = Instant::now();
        let ca = &mut self.acc.cands[c];
        ca.compress_ns += (t1 - t0).as_nanos() as u64;
        if let Some(m) = img.compressed {
            ca.compressed += 1;
            let r = self
                .dec
                .decompress(m, &img.bytes, self.page.len(), &mut self.check);
            ca.decompress_ns += t1.elapsed().as_nanos() as u64;
            let bad = match r {
                Err(e) => Some(e.to_string()),
                Ok(()) if self.check != self.page => Some("bytes differ".into()),
                Ok(()) => None,
            };
            if let Some(reason) = bad {
                return Err(AdviseError::RoundTrip {
                    spec: spec.to_string(),
                    lsn: Lsn(rec.lsn).to_string(),
                    reason,
                });
            }
        }
        Ok((img.stored_len as u64, img.header_extra as u64))
    }
}

fn image_error(plan: &Plan, rec: &RecJob, img: &ImgJob, reason: String) -> AdviseError {
    let seg = plan.seg_size;
    AdviseError::Image {
        segment: SegmentName::containing(plan.tli, Lsn(rec.lsn), seg).file_name(seg),
        lsn: Lsn(rec.lsn).to_string(),
        block: img.block,
        method: img.method.name(),
        reason,
    }
}

/// The 2-byte compress header PostgreSQL wrote for this image, if any.
fn old_extra(i: &ImgJob) -> u64 {
    let compressed = i.method != ImageMethod::None;
    if compressed && i.hole_length != 0 {
        codec::page::SIZE_OF_COMPRESS_HEADER as u64
    } else {
        0
    }
}
