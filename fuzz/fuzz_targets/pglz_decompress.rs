//! pglz: arbitrary streams must decode or fail cleanly within the raw size, and
//! whatever the encoder produces must decode back to its input.
#![no_main]

use codec::pglz::{self, Strategy};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Bytes 0-1: raw size (below 64 KiB); byte 2: flags; the rest: the stream.
    if data.len() < 3 {
        return;
    }
    let rawsize = usize::from(u16::from_le_bytes([data[0], data[1]]));
    let flags = data[2];
    let src = &data[3..];

    for check_complete in [false, true] {
        match pglz::decompress(src, rawsize, check_complete) {
            Ok(out) => {
                assert!(out.len() <= rawsize, "{} > rawsize {rawsize}", out.len());
                if check_complete {
                    assert_eq!(out.len(), rawsize);
                }
            }
            Err(_) => {}
        }
    }

    // Round trip of the same bytes as plain data, with both stock strategies; `None` is
    // pglz_compress's -1 (not worth compressing) and is allowed.
    let strategy = if flags & 1 == 0 {
        Strategy::ALWAYS
    } else {
        Strategy::DEFAULT
    };
    if let Some(c) = pglz::compress(src, &strategy) {
        assert!(c.len() <= pglz::max_output(src.len()));
        let back = pglz::decompress(&c, src.len(), true).expect("own output decodes");
        assert_eq!(back, src);
    }
});
