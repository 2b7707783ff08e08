//! The WAL records transform and word coding on arbitrary bytes, both ways. First byte:
//!
//! - 0 mod 4: the rest is a segment prefix (its page address taken from its own first page).
//!   Whatever `split` accepts, `join` must give back byte for byte.
//! - 1 mod 4: the rest is cut into nine streams and a header for `join`, which must return an
//!   error or exactly the length asked for, never panic or allocate without bound.
//! - 2 mod 4: whatever `words::encode` codes, `words::decode` must give back.
//! - 3 mod 4: `words::decode` of the rest returns an error or at most the length allowed.
#![no_main]

use archive::walsplit::{join, split, SplitInfo, STREAMS};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode % 4 == 2 {
        if let Some(coded) = codec::words::encode(rest) {
            let back = codec::words::decode(&coded, rest.len()).expect("decode of an encode");
            assert!(back == rest, "word coding changed the bytes");
        }
        return;
    }
    if mode % 4 == 3 {
        if let Ok(out) = codec::words::decode(rest, 1 << 20) {
            assert!(out.len() <= 1 << 20);
        }
        return;
    }
    if mode % 4 == 0 {
        if rest.len() < 16 {
            return;
        }
        let start = u64::from_le_bytes(rest[8..16].try_into().unwrap());
        if let Some(s) = split(rest, start) {
            let back = join(start, rest.len() as u64, &s.info, &s.streams).expect("join of a split");
            assert!(back == rest, "split/join changed the bytes");
        }
        return;
    }
    // 8 bytes segment start, 4 valid length, 4 records, 4 lead, 8 first prev, then nine
    // u16 stream lengths, then the streams' bytes.
    if rest.len() < 28 + 2 * STREAMS {
        return;
    }
    let u = |at: usize, n: usize| {
        let mut b = [0u8; 8];
        b[..n].copy_from_slice(&rest[at..at + n]);
        u64::from_le_bytes(b)
    };
    let start = u(0, 8);
    let valid_len = u(8, 4);
    let info = SplitInfo {
        records: u(12, 4),
        lead_len: u(16, 4),
        first_prev: u(20, 8),
    };
    let mut at = 28 + 2 * STREAMS;
    let mut streams: [Vec<u8>; STREAMS] = Default::default();
    for (i, s) in streams.iter_mut().enumerate() {
        let want = u(28 + 2 * i, 2) as usize;
        let n = want.min(rest.len() - at);
        s.extend_from_slice(&rest[at..at + n]);
        at += n;
    }
    if let Ok(out) = join(start, valid_len, &info, &streams) {
        assert_eq!(out.len() as u64, valid_len);
    }
});
