//! The encoder's dictionary: what coding a stream would gain ([`Plan`]), and the table from
//! a word's letters to its codes ([`Dict`]).

use super::scan::{key, letters_end, not_letters, Counts, Key, Word, LANES_20, MUL};
use super::{MAX_WORD, ONE, RESERVED};

/// What coding a stream would gain: the dictionary, the code values, and the estimated
/// saving and cost (escapes and dictionary) in bytes over the whole stream.
pub(super) struct Plan {
    pub(super) ranked: Vec<Word>,
    pub(super) reserved: [u8; RESERVED],
    pub(super) dict_len: usize,
    saving: u64,
    cost: u64,
}

impl Plan {
    /// Counts words in `blocks` (ranges of `data`) and scales the saving from their total
    /// length `sampled` to `data`'s. `hist` is the byte histogram of `hist_of` bytes.
    pub(super) fn new(
        data: &[u8],
        blocks: impl Iterator<Item = (usize, usize)>,
        hist: &[u64; 256],
        hist_of: usize,
    ) -> Plan {
        let mut counts = Counts::new();
        let mut sampled = 0u64;
        for (start, end) in blocks {
            counts.scan(data, start, end);
            sampled += (end - start) as u64;
        }
        let ranked = counts.ranked(data);
        let mut order: [u8; 256] = std::array::from_fn(|b| b as u8);
        order.sort_unstable_by_key(|&b| (hist[usize::from(b)], b));
        let mut reserved = [0u8; RESERVED];
        reserved.copy_from_slice(&order[..RESERVED]);
        let escapes: u64 = reserved.iter().map(|&b| hist[usize::from(b)]).sum();
        let escapes = escapes * data.len() as u64 / (hist_of as u64).max(1);
        let saving_sample: u64 = ranked
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let code = if i < ONE { 1 } else { 2 };
                u64::from(w.count) * u64::from(w.len).saturating_sub(code)
            })
            .sum();
        let saving = saving_sample * data.len() as u64 / sampled.max(1);
        let dict_len: usize = ranked.iter().map(|w| usize::from(w.len) + 1).sum();
        Plan {
            ranked,
            reserved,
            dict_len,
            saving,
            cost: escapes + dict_len as u64,
        }
    }

    /// Whether the estimated gain is at least `permille` of the stream.
    pub(super) fn gains(&self, len: usize, permille: u64) -> bool {
        self.saving > self.cost && (self.saving - self.cost) * 1000 >= len as u64 * permille
    }
}

/// A word's codes, without and with the space after it. `len` 0 marks a free slot.
#[derive(Clone, Copy, Default)]
pub(super) struct DictSlot {
    head: u64,
    /// Code bytes without the space (0 and 1), with it (2 and 3).
    codes: [u8; 4],
    /// The word's index in [`Dict::words`].
    word: u16,
    len: u8,
    /// Number of code bytes without the space (low four bits) and with it (high four
    /// bits); 0 for no such code.
    lens: u8,
}

impl DictSlot {
    /// The code for the word (`n` letters) and whether `space` follows: code bytes, their
    /// number, and the number of bytes coded.
    #[inline]
    fn pick(&self, n: usize, space: bool) -> Option<([u8; 2], usize, usize)> {
        let with = usize::from(self.lens >> 4);
        let without = usize::from(self.lens & 15);
        if space && with != 0 {
            Some(([self.codes[2], self.codes[3]], with, n + 1))
        } else if without != 0 {
            Some(([self.codes[0], self.codes[1]], without, n))
        } else {
            None
        }
    }
}

/// Open addressing from a word's letters to its codes: the dictionary is at most a few
/// thousand short words in 16-byte slots, so this stays in cache.
pub(super) struct Dict<'a> {
    slots: Vec<DictSlot>,
    words: Vec<&'a [u8]>,
    shift: u32,
}

impl<'a> Dict<'a> {
    pub(super) fn new(n: usize) -> Dict<'a> {
        let size = (n + n / 2).next_power_of_two().max(64);
        Dict {
            slots: vec![DictSlot::default(); size],
            words: Vec::with_capacity(n),
            shift: 64 - size.trailing_zeros(),
        }
    }

    /// Gives `word` (lower-case letters, then maybe a space) the one or two bytes of `code`.
    pub(super) fn insert(&mut self, word: &'a [u8], code: &[u8]) {
        let space = word.last() == Some(&b' ');
        let letters = &word[..word.len() - usize::from(space)];
        let k = key(letters, 0, letters.len());
        let mask = self.slots.len() - 1;
        let mut i = (k.hash >> self.shift) as usize;
        while self.slots[i].len != 0
            && (self.slots[i].head != k.head
                || self.words[usize::from(self.slots[i].word)] != letters)
        {
            i = (i + 1) & mask;
        }
        let s = &mut self.slots[i];
        if s.len == 0 {
            *s = DictSlot {
                head: k.head,
                codes: [0; 4],
                word: self.words.len() as u16,
                len: letters.len() as u8,
                lens: 0,
            };
            self.words.push(letters);
        }
        let at = 2 * usize::from(space);
        s.codes[at..at + code.len()].copy_from_slice(code);
        s.lens |= (code.len() as u8) << (4 * u8::from(space));
    }

    /// The slot of the `n` letters at `at` (not mixed case), whose key is `k`.
    #[inline]
    fn get(&self, data: &[u8], at: usize, n: usize, k: &Key) -> Option<&DictSlot> {
        let mask = self.slots.len() - 1;
        let mut i = (k.hash >> self.shift) as usize;
        loop {
            let s = &self.slots[i];
            if s.len == 0 {
                return None;
            }
            if s.head == k.head
                && usize::from(s.len) == n
                && (n <= 8 || self.words[usize::from(s.word)][8..] == data[at + 8..at + n])
            {
                return Some(s);
            }
            i = (i + 1) & mask;
        }
    }

    /// The slot of a word of fewer than eight letters, `head` (which then tells its length).
    #[inline]
    fn get_short(&self, head: u64, n: usize) -> Option<&DictSlot> {
        let mask = self.slots.len() - 1;
        let mut i = ((head ^ n as u64).wrapping_mul(MUL) >> self.shift) as usize;
        loop {
            let s = &self.slots[i];
            if s.head == head {
                return Some(s);
            }
            if s.len == 0 {
                return None;
            }
            i = (i + 1) & mask;
        }
    }

    /// The word starting at `data[at]` (a letter): its number of letters, and when it is
    /// coded, the code bytes, their number and the number of bytes coded.
    #[inline(always)]
    pub(super) fn find(&self, data: &[u8], at: usize) -> (usize, Option<([u8; 2], usize, usize)>) {
        // Most words are shorter than eight letters: one load tells their length, key and
        // the byte after them.
        if let Some(b) = data.get(at..).and_then(<[u8]>::first_chunk::<8>) {
            let w = u64::from_le_bytes(*b);
            let others = not_letters(w);
            if others != 0 {
                let n = (others.trailing_zeros() / 8) as usize;
                let lanes = (1u64 << (8 * n)) - 1;
                if n < 2 || !w & lanes & LANES_20 & !0xff != 0 {
                    return (n, None);
                }
                let space = (w >> (8 * n)) as u8 == b' ';
                let hit = self.get_short((w & lanes) | 0x20, n);
                return (n, hit.and_then(|s| s.pick(n, space)));
            }
        }
        let end = letters_end(data, at, data.len());
        let n = end - at;
        if !(2..=MAX_WORD).contains(&n) {
            return (n, None);
        }
        let k = key(data, at, n);
        if k.mixed {
            return (n, None);
        }
        let space = data.get(end) == Some(&b' ');
        (n, self.get(data, at, n, &k).and_then(|s| s.pick(n, space)))
    }
}
