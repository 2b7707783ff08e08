//! Arbitrary bytes as a WAL segment stream, fed to the sans-IO decoder in chunks
//! whose sizes come from the input, and once more in one piece: the decoder must
//! never panic, must terminate, and must give the same records and the same stop
//! whichever way the bytes arrive.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use wal::{DecoderOptions, Lsn, Next, Stop, WalDecoder};

/// The long page header of segment 000000010000000000000007 of the PostgreSQL 18
/// fixture (magic 0xD118, 1 MB segments, 8 KiB pages, page 0/700000, a continued
/// record of 0x1E4 bytes). Prefixed when the flag byte asks, so that most inputs get
/// past the magic and geometry checks and exercise the record reader.
const PG18_FIRST_PAGE_HEADER: [u8; 40] = [
    0x18, 0xd1, 0x07, 0x00, 0x01, 0x00, 0x00, 0x00, // magic, info, tli
    0x00, 0x00, 0x70, 0x00, 0x00, 0x00, 0x00, 0x00, // pageaddr 0/700000
    0xe4, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // rem_len, padding
    0x4c, 0xb9, 0x41, 0x7a, 0xcb, 0x44, 0x02, 0x6b, // sysid
    0x00, 0x00, 0x10, 0x00, 0x00, 0x20, 0x00, 0x00, // seg_size 1 MB, XLOG_BLCKSZ 8192
];

/// Where the fixture header says its segment starts.
const PG18_START: Lsn = Lsn(0x70_0000);

type Seen = (u64, u64, wal::RecordHeader, u64, u32, u32, u32, u64);

/// Decodes `stream` fed in `chunks` (sizes, cycled; empty = all at once).
fn run(stream: &[u8], start: Lsn, chunks: &[usize]) -> (Vec<Seen>, Stop) {
    let mut dec = WalDecoder::new(start, DecoderOptions::default());
    let mut seen = Vec::new();
    let mut fed = 0usize;
    let mut sizes = chunks.iter().cycle();
    // Each record consumes at least 24 bytes, and each NeedInput either feeds at least
    // one byte or finishes the input: a bound that only a hang can exceed.
    let mut budget = 4 * stream.len() + 64;
    loop {
        budget = budget
            .checked_sub(1)
            .expect("decoder does not make progress");
        match dec.next_record() {
            Next::Record(r) => {
                let mut h = DefaultHasher::new();
                r.bytes.hash(&mut h);
                assert_eq!(r.bytes.len(), r.header.tot_len as usize);
                assert!(r.next_lsn > r.lsn);
                // Ranges the body reports must lie inside the record.
                for b in &r.body.blocks {
                    assert!(b.image_range.end <= r.bytes.len());
                    assert!(b.data_range.end <= r.bytes.len());
                    let _ = r.image_bytes(b);
                }
                let _ = r.main_data();
                let _ = r.rec_len();
                seen.push((
                    r.lsn.0,
                    r.next_lsn.0,
                    r.header,
                    h.finish(),
                    r.body.fpi_len,
                    r.page_header_bytes,
                    r.padding_bytes,
                    r.switch_tail_bytes,
                ));
            }
            Next::NeedInput => {
                if fed == stream.len() {
                    dec.finish_input();
                    continue;
                }
                let n = match sizes.next() {
                    Some(&n) => n.clamp(1, stream.len() - fed),
                    None => stream.len() - fed,
                };
                dec.feed(&stream[fed..fed + n]);
                fed += n;
            }
            Next::Stopped(s) => {
                // Once stopped, it stays stopped with the same reason.
                match dec.next_record() {
                    Next::Stopped(again) => assert_eq!(again, s),
                    other => panic!("stopped decoder produced {other:?}"),
                }
                return (seen, s);
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    // Byte 0: flags (bit 0: prefix the fixture header); bytes 1-2: chunk-size seed.
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let (seed, body) = if rest.len() >= 2 {
        (u16::from_le_bytes([rest[0], rest[1]]), &rest[2..])
    } else {
        (0, rest)
    };
    let mut stream = Vec::with_capacity(body.len() + 40);
    let start = if flags & 1 != 0 {
        stream.extend_from_slice(&PG18_FIRST_PAGE_HEADER);
        PG18_START
    } else {
        // A 1 MB-aligned start, as the fixture's segments have (flags 14 is segment
        // 000000010000000000000007): the first page must name it in xlp_pageaddr.
        Lsn(u64::from(flags >> 1) << 20)
    };
    stream.extend_from_slice(body);

    // Chunk sizes from a small LCG seeded by the input: 1 byte, page-ish, and larger.
    let mut x = u32::from(seed) | 1;
    let chunks: Vec<usize> = (0..16)
        .map(|_| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            match (x >> 16) % 4 {
                0 => 1,
                1 => ((x >> 8) % 64) as usize + 1,
                2 => ((x >> 4) % 9000) as usize + 1,
                _ => ((x >> 2) % 70_000) as usize + 1,
            }
        })
        .collect();

    let whole = run(&stream, start, &[]);
    let chunked = run(&stream, start, &chunks);
    assert_eq!(whole, chunked, "one-shot and chunked decoding disagree");
});
