//! WAL statistics: everything `pg_waldump --stats` reports (xlogstats.c,
//! pg_waldump.c `XLogDumpDisplayStats`), and what it does not.

use crate::decoder::{Record, Stop};
use crate::lsn::Lsn;
use crate::page::Geometry;
use crate::record::ImageMethod;
use crate::rmgr;
use std::fmt::Write as _;

/// Counters of one resource manager.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RmgrStats {
    /// Records.
    pub records: u64,
    /// pg_waldump's "Record size": `xl_tot_len` minus stored image bytes.
    pub record_bytes: u64,
    /// pg_waldump's "FPI size": stored image bytes.
    pub fpi_bytes: u64,
    /// Full-page images.
    pub fpi_count: u64,
}

/// Counters of the images stored with one method.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImageStats {
    /// Images.
    pub count: u64,
    /// Bytes as stored in the WAL (bimg_len).
    pub stored_bytes: u64,
    /// Bytes before compression: the page without its hole.
    pub raw_bytes: u64,
    /// Hole bytes elided (zeros again on replay).
    pub hole_bytes: u64,
    /// Images that exist only for `wal_consistency_checking` (no `BKPIMAGE_APPLY`).
    pub verify_only: u64,
}

/// Statistics of a run of WAL.
#[derive(Debug, Clone)]
pub struct WalStats {
    /// Geometry of the stream.
    pub geometry: Geometry,
    /// Data page size assumed for images.
    pub blcksz: usize,
    /// First record read.
    pub start_lsn: Lsn,
    /// End of the last record read (pg_waldump's end LSN).
    pub end_lsn: Lsn,
    /// Counters per resource manager id (0..=255).
    pub rmgrs: Vec<RmgrStats>,
    /// Counters per image storage method, indexed by [`ImageMethod::index`].
    pub images: [ImageStats; 4],
    /// Page-header bytes crossed between the first and last record.
    pub page_header_bytes: u64,
    /// MAXALIGN padding bytes after records.
    pub padding_bytes: u64,
    /// Bytes left unused after `XLOG_SWITCH` records.
    pub switch_tail_bytes: u64,
    /// `XLOG_SWITCH` records.
    pub switches: u64,
    /// Records whose bytes cross at least one page boundary.
    pub records_crossing_pages: u64,
    /// Records whose bytes cross at least one segment boundary.
    pub records_crossing_segments: u64,
    /// Segment files read.
    pub segments: usize,
    /// Bytes of the files given.
    pub file_bytes: u64,
    /// Why reading stopped.
    pub stop: Option<Stop>,
}

impl WalStats {
    /// Empty statistics for a stream of this geometry.
    pub fn new(geometry: Geometry, blcksz: usize) -> WalStats {
        WalStats {
            geometry,
            blcksz,
            start_lsn: Lsn::INVALID,
            end_lsn: Lsn::INVALID,
            rmgrs: vec![RmgrStats::default(); 256],
            images: [ImageStats::default(); 4],
            page_header_bytes: 0,
            padding_bytes: 0,
            switch_tail_bytes: 0,
            switches: 0,
            records_crossing_pages: 0,
            records_crossing_segments: 0,
            segments: 0,
            file_bytes: 0,
            stop: None,
        }
    }

    /// Counts one record.
    pub fn add(&mut self, r: &Record<'_>) {
        if self.start_lsn == Lsn::INVALID {
            self.start_lsn = r.lsn;
        }
        // A record's page-header bytes lie after its start: headers of the pages it
        // crosses, or the header it begins after. The first record read never begins
        // at a page start (reading starts past the header), so every byte counted here
        // is between the first and the last record.
        self.page_header_bytes += u64::from(r.page_header_bytes);
        self.end_lsn = r.next_lsn;
        self.padding_bytes += u64::from(r.padding_bytes);
        self.switch_tail_bytes += r.switch_tail_bytes;
        if r.header.is_switch() {
            self.switches += 1;
        }
        // Sizes are powers of two: compare with XOR and masks instead of dividing.
        let (first, last) = (r.lsn.0, r.last_byte_lsn().0);
        if (first ^ last) >= u64::from(self.geometry.page_size) {
            self.records_crossing_pages += 1;
        }
        if (first ^ last) >= self.geometry.seg_size {
            self.records_crossing_segments += 1;
        }
        let s = &mut self.rmgrs[usize::from(r.header.rmid)];
        s.records += 1;
        s.record_bytes += u64::from(r.rec_len());
        s.fpi_bytes += u64::from(r.body.fpi_len);
        for b in &r.body.blocks {
            if let Some(img) = b.image {
                s.fpi_count += 1;
                let i = &mut self.images[img.method().index()];
                i.count += 1;
                i.stored_bytes += u64::from(img.length);
                i.raw_bytes += img.raw_len(self.blcksz) as u64;
                i.hole_bytes += u64::from(img.hole_length);
                if !img.is_apply() {
                    i.verify_only += 1;
                }
            }
        }
    }

    /// Adds the statistics of the WAL that directly follows `self`'s (a later
    /// partition of a parallel read).
    pub fn merge(&mut self, next: &WalStats) {
        if next.start_lsn == Lsn::INVALID {
            return;
        }
        if self.start_lsn == Lsn::INVALID {
            let keep_files = (self.segments, self.file_bytes);
            *self = next.clone();
            (self.segments, self.file_bytes) = keep_files;
            return;
        }
        // Between our last record's end and its first record there is only the page
        // header a sequential read would have counted with that first record.
        self.page_header_bytes += next.page_header_bytes + (next.start_lsn.0 - self.end_lsn.0);
        self.end_lsn = next.end_lsn;
        for (a, b) in self.rmgrs.iter_mut().zip(&next.rmgrs) {
            a.records += b.records;
            a.record_bytes += b.record_bytes;
            a.fpi_bytes += b.fpi_bytes;
            a.fpi_count += b.fpi_count;
        }
        for (a, b) in self.images.iter_mut().zip(&next.images) {
            a.count += b.count;
            a.stored_bytes += b.stored_bytes;
            a.raw_bytes += b.raw_bytes;
            a.hole_bytes += b.hole_bytes;
            a.verify_only += b.verify_only;
        }
        self.padding_bytes += next.padding_bytes;
        self.switch_tail_bytes += next.switch_tail_bytes;
        self.switches += next.switches;
        self.records_crossing_pages += next.records_crossing_pages;
        self.records_crossing_segments += next.records_crossing_segments;
    }

    /// Total over all resource managers.
    pub fn total(&self) -> RmgrStats {
        self.rmgrs
            .iter()
            .fold(RmgrStats::default(), |a, s| RmgrStats {
                records: a.records + s.records,
                record_bytes: a.record_bytes + s.record_bytes,
                fpi_bytes: a.fpi_bytes + s.fpi_bytes,
                fpi_count: a.fpi_count + s.fpi_count,
            })
    }

    /// Rows pg_waldump prints: every built-in resource manager, and custom ones with records.
    pub fn rows(&self) -> Vec<(String, RmgrStats)> {
        self.rmgrs
            .iter()
            .enumerate()
            .filter(|(id, s)| {
                let id = *id as u8;
                (!rmgr::is_custom(id) && usize::from(id) < rmgr::BUILTIN_NAMES.len())
                    || s.records > 0
            })
            .map(|(id, s)| (rmgr::name(id as u8), *s))
            .collect()
    }

    /// The table exactly as `pg_waldump --stats` prints it.
    pub fn pg_waldump_table(&self) -> String {
        let t = self.total();
        let total_len = t.record_bytes + t.fpi_bytes;
        let pct = |n: u64, d: u64| {
            if d == 0 {
                0.0
            } else {
                100.0 * n as f64 / d as f64
            }
        };
        let mut out = String::new();
        let _ = writeln!(
            out,
            "WAL statistics between {} and {}:",
            self.start_lsn, self.end_lsn
        );
        let _ = writeln!(
            out,
            "{:<27} {:>20} {:>8} {:>20} {:>8} {:>20} {:>8} {:>20} {:>8}",
            "Type", "N", "(%)", "Record size", "(%)", "FPI size", "(%)", "Combined size", "(%)"
        );
        let _ = writeln!(
            out,
            "{:<27} {:>20} {:>8} {:>20} {:>8} {:>20} {:>8} {:>20} {:>8}",
            "----", "-", "---", "-----------", "---", "--------", "---", "-------------", "---"
        );
        for (name, s) in self.rows() {
            let comb = s.record_bytes + s.fpi_bytes;
            let _ = writeln!(
                out,
                "{:<27} {:>20} ({:>6.2}) {:>20} ({:>6.2}) {:>20} ({:>6.2}) {:>20} ({:>6.2})",
                name,
                s.records,
                pct(s.records, t.records),
                s.record_bytes,
                pct(s.record_bytes, t.record_bytes),
                s.fpi_bytes,
                pct(s.fpi_bytes, t.fpi_bytes),
                comb,
                pct(comb, total_len)
            );
        }
        let _ = writeln!(
            out,
            "{:<27} {:>20} {:>8} {:>20} {:>8} {:>20} {:>8} {:>20}",
            "", "--------", "", "--------", "", "--------", "", "--------"
        );
        let _ = writeln!(
            out,
            "{:<27} {:>20} {:<9}{:>20} {:<9}{:>20} {:<9}{:>20} {:<6}",
            "Total",
            t.records,
            "",
            t.record_bytes,
            format!("[{:.2}%]", pct(t.record_bytes, total_len)),
            t.fpi_bytes,
            format!("[{:.2}%]", pct(t.fpi_bytes, total_len)),
            total_len,
            "[100%]"
        );
        out
    }

    /// Bytes of images that exist in each method, in method order.
    pub fn image_rows(&self) -> Vec<(ImageMethod, ImageStats)> {
        ImageMethod::ALL
            .iter()
            .map(|m| (*m, self.images[m.index()]))
            .collect()
    }
}
