//! `codec::words::decode` on arbitrary bytes: an error or at most the length allowed, never a
//! panic or an allocation beyond the cap. The first two bytes (little-endian) give the cap in
//! units of 16 bytes; the rest is the coded input.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((cap, coded)) = data.split_first_chunk::<2>() else {
        return;
    };
    let cap = usize::from(u16::from_le_bytes(*cap)) * 16;
    if let Ok(out) = codec::words::decode(coded, cap) {
        assert!(out.len() <= cap, "decoded past the cap");
    }
});
