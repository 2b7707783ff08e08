//! The link decoder on arbitrary frames: never panics, never emits more than a chunk's cap
//! per frame, and what an encoder produced from the same bytes decodes back exactly. With
//! zstd:6, column-coded chunks are allowed both ways (link version 2).
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::link::{parse_spec, LinkDecoder, LinkEncoder, SenderConfig, CHUNK_RAW_MAX};
use wire::Direction;

const METHODS: [&str; 4] = ["none", "lz4", "zstd:1", "zstd:6"];

fuzz_target!(|data: &[u8]| {
    // Byte 0: method, and whether the session is already ready; the rest: link bytes.
    let Some((&ctl, link)) = data.split_first() else {
        return;
    };
    let spec = parse_spec(METHODS[usize::from(ctl & 3)]).expect("spec");
    let columns = ctl & 3 == 3;
    let mut dec = LinkDecoder::new(Direction::FrontendToBackend, spec)
        .expect("decoder")
        .with_columns(columns);
    if ctl & 4 != 0 {
        dec.session_ready();
    }
    let mut rest = link;
    let mut out = Vec::new();
    while let Ok(Some(d)) = dec.decode(rest, &mut out) {
        assert!(out.len() <= CHUNK_RAW_MAX);
        assert!(d.consumed <= rest.len());
        rest = &rest[d.consumed..];
        out.clear();
    }

    // The same bytes as CopyData messages through an encoder come back.
    let config = SenderConfig {
        columns,
        ..SenderConfig::new(spec)
    };
    let mut enc = LinkEncoder::new(Direction::FrontendToBackend, config).expect("encoder");
    enc.session_ready();
    let mut raw = Vec::new();
    for piece in link.chunks(usize::from(ctl >> 3) * 37 + 1) {
        let mut m = vec![b'd'];
        m.extend_from_slice(&(piece.len() as u32 + 4).to_be_bytes());
        m.extend_from_slice(piece);
        enc.push_bytes(Some(b'd'), &m).expect("push");
        raw.extend_from_slice(&m);
        if piece.first().is_some_and(|b| b & 1 == 0) {
            enc.flush().expect("flush");
        }
    }
    enc.flush().expect("flush");
    let frames = enc.output().to_vec();
    let mut dec = LinkDecoder::new(Direction::FrontendToBackend, spec)
        .expect("decoder")
        .with_columns(columns);
    dec.session_ready();
    let mut back = Vec::new();
    let mut rest = &frames[..];
    while let Some(d) = dec.decode(rest, &mut back).expect("own frames decode") {
        rest = &rest[d.consumed..];
    }
    assert!(rest.is_empty());
    assert_eq!(back, raw);
});
