//! `codec::words::decode` on arbitrary bytes: an error or at most the length allowed, never a
//! panic or an allocation beyond the cap; and `codec::words::Reader`, reading the same input
//! in windows, gives exactly what `decode` gives (the same bytes, or the same error). The first
//! two bytes (little-endian) give the cap in units of 16 bytes and, in their low six bits, the
//! window (1 to 64 bytes, then doubling); the rest is the coded input.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((head, coded)) = data.split_first_chunk::<2>() else {
        return;
    };
    let head = u16::from_le_bytes(*head);
    let cap = usize::from(head) * 16;
    let whole = codec::words::decode(coded, cap);
    if let Ok(out) = &whole {
        assert!(out.len() <= cap, "decoded past the cap");
    }
    let w = usize::from(head & 63) + 1;
    let window = if w <= 48 { w } else { 64 << (w - 48) };
    let windowed = codec::words::Reader::new(coded, cap).and_then(|mut r| {
        let mut out = Vec::new();
        let mut buf = vec![0u8; window];
        loop {
            let n = r.read(&mut buf)?;
            if n == 0 {
                return Ok(out);
            }
            out.extend_from_slice(&buf[..n]);
            assert!(out.len() <= cap, "read past the cap");
        }
    });
    assert_eq!(whole, windowed, "windowed reading differs (window {window})");
});
