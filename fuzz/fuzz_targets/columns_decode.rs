//! `codec::columns::decode` on arbitrary bytes: an error or at most the length allowed, never
//! a panic or an allocation beyond the cap. The first two bytes (little-endian) give the cap
//! in units of 16 bytes; the rest is the coded input. The same rest, column-coded when
//! `encode` accepts it, must come back exactly.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((cap, rest)) = data.split_first_chunk::<2>() else {
        return;
    };
    let cap = usize::from(u16::from_le_bytes(*cap)) * 16;
    if let Ok(out) = codec::columns::decode(rest, cap) {
        assert!(out.len() <= cap, "decoded past the cap");
    }
    if let Some(coded) = codec::columns::encode(rest) {
        let back = codec::columns::decode(&coded, rest.len()).expect("an encoding decodes");
        assert!(back == rest, "an encoding came back different");
    }
});
