use super::decoder::decode_with;
use super::encoder::declined_early;
use super::{decode, encode, Reader, WordsError};

fn prose(n: usize) -> Vec<u8> {
    let words = [
        "the",
        "of",
        "and",
        "government",
        "people",
        "Church",
        "war",
        "history",
        "field",
        "example",
        "thought",
        "Political",
        "room",
        "door",
        "world",
        "which",
        "there",
    ];
    let mut s = Vec::new();
    let mut x: u64 = 7;
    while s.len() < n {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        s.extend_from_slice(words[(x >> 33) as usize % words.len()].as_bytes());
        s.push(if x % 11 == 0 { b'.' } else { b' ' });
        if x % 7 == 0 {
            // Binary noise between texts, including bytes that will be code values.
            s.extend_from_slice(&x.to_le_bytes());
        }
    }
    s
}

#[test]
fn prose_gets_smaller_and_comes_back() {
    let data = prose(200_000);
    let coded = encode(&data).expect("prose is coded");
    assert!(
        coded.len() < data.len() * 2 / 3,
        "{} of {}",
        coded.len(),
        data.len()
    );
    assert_eq!(decode(&coded, data.len()).expect("decodes"), data);
}

#[test]
fn binary_is_declined() {
    let mut x: u64 = 1;
    let data: Vec<u8> = (0..100_000)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            (x >> 56) as u8
        })
        .collect();
    assert!(encode(&data).is_none());
}

/// Pseudo-random bytes, `n` of them.
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            (x >> 56) as u8
        })
        .collect()
}

#[test]
fn large_binary_is_declined_on_the_small_sample() {
    // pgbench-like pages: small integers, zeros, blank-padded filler, random bytes.
    let mut data = Vec::new();
    let mut x: u64 = 3;
    while data.len() < 6 << 20 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        data.extend_from_slice(&(x >> 40).to_le_bytes());
        data.extend_from_slice(&[0; 12]);
        data.extend_from_slice(&noise(24, x));
        if x % 5 == 0 {
            data.extend_from_slice(&[b' '; 84]);
        }
    }
    assert!(declined_early(&data), "the quick estimate declines");
    assert!(encode(&data).is_none());
    let random = noise(5 << 20, 9);
    assert!(declined_early(&random));
    assert!(encode(&random).is_none());
}

#[test]
fn large_prose_is_not_declined_early() {
    let data = prose(3 << 20);
    assert!(!declined_early(&data));
    let coded = encode(&data).expect("prose is coded");
    assert_eq!(decode(&coded, data.len()).expect("decodes"), data);
}

/// Prose with capitals, mixed case, long words, single letters, and every byte value.
fn awkward(n: usize) -> Vec<u8> {
    let words = [
        "the ",
        "The ",
        "of ",
        "Of",
        "government",
        "Government ",
        "GOVERNMENT ",
        "gOvernment ",
        "a ",
        "I ",
        "x",
        "abcdefgh ",
        "Abcdefgh",
        "abcdefghijklmno ",
        "Abcdefghijklmnop ",
        "abcdefghijklmnopq ",
        "Abcdefghijklmnopqrstuvwxyzabcdef ",
        "abcdefghijklmnopqrstuvwxyzabcdefg ",
        "people,  ",
        "People.\n",
    ];
    let mut s = Vec::new();
    let mut x: u64 = 11;
    let mut byte = 0u8;
    while s.len() < n {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        s.extend_from_slice(words[(x >> 33) as usize % words.len()].as_bytes());
        if x % 5 == 0 {
            // Every byte value comes by, code values included.
            s.push(byte);
            s.push(byte.wrapping_add(1));
            byte = byte.wrapping_add(2);
        }
    }
    s.truncate(n);
    s
}

#[test]
fn capitals_escapes_and_words_at_the_ends_come_back() {
    let data = awkward(300_000);
    assert!(encode(&data).is_some(), "the test data is coded");
    // Cut at many places so that words (whole, cut, with and without their space,
    // capitalised) and escaped bytes meet the end of the buffer, and start with a word.
    for cut in (0..64).chain((64..4096).step_by(61)) {
        for part in [&data[..data.len() - cut], &data[cut..]] {
            let Some(coded) = encode(part) else {
                continue;
            };
            assert_eq!(
                decode(&coded, part.len()).expect("decodes"),
                part,
                "cut {cut}"
            );
            assert_eq!(decode_with(&coded, part.len(), false), Ok(part.to_vec()));
        }
    }
    // Every byte value behind code values: the escapes.
    let all: Vec<u8> = (0..=255u8).cycle().take(60_000).collect();
    let mut mixed = awkward(200_000);
    mixed.extend_from_slice(&all);
    let coded = encode(&mixed).expect("coded");
    assert_eq!(decode(&coded, mixed.len()).expect("decodes"), mixed);
}

/// 3000 damaged copies of a coded `awkward(100_000)` (a few bytes changed, mostly in the
/// body, sometimes in the header and dictionary; sometimes cut short), each with a cap near
/// the decoded length and the generator's state after it (`seed` starts it).
fn damaged_copies(seed: u64) -> impl Iterator<Item = (Vec<u8>, usize, u64)> {
    let data_len = 100_000;
    let coded = encode(&awkward(data_len)).expect("coded");
    let body = coded.len() - 2000;
    let mut x = seed;
    (0..3000).map(move |_| {
        let mut bad = coded.clone();
        for _ in 0..1 + x % 3 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            let at = if x % 4 == 0 {
                (x >> 20) as usize % coded.len()
            } else {
                body + (x >> 20) as usize % 2000
            };
            bad[at] = (x >> 40) as u8;
        }
        if x % 7 == 0 {
            bad.truncate(bad.len() - (x >> 50) as usize % 5);
        }
        (bad, data_len + (x % 3) as usize, x)
    })
}

#[test]
fn fast_and_careful_decoding_agree_on_damage() {
    for (bad, cap, _) in damaged_copies(5) {
        assert_eq!(decode_with(&bad, cap, true), decode_with(&bad, cap, false));
    }
}

#[test]
fn capital_marker_on_an_empty_word_is_an_error() {
    // Header: length 1, escape 0xfe, capital 0xff, one code (0x01), no prefixes,
    // dictionary of one empty word; body: capital marker, code.
    let mut coded = 1u64.to_le_bytes().to_vec();
    coded.extend_from_slice(&[0xfe, 0xff, 1, 0x01, 0]);
    coded.extend_from_slice(&1u32.to_le_bytes());
    coded.push(0);
    coded.extend_from_slice(&[0xff, 0x01]);
    assert!(decode(&coded, 10).is_err());
    // The same after enough literals for the fast loop.
    let mut long = 1001u64.to_le_bytes().to_vec();
    long.extend_from_slice(&coded[8..coded.len() - 2]);
    long.extend_from_slice(&[b'a'; 1000]);
    long.extend_from_slice(&[0xff, 0x01, b'a']);
    assert!(decode(&long, 2000).is_err());
    assert!(decode_with(&long, 2000, false).is_err());
    // And a one-letter word in its place decodes.
    let at = 8 + 5 + 4;
    long[at - 4..at].copy_from_slice(&2u32.to_le_bytes());
    long.insert(at, b'q');
    long[..8].copy_from_slice(&1002u64.to_le_bytes());
    let out = decode(&long, 2000).expect("decodes");
    assert_eq!(&out[1000..], b"Qa");
}

#[test]
fn damaged_codes_are_errors_or_other_bytes() {
    let data = prose(50_000);
    let coded = encode(&data).expect("coded");
    for at in (0..coded.len()).step_by(97) {
        let mut bad = coded.clone();
        bad[at] ^= 0x41;
        if let Ok(out) = decode(&bad, data.len()) {
            assert_eq!(out.len(), data.len());
        }
    }
    assert!(decode(&coded, data.len() - 1).is_err(), "length cap");
    assert!(
        decode(&coded[..coded.len() - 1], data.len()).is_err(),
        "truncated"
    );
}

/// Everything `coded` decodes to, read through a [`Reader`] in windows whose sizes `window`
/// gives call by call.
fn read_windowed(
    coded: &[u8],
    cap: usize,
    mut window: impl FnMut() -> usize,
) -> Result<Vec<u8>, WordsError> {
    let mut r = Reader::new(coded, cap)?;
    let mut out = Vec::new();
    loop {
        let at = out.len();
        out.resize(at + window(), 0xaa);
        let n = r.read(&mut out[at..])?;
        out.truncate(at + n);
        if n == 0 {
            return Ok(out);
        }
    }
}

#[test]
fn windowed_reading_gives_the_same_bytes_in_any_windows() {
    let mut mixed = awkward(200_000);
    mixed.extend((0..=255u8).cycle().take(30_000));
    for data in [awkward(300_000), prose(200_000), prose(20_000), mixed] {
        let coded = encode(&data).unwrap_or_else(|| panic!("{} bytes not coded", data.len()));
        let mut r = Reader::new(&coded, data.len()).expect("header");
        assert_eq!(r.len(), data.len());
        assert_eq!(r.read(&mut []), Ok(0), "an empty window reads nothing");
        for w in [1, 2, 3, 17, 47, 48, 49, 64, 1000, 4096, 65536, 1 << 20] {
            assert_eq!(
                read_windowed(&coded, data.len(), || w),
                Ok(data.clone()),
                "window {w}"
            );
        }
        let mut x: u64 = 3;
        let varying = read_windowed(&coded, data.len(), || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            1 + (x >> 40) as usize % 300
        });
        assert_eq!(varying, Ok(data.clone()), "varying windows");
    }
}

#[test]
fn windowed_reading_agrees_with_decode_on_damage() {
    for (bad, cap, x) in damaged_copies(9) {
        let w = [1, 50, 4096, 1 << 17][(x >> 30) as usize % 4];
        assert_eq!(
            read_windowed(&bad, cap, || w),
            decode(&bad, cap),
            "window {w}"
        );
    }
}
