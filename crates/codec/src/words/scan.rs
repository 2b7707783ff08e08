//! Finding and counting words: eight-byte loads, letter masks, the word hash, and the
//! open-addressing table of counts the encoder ranks its dictionary from.

use super::MAX_WORD;
use super::MAX_WORDS;

/// Multiplier of the word hash (2^64 / golden ratio); tables index by the product's top bits.
pub(super) const MUL: u64 = 0x9e37_79b9_7f4a_7c15;
pub(super) const LANES_20: u64 = 0x2020_2020_2020_2020;

/// `n` (1..=8) bytes of `data` from `at`, little-endian, zero above them.
#[inline(always)]
fn chunk(data: &[u8], at: usize, n: usize) -> u64 {
    let mask = if n >= 8 {
        u64::MAX
    } else {
        (1u64 << (8 * n)) - 1
    };
    match data.get(at..).and_then(<[u8]>::first_chunk::<8>) {
        Some(b) => u64::from_le_bytes(*b) & mask,
        None => {
            let mut b = [0u8; 8];
            b[..n].copy_from_slice(&data[at..at + n]);
            u64::from_le_bytes(b)
        }
    }
}

/// What identifies a word of `n` (1..=[`MAX_WORD`]) ASCII letters at `at`, first letter taken
/// in lower case: its hash, its first eight bytes (the whole word when `n` <= 8) and whether a
/// letter after the first is upper case (then it is never coded).
pub(super) struct Key {
    pub(super) hash: u64,
    pub(super) head: u64,
    pub(super) mixed: bool,
}

#[inline(always)]
pub(super) fn key(data: &[u8], at: usize, n: usize) -> Key {
    let m = n.min(8);
    let raw = chunk(data, at, m);
    let lanes = if m == 8 {
        u64::MAX
    } else {
        (1u64 << (8 * m)) - 1
    };
    // A letter is upper case when its 0x20 bit is clear; the first letter does not count.
    let mut upper = !raw & lanes & LANES_20 & !0xff;
    let head = raw | 0x20;
    let mut hash = (head ^ n as u64).wrapping_mul(MUL);
    let mut o = 8;
    while o < n {
        let m = (n - o).min(8);
        let c = chunk(data, at + o, m);
        let lanes = if m == 8 {
            u64::MAX
        } else {
            (1u64 << (8 * m)) - 1
        };
        upper |= !c & lanes & LANES_20;
        hash = (hash.rotate_left(26) ^ c).wrapping_mul(MUL);
        o += 8;
    }
    Key {
        hash,
        head,
        mixed: upper != 0,
    }
}

/// Where the run of ASCII letters from `at` ends (at most `end`), eight bytes at a time.
#[inline]
pub(super) fn letters_end(data: &[u8], mut at: usize, end: usize) -> usize {
    while let Some(b) = data.get(at..end).and_then(<[u8]>::first_chunk::<8>) {
        let others = not_letters(u64::from_le_bytes(*b));
        if others != 0 {
            return at + (others.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    while at < end && data[at].is_ascii_alphabetic() {
        at += 1;
    }
    at
}

/// The top bit of each byte of `w` that is not an ASCII letter.
#[inline]
pub(super) fn not_letters(w: u64) -> u64 {
    const TOP: u64 = 0x8080_8080_8080_8080;
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    // Lower case (for letters), then each byte's low seven bits checked against 'a'..='z'
    // without carries between bytes; a byte with its top bit set is never a letter.
    let y = w | LANES_20;
    let a = y & LOW7;
    let at_least_a = (a | TOP) - 0x6161_6161_6161_6161;
    let at_most_z = 0xfafa_fafa_fafa_fafa - a;
    !(at_least_a & at_most_z & !y) & TOP
}

/// One counted word: where it first occurs, its length, and how often it was seen without
/// and with a space after it. `len` 0 marks a free slot.
#[derive(Clone, Copy, Default)]
struct CountSlot {
    pub(super) head: u64,
    at: u32,
    pub(super) len: u32,
    seen: [u32; 2],
}

/// Open addressing from a word to its counts. Keys are not copied: a slot points at the
/// word's first occurrence in the data.
pub(super) struct Counts {
    slots: Vec<CountSlot>,
    used: usize,
    shift: u32,
}

impl Counts {
    pub(super) fn new() -> Counts {
        Counts {
            slots: vec![CountSlot::default(); 1 << 10],
            used: 0,
            shift: 64 - 10,
        }
    }

    #[inline(always)]
    fn add(&mut self, data: &[u8], at: usize, n: usize, k: &Key, space: bool) {
        let mask = self.slots.len() - 1;
        let mut i = (k.hash >> self.shift) as usize;
        loop {
            let s = &mut self.slots[i];
            if s.head == k.head
                && s.len as usize == n
                && (n <= 8 || data[s.at as usize + 8..s.at as usize + n] == data[at + 8..at + n])
            {
                s.seen[usize::from(space)] += 1;
                return;
            }
            if s.len == 0 {
                self.insert(data, i, at, n, k, space);
                return;
            }
            i = (i + 1) & mask;
        }
    }

    /// Puts a word seen for the first time in the free slot `i`.
    #[cold]
    fn insert(&mut self, data: &[u8], i: usize, at: usize, n: usize, k: &Key, space: bool) {
        let s = &mut self.slots[i];
        *s = CountSlot {
            head: k.head,
            at: at as u32,
            len: n as u32,
            seen: [0; 2],
        };
        s.seen[usize::from(space)] = 1;
        self.used += 1;
        if self.used * 2 > self.slots.len() {
            self.grow(data);
        }
    }

    fn grow(&mut self, data: &[u8]) {
        let old = std::mem::take(&mut self.slots);
        self.slots = vec![CountSlot::default(); old.len() * 2];
        self.shift -= 1;
        let mask = self.slots.len() - 1;
        for s in old.into_iter().filter(|s| s.len != 0) {
            let h = key(data, s.at as usize, s.len as usize).hash;
            let mut i = (h >> self.shift) as usize;
            while self.slots[i].len != 0 {
                i = (i + 1) & mask;
            }
            self.slots[i] = s;
        }
    }

    /// Counts the words of `data[start..end]` (words cut by `end` count as they are there).
    pub(super) fn scan(&mut self, data: &[u8], start: usize, end: usize) {
        let mut i = start;
        while i < end {
            if !data[i].is_ascii_alphabetic() {
                i += 1;
                continue;
            }
            // Most words are shorter than eight letters: one load tells their length, key
            // and the byte after them.
            if let Some(b) = data.get(i..end).and_then(<[u8]>::first_chunk::<8>) {
                let w = u64::from_le_bytes(*b);
                let others = not_letters(w);
                if others != 0 {
                    let n = (others.trailing_zeros() / 8) as usize;
                    let lanes = (1u64 << (8 * n)) - 1;
                    let space = (w >> (8 * n)) as u8 == b' ';
                    if n >= 2 && !w & lanes & LANES_20 & !0xff == 0 {
                        let head = (w & lanes) | 0x20;
                        let k = Key {
                            hash: (head ^ n as u64).wrapping_mul(MUL),
                            head,
                            mixed: false,
                        };
                        self.add(data, i, n, &k, space);
                    }
                    i += n + usize::from(space);
                    continue;
                }
            }
            let e = letters_end(data, i, end);
            let n = e - i;
            let space = e < end && data[e] == b' ';
            if (2..=MAX_WORD).contains(&n) {
                let k = key(data, i, n);
                if !k.mixed {
                    self.add(data, i, n, &k, space);
                }
            }
            i = e + usize::from(space);
        }
    }

    /// The words seen at least twice (with their space as another word), ranked by the
    /// letters they would save, most first (ties: byte order), at most [`MAX_WORDS`].
    pub(super) fn ranked(&self, data: &[u8]) -> Vec<Word> {
        let mut words = Vec::new();
        for s in self.slots.iter().filter(|s| s.len != 0) {
            for space in [false, true] {
                let count = s.seen[usize::from(space)];
                if count < 2 {
                    continue;
                }
                let n = s.len as usize;
                let mut text = [0u8; MAX_WORD + 1];
                text[..n].copy_from_slice(&data[s.at as usize..s.at as usize + n]);
                text[0] |= 0x20;
                let len = if space {
                    text[n] = b' ';
                    n + 1
                } else {
                    n
                };
                words.push(Word {
                    text,
                    len: len as u8,
                    count,
                });
            }
        }
        let order = |a: &Word, b: &Word| b.weight().cmp(&a.weight()).then(a.bytes().cmp(b.bytes()));
        if words.len() > MAX_WORDS {
            words.select_nth_unstable_by(MAX_WORDS - 1, order);
            words.truncate(MAX_WORDS);
        }
        words.sort_unstable_by(order);
        words
    }
}

/// A dictionary candidate: lower-case letters, maybe with a space, and its sampled count.
pub(super) struct Word {
    pub(super) text: [u8; MAX_WORD + 1],
    pub(super) len: u8,
    pub(super) count: u32,
}

impl Word {
    pub(super) fn bytes(&self) -> &[u8] {
        &self.text[..usize::from(self.len)]
    }

    pub(super) fn weight(&self) -> u64 {
        u64::from(self.count) * (u64::from(self.len) - 1)
    }
}

/// Byte counts of `data`, in four interleaved tables so that runs of one byte value do not
/// wait on one counter.
pub(super) fn histogram(data: &[u8], hist: &mut [u64; 256]) {
    let mut lanes = [[0u32; 256]; 4];
    // u32 counters: flushed well before they could overflow.
    for part in data.chunks(1 << 30) {
        let mut quads = part.chunks_exact(4);
        for q in &mut quads {
            lanes[0][usize::from(q[0])] += 1;
            lanes[1][usize::from(q[1])] += 1;
            lanes[2][usize::from(q[2])] += 1;
            lanes[3][usize::from(q[3])] += 1;
        }
        for &b in quads.remainder() {
            lanes[0][usize::from(b)] += 1;
        }
        for lane in &mut lanes {
            for (h, c) in hist.iter_mut().zip(lane.iter_mut()) {
                *h += u64::from(*c);
                *c = 0;
            }
        }
    }
}
