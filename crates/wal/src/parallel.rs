//! Reading a run of segments on several cores with the result of a sequential read.
//!
//! Partition k (a contiguous range of files) starts as `XLogFindNextRecord` does at
//! its first segment, and reads on past its range until the first record that
//! starts beyond it, with every sequential check. Partition k+1 is accepted only if
//! its first record is exactly that record; partition k having read it with the
//! prev-link and CRC checks of a sequential reader, the two joined give what one
//! reader would have seen. If partition k stops (end of WAL or damage), later
//! partitions are dropped, as a sequential reader would never reach them. Any
//! disagreement falls back to one sequential read.

use crate::decoder::{DecoderOptions, Next, Record, Stop, WalDecoder};
use crate::error::{Defect, Internal, WalError};
use crate::lsn::Lsn;
use crate::source::{ReadSummary, SegmentSet, SourceError};
use std::fs::File;
use std::io::Read;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// What [`SegmentSet::read_parallel`] returns: one accumulator per accepted
/// partition, in stream order, and how reading ended.
#[derive(Debug)]
pub struct ParallelRead<A> {
    /// Accumulators of the partitions whose records count, in order.
    pub parts: Vec<A>,
    /// How the whole read ended.
    pub summary: ReadSummary,
}

pub(crate) struct Part<A> {
    pub(crate) acc: A,
    /// First record counted, if any.
    pub(crate) first: Option<Lsn>,
    /// The first record at or beyond the range's end: where the next partition must start.
    pub(crate) boundary_record: Option<Lsn>,
    /// Set when the decoder stopped before reaching the range's end.
    pub(crate) stop: Option<Stop>,
    pub(crate) records: u64,
    pub(crate) files_read: usize,
}

impl SegmentSet {
    /// Reads every record like [`SegmentSet::read`], on up to `threads` threads.
    /// `init(i)` makes the accumulator of partition `i`; `on_record` may run on any
    /// thread, for the records of one partition in order.
    pub fn read_parallel<A, I, F>(
        &self,
        opts: DecoderOptions,
        threads: usize,
        init: I,
        on_record: F,
    ) -> Result<ParallelRead<A>, SourceError>
    where
        A: Send,
        I: Fn(usize) -> A + Sync,
        F: Fn(&mut A, &Record<'_>) + Sync,
    {
        self.read_parallel_with_progress(opts, threads, init, on_record, &|_| {})
    }

    /// [`SegmentSet::read_parallel`], calling `on_file` (from any thread) with the
    /// index of each file as it is opened, for progress reports.
    pub fn read_parallel_with_progress<A, I, F>(
        &self,
        opts: DecoderOptions,
        threads: usize,
        init: I,
        on_record: F,
        on_file: &(dyn Fn(usize) + Sync),
    ) -> Result<ParallelRead<A>, SourceError>
    where
        A: Send,
        I: Fn(usize) -> A + Sync,
        F: Fn(&mut A, &Record<'_>) + Sync,
    {
        let n = self.files.len();
        let parts_wanted = threads.clamp(1, n.max(1));
        if parts_wanted <= 1 || n < 2 * parts_wanted {
            return self.read_sequential_into(opts, &init, &on_record, on_file);
        }
        // More partitions than threads, taken in turn: WAL density varies along a run
        // of segments, and equal file counts per thread would leave one of them with
        // most of the records.
        let nparts = (parts_wanted * 4).min(n / 2).max(parts_wanted);
        let bounds: Vec<(usize, usize)> = (0..nparts)
            .map(|i| (i * n / nparts, (i + 1) * n / nparts))
            .collect();
        let next = AtomicUsize::new(0);
        let slots: Vec<Mutex<Option<PartResult<A>>>> =
            (0..nparts).map(|_| Mutex::new(None)).collect();
        std::thread::scope(|scope| {
            for _ in 0..parts_wanted {
                scope.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(a, b)) = bounds.get(i) else { break };
                    let r = self.read_range(opts, a, b, init(i), &on_record, &mut |f| on_file(f));
                    if let Ok(mut slot) = slots[i].lock() {
                        *slot = Some(r);
                    }
                });
            }
        });
        let results: Vec<PartResult<A>> = slots
            .into_iter()
            .map(|m| {
                m.into_inner().ok().flatten().unwrap_or_else(|| {
                    Err(SourceError::Wal(internal(Internal::ReaderStoppedEarly)))
                })
            })
            .collect();
        let mut parts = Vec::new();
        let mut records = 0;
        let mut files_read = 0;
        let mut expected_first: Option<Lsn> = None;
        let mut final_stop = None;
        for (i, r) in results.into_iter().enumerate() {
            let p = r?;
            if i > 0 && p.first != expected_first {
                // The partitions disagree about where records start: trust one reader.
                return self.read_sequential_into(opts, &init, &on_record, on_file);
            }
            records += p.records;
            files_read = files_read.max(bounds[i].0 + p.files_read);
            expected_first = p.boundary_record;
            let stop = p.stop.clone();
            parts.push(p.acc);
            if let Some(s) = stop {
                final_stop = Some(s);
                break;
            }
        }
        let stop = match final_stop {
            Some(s) => s,
            // The last partition always runs to a stop: it has no range end to reach.
            None => return self.read_sequential_into(opts, &init, &on_record, on_file),
        };
        Ok(ParallelRead {
            parts,
            summary: ReadSummary {
                stop,
                records,
                files_read,
            },
        })
    }

    fn read_sequential_into<A, I, F>(
        &self,
        opts: DecoderOptions,
        init: &I,
        on_record: &F,
        on_file: &(dyn Fn(usize) + Sync),
    ) -> Result<ParallelRead<A>, SourceError>
    where
        I: Fn(usize) -> A,
        F: Fn(&mut A, &Record<'_>),
    {
        let part = self.read_range(opts, 0, self.files.len(), init(0), on_record, &mut |f| {
            on_file(f)
        })?;
        let stop = part.stop.unwrap_or(Stop::EndOfInput { lsn: Lsn::INVALID });
        let summary = ReadSummary {
            stop,
            records: part.records,
            files_read: part.files_read,
        };
        Ok(ParallelRead {
            parts: vec![part.acc],
            summary,
        })
    }

    /// Reads the records that start in files `[a, b)` (all of them when `b` is the
    /// last file), feeding later files as a record crossing the end needs them.
    pub(crate) fn read_range<A, F, P>(
        &self,
        opts: DecoderOptions,
        a: usize,
        b: usize,
        acc: A,
        on_record: &F,
        on_file: &mut P,
    ) -> Result<Part<A>, SourceError>
    where
        F: Fn(&mut A, &Record<'_>),
        P: FnMut(usize),
    {
        let seg = self.geometry.seg_size;
        let start = Lsn(self.start.0 + a as u64 * seg);
        let end = if b == self.files.len() {
            u64::MAX
        } else {
            self.start.0 + b as u64 * seg
        };
        let mut dec = WalDecoder::new(
            start,
            DecoderOptions {
                tli: self.tli,
                ..opts
            },
        );
        let mut part = Part {
            acc,
            first: None,
            boundary_record: None,
            stop: None,
            records: 0,
            files_read: 0,
        };
        let mut next = a;
        let mut size_defect: Option<WalError> = None;
        // The file being read and how much of it was fed: pieces of PIECE bytes keep
        // few buffers alive (and faulted in) whatever the segment size.
        let mut reader: Option<(File, u64)> = None;
        loop {
            match dec.next_record() {
                Next::Record(r) => {
                    if r.lsn.0 >= end {
                        part.boundary_record = Some(r.lsn);
                        break;
                    }
                    if part.first.is_none() {
                        part.first = Some(r.lsn);
                    }
                    part.records += 1;
                    on_record(&mut part.acc, &r);
                }
                Next::Stopped(s) => {
                    part.stop = Some(match (s, size_defect.take()) {
                        (Stop::EndOfInput { .. }, Some(e)) => Stop::Invalid(e),
                        (s, _) => s,
                    });
                    break;
                }
                Next::NeedInput => {
                    if size_defect.is_some() {
                        dec.finish_input();
                        continue;
                    }
                    if reader.is_none() {
                        if next == self.files.len() {
                            dec.finish_input();
                            continue;
                        }
                        let path = &self.files[next];
                        on_file(next);
                        let f = File::open(path).map_err(|source| SourceError::Io {
                            path: path.clone(),
                            source,
                        })?;
                        reader = Some((f, 0u64));
                        next += 1;
                        part.files_read = next - a;
                    }
                    let path = &self.files[next - 1];
                    dec.release_consumed();
                    let mut buf = dec.recycle().unwrap_or_else(|| Vec::with_capacity(PIECE));
                    buf.clear();
                    let Some((f, done)) = reader.as_mut() else {
                        continue;
                    };
                    let want = PIECE.min((seg - *done) as usize);
                    let got = f
                        .take(want as u64)
                        .read_to_end(&mut buf)
                        .map_err(|source| SourceError::Io {
                            path: path.clone(),
                            source,
                        })?;
                    *done += got as u64;
                    let file_lsn = self.start.0 + (next - 1) as u64 * seg;
                    if got < want {
                        size_defect = Some(size_error(path, Lsn(file_lsn + *done), *done, seg));
                    } else if *done == seg {
                        // A file longer than a segment is damaged too.
                        let mut probe = [0u8; 1];
                        let more = f.read(&mut probe).map_err(|source| SourceError::Io {
                            path: path.clone(),
                            source,
                        })?;
                        if more > 0 {
                            let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(seg + 1);
                            size_defect = Some(size_error(path, Lsn(file_lsn + seg), len, seg));
                        }
                        reader = None;
                    }
                    dec.feed_owned(buf);
                }
            }
        }
        Ok(part)
    }
}

/// A file whose size is not the segment size, located at `lsn`.
fn size_error(path: &std::path::Path, lsn: Lsn, found: u64, seg: u64) -> WalError {
    WalError {
        lsn,
        segment: path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("?")
            .to_string(),
        defect: Defect::FileSize {
            found,
            expected: seg,
        },
    }
}

/// What reading one partition gives.
type PartResult<A> = Result<Part<A>, SourceError>;

/// Bytes read and fed at a time: a multiple of 64 KiB, so the decoder shares them.
const PIECE: usize = 1 << 20;

fn internal(what: Internal) -> WalError {
    WalError {
        lsn: Lsn::INVALID,
        segment: String::new(),
        defect: Defect::Internal(what),
    }
}
