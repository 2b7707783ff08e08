//! Word coding: text inside WAL streams, rewritten so that a general-purpose compressor sees
//! words instead of letters.
//!
//! zstd codes literals one byte at a time with one Huffman table, so prose costs it about
//! three bits a letter even when the same few thousand words come back again and again.
//! Here the most frequent words of a stream (lower-case ASCII letters, with the space after
//! them when there is one) get one- or two-byte codes taken from the byte values the stream
//! uses least; a capitalised word is a marker byte and the word's code. Everything else is
//! copied, and a copied byte that happens to be a code value is preceded by an escape byte,
//! so any input comes back exactly. [`encode`] declines (returns `None`) when the words it
//! would code do not outweigh the escapes and the dictionary, which is the case for binary
//! streams such as pgbench's.
//!
//! Coded form, little-endian: decoded length u64; escape byte; capital marker byte; count
//! `n1` and the `n1` one-byte code values; count `n2` and the `n2` prefix values (a prefix
//! and any following byte is a two-byte code); dictionary length u32 and the dictionary
//! (the words in code order, each followed by a zero byte: one-byte codes first, then
//! prefix 0 second byte 0..=255, prefix 1, ...); the coded body.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// FNV-1a: words are short, and SipHash's resistance to chosen keys buys nothing here
/// (a bad distribution only costs time, never correctness).
#[derive(Default)]
struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

type Map<K, V> = HashMap<K, V, BuildHasherDefault<Fnv>>;

/// One-byte codes.
const ONE: usize = 94;
/// Prefixes of two-byte codes (each opens 256 codes).
const PREFIXES: usize = 32;
/// Code values taken from the byte alphabet: escape, capital marker, one-byte codes, prefixes.
const RESERVED: usize = 2 + ONE + PREFIXES;
/// Longest word coded (letters, without the trailing space).
const MAX_WORD: usize = 32;
/// Counting looks at one block in [`SAMPLE_EVERY`] of this size.
const SAMPLE_BLOCK: usize = 64 << 10;
const SAMPLE_EVERY: usize = 4;
/// Coding must save at least this share of the stream (in 1/1000) to be used.
const MIN_GAIN_PERMILLE: usize = 60;

/// A token at `at`: a run of ASCII letters, with the space after it if there is one.
/// Returns (letters, with_space) lengths; letters = 0 when `at` is not a letter.
fn token(data: &[u8], at: usize) -> (usize, bool) {
    let mut end = at;
    while end < data.len() && data[end].is_ascii_alphabetic() {
        end += 1;
    }
    let n = end - at;
    (n, n > 0 && end < data.len() && data[end] == b' ')
}

/// The lower-case form of a word that is all lower case or capitalised, into `buf`.
fn lower_key<'a>(word: &[u8], buf: &'a mut [u8; MAX_WORD + 1]) -> Option<(&'a [u8], bool)> {
    if word.len() < 2 || word.len() > MAX_WORD || word[1..].iter().any(u8::is_ascii_uppercase) {
        return None;
    }
    buf[..word.len()].copy_from_slice(word);
    let cap = word[0].is_ascii_uppercase();
    buf[0] = buf[0].to_ascii_lowercase();
    Some((&buf[..word.len()], cap))
}

/// Word-codes `data`, or `None` when that would not make it clearly smaller.
pub fn encode(data: &[u8]) -> Option<Vec<u8>> {
    if data.len() < 4096 {
        return None;
    }
    // Count words (with their space) on a sample.
    let mut counts: Map<Vec<u8>, u32> = Map::default();
    let mut buf = [0u8; MAX_WORD + 1];
    for block in data.chunks(SAMPLE_BLOCK).step_by(SAMPLE_EVERY) {
        let mut i = 0;
        while i < block.len() {
            let (n, space) = token(block, i);
            if n == 0 {
                i += 1;
                continue;
            }
            if let Some((key, _)) = lower_key(&block[i..i + n], &mut buf) {
                let len = key.len();
                let mut k = [0u8; MAX_WORD + 1];
                k[..len].copy_from_slice(key);
                let klen = if space {
                    k[len] = b' ';
                    len + 1
                } else {
                    len
                };
                match counts.get_mut(&k[..klen]) {
                    Some(c) => *c += 1,
                    None => {
                        counts.insert(k[..klen].to_vec(), 1);
                    }
                }
            }
            i += n + usize::from(space);
        }
    }
    let mut ranked: Vec<(Vec<u8>, u32)> = counts.into_iter().filter(|(_, c)| *c >= 2).collect();
    ranked.sort_unstable_by(|a, b| {
        let wa = u64::from(a.1) * (a.0.len() as u64 - 1);
        let wb = u64::from(b.1) * (b.0.len() as u64 - 1);
        wb.cmp(&wa).then_with(|| a.0.cmp(&b.0))
    });
    ranked.truncate(ONE + PREFIXES * 256);

    // Code values: the bytes the stream uses least.
    let mut hist = [0u64; 256];
    for &b in data {
        hist[usize::from(b)] += 1;
    }
    let mut order: Vec<u8> = (0..=255u8).collect();
    order.sort_by_key(|&b| (hist[usize::from(b)], b));
    let reserved = &order[..RESERVED];
    let escapes: u64 = reserved.iter().map(|&b| hist[usize::from(b)]).sum();

    // Estimated saving, scaled from the sample to the whole stream.
    let sampled: u64 = data
        .chunks(SAMPLE_BLOCK)
        .step_by(SAMPLE_EVERY)
        .map(|b| b.len() as u64)
        .sum();
    let saving_sample: u64 = ranked
        .iter()
        .enumerate()
        .map(|(i, (w, c))| {
            let code = if i < ONE { 1 } else { 2 };
            u64::from(*c) * (w.len() as u64).saturating_sub(code)
        })
        .sum();
    let saving = saving_sample * data.len() as u64 / sampled.max(1);
    let dict_len: usize = ranked.iter().map(|(w, _)| w.len() + 1).sum();
    let cost = escapes + dict_len as u64;
    if saving <= cost || (saving - cost) * 1000 < (data.len() * MIN_GAIN_PERMILLE) as u64 {
        return None;
    }

    let escape = reserved[0];
    let capital = reserved[1];
    let ones = &reserved[2..2 + ONE];
    let prefixes = &reserved[2 + ONE..];
    let mut is_reserved = [false; 256];
    for &b in reserved {
        is_reserved[usize::from(b)] = true;
    }
    let mut table = Table::new(ranked.len());
    for (i, (w, _)) in ranked.iter().enumerate() {
        let code = if i < ONE {
            [ones[i], 0, 1]
        } else {
            let j = i - ONE;
            [prefixes[j / 256], (j % 256) as u8, 2]
        };
        table.insert(w, code);
    }

    let mut out = Vec::with_capacity(data.len() / 2 + dict_len + 64);
    out.extend_from_slice(&(data.len() as u64).to_le_bytes());
    out.push(escape);
    out.push(capital);
    out.push(ONE as u8);
    out.extend_from_slice(ones);
    out.push(PREFIXES as u8);
    out.extend_from_slice(prefixes);
    out.extend_from_slice(&(dict_len as u32).to_le_bytes());
    for (w, _) in &ranked {
        out.extend_from_slice(w);
        out.push(0);
    }
    let literal = |out: &mut Vec<u8>, bytes: &[u8]| {
        for &b in bytes {
            if is_reserved[usize::from(b)] {
                out.push(escape);
            }
            out.push(b);
        }
    };
    let mut i = 0;
    while i < data.len() {
        let (n, space) = token(data, i);
        if n == 0 {
            literal(&mut out, &data[i..i + 1]);
            i += 1;
            continue;
        }
        let word = &data[i..i + n];
        let mut coded = false;
        if let Some((key, cap)) = lower_key(word, &mut buf) {
            let len = key.len();
            let h = fnv(key);
            let hit = if space {
                table
                    .get(fnv_more(h, b' '), key, true)
                    .map(|c| (c, len + 1))
            } else {
                None
            }
            .or_else(|| table.get(h, key, false).map(|c| (c, len)));
            if let Some((code, used)) = hit {
                if cap {
                    out.push(capital);
                }
                out.extend_from_slice(&code[..usize::from(code[2])]);
                i += used;
                coded = true;
            }
        }
        if !coded {
            literal(&mut out, word);
            i += n;
        }
    }
    Some(out)
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |h, &b| fnv_more(h, b))
}

fn fnv_more(h: u64, b: u8) -> u64 {
    (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
}

/// Open addressing from a word's FNV hash to its code (two code bytes and the code length):
/// the dictionary is at most a few thousand short words, so this stays in cache.
struct Table<'a> {
    slots: Vec<(u64, u32)>,
    words: Vec<(&'a [u8], [u8; 3])>,
    mask: usize,
}

impl<'a> Table<'a> {
    fn new(n: usize) -> Table<'a> {
        let size = (n * 4).next_power_of_two().max(64);
        Table {
            slots: vec![(0, u32::MAX); size],
            words: Vec::with_capacity(n),
            mask: size - 1,
        }
    }

    fn insert(&mut self, word: &'a [u8], code: [u8; 3]) {
        let h = fnv(word);
        let mut at = h as usize & self.mask;
        while self.slots[at].1 != u32::MAX {
            at = (at + 1) & self.mask;
        }
        self.slots[at] = (h, self.words.len() as u32);
        self.words.push((word, code));
    }

    /// The code of `letters` (plus a space when `space`), whose hash is `h`.
    fn get(&self, h: u64, letters: &[u8], space: bool) -> Option<[u8; 3]> {
        let mut at = h as usize & self.mask;
        loop {
            let (sh, idx) = self.slots[at];
            if idx == u32::MAX {
                return None;
            }
            if sh == h {
                let (w, code) = self.words[idx as usize];
                let n = letters.len();
                if w.len() == n + usize::from(space)
                    && &w[..n] == letters
                    && (!space || w[n] == b' ')
                {
                    return Some(code);
                }
            }
            at = (at + 1) & self.mask;
        }
    }
}

/// Reverses [`encode`]. `max_len` caps the decoded length the header may claim.
pub fn decode(coded: &[u8], max_len: usize) -> Result<Vec<u8>, String> {
    let mut r = Cursor { b: coded, at: 0 };
    let len = u64::from_le_bytes(r.take(8)?.try_into().map_err(|_| "length")?);
    let len = usize::try_from(len).map_err(|_| "decoded length too large")?;
    if len > max_len {
        return Err(format!(
            "decoded length {len} is above the {max_len}-byte limit"
        ));
    }
    const LIT: u8 = 0;
    const ESC: u8 = 1;
    const CAP: u8 = 2;
    const ONE_CODE: u8 = 3;
    const PREFIX: u8 = 4;
    let mut kind = [LIT; 256];
    let mut index = [0u16; 256];
    let escape = r.u8()?;
    let capital = r.u8()?;
    if escape == capital {
        return Err("escape and capital marker are the same byte".into());
    }
    kind[usize::from(escape)] = ESC;
    kind[usize::from(capital)] = CAP;
    let n1 = usize::from(r.u8()?);
    for (i, &b) in r.take(n1)?.iter().enumerate() {
        if kind[usize::from(b)] != LIT {
            return Err(format!("code byte {b:#04x} given twice"));
        }
        kind[usize::from(b)] = ONE_CODE;
        index[usize::from(b)] = i as u16;
    }
    let n2 = usize::from(r.u8()?);
    for (i, &b) in r.take(n2)?.iter().enumerate() {
        if kind[usize::from(b)] != LIT {
            return Err(format!("prefix byte {b:#04x} given twice"));
        }
        kind[usize::from(b)] = PREFIX;
        index[usize::from(b)] = i as u16;
    }
    let dict_len = u32::from_le_bytes(r.take(4)?.try_into().map_err(|_| "dictionary")?);
    let dict = r.take(dict_len as usize)?;
    let words: Vec<&[u8]> = if dict.is_empty() {
        Vec::new()
    } else {
        if dict.last() != Some(&0) {
            return Err("dictionary does not end with a zero byte".into());
        }
        dict[..dict.len() - 1].split(|&b| b == 0).collect()
    };
    if words.len() > n1 + n2 * 256 {
        return Err(format!("{} words for {} codes", words.len(), n1 + n2 * 256));
    }
    let mut out = Vec::with_capacity(len);
    let body = &coded[r.at..];
    let mut i = 0;
    let word_at = |w: usize| -> Result<&[u8], String> {
        words
            .get(w)
            .copied()
            .ok_or_else(|| format!("code for word {w}, the dictionary has {}", words.len()))
    };
    while i < body.len() {
        // Copy a run of literal bytes at once.
        let run = body[i..]
            .iter()
            .position(|&b| kind[usize::from(b)] != LIT)
            .unwrap_or(body.len() - i);
        if run > 0 {
            if out.len() + run > len {
                return Err(format!("decodes to more than {len} bytes"));
            }
            out.extend_from_slice(&body[i..i + run]);
            i += run;
            continue;
        }
        let b = body[i];
        i += 1;
        let k = kind[usize::from(b)];
        if k == ESC {
            let &next = body.get(i).ok_or("escape at the end")?;
            out.push(next);
            i += 1;
            continue;
        }
        let cap = k == CAP;
        let (k, b) = if cap {
            let &next = body.get(i).ok_or("capital marker at the end")?;
            i += 1;
            (kind[usize::from(next)], next)
        } else {
            (k, b)
        };
        let w = match k {
            ONE_CODE => usize::from(index[usize::from(b)]),
            PREFIX => {
                let &second = body.get(i).ok_or("two-byte code cut short")?;
                i += 1;
                n1 + usize::from(index[usize::from(b)]) * 256 + usize::from(second)
            }
            _ => return Err("capital marker not followed by a word".into()),
        };
        let word = word_at(w)?;
        if out.len() + word.len() > len {
            return Err(format!("decodes to more than {len} bytes"));
        }
        let start = out.len();
        out.extend_from_slice(word);
        if cap {
            out[start] = out[start].to_ascii_uppercase();
        }
        if out.len() > len {
            return Err(format!("decodes to more than {len} bytes"));
        }
    }
    if out.len() != len {
        return Err(format!("decodes to {} bytes, expected {len}", out.len()));
    }
    Ok(out)
}

struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.b.len() - self.at < n {
            return Err(format!("word-coded stream ends early at {}", self.at));
        }
        let s = &self.b[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
