//! Corrupted and hostile input. For every damage applied to the PostgreSQL 18 fixture
//! the decoder and `verify` must terminate without panicking, and `verify` must
//! report damage that hit bytes PostgreSQL's reader depends on before the end of WAL.
//! Random bytes, with and without a valid start, must never hang or panic the decoder.
//!
//! Cases come from fixed seeds. Each case works on a window of three consecutive
//! segments of the fixture, so that a few hundred verifications stay fast; windows
//! cover the stretches written with every `wal_compression` setting.

mod common;

use common::{segment_paths, segments, Rng};
use std::path::PathBuf;
use wal::source::SegmentSet;
use wal::verify::verify;
use wal::{DecoderOptions, Lsn, Next, Stop, WalDecoder};

const SEG: usize = 1 << 20;
const PAGE: usize = 8192;
const WINDOW: usize = 3;
/// First segment of the fixture: 000000010000000000000007 starts at 0/700000.
const FIRST_SEG_LSN: u64 = 0x70_0000;

/// A run of `WINDOW` clean segments and what a clean read of it says about its bytes.
struct Window {
    first: usize,
    start: Lsn,
    /// `must[i]`: damage to byte `i` of the window has to be reported by verify.
    must: Vec<bool>,
    /// Records read from the clean window.
    records: Vec<(Lsn, u32)>,
}

fn header_len_at(off: usize) -> usize {
    if off % SEG == 0 {
        40
    } else {
        24
    }
}

/// The stream offsets a record's bytes occupy (page headers in between excluded).
fn record_ranges(rec: usize, tot_len: u32) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut pos = rec;
    let mut left = tot_len as usize;
    while left > 0 {
        let page_end = (pos / PAGE + 1) * PAGE;
        let take = left.min(page_end - pos);
        out.push(pos..pos + take);
        left -= take;
        pos = page_end + header_len_at(page_end);
    }
    out
}

impl Window {
    fn new(first: usize) -> Window {
        let start = Lsn(FIRST_SEG_LSN + (first * SEG) as u64);
        let stream = segments()[first..first + WINDOW].concat();
        let (seen, stop) = decode_chunked(&stream, start, &mut |_| stream.len());
        assert!(matches!(stop, Stop::EndOfInput { .. }), "{stop:?}");
        let records: Vec<(Lsn, u32)> = seen.iter().map(|s| (s.0, s.1)).collect();
        let mut must = vec![false; stream.len()];
        // Every byte of a record is under its CRC-32C (header fields up to xl_crc
        // included, ValidXLogRecord): a change fails the CRC or, for xl_tot_len and
        // xl_prev, an earlier check. None of these failures looks like an end of WAL,
        // except a length of 0, which leaves the rest of the record nonzero on the page.
        let mut last_end = 0;
        for &(lsn, len) in &records {
            for r in record_ranges((lsn.0 - start.0) as usize, len) {
                last_end = r.end;
                must[r].fill(true);
            }
        }
        // Page L holds the last byte of the last complete record. Page headers from the
        // first page to L: xlp_magic (checked on every page; only 0 looks like an end,
        // and a flip of a valid magic is never 0), xlp_pageaddr (must equal the page's
        // position; a stale-looking one ends WAL, but valid pages follow) and the long
        // header's system id, segment size and page size (must equal the stream's).
        let last_page = (last_end - 1) / PAGE * PAGE;
        for p in (0..=last_page).step_by(PAGE) {
            must[p..p + 2].fill(true);
            if p != last_page {
                // On L itself, an older address at the same offset looks exactly like a
                // recycled page with nothing valid after it: an ordinary end of WAL.
                must[p + 8..p + 16].fill(true);
            }
            if p % SEG == 0 {
                must[p + 24..p + 40].fill(true);
            }
        }
        // A record that starts on L and is made longer runs into the blank (or absent)
        // pages after L: PostgreSQL too reads that as a record cut short by a crash.
        for &(lsn, _) in &records {
            let off = (lsn.0 - start.0) as usize;
            if off / PAGE * PAGE == last_page {
                must[off..off + 4].fill(false);
            }
        }
        Window {
            first,
            start,
            must,
            records,
        }
    }

    fn last_page(&self) -> usize {
        self.must
            .iter()
            .rposition(|&m| m)
            .expect("some bytes matter")
            / PAGE
            * PAGE
    }
}

type Seen = (Lsn, u32, Lsn, u32);

/// Feeds `stream` to a decoder in chunks of `next_chunk(fed)` bytes and collects
/// (lsn, xl_tot_len, next_lsn, fpi_len) of every record and the stop. Panics if the
/// decoder does not make progress: every step either yields a record (at least 24
/// bytes of input), feeds at least one byte, or finishes the input.
fn decode_chunked(
    stream: &[u8],
    start: Lsn,
    next_chunk: &mut dyn FnMut(usize) -> usize,
) -> (Vec<Seen>, Stop) {
    let mut dec = WalDecoder::new(start, DecoderOptions::default());
    let mut seen = Vec::new();
    let mut fed = 0usize;
    let mut budget = 2 * stream.len() + 16;
    loop {
        budget = budget.checked_sub(1).expect("decoder stuck");
        match dec.next_record() {
            Next::Record(r) => seen.push((r.lsn, r.header.tot_len, r.next_lsn, r.body.fpi_len)),
            Next::NeedInput if fed == stream.len() => dec.finish_input(),
            Next::NeedInput => {
                let n = next_chunk(fed).clamp(1, stream.len() - fed);
                dec.feed(&stream[fed..fed + n]);
                fed += n;
            }
            Next::Stopped(s) => return (seen, s),
        }
    }
}

/// A damage to a window of segments.
#[derive(Debug, Clone)]
enum Damage {
    /// Flip these bits (stream offset, bit).
    Flip(Vec<(usize, u8)>),
    /// Cut segment `k` of the window to `len` bytes.
    Truncate { k: usize, len: usize },
    /// Zero the page at this stream offset.
    ZeroPage(usize),
    /// Overwrite `len` bytes at `at` with random bytes from `seed`.
    Overwrite { at: usize, len: usize, seed: u64 },
    /// Exchange the contents of segments `a` and `b` of the window.
    Swap(usize, usize),
}

impl Damage {
    /// Applies the damage; returns the segments' new contents.
    fn apply(&self, w: &Window) -> Vec<Vec<u8>> {
        let mut segs: Vec<Vec<u8>> = segments()[w.first..w.first + WINDOW].to_vec();
        match self {
            Damage::Flip(bits) => {
                for &(at, bit) in bits {
                    segs[at / SEG][at % SEG] ^= 1 << bit;
                }
            }
            Damage::Truncate { k, len } => segs[*k].truncate(*len),
            Damage::ZeroPage(at) => segs[at / SEG][at % SEG..at % SEG + PAGE].fill(0),
            Damage::Overwrite { at, len, seed } => {
                let mut junk = vec![0u8; *len];
                Rng::new(*seed).fill(&mut junk);
                for (i, b) in junk.into_iter().enumerate() {
                    let o = at + i;
                    segs[o / SEG][o % SEG] = b;
                }
            }
            Damage::Swap(a, b) => segs.swap(*a, *b),
        }
        segs
    }

    /// Whether verify is obliged to notice, from the clean read's map of the window.
    fn must_detect(&self, w: &Window) -> bool {
        match self {
            Damage::Flip(bits) => bits.iter().any(|&(at, _)| w.must[at]),
            // Every fixture file is exactly one segment long, and the reader checks sizes.
            Damage::Truncate { .. } => true,
            // A blank page before L with valid WAL after it is damage; on L or after it,
            // a blank page is what the end of WAL looks like.
            Damage::ZeroPage(at) => *at < w.last_page(),
            Damage::Overwrite { at, len, .. } => w.must[*at..at + len].iter().any(|&m| m),
            // The earlier position then holds a later segment: its xlp_pageaddr is ahead
            // of the page's position, which no recycled segment can produce.
            Damage::Swap(..) => true,
        }
    }
}

/// Writes the damaged segments to a temp dir under their own names (unchanged ones are
/// read where the fixture was unpacked) and runs verify; also decodes the damaged stream
/// whole and in random chunks and requires the same result.
fn check(w: &Window, damage: &Damage, rng: &mut Rng) {
    let segs = damage.apply(w);
    let originals = &segment_paths()[w.first..w.first + WINDOW];
    let dir = tempfile::tempdir().expect("temp dir");
    let mut paths: Vec<PathBuf> = Vec::new();
    for (k, bytes) in segs.iter().enumerate() {
        if *bytes == segments()[w.first + k] {
            paths.push(originals[k].clone());
        } else {
            let p = dir.path().join(originals[k].file_name().expect("name"));
            std::fs::write(&p, bytes).expect("write damaged segment");
            paths.push(p);
        }
    }
    let verdict = |threads: usize| match SegmentSet::from_paths(&paths) {
        // The first page no longer describes a WAL stream: refused up front.
        Err(_) => true,
        Ok(set) => match verify(&set, DecoderOptions::default(), threads) {
            Err(e) => panic!("I/O error on local files: {e}"),
            Ok(Ok(_)) => false,
            Ok(Err(_)) => true,
        },
    };
    let detected = verdict(1);
    // Segments read in parallel must reach the same verdict.
    assert_eq!(verdict(2), detected, "damage {damage:?}: 1 vs 2 threads");
    if damage.must_detect(w) {
        assert!(
            detected,
            "window {} ({}): damage {damage:?} not detected",
            w.first, w.start
        );
    }

    let stream = segs.concat();
    let whole = decode_chunked(&stream, w.start, &mut |_| stream.len());
    let chunked = decode_chunked(&stream, w.start, &mut |_| rng.range(1, 70_000) as usize);
    assert_eq!(whole, chunked, "damage {damage:?}: streaming differs");
    // Records before the damage are still read, unchanged.
    let first_damaged = match damage {
        Damage::Flip(bits) => bits.iter().map(|b| b.0).min().unwrap_or(0),
        Damage::Truncate { k, len } => k * SEG + len,
        Damage::ZeroPage(at) | Damage::Overwrite { at, .. } => *at,
        Damage::Swap(a, b) => a.min(b) * SEG,
    };
    let intact = w
        .records
        .iter()
        .take_while(|(lsn, len)| {
            record_ranges((lsn.0 - w.start.0) as usize, *len)
                .last()
                .is_some_and(|r| r.end <= first_damaged)
                // The page header after a record is read before the next one.
                && (lsn.0 - w.start.0) as usize / PAGE * PAGE + PAGE <= first_damaged
        })
        .count();
    let got: Vec<(Lsn, u32)> = whole.0.iter().map(|s| (s.0, s.1)).collect();
    assert!(got.len() >= intact, "damage {damage:?}");
    assert_eq!(got[..intact], w.records[..intact], "damage {damage:?}");
}

fn windows() -> Vec<Window> {
    // Every third start: 11 windows over all 35 segments, the last one holding the
    // final XLOG_SWITCH.
    (0..=segments().len() - WINDOW)
        .step_by(WINDOW)
        .chain([segments().len() - WINDOW])
        .map(Window::new)
        .collect()
}

fn run_cases(seed: u64, cases: usize, make: impl Fn(&Window, &mut Rng) -> Damage) {
    let ws = windows();
    let mut rng = Rng::new(seed);
    let mut obliged = 0;
    for i in 0..cases {
        let w = &ws[i % ws.len()];
        let d = make(w, &mut rng);
        obliged += usize::from(d.must_detect(w));
        check(w, &d, &mut rng);
    }
    // The cases must mostly test detection, not only the absence of panics.
    assert!(
        obliged * 3 >= cases,
        "only {obliged} of {cases} cases had to be detected"
    );
}

#[test]
fn clean_windows_verify() {
    for w in windows() {
        check(&w, &Damage::Flip(Vec::new()), &mut Rng::new(1));
    }
}

#[test]
fn bit_flips() {
    run_cases(0xF11F, 150, |w, rng| {
        let n = if rng.below(4) == 0 {
            rng.range(2, 5)
        } else {
            1
        };
        // Half the flips aimed at the pages before L, where WAL is dense.
        let span = if rng.below(2) == 0 {
            w.last_page() + PAGE
        } else {
            w.must.len()
        };
        Damage::Flip(
            (0..n)
                .map(|_| (rng.below(span), rng.below(8) as u8))
                .collect(),
        )
    });
}

#[test]
fn page_header_bit_flips() {
    run_cases(0x4EAD, 60, |w, rng| {
        let page = rng.below(w.last_page() / PAGE + 1) * PAGE;
        let len = header_len_at(page);
        Damage::Flip(vec![(page + rng.below(len), rng.below(8) as u8)])
    });
}

#[test]
fn truncations() {
    run_cases(0x7C, 30, |_, rng| Damage::Truncate {
        k: rng.below(WINDOW),
        len: rng.below(SEG),
    });
}

#[test]
fn zeroed_pages() {
    run_cases(0x2E80, 40, |w, rng| {
        Damage::ZeroPage(
            rng.below(w.last_page() / PAGE + 2)
                .min(w.must.len() / PAGE - 1)
                * PAGE,
        )
    });
}

#[test]
fn random_overwrites() {
    run_cases(0x0BE7, 50, |w, rng| {
        let len = rng.range(1, 300) as usize;
        Damage::Overwrite {
            at: rng.below(w.must.len() - len),
            len,
            seed: rng.next_u64(),
        }
    });
}

#[test]
fn swapped_segments() {
    run_cases(0x5A9, 12, |_, rng| {
        let a = rng.below(WINDOW);
        let b = (a + 1 + rng.below(WINDOW - 1)) % WINDOW;
        Damage::Swap(a, b)
    });
}

/// Random input never panics or hangs the decoder, fed whole or in pieces.
#[test]
fn random_bytes_terminate() {
    let mut rng = Rng::new(0xA11CE);
    for _ in 0..150 {
        let mut bytes = vec![0u8; rng.below(40_000)];
        rng.fill(&mut bytes);
        let start = Lsn(rng.range(0, 64) << 24);
        let whole = decode_chunked(&bytes, start, &mut |_| bytes.len());
        let chunked = decode_chunked(&bytes, start, &mut |_| rng.range(1, 5000) as usize);
        assert_eq!(whole, chunked);
        assert!(whole.0.is_empty(), "a record out of random bytes");
    }
}

/// A valid start (the first page header, or a real prefix of the stream) followed by
/// random bytes: records wholly inside the valid prefix come out, nothing else does,
/// and decoding ends.
#[test]
fn valid_prefix_then_random_bytes() {
    let clean = Window::new(0);
    let seg = &segments()[0];
    let mut rng = Rng::new(0xB0B);
    for i in 0..120 {
        let prefix = match i % 3 {
            0 => 40,
            1 => PAGE,
            _ => rng.range(40, 3 * PAGE as u64 * 8) as usize,
        };
        let mut bytes = seg[..prefix].to_vec();
        let mut junk = vec![0u8; rng.below(3 * PAGE * 4)];
        rng.fill(&mut junk);
        bytes.extend_from_slice(&junk);
        let whole = decode_chunked(&bytes, clean.start, &mut |_| bytes.len());
        let chunked = decode_chunked(&bytes, clean.start, &mut |_| rng.range(1, 9000) as usize);
        assert_eq!(whole, chunked);
        let inside = clean
            .records
            .iter()
            .take_while(|(lsn, len)| {
                record_ranges((lsn.0 - clean.start.0) as usize, *len)
                    .last()
                    .is_some_and(|r| r.end <= prefix)
            })
            .count();
        let got: Vec<(Lsn, u32)> = whole.0.iter().map(|s| (s.0, s.1)).collect();
        // A record ending inside the prefix whose next page header is junk is still
        // produced; a record reaching into the junk fails its CRC.
        assert_eq!(got, clean.records[..inside], "prefix {prefix}");
    }
}
