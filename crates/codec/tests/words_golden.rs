//! The word coding's bytes must never change: containers already written hold them. Each
//! input here is word-coded and the SHA-256 of what comes out (or "declined") is compared
//! with the value recorded when the coder moved from `archive` to `codec`; every coded input
//! must also decode back. (The WAL streams of the PostgreSQL 18 fixture are checked the same
//! way in `crates/archive/tests/words_golden.rs`, where the WAL is taken apart.)

use codec::words::{decode, encode};
use sha2::{Digest, Sha256};

/// A deterministic generator (64-bit LCG).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0
    }
}

/// English-like text: sentences of frequent words (skewed towards the start of the list),
/// capitalised, with commas and full stops.
fn english(n: usize, seed: u64) -> Vec<u8> {
    const WORDS: &str =
        "the of and to a in is that for it as was with be by on not he this are or \
        his from at which but have an they you were her she there been one all we their has \
        would when if so no will more other what time about up out into them can only some \
        could than first two may then do any like my now over such our man me even most made \
        after also did many before must through back years where much your way well down \
        should because each just those people how too little state good very make world still \
        own see men work long get here between both life being under never day same another \
        know while last might us great old year off come since against go came right used take \
        three government history political example thought church";
    let words: Vec<&str> = WORDS.split_whitespace().collect();
    let mut r = Lcg(seed);
    let mut s = Vec::with_capacity(n + 64);
    while s.len() < n {
        let len = 4 + r.next() % 16;
        for i in 0..len {
            let x = (r.next() >> 11) as f64 / (1u64 << 53) as f64;
            let w = words[(x * x * words.len() as f64) as usize];
            if i == 0 {
                s.push(w.as_bytes()[0].to_ascii_uppercase());
                s.extend_from_slice(&w.as_bytes()[1..]);
            } else {
                s.extend_from_slice(w.as_bytes());
            }
            if i + 1 < len {
                if r.next() % 9 == 0 {
                    s.push(b',');
                }
                s.push(b' ');
            }
        }
        s.extend_from_slice(b". ");
    }
    s.truncate(n);
    s
}

/// Prose with binary noise between texts, including bytes that become code values.
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
    let mut r = Lcg(7);
    while s.len() < n {
        let x = r.next();
        s.extend_from_slice(words[(x >> 33) as usize % words.len()].as_bytes());
        s.push(if x % 11 == 0 { b'.' } else { b' ' });
        if x % 7 == 0 {
            s.extend_from_slice(&x.to_le_bytes());
        }
    }
    s
}

/// Capitals, mixed case, long words, single letters, and every byte value.
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
    let mut r = Lcg(11);
    let mut byte = 0u8;
    while s.len() < n {
        let x = r.next();
        s.extend_from_slice(words[(x >> 33) as usize % words.len()].as_bytes());
        if x % 5 == 0 {
            s.push(byte);
            s.push(byte.wrapping_add(1));
            byte = byte.wrapping_add(2);
        }
    }
    s.truncate(n);
    s
}

/// Pseudo-random bytes.
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut r = Lcg(seed);
    (0..n).map(|_| (r.next() >> 56) as u8).collect()
}

/// Frequent words mixed with runs of letters far longer than any coded word.
fn long_words(n: usize) -> Vec<u8> {
    let mut r = Lcg(3);
    let mut s = Vec::new();
    while s.len() < n {
        let x = r.next();
        if x % 13 == 0 {
            let len = 33 + (x >> 20) as usize % 2000;
            s.extend((0..len).map(|i| b'a' + ((x >> 8) as usize + i * 7) as u8 % 26));
        } else {
            s.extend_from_slice(
                ["there ", "which ", "People ", "history "][(x >> 40) as usize % 4].as_bytes(),
            );
        }
        s.push(b' ');
    }
    s.truncate(n);
    s
}

fn inputs() -> Vec<(&'static str, Vec<u8>)> {
    let mut text_and_binary = english(150_000, 1);
    text_and_binary.extend_from_slice(&noise(50_000, 2));
    text_and_binary.extend_from_slice(&english(150_000, 3));
    vec![
        ("empty", Vec::new()),
        ("one byte", b"a".to_vec()),
        ("short text", english(4095, 5)),
        ("4096 bytes of text", english(4096, 5)),
        ("english 64k", english(64 << 10, 6)),
        ("english 1M", english(1 << 20, 7)),
        ("english 3M", english(3 << 20, 8)),
        ("prose 200k", prose(200_000)),
        ("awkward 300k", awkward(300_000)),
        (
            "all byte values",
            (0..=255u8).cycle().take(70_000).collect(),
        ),
        ("noise 100k", noise(100_000, 9)),
        ("noise 5M", noise(5 << 20, 10)),
        ("long words", long_words(400_000)),
        ("text and binary", text_and_binary),
    ]
}

/// The recorded digests, in the order of [`inputs`].
const EXPECTED: &[(&str, &str)] = &[
    ("empty", "declined"),
    ("one byte", "declined"),
    ("short text", "declined"),
    (
        "4096 bytes of text",
        "3e23fd73c5b931bb9dc465822e763b8a9d8ae7edfabeb8ab3cba2fdc4d2ca66f",
    ),
    (
        "english 64k",
        "ed8995e8f5445ec04799f04a49ce7f99b3caf463555b9dee5f2bf5462ef318b6",
    ),
    (
        "english 1M",
        "565c5007fc8eb516609f5db6bb756b5751c229b028cb9169318e4e197265d623",
    ),
    (
        "english 3M",
        "c2334346da9a17f70494966fff044984b4f69b4e354e9d8255f07a37b16409f1",
    ),
    (
        "prose 200k",
        "2274e352efebaf3b7d9c812bada686b37acf1b1cb5b0adf22980d977315fd0c4",
    ),
    (
        "awkward 300k",
        "f90b3164ea64fc3e668cda8115fa2794cf7ab4be4dc7e940e81cd8515e1112fc",
    ),
    ("all byte values", "declined"),
    ("noise 100k", "declined"),
    ("noise 5M", "declined"),
    ("long words", "declined"),
    (
        "text and binary",
        "e5c165d20e1840460ac1628e9902af046714a77ff01b08c527da89c1b1b0be27",
    ),
];

#[test]
fn coded_bytes_never_change() {
    let mut got = Vec::new();
    for (name, data) in inputs() {
        let digest = match encode(&data) {
            None => "declined".to_owned(),
            Some(coded) => {
                assert_eq!(decode(&coded, data.len()).expect("decodes"), data, "{name}");
                format!("{:x}", Sha256::digest(&coded))
            }
        };
        got.push((name, digest));
    }
    for (name, digest) in &got {
        println!("(\"{name}\", \"{digest}\"),");
    }
    let expected: Vec<(&str, String)> = EXPECTED
        .iter()
        .map(|(n, d)| (*n, (*d).to_owned()))
        .collect();
    assert_eq!(got, expected);
}
