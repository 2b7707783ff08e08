//! One input, every path (STYLE.md): the fixture's segments fed to the decoder as
//! whole files and in chunks of 1 byte and of random sizes must produce the same
//! records, byte for byte, and stop at the same place for the same reason.

mod common;

use common::{segment_paths, segments, Rng};
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use wal::source::SegmentSet;
use wal::{DecoderOptions, Lsn, Next, RecordHeader, Stop, WalDecoder};

/// What a record looks like from outside: position, header, content and images.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    lsn: Lsn,
    next_lsn: Lsn,
    header: RecordHeader,
    bytes_hash: u64,
    fpi_len: u32,
    page_header_bytes: u32,
    padding_bytes: u32,
    switch_tail_bytes: u64,
}

/// Decodes the fixture, feeding the concatenated segments in pieces of the lengths
/// `next_chunk(offset)` returns.
fn decode(mut next_chunk: impl FnMut(usize) -> usize) -> (Vec<Seen>, Stop) {
    let stream: Vec<u8> = segments().concat();
    let set = SegmentSet::from_paths(&segment_paths()).expect("segment set");
    let mut dec = WalDecoder::new(set.start, DecoderOptions::default());
    let mut seen = Vec::new();
    let mut fed = 0usize;
    loop {
        match dec.next_record() {
            Next::Record(r) => {
                let mut h = DefaultHasher::new();
                r.bytes.hash(&mut h);
                seen.push(Seen {
                    lsn: r.lsn,
                    next_lsn: r.next_lsn,
                    header: r.header,
                    bytes_hash: h.finish(),
                    fpi_len: r.body.fpi_len,
                    page_header_bytes: r.page_header_bytes,
                    padding_bytes: r.padding_bytes,
                    switch_tail_bytes: r.switch_tail_bytes,
                });
            }
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

fn whole_files() -> (Vec<Seen>, Stop) {
    let seg = segments()[0].len();
    decode(|_| seg)
}

#[test]
fn whole_files_read_every_record() {
    let (seen, stop) = whole_files();
    // The figure pg_waldump --stats printed for the fixture (tests/pg18_fixture.rs
    // checks the rest of its output).
    assert_eq!(seen.len(), 32413);
    assert!(matches!(stop, Stop::EndOfInput { .. }), "{stop:?}");
    // Records chain: each starts where the previous one said the next would, or just
    // after the page header found there, and links back to it.
    for w in seen.windows(2) {
        let gap = w[1].lsn.0 - w[0].next_lsn.0;
        assert!(gap == 0 || (gap == 24 || gap == 40) && w[0].next_lsn.0 % 8192 == 0);
        assert_eq!(w[1].header.prev, w[0].lsn);
    }
}

#[test]
fn one_byte_then_random_chunks_match_whole_files() {
    let expected = whole_files();
    let seg = segments()[0].len();
    let mut rng = Rng::new(0x5EED_C4A2);
    // Byte by byte through the first two segments (every page and segment boundary of
    // that stretch is crossed mid-header and mid-record), then 1..70000-byte chunks.
    let got = decode(|fed| {
        if fed < 2 * seg {
            1
        } else {
            rng.range(1, 70_000) as usize
        }
    });
    assert_eq!(got.0.len(), expected.0.len());
    assert_eq!(got, expected);
}

#[test]
fn page_and_odd_sized_chunks_match_whole_files() {
    let expected = whole_files();
    // Chunk sizes that land just before, on and after page and record-header boundaries.
    for size in [23, 24, 40, 8191, 8192, 8193, 65_537] {
        assert_eq!(decode(|_| size), expected, "chunks of {size} bytes");
    }
}

#[test]
fn segment_set_reader_matches_the_decoder() {
    // The file-reading adapter is one more path: same records, same stop.
    let (seen, stop) = whole_files();
    let set = SegmentSet::from_paths(&segment_paths()).expect("segment set");
    let mut lsns = Vec::new();
    let summary = set
        .read(DecoderOptions::default(), |r, _| lsns.push(r.lsn))
        .expect("read");
    assert_eq!(lsns, seen.iter().map(|s| s.lsn).collect::<Vec<_>>());
    assert_eq!(summary.stop, stop);
}

/// Regression (found by the `wal_decoder` fuzz target): while looking for the first
/// record, the decoder skips pages filled by a record continued from the previous
/// segment. It must remember those pages' timeline, as xlogreader.c's
/// `XLogReaderValidatePageHeader` does (`latestPageTLI`), whether or not the input
/// stops between two of the skipped pages. Here page 0 claims timeline 2 and a
/// continuation longer than the page, so page 1 (timeline 1) goes backwards.
#[test]
fn find_first_keeps_timeline_of_skipped_pages_across_input_boundaries() {
    let mut seg = segments()[0x24 - 7][..4 * 8192].to_vec();
    seg[4..8].copy_from_slice(&2u32.to_le_bytes()); // xlp_tli of page 0
    seg[16..20].copy_from_slice(&0x1_0000u32.to_le_bytes()); // xlp_rem_len of page 0
    let start = Lsn(0x240_0000);
    let run = |chunk: usize| {
        let mut dec = WalDecoder::new(start, DecoderOptions::default());
        let mut fed = 0;
        loop {
            match dec.next_record() {
                Next::Record(r) => return Err(r.lsn),
                Next::NeedInput if fed == seg.len() => dec.finish_input(),
                Next::NeedInput => {
                    let n = chunk.min(seg.len() - fed);
                    dec.feed(&seg[fed..fed + n]);
                    fed += n;
                }
                Next::Stopped(s) => return Ok(s),
            }
        }
    };
    let whole = run(seg.len());
    assert!(
        matches!(&whole, Ok(Stop::Invalid(e)) if e.lsn == Lsn(0x240_2000)),
        "{whole:?}"
    );
    for chunk in [1, 100, 8192] {
        assert_eq!(run(chunk), whole, "chunks of {chunk}");
    }
}
