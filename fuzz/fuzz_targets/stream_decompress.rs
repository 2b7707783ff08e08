//! Streaming decompression of every method with a stream format: arbitrary input must
//! decode or fail cleanly, never produce more than the cap, never allocate a window beyond
//! what the cap allows; what the streaming encoder writes must decode back.
#![no_main]

use std::io::{Cursor, Read, Write};

use codec::stream::{Decoder, Encoder};
use codec::{Method, Spec};
use libfuzzer_sys::fuzz_target;

/// The output cap.
const CAP: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    // Byte 0: method; the rest: the stream.
    let Some((&m, src)) = data.split_first() else {
        return;
    };
    let method = Method::ALL[usize::from(m) % Method::ALL.len()];
    let Ok(mut d) = Decoder::new(method, Cursor::new(src.to_vec()), CAP) else {
        // pglz has no stream form.
        assert_eq!(method, Method::Pglz);
        return;
    };
    let mut out = Vec::new();
    let _ = d.read_to_end(&mut out);
    assert!(out.len() <= CAP);

    // The encoder's output must come back exactly.
    let mut e = Encoder::new(&Spec::new(method), Vec::new()).expect("encoder");
    e.write_all(src).expect("write");
    let z = e.finish().expect("finish");
    let mut back = Vec::new();
    Decoder::new(method, Cursor::new(z), src.len())
        .expect("decoder")
        .read_to_end(&mut back)
        .expect("own output decodes");
    assert_eq!(back, src);
});
