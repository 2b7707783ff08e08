//! The I/O adapter: finds segment files, checks they form one contiguous run, and
//! feeds them to a [`WalDecoder`] in order.

use crate::consts::LONG_PAGE_HEADER_LEN;
use crate::decoder::{DecoderOptions, Record, Stop};
use crate::error::WalError;
use crate::lsn::{is_segment_file_name, Lsn, SegmentName};
use crate::page::{Geometry, PageHeader};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Errors of finding and reading segment files.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// A file or directory could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A directory holds no WAL segment files.
    #[error("{0}: no WAL segment files (24 hexadecimal digits) found")]
    NoSegments(PathBuf),
    /// The first file does not start like a WAL segment.
    #[error("{path}: not a WAL segment of PostgreSQL 15-18: {reason}")]
    NotWal {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// Files of several timelines were given.
    #[error("segments of several timelines given ({0}); name the files of one timeline")]
    MixedTimelines(String),
    /// A segment is missing from the run.
    #[error("segment {missing} is missing (between {before} and {after})")]
    Gap {
        /// Name of the missing segment.
        missing: String,
        /// The file before the gap.
        before: String,
        /// The file after the gap.
        after: String,
    },
    /// The same segment was named twice.
    #[error("segment {0} given twice")]
    Duplicate(String),
    /// The WAL itself is invalid where the caller demanded validity.
    #[error("{0}")]
    Wal(WalError),
}

/// One contiguous run of segment files of one timeline.
#[derive(Debug, Clone)]
pub struct SegmentSet {
    /// Files in stream order.
    pub files: Vec<PathBuf>,
    /// Geometry read from the first file.
    pub geometry: Geometry,
    /// Position of the first file's first byte.
    pub start: Lsn,
    /// Timeline of the files.
    pub tli: u32,
}

impl SegmentSet {
    /// Collects segment files from directories (every file named like a segment) and
    /// files given by name, sorts them and checks that they are contiguous.
    pub fn from_paths<P: AsRef<Path>>(paths: &[P]) -> Result<SegmentSet, SourceError> {
        let mut files = Vec::new();
        for p in paths {
            let p = p.as_ref();
            let meta = std::fs::metadata(p).map_err(|e| io(p, e))?;
            if meta.is_dir() {
                let mut found = Vec::new();
                for entry in std::fs::read_dir(p).map_err(|e| io(p, e))? {
                    let entry = entry.map_err(|e| io(p, e))?;
                    let name = entry.file_name();
                    if !name.to_str().is_some_and(is_segment_file_name) {
                        continue;
                    }
                    // Follows symbolic links, as pg_waldump does: a directory of links
                    // to segments is a directory of segments. Broken links are skipped.
                    let is_file = std::fs::metadata(entry.path()).is_ok_and(|m| m.is_file());
                    if is_file {
                        found.push(entry.path());
                    }
                }
                if found.is_empty() {
                    return Err(SourceError::NoSegments(p.to_path_buf()));
                }
                files.extend(found);
            } else {
                files.push(p.to_path_buf());
            }
        }
        if files.is_empty() {
            return Err(SourceError::NoSegments(PathBuf::from(".")));
        }
        files.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
        let geometry = read_geometry(&files[0])?;
        let seg = geometry.seg_size;
        let mut names = Vec::with_capacity(files.len());
        for f in &files {
            let name = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
            names.push(SegmentName::parse(name, seg));
        }
        // A single file need not be named like a segment: its header says where it is.
        if files.len() == 1 && names[0].is_none() {
            let start = first_page_addr(&files[0])?;
            return Ok(SegmentSet {
                files,
                geometry,
                start,
                tli: 1,
            });
        }
        let mut parsed = Vec::with_capacity(files.len());
        for (f, n) in files.iter().zip(&names) {
            match n {
                Some(n) => parsed.push(*n),
                None => {
                    return Err(SourceError::NotWal {
                        path: f.clone(),
                        reason: format!(
                            "the name is not a segment name for {} MB segments",
                            seg >> 20
                        ),
                    })
                }
            }
        }
        let mut tlis: Vec<u32> = parsed.iter().map(|n| n.tli).collect();
        tlis.dedup();
        if tlis.len() > 1 {
            let list: Vec<String> = tlis.iter().map(|t| t.to_string()).collect();
            return Err(SourceError::MixedTimelines(list.join(", ")));
        }
        for w in parsed.windows(2) {
            if w[1].segno == w[0].segno {
                return Err(SourceError::Duplicate(w[0].file_name(seg)));
            }
            if w[1].segno != w[0].segno + 1 {
                let missing = SegmentName {
                    tli: w[0].tli,
                    segno: w[0].segno + 1,
                };
                return Err(SourceError::Gap {
                    missing: missing.file_name(seg),
                    before: w[0].file_name(seg),
                    after: w[1].file_name(seg),
                });
            }
        }
        Ok(SegmentSet {
            start: parsed[0].start_lsn(seg),
            tli: parsed[0].tli,
            files,
            geometry,
        })
    }

    /// Total bytes of the files, by their sizes on disk.
    pub fn total_bytes(&self) -> u64 {
        self.files
            .iter()
            .filter_map(|f| std::fs::metadata(f).ok())
            .map(|m| m.len())
            .sum()
    }

    /// Reads every record, in order, calling `on_record` for each, and returns why
    /// reading stopped. Files are read in pieces; a file whose size is not the
    /// segment size stops the stream with a [`crate::Defect::FileSize`] at its end.
    pub fn read<F>(
        &self,
        opts: DecoderOptions,
        mut on_record: F,
    ) -> Result<ReadSummary, SourceError>
    where
        F: FnMut(&Record<'_>, &SegmentSet),
    {
        self.read_with_progress(opts, &mut on_record, &mut |_| {})
    }

    /// Like [`SegmentSet::read`], also calling `on_file` with each file's index as it is opened.
    pub fn read_with_progress<F, P>(
        &self,
        opts: DecoderOptions,
        on_record: &mut F,
        on_file: &mut P,
    ) -> Result<ReadSummary, SourceError>
    where
        F: FnMut(&Record<'_>, &SegmentSet),
        P: FnMut(usize),
    {
        let part = self.read_range(
            opts,
            0,
            self.files.len(),
            on_record,
            &|acc: &mut &mut F, r| acc(r, self),
            on_file,
        )?;
        let stop = part.stop.unwrap_or(Stop::EndOfInput { lsn: Lsn::INVALID });
        Ok(ReadSummary {
            stop,
            records: part.records,
            files_read: part.files_read,
        })
    }
}

/// How a read ended.
#[derive(Debug, Clone)]
pub struct ReadSummary {
    /// Why reading stopped.
    pub stop: Stop,
    /// Records read.
    pub records: u64,
    /// Files opened.
    pub files_read: usize,
}

fn io(path: &Path, source: std::io::Error) -> SourceError {
    SourceError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn read_first_page(path: &Path) -> Result<PageHeader, SourceError> {
    let mut buf = [0u8; LONG_PAGE_HEADER_LEN];
    let mut f = File::open(path).map_err(|e| io(path, e))?;
    f.read_exact(&mut buf).map_err(|_| SourceError::NotWal {
        path: path.to_path_buf(),
        reason: "shorter than a page header".into(),
    })?;
    PageHeader::parse(&buf).ok_or_else(|| SourceError::NotWal {
        path: path.to_path_buf(),
        reason: "shorter than a page header".into(),
    })
}

fn read_geometry(path: &Path) -> Result<Geometry, SourceError> {
    let h = read_first_page(path)?;
    Geometry::from_first_page(&h).map_err(|d| SourceError::NotWal {
        path: path.to_path_buf(),
        reason: d.to_string(),
    })
}

fn first_page_addr(path: &Path) -> Result<Lsn, SourceError> {
    Ok(read_first_page(path)?.pageaddr)
}
