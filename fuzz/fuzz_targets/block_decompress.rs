//! Block decompression of every method: arbitrary input must decode or fail cleanly,
//! never produce other than the expected length or more than the cap, and what the
//! block compressor writes must decode back.
#![no_main]

use codec::block;
use codec::{Method, Spec};
use libfuzzer_sys::fuzz_target;

/// Upper bound of expected_len and of the cap, so a bomb is an error, not an OOM.
const MAX_LEN: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    // Byte 0: method; bytes 1-3: expected length (bounded); the rest: compressed bytes.
    if data.len() < 4 {
        return;
    }
    let method = Method::ALL[usize::from(data[0]) % Method::ALL.len()];
    let expected_len =
        (u32::from_le_bytes([data[1], data[2], data[3], 0]) as usize) % (MAX_LEN + 1);
    let src = &data[4..];

    let mut out = Vec::new();
    if block::decompress(method, src, expected_len, &mut out).is_ok() {
        assert_eq!(out.len(), expected_len);
    }
    if let Ok(v) = block::decompress_capped(method, src, expected_len) {
        assert!(v.len() <= expected_len);
    }

    // The compressor's output must come back exactly (one round trip per input).
    let mut c = Vec::new();
    block::compress(&Spec::new(method), src, &mut c).expect("compress");
    assert!(c.len() <= block::max_compressed_size(method, src.len()));
    let mut back = Vec::new();
    block::decompress(method, &c, src.len(), &mut back).expect("own output decodes");
    assert_eq!(back, src);
});
