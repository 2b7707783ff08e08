//! The sans-IO WAL stream decoder.
//!
//! Feed it the bytes of consecutive segment files, starting at a segment boundary;
//! ask it for records. It never touches a file: the same code serves the CLI, the
//! archiver, fuzzers and benchmarks. Reading follows `XLogFindNextRecord` and
//! `XLogDecodeNextRecord` (xlogreader.c) so that it starts and stops exactly where
//! pg_waldump does.

use crate::consts::*;
use crate::error::{Defect, Internal, WalError};
use crate::input::Input;
use crate::lsn::{Lsn, SegmentName};
use crate::page::{Geometry, PageHeader};
use crate::record::{decode_body, record_crc, Body, RecordHeader};

/// Options of a decoder.
#[derive(Debug, Clone, Copy)]
pub struct DecoderOptions {
    /// Data page size (`BLCKSZ`), which WAL does not record. Default 8192.
    pub blcksz: usize,
    /// Timeline used to name segments in error messages until a page says otherwise.
    pub tli: u32,
}

impl Default for DecoderOptions {
    fn default() -> Self {
        DecoderOptions {
            blcksz: DEFAULT_BLCKSZ,
            tli: 1,
        }
    }
}

/// Why a decoder stopped producing records.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Stop {
    /// The input ended (after `finish_input`) before the next record was complete;
    /// pg_waldump stops the same way when it reaches the last segment's end.
    EndOfInput {
        /// Where the next record would have started.
        lsn: Lsn,
    },
    /// The WAL is not valid at this position. At the end of a live or recycled
    /// segment this is the ordinary end of WAL; elsewhere it is corruption.
    Invalid(WalError),
}

impl Stop {
    /// The position at which reading stopped.
    pub fn lsn(&self) -> Lsn {
        match self {
            Stop::EndOfInput { lsn } => *lsn,
            Stop::Invalid(e) => e.lsn,
        }
    }
}

/// How reading ended, in words: "end of input at 0/3000128" or "end of valid WAL: ...".
impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stop::EndOfInput { lsn } => write!(f, "end of input at {lsn}"),
            Stop::Invalid(e) => write!(f, "end of valid WAL: {e}"),
        }
    }
}

/// What [`WalDecoder::next_record`] found.
#[derive(Debug)]
pub enum Next<'a> {
    /// A complete, CRC-checked record.
    Record(Record<'a>),
    /// More input is needed (or `finish_input` must be called).
    NeedInput,
    /// No more records: end of input or end of valid WAL.
    Stopped(Stop),
}

/// A decoded record, borrowed from the decoder until the next call.
#[derive(Debug, Clone, Copy)]
pub struct Record<'a> {
    /// Where the record starts.
    pub lsn: Lsn,
    /// Where the next record will be looked for (`EndRecPtr`).
    pub next_lsn: Lsn,
    /// The header.
    pub header: RecordHeader,
    /// All `xl_tot_len` bytes of the record, reassembled if it crossed pages.
    pub bytes: &'a [u8],
    /// Block references and data ranges.
    pub body: &'a Body,
    /// Timeline of the page the record starts on.
    pub tli: u32,
    /// Page-header bytes between the end of the previous record and `next_lsn`.
    pub page_header_bytes: u32,
    /// Alignment padding after the record (MAXALIGN).
    pub padding_bytes: u32,
    /// Bytes skipped after an `XLOG_SWITCH` record up to the segment's end.
    pub switch_tail_bytes: u64,
}

impl Record<'_> {
    /// pg_waldump's record length: `xl_tot_len` minus the stored image bytes.
    pub fn rec_len(&self) -> u32 {
        self.header.tot_len - self.body.fpi_len
    }

    /// Position of the record's last byte (before padding and any switch tail).
    pub fn last_byte_lsn(&self) -> Lsn {
        Lsn(self.next_lsn.0 - self.switch_tail_bytes - u64::from(self.padding_bytes) - 1)
    }

    /// The bytes of one block's image, as stored.
    pub fn image_bytes(&self, block: &crate::record::BlockRef) -> &[u8] {
        &self.bytes[block.image_range.clone()]
    }

    /// The main data.
    pub fn main_data(&self) -> &[u8] {
        &self.bytes[self.body.main_data.clone()]
    }
}

enum Phase {
    /// Looking for the first record that starts in the first segment.
    FindFirst { page: u64 },
    /// Reading records sequentially.
    Read,
}

enum Found {
    Input(u64, usize),
    Assembled,
}

struct Attempt {
    found: Found,
    lsn: u64,
    next: u64,
    header: RecordHeader,
    tli: u32,
    latest: (u64, u32),
    page_header_bytes: u32,
    padding: u32,
    tail: u64,
}

/// Outcome of an attempt that did not produce a record.
enum Miss {
    NeedInput,
    Stop(Stop),
}

impl From<Stop> for Miss {
    fn from(s: Stop) -> Miss {
        Miss::Stop(s)
    }
}

/// The decoder. See the module documentation.
pub struct WalDecoder {
    opts: DecoderOptions,
    geom: Option<Geometry>,
    start: u64,
    input: Input,
    finished: bool,
    phase: Phase,
    next_rec: u64,
    prev_rec: u64,
    latest_page: u64,
    latest_tli: u32,
    asm: Vec<u8>,
    body: Body,
    /// The last page header validated: records on the same page need no second look.
    last_page: Option<(u64, PageHeader)>,
    stopped: Option<Stop>,
    records: u64,
}

impl WalDecoder {
    /// A decoder whose first input byte is the first byte of the segment starting at `start`.
    pub fn new(start: Lsn, opts: DecoderOptions) -> WalDecoder {
        WalDecoder {
            opts,
            geom: None,
            start: start.0,
            input: Input::new(start.0),
            finished: false,
            phase: Phase::FindFirst { page: start.0 },
            next_rec: start.0,
            prev_rec: 0,
            latest_page: 0,
            latest_tli: 0,
            asm: Vec::new(),
            body: Body::default(),
            last_page: None,
            stopped: None,
            records: 0,
        }
    }

    /// The stream's geometry, once the first page has been read.
    pub fn geometry(&self) -> Option<Geometry> {
        self.geom
    }

    /// Position up to which input has been fed.
    pub fn input_end(&self) -> Lsn {
        Lsn(self.input.end())
    }

    /// Records produced so far.
    pub fn records_read(&self) -> u64 {
        self.records
    }

    /// Appends a copy of the next bytes of the stream.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.compact();
        self.input.push_slice(bytes);
    }

    /// Appends the next bytes of the stream without copying them (a whole segment
    /// read by the caller) when they start and end on 64 KiB boundaries; otherwise
    /// copies them. Once consumed the buffer comes back from [`WalDecoder::recycle`].
    pub fn feed_owned(&mut self, bytes: Vec<u8>) {
        self.compact();
        self.input.push_whole(bytes);
    }

    /// A buffer given to [`WalDecoder::feed_owned`] that the decoder no longer needs,
    /// for the caller to fill again instead of allocating.
    pub fn recycle(&mut self) -> Option<Vec<u8>> {
        self.input.take_released()
    }

    /// Releases input no later record can need, so [`WalDecoder::recycle`] can
    /// return it before the next feed.
    pub fn release_consumed(&mut self) {
        self.compact();
    }

    /// Says no more input will come: a record that needs more now ends the stream.
    pub fn finish_input(&mut self) {
        self.finished = true;
    }

    /// Drops input that no later record can need (before the page of the next record).
    fn compact(&mut self) {
        let keep_from = match self.phase {
            Phase::FindFirst { page } => page,
            Phase::Read => self.next_rec - self.next_rec % self.page_size(),
        };
        self.input.release_before(keep_from);
    }

    fn page_size(&self) -> u64 {
        self.geom.map_or(8192, |g| u64::from(g.page_size))
    }

    /// The next record, a request for input, or the reason decoding stopped.
    pub fn next_record(&mut self) -> Next<'_> {
        if let Some(stop) = &self.stopped {
            return Next::Stopped(stop.clone());
        }
        if let Phase::FindFirst { .. } = self.phase {
            match self.find_first() {
                Ok(()) => {}
                Err(Miss::NeedInput) => return Next::NeedInput,
                Err(Miss::Stop(s)) => {
                    self.stopped = Some(s.clone());
                    return Next::Stopped(s);
                }
            }
        }
        match self.read_record() {
            Ok(a) => {
                self.prev_rec = a.lsn;
                self.next_rec = a.next;
                (self.latest_page, self.latest_tli) = a.latest;
                self.records += 1;
                let bytes = match a.found {
                    Found::Input(lsn, len) => self.input.get(lsn, len).unwrap_or(&[]),
                    Found::Assembled => &self.asm[..],
                };
                Next::Record(Record {
                    lsn: Lsn(a.lsn),
                    next_lsn: Lsn(a.next),
                    header: a.header,
                    bytes,
                    body: &self.body,
                    tli: a.tli,
                    page_header_bytes: a.page_header_bytes,
                    padding_bytes: a.padding,
                    switch_tail_bytes: a.tail,
                })
            }
            Err(Miss::NeedInput) => Next::NeedInput,
            Err(Miss::Stop(s)) => {
                self.stopped = Some(s.clone());
                Next::Stopped(s)
            }
        }
    }

    fn err(&self, lsn: u64, defect: Defect, tli: u32) -> Miss {
        let segment = match self.geom {
            Some(g) => SegmentName::containing(tli, Lsn(lsn), g.seg_size).file_name(g.seg_size),
            None => String::new(),
        };
        Miss::Stop(Stop::Invalid(WalError {
            lsn: Lsn(lsn),
            segment,
            defect,
        }))
    }

    fn tli_for_errors(&self) -> u32 {
        if self.latest_tli != 0 {
            self.latest_tli
        } else {
            self.opts.tli
        }
    }

    /// Bytes of input at `[lsn, lsn+len)`, or a miss when not (yet) fed.
    fn bytes(&self, lsn: u64, len: usize) -> Result<&[u8], Miss> {
        slice(&self.input, self.finished, lsn, len)
    }

    /// Reads and validates the header of the page at `page`, tracking the timeline.
    fn page_header(&mut self, page: u64, latest: &mut (u64, u32)) -> Result<PageHeader, Miss> {
        if let Some((p, h)) = self.last_page {
            if p == page && page <= latest.0 {
                return Ok(h);
            }
        }
        let tli = self.tli_for_errors();
        let first = self.bytes(page, SHORT_PAGE_HEADER_LEN)?;
        let need = PageHeader::needed_len(first);
        let raw = self.bytes(page, need)?;
        let h = PageHeader::parse(raw).ok_or(Miss::NeedInput)?;
        if self.geom.is_none() {
            if page != self.start {
                return Err(self.err(page, Defect::MissingLongHeader(h.info), tli));
            }
            let g = Geometry::from_first_page(&h).map_err(|d| self.err(page, d, tli))?;
            if page % g.seg_size != 0 {
                return Err(self.err(page, Defect::UnexpectedPageAddr { found: h.pageaddr }, tli));
            }
            self.geom = Some(g);
        }
        let g = self.geom.unwrap_or_else(|| unreachable!());
        g.validate(Lsn(page), &h)
            .map_err(|d| self.err(page, d, h.tli.max(1)))?;
        if page > latest.0 {
            if h.tli < latest.1 {
                return Err(self.err(
                    page,
                    Defect::TimelineBackwards {
                        found: h.tli,
                        previous: latest.1,
                    },
                    h.tli,
                ));
            }
            *latest = (page, h.tli);
        }
        self.last_page = Some((page, h));
        Ok(h)
    }

    fn find_first(&mut self) -> Result<(), Miss> {
        let mut latest = (self.latest_page, self.latest_tli);
        loop {
            let Phase::FindFirst { page } = self.phase else {
                return Ok(());
            };
            let h = self.page_header(page, &mut latest)?;
            let ps = self.page_size();
            let hl = h.len() as u64;
            if h.is_contrecord() {
                if maxalign(u64::from(h.rem_len)) >= ps - hl {
                    self.phase = Phase::FindFirst { page: page + ps };
                    // This page is not read again: keep its timeline (latestPageTLI),
                    // or a wait for input here would forget it.
                    (self.latest_page, self.latest_tli) = latest;
                    continue;
                }
                self.next_rec = page + hl + maxalign(u64::from(h.rem_len));
            } else {
                self.next_rec = page + hl;
            }
            self.phase = Phase::Read;
            self.prev_rec = 0;
            (self.latest_page, self.latest_tli) = latest;
            return Ok(());
        }
    }

    fn read_record(&mut self) -> Result<Attempt, Miss> {
        let mut latest = (self.latest_page, self.latest_tli);
        let mut rec = self.next_rec;
        let ps = self.page_size();
        let mut header_bytes = 0u32;
        'restart: loop {
            // Page sizes are powers of two: masks, not divisions, on this hot path.
            let page = rec & !(ps - 1);
            let h = self.page_header(page, &mut latest)?;
            let g = self.geom.unwrap_or_else(|| unreachable!());
            let hl = h.len() as u64;
            let tli = h.tli;
            let mut off = rec & (ps - 1);
            if off == 0 {
                rec += hl;
                off = hl;
                header_bytes += hl as u32;
            } else if off < hl {
                return Err(self.err(
                    rec,
                    Defect::InvalidRecordOffset {
                        min: hl as u32,
                        got: off as u32,
                    },
                    tli,
                ));
            }
            if h.is_contrecord() && off == hl {
                return Err(self.err(rec, Defect::ContrecordRequested, tli));
            }
            let tot_len = codec::cursor::le_u32_at(self.bytes(rec, 4)?, 0)
                .ok_or_else(|| not_contiguous(rec, 4))?;
            let mut gotheader = false;
            if off <= ps - RECORD_HEADER_LEN as u64 {
                let hdr = RecordHeader::parse(self.bytes(rec, RECORD_HEADER_LEN)?)
                    .ok_or(Miss::NeedInput)?;
                self.validate_header(rec, &hdr, tli)?;
                gotheader = true;
            } else if (tot_len as usize) < RECORD_HEADER_LEN {
                return Err(self.err(rec, Defect::RecordTooShort(tot_len), tli));
            }
            let on_page = ps - off;
            if u64::from(tot_len) <= on_page {
                let bytes = slice(&self.input, self.finished, rec, tot_len as usize)?;
                let header = self.check_crc(rec, bytes, tli)?;
                let bytes = slice(&self.input, self.finished, rec, tot_len as usize)?;
                let decoded = decode_body(bytes, self.opts.blcksz, &mut self.body);
                decoded.map_err(|d| self.err(rec, d, tli))?;
                let end = Ended {
                    rec,
                    after: rec,
                    len: tot_len,
                    seg_size: g.seg_size,
                };
                return Ok(end.attempt(
                    Found::Input(rec, tot_len as usize),
                    header,
                    tli,
                    latest,
                    header_bytes,
                ));
            }
            // The record crosses pages. Before copying, make sure every byte it needs is
            // here, so an attempt cut short by missing input costs nothing.
            if !self.finished && !self.all_fed(rec, tot_len, g) {
                return Err(Miss::NeedInput);
            }
            if tot_len > MAX_RECORD_LEN {
                return Err(self.err(rec, Defect::RecordTooLong(tot_len), tli));
            }
            self.asm.clear();
            let first = slice(&self.input, self.finished, rec, on_page as usize)?;
            self.asm.extend_from_slice(first);
            let mut gotlen = on_page;
            let mut cont_page = page;
            let mut last_rem;
            let mut last_hl;
            loop {
                cont_page += ps;
                let ch = self.page_header(cont_page, &mut latest)?;
                if ch.info & XLP_FIRST_IS_OVERWRITE_CONTRECORD != 0 {
                    // The continuation was overwritten after a crash: the record is
                    // abandoned and reading restarts at this page (xlogreader.c).
                    rec = cont_page;
                    header_bytes = 0;
                    continue 'restart;
                }
                if !ch.is_contrecord() {
                    return Err(self.err(rec, Defect::NoContrecordFlag, tli));
                }
                if ch.rem_len == 0 || u64::from(tot_len) != u64::from(ch.rem_len) + gotlen {
                    return Err(self.err(
                        rec,
                        Defect::BadContrecordLength {
                            found: ch.rem_len,
                            expected: u64::from(tot_len) - gotlen,
                        },
                        tli,
                    ));
                }
                let chl = ch.len() as u64;
                header_bytes += chl as u32;
                let len = (ps - chl).min(u64::from(ch.rem_len));
                let piece = slice(&self.input, self.finished, cont_page + chl, len as usize)?;
                self.asm.extend_from_slice(piece);
                gotlen += len;
                if !gotheader {
                    let hdr = RecordHeader::parse(&self.asm)
                        .ok_or_else(|| self.err(rec, Defect::RecordTooShort(tot_len), tli))?;
                    self.validate_header(rec, &hdr, tli)?;
                    gotheader = true;
                }
                last_rem = ch.rem_len;
                last_hl = chl;
                if gotlen >= u64::from(tot_len) {
                    break;
                }
            }
            let asm = std::mem::take(&mut self.asm);
            let checked = self
                .check_crc(rec, &asm, tli)
                .and_then(|header| self.decode_owned(rec, &asm, tli).map(|()| header));
            self.asm = asm;
            let header = checked?;
            let end = Ended {
                rec,
                after: cont_page + last_hl,
                len: last_rem,
                seg_size: g.seg_size,
            };
            return Ok(end.attempt(Found::Assembled, header, tli, latest, header_bytes));
        }
    }

    /// True when every byte of a record of `tot_len` starting at `rec` has been fed.
    fn all_fed(&self, rec: u64, tot_len: u32, g: Geometry) -> bool {
        let ps = u64::from(g.page_size);
        let end_of_input = self.input.end();
        let mut remaining = u64::from(tot_len).saturating_sub(ps - rec % ps);
        let mut page = rec - rec % ps;
        while remaining > 0 {
            page += ps;
            if page >= end_of_input {
                return false;
            }
            let hl = g.header_len_at(Lsn(page)) as u64;
            let take = remaining.min(ps - hl);
            remaining -= take;
            if page + hl + take > end_of_input {
                return false;
            }
        }
        true
    }

    fn validate_header(&self, rec: u64, h: &RecordHeader, tli: u32) -> Result<(), Miss> {
        if (h.tot_len as usize) < RECORD_HEADER_LEN {
            return Err(self.err(rec, Defect::RecordTooShort(h.tot_len), tli));
        }
        if !crate::rmgr::is_valid(h.rmid) {
            return Err(self.err(rec, Defect::BadRmgr(h.rmid), tli));
        }
        if self.prev_rec == 0 {
            if h.prev.0 >= rec {
                return Err(self.err(
                    rec,
                    Defect::BadPrevLink {
                        found: h.prev,
                        expected: Lsn(rec),
                    },
                    tli,
                ));
            }
        } else if h.prev.0 != self.prev_rec {
            return Err(self.err(
                rec,
                Defect::BadPrevLink {
                    found: h.prev,
                    expected: Lsn(self.prev_rec),
                },
                tli,
            ));
        }
        if h.tot_len > MAX_RECORD_LEN {
            return Err(self.err(rec, Defect::RecordTooLong(h.tot_len), tli));
        }
        Ok(())
    }

    fn check_crc(&self, rec: u64, bytes: &[u8], tli: u32) -> Result<RecordHeader, Miss> {
        let header = RecordHeader::parse(bytes)
            .ok_or_else(|| self.err(rec, Defect::RecordTooShort(0), tli))?;
        let crc = record_crc(bytes);
        if crc != header.crc {
            return Err(self.err(
                rec,
                Defect::BadCrc {
                    found: header.crc,
                    expected: crc,
                },
                tli,
            ));
        }
        Ok(header)
    }

    fn decode_owned(&mut self, rec: u64, bytes: &[u8], tli: u32) -> Result<(), Miss> {
        let r = decode_body(bytes, self.opts.blcksz, &mut self.body);
        r.map_err(|d| self.err(rec, d, tli))
    }
}

/// Input bytes `[lsn, lsn+len)`, a request for more input, or the end of input.
fn slice(input: &Input, finished: bool, lsn: u64, len: usize) -> Result<&[u8], Miss> {
    if let Some(b) = input.get(lsn, len) {
        return Ok(b);
    }
    if lsn + len as u64 <= input.end() {
        // Fed but not in one chunk: the input's invariant was broken.
        return Err(not_contiguous(lsn, len));
    }
    if finished {
        Err(Miss::Stop(Stop::EndOfInput { lsn: Lsn(lsn) }))
    } else {
        Err(Miss::NeedInput)
    }
}

/// The input did not give the `len` bytes at `lsn` in one piece.
fn not_contiguous(lsn: u64, len: usize) -> Miss {
    Miss::Stop(Stop::Invalid(WalError {
        lsn: Lsn(lsn),
        segment: String::new(),
        defect: Defect::Internal(Internal::NotContiguous { len, at: Lsn(lsn) }),
    }))
}

/// Where a complete record's last piece lies: `len` bytes from `after`.
struct Ended {
    rec: u64,
    after: u64,
    len: u32,
    seg_size: u64,
}

impl Ended {
    /// The attempt that produced this record: the next record is MAXALIGNed after the
    /// last piece (`NextRecPtr` in xlogreader.c), or at the next segment after a switch.
    fn attempt(
        &self,
        found: Found,
        header: RecordHeader,
        tli: u32,
        latest: (u64, u32),
        page_header_bytes: u32,
    ) -> Attempt {
        let len = u64::from(self.len);
        let mut next = self.after + maxalign(len);
        let tail = switch_tail(&header, &mut next, self.seg_size);
        Attempt {
            found,
            lsn: self.rec,
            next,
            header,
            tli,
            latest,
            page_header_bytes,
            padding: (maxalign(len) - len) as u32,
            tail,
        }
    }
}

/// After `XLOG_SWITCH` the reader pretends the record runs to the segment's end.
fn switch_tail(h: &RecordHeader, next: &mut u64, seg_size: u64) -> u64 {
    if !h.is_switch() {
        return 0;
    }
    let rounded = (*next).div_ceil(seg_size) * seg_size;
    let tail = rounded - *next;
    *next = rounded;
    tail
}
