//! One-shot vs streaming, whole buffer vs one byte at a time, and caps.

use super::*;

const METHODS: [Method; 6] = [
    Method::None,
    Method::Zstd,
    Method::Lz4,
    Method::Gzip,
    Method::Xz,
    Method::Snappy,
];

fn data() -> Vec<u8> {
    (0..50_000u32)
        .map(|i| ((i / 7) % 251) as u8 ^ (i % 3) as u8)
        .collect()
}

fn encode(spec: &Spec, input: &[u8], one_byte: bool) -> Vec<u8> {
    let mut enc = Encoder::new(spec, Vec::new()).expect("encoder");
    if one_byte {
        for b in input {
            enc.write_all(std::slice::from_ref(b)).expect("write");
        }
    } else {
        enc.write_all(input).expect("write");
    }
    enc.finish().expect("finish")
}

/// A reader that hands out one byte per call.
struct Trickle(Vec<u8>, usize);
impl Read for Trickle {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.1 >= self.0.len() || buf.is_empty() {
            return Ok(0);
        }
        buf[0] = self.0[self.1];
        self.1 += 1;
        Ok(1)
    }
}

fn decode_one_byte_reads<R: Read + Send + 'static>(
    m: Method,
    r: R,
    cap: usize,
) -> io::Result<Vec<u8>> {
    let mut d = Decoder::new(m, r, cap).map_err(io::Error::other)?;
    let mut out = Vec::new();
    let mut b = [0u8; 1];
    loop {
        match d.read(&mut b)? {
            0 => return Ok(out),
            _ => out.push(b[0]),
        }
    }
}

#[test]
fn streaming_matches_one_shot() {
    let input = data();
    for m in METHODS {
        let spec = Spec::new(m);
        let whole = encode(&spec, &input, false);
        let trickled = encode(&spec, &input[..5000], true);
        // Decode: whole reader, trickling reader, one-byte reads.
        let mut out = Vec::new();
        Decoder::new(m, io::Cursor::new(whole.clone()), input.len())
            .expect("decoder")
            .read_to_end(&mut out)
            .expect("read");
        assert_eq!(out, input, "{m}");
        let out = decode_one_byte_reads(m, Trickle(whole.clone(), 0), input.len()).expect("read");
        assert_eq!(out, input, "{m}");
        let out = decode_one_byte_reads(m, Trickle(trickled, 0), 5000).expect("read");
        assert_eq!(out, &input[..5000], "{m}");
        // Same bytes as the block API where the formats coincide.
        if matches!(m, Method::Zstd | Method::Gzip | Method::Xz) {
            assert_eq!(
                crate::block::decompress_capped(m, &whole, input.len()).ok(),
                Some(input.clone()),
                "{m}"
            );
        }
        // Cap one below the size: error.
        let mut out = Vec::new();
        let r = Decoder::new(m, io::Cursor::new(whole), input.len() - 1)
            .expect("decoder")
            .read_to_end(&mut out);
        assert!(r.is_err(), "{m}");
    }
}

#[test]
fn zstd_options_stream() {
    let input = data();
    for s in [
        "zstd:level=19,long",
        "zstd:-7",
        "zstd:workers=2,long=24",
        "lz4:9",
        "gzip:1",
        "xz:0",
    ] {
        let spec: Spec = s.parse().expect("valid");
        let z = encode(&spec, &input, false);
        let mut out = Vec::new();
        Decoder::new(spec.method, io::Cursor::new(z), input.len())
            .expect("decoder")
            .read_to_end(&mut out)
            .expect("read");
        assert_eq!(out, input, "{s}");
    }
}

#[test]
fn pglz_has_no_stream() {
    assert!(Encoder::new(&Spec::new(Method::Pglz), Vec::new()).is_err());
    assert!(Decoder::new(Method::Pglz, io::empty(), 10).is_err());
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(32))]
    #[test]
    fn garbage_streams_never_panic(data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
        for m in METHODS {
            if let Ok(mut d) = Decoder::new(m, io::Cursor::new(data.clone()), 10_000) {
                let mut out = Vec::new();
                let _ = d.read_to_end(&mut out);
                proptest::prop_assert!(out.len() <= 10_000);
            }
        }
    }
}

/// A zstd frame without a content size whose header declares a window of `2^log` bytes,
/// holding one raw block with the byte `x`.
fn frame_with_window(log: u8) -> Vec<u8> {
    let mut f = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, (log - 10) << 3];
    f.extend_from_slice(&[0x09, 0x00, 0x00, b'x']);
    f
}

#[test]
fn a_zstd_stream_gets_no_window_beyond_its_cap_and_128_mib() {
    let read = |log: u8, cap: usize| {
        let mut out = Vec::new();
        Decoder::new(Method::Zstd, io::Cursor::new(frame_with_window(log)), cap)
            .expect("decoder")
            .read_to_end(&mut out)
            .map(|_| out)
    };
    // A 2 GiB window for at most 100 bytes of output is refused before it is allocated.
    assert!(read(31, 100).is_err());
    assert!(read(28, 1 << 20).is_err());
    // Windows up to 128 MiB (what `long` writes) always decode, larger ones under a cap that
    // needs them.
    assert_eq!(read(27, 100).expect("128 MiB window"), b"x");
    assert_eq!(read(28, 200 << 20).expect("cap-sized window"), b"x");
}

#[test]
fn an_xz_or_lzma_stream_gets_no_dictionary_beyond_its_cap_and_128_mib() {
    // Found by the stream_decompress fuzz target: a `.lzma` header (properties byte,
    // dictionary size, uncompressed size) asking for a 4 GiB dictionary.
    let mut lzma = vec![0x0c];
    lzma.extend_from_slice(&[0xff; 12]);
    let mut out = Vec::new();
    let r = Decoder::new(Method::Xz, io::Cursor::new(lzma), 1 << 20)
        .expect("decoder")
        .read_to_end(&mut out);
    let err = r.expect_err("refused");
    assert!(err.to_string().contains("emory"), "{err}");
    // Level 9 (a 64 MiB dictionary) still decodes under a small cap.
    let input = data();
    let spec: Spec = "xz:9".parse().expect("spec");
    let z = encode(&spec, &input, false);
    let mut back = Vec::new();
    Decoder::new(Method::Xz, io::Cursor::new(z), input.len())
        .expect("decoder")
        .read_to_end(&mut back)
        .expect("level 9 decodes");
    assert_eq!(back, input);
}

#[test]
fn lz4_framing_is_what_was_asked_and_every_kind_decodes() {
    let input = data();
    let spec = Spec::new(Method::Lz4);
    let mut sizes = Vec::new();
    for (checksums, linked) in [(true, true), (false, true), (true, false), (false, false)] {
        let framing = Framing::default()
            .checksums(checksums)
            .linked_blocks(linked);
        let mut enc = Encoder::with_framing(&spec, Vec::new(), framing).expect("encoder");
        // Flushed in the middle, as a spill file flushes at each record.
        for part in input.chunks(7000) {
            enc.write_all(part).expect("write");
            enc.flush().expect("flush");
        }
        let out = enc.finish().expect("finish");
        // LZ4 frame descriptor FLG (lz4_Frame_format.md): bit 5 block independence,
        // bit 4 block checksum, bit 2 content checksum.
        let flg = out[4];
        assert_eq!(flg & 0x20 != 0, !linked, "{framing:?}");
        assert_eq!(flg & 0x10 != 0, checksums, "{framing:?}");
        assert_eq!(flg & 0x04 != 0, checksums, "{framing:?}");
        let mut back = Vec::new();
        Decoder::new(Method::Lz4, io::Cursor::new(out.clone()), input.len())
            .expect("decoder")
            .read_to_end(&mut back)
            .expect("read");
        assert_eq!(back, input, "{framing:?}");
        sizes.push(out.len());
    }
    assert_eq!(
        Framing::default(),
        Framing::default().checksums(true).linked_blocks(true)
    );
    // Without checksums: 4 bytes less per block and 4 at the end.
    assert!(sizes[1] < sizes[0] && sizes[3] < sizes[2], "{sizes:?}");
}
