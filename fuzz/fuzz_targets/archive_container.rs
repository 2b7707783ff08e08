//! Arbitrary bytes as an archived container: header parsing and full decoding must
//! reject anything malformed with an error, never panic or allocate without bound,
//! and whatever decodes must have exactly the size its header records.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = archive::container::Header::parse(data);
    if let Ok((header, out)) = archive::decode(data) {
        assert_eq!(out.len() as u64, header.original_size);
    }
});
