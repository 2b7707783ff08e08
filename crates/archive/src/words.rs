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
//! Words are counted on one 64 KiB block in four; a stream of 1 MiB or more is first judged
//! on sixteen 16 KiB blocks spread over it and declined at once when even that estimate is
//! far from paying, so a binary stream costs about a quarter of a megabyte of counting.
//! Counting and coding read words eight bytes at a time and look them up in open-addressing
//! tables that point into the data instead of holding copies of it. Decoding goes through
//! a table with one entry per symbol (a byte, or a prefix or marker and the byte after it)
//! telling what to copy; capitalised words are copied from an upper-cased copy of the
//! dictionary; anything unusual (long words, damage) takes a slower path that checks each
//! step.
//!
//! Coded form, little-endian: decoded length u64; escape byte; capital marker byte; count
//! `n1` and the `n1` one-byte code values; count `n2` and the `n2` prefix values (a prefix
//! and any following byte is a two-byte code); dictionary length u32 and the dictionary
//! (the words in code order, each followed by a zero byte: one-byte codes first, then
//! prefix 0 second byte 0..=255, prefix 1, ...); the coded body.

/// One-byte codes.
const ONE: usize = 94;
/// Prefixes of two-byte codes (each opens 256 codes).
const PREFIXES: usize = 32;
/// Most words a dictionary holds.
const MAX_WORDS: usize = ONE + PREFIXES * 256;
/// Code values taken from the byte alphabet: escape, capital marker, one-byte codes, prefixes.
const RESERVED: usize = 2 + ONE + PREFIXES;
/// Longest word coded (letters, without the trailing space).
const MAX_WORD: usize = 32;
/// Counting looks at one block in [`SAMPLE_EVERY`] of this size.
const SAMPLE_BLOCK: usize = 64 << 10;
const SAMPLE_EVERY: usize = 4;
/// Coding must save at least this share of the stream (in 1/1000) to be used.
const MIN_GAIN_PERMILLE: u64 = 60;
/// Before that count, a stream of at least [`QUICK_MIN`] bytes is judged on [`QUICK_BLOCKS`]
/// blocks of [`QUICK_BLOCK`] bytes spread over it, and declined at once when even that
/// estimate's gain is below [`QUICK_GAIN_PERMILLE`]: a binary stream then costs a few hundred
/// kilobytes of counting instead of a quarter of its length and a histogram of all of it.
const QUICK_BLOCK: usize = 16 << 10;
const QUICK_BLOCKS: usize = 16;
const QUICK_MIN: usize = 4 * QUICK_BLOCK * QUICK_BLOCKS;
const QUICK_GAIN_PERMILLE: u64 = MIN_GAIN_PERMILLE / 3;

/// Multiplier of the word hash (2^64 / golden ratio); tables index by the product's top bits.
const MUL: u64 = 0x9e37_79b9_7f4a_7c15;
const LANES_20: u64 = 0x2020_2020_2020_2020;

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
struct Key {
    hash: u64,
    head: u64,
    mixed: bool,
}

#[inline(always)]
fn key(data: &[u8], at: usize, n: usize) -> Key {
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
fn letters_end(data: &[u8], mut at: usize, end: usize) -> usize {
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
fn not_letters(w: u64) -> u64 {
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
    head: u64,
    at: u32,
    len: u32,
    seen: [u32; 2],
}

/// Open addressing from a word to its counts. Keys are not copied: a slot points at the
/// word's first occurrence in the data.
struct Counts {
    slots: Vec<CountSlot>,
    used: usize,
    shift: u32,
}

impl Counts {
    fn new() -> Counts {
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
    fn scan(&mut self, data: &[u8], start: usize, end: usize) {
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
    fn ranked(&self, data: &[u8]) -> Vec<Word> {
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
struct Word {
    text: [u8; MAX_WORD + 1],
    len: u8,
    count: u32,
}

impl Word {
    fn bytes(&self) -> &[u8] {
        &self.text[..usize::from(self.len)]
    }

    fn weight(&self) -> u64 {
        u64::from(self.count) * (u64::from(self.len) - 1)
    }
}

/// Byte counts of `data`, in four interleaved tables so that runs of one byte value do not
/// wait on one counter.
fn histogram(data: &[u8], hist: &mut [u64; 256]) {
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

/// What coding a stream would gain: the dictionary, the code values, and the estimated
/// saving and cost (escapes and dictionary) in bytes over the whole stream.
struct Plan {
    ranked: Vec<Word>,
    reserved: [u8; RESERVED],
    dict_len: usize,
    saving: u64,
    cost: u64,
}

impl Plan {
    /// Counts words in `blocks` (ranges of `data`) and scales the saving from their total
    /// length `sampled` to `data`'s. `hist` is the byte histogram of `hist_of` bytes.
    fn new(
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
    fn gains(&self, len: usize, permille: u64) -> bool {
        self.saving > self.cost && (self.saving - self.cost) * 1000 >= len as u64 * permille
    }
}

/// A word's codes, without and with the space after it. `len` 0 marks a free slot.
#[derive(Clone, Copy, Default)]
struct DictSlot {
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
struct Dict<'a> {
    slots: Vec<DictSlot>,
    words: Vec<&'a [u8]>,
    shift: u32,
}

impl<'a> Dict<'a> {
    fn new(n: usize) -> Dict<'a> {
        let size = (n + n / 2).next_power_of_two().max(64);
        Dict {
            slots: vec![DictSlot::default(); size],
            words: Vec::with_capacity(n),
            shift: 64 - size.trailing_zeros(),
        }
    }

    /// Gives `word` (lower-case letters, then maybe a space) the one or two bytes of `code`.
    fn insert(&mut self, word: &'a [u8], code: &[u8]) {
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
    fn find(&self, data: &[u8], at: usize) -> (usize, Option<([u8; 2], usize, usize)>) {
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

/// Whether `data` (of at least [`QUICK_MIN`] bytes) is clearly not worth coding, judged on
/// [`QUICK_BLOCKS`] blocks spread over it: its estimated gain is below
/// [`QUICK_GAIN_PERMILLE`], well under what coding needs.
fn declined_early(data: &[u8]) -> bool {
    if data.len() < QUICK_MIN {
        return false;
    }
    let step = (data.len() - QUICK_BLOCK) / (QUICK_BLOCKS - 1);
    let blocks = (0..QUICK_BLOCKS).map(|i| (i * step, i * step + QUICK_BLOCK));
    let mut hist = [0u64; 256];
    for (start, end) in blocks.clone() {
        histogram(&data[start..end], &mut hist);
    }
    let quick = Plan::new(data, blocks, &hist, QUICK_BLOCK * QUICK_BLOCKS);
    !quick.gains(data.len(), QUICK_GAIN_PERMILLE)
}

/// Word-codes `data`, or `None` when that would not make it clearly smaller.
pub fn encode(data: &[u8]) -> Option<Vec<u8>> {
    // Word positions are kept as u32; no WAL stream comes near that.
    if data.len() < 4096 || u32::try_from(data.len()).is_err() || declined_early(data) {
        return None;
    }
    // Count words (with their space) on a sample; code values are the bytes the stream uses
    // least.
    let mut hist = [0u64; 256];
    histogram(data, &mut hist);
    let blocks = (0..data.len())
        .step_by(SAMPLE_BLOCK * SAMPLE_EVERY)
        .map(|start| (start, (start + SAMPLE_BLOCK).min(data.len())));
    let plan = Plan::new(data, blocks, &hist, data.len());
    if !plan.gains(data.len(), MIN_GAIN_PERMILLE) {
        return None;
    }
    Some(code(data, &plan))
}

/// The coded form of `data` under `plan`.
fn code(data: &[u8], plan: &Plan) -> Vec<u8> {
    let reserved = &plan.reserved;
    let escape = reserved[0];
    let capital = reserved[1];
    let ones = &reserved[2..2 + ONE];
    let prefixes = &reserved[2 + ONE..];
    let mut dict = Dict::new(plan.ranked.len());
    for (i, w) in plan.ranked.iter().enumerate() {
        if i < ONE {
            dict.insert(w.bytes(), &[ones[i]]);
        } else {
            let j = i - ONE;
            dict.insert(w.bytes(), &[prefixes[j / 256], (j % 256) as u8]);
        }
    }
    // Byte classes: 1 a letter, 2 a code value (copied behind an escape), 3 both.
    const LETTER: u8 = 1;
    const CODE_VALUE: u8 = 2;
    let mut class = [0u8; 256];
    for b in (b'A'..=b'Z').chain(b'a'..=b'z') {
        class[usize::from(b)] = LETTER;
    }
    for &b in reserved {
        class[usize::from(b)] |= CODE_VALUE;
    }
    let letter_is_code = reserved.iter().any(u8::is_ascii_alphabetic);

    let mut head = Vec::with_capacity(RESERVED + plan.dict_len + 64);
    head.extend_from_slice(&(data.len() as u64).to_le_bytes());
    head.push(escape);
    head.push(capital);
    head.push(ONE as u8);
    head.extend_from_slice(ones);
    head.push(PREFIXES as u8);
    head.extend_from_slice(prefixes);
    head.extend_from_slice(&(plan.dict_len as u32).to_le_bytes());
    for w in &plan.ranked {
        head.extend_from_slice(w.bytes());
        head.push(0);
    }
    let at = head.len();
    // At most two bytes for each byte (an escaped byte; a capitalised two-letter word with a
    // two-byte code takes three for two), and 16 more for fixed-size copies. Pages not
    // written to are never touched.
    let mut out = vec![0u8; at + 2 * data.len() + 16];
    out[..at].copy_from_slice(&head);
    let mut o = at;
    // Bytes from `copied` to `i` go out as they are, when something else has to be written.
    let mut copied = 0;
    let mut i = 0;
    while i < data.len() {
        let b = data[i];
        let c = class[usize::from(b)];
        if c == 0 {
            i += 1;
            continue;
        }
        if c == CODE_VALUE {
            o = put(&mut out, o, data, copied, i);
            out[o] = escape;
            out[o + 1] = b;
            o += 2;
            i += 1;
            copied = i;
            continue;
        }
        let (n, hit) = dict.find(data, i);
        if let Some((code, len, used)) = hit {
            o = put(&mut out, o, data, copied, i);
            out[o] = capital;
            o += usize::from(b.is_ascii_uppercase());
            out[o] = code[0];
            out[o + 1] = code[1];
            o += len;
            i += used;
            copied = i;
            continue;
        }
        let end = i + n;
        // Not coded: the letters are copied, behind escapes where they are code values.
        if letter_is_code
            && data[i..end]
                .iter()
                .any(|&b| class[usize::from(b)] & CODE_VALUE != 0)
        {
            o = put(&mut out, o, data, copied, i);
            for &b in &data[i..end] {
                if class[usize::from(b)] & CODE_VALUE != 0 {
                    out[o] = escape;
                    o += 1;
                }
                out[o] = b;
                o += 1;
            }
            copied = end;
        }
        i = end;
    }
    o = put(&mut out, o, data, copied, data.len());
    out.truncate(o);
    out.shrink_to_fit();
    out
}

/// Copies `data[from..to]` to `out[o..]` (which has 16 bytes more than that) and returns
/// where it ends: short pieces as one 16-byte copy.
#[inline(always)]
fn put(out: &mut [u8], o: usize, data: &[u8], from: usize, to: usize) -> usize {
    let n = to - from;
    match (data.get(from..from + 16), out.get_mut(o..o + 16)) {
        (Some(src), Some(dst)) if n <= 16 => dst.copy_from_slice(src),
        _ => out[o..o + n].copy_from_slice(&data[from..to]),
    }
    o + n
}

const LIT: u8 = 0;
const ESC: u8 = 1;
const CAP: u8 = 2;
const ONE_CODE: u8 = 3;
const PREFIX: u8 = 4;

/// What the header of a coded stream says.
struct Header<'a> {
    len: usize,
    /// What each byte value is in the body.
    kind: [u8; 256],
    /// For a one-byte code, its word; for a prefix, the word of its second byte 0.
    first: [usize; 256],
    dict: &'a [u8],
    /// Each word as (start, length) in `dict`.
    words: Vec<(usize, usize)>,
}

impl Header<'_> {
    fn too_long(&self) -> String {
        format!("decodes to more than {} bytes", self.len)
    }

    /// Decodes the symbol at `body[i]` into `out` at `o` (below `self.len`, bounded by
    /// `self.len`): the new `i` and `o`.
    fn step(
        &self,
        body: &[u8],
        mut i: usize,
        out: &mut [u8],
        o: usize,
    ) -> Result<(usize, usize), String> {
        let kind = &self.kind;
        let b = body[i];
        i += 1;
        let k = kind[usize::from(b)];
        if k == LIT || k == ESC {
            let b = if k == ESC {
                let &next = body.get(i).ok_or("escape at the end")?;
                i += 1;
                next
            } else {
                b
            };
            if o >= self.len {
                return Err(self.too_long());
            }
            out[o] = b;
            return Ok((i, o + 1));
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
            ONE_CODE => self.first[usize::from(b)],
            PREFIX => {
                let &second = body.get(i).ok_or("two-byte code cut short")?;
                i += 1;
                self.first[usize::from(b)] + usize::from(second)
            }
            _ => return Err("capital marker not followed by a word".into()),
        };
        let &(at, n) = self
            .words
            .get(w)
            .ok_or_else(|| format!("code for word {w}, the dictionary has {}", self.words.len()))?;
        if n > self.len - o {
            return Err(self.too_long());
        }
        out[o..o + n].copy_from_slice(&self.dict[at..at + n]);
        if cap {
            if n == 0 {
                return Err("capital marker on an empty word".into());
            }
            out[o].make_ascii_uppercase();
        }
        Ok((i, o + n))
    }
}

/// Tables for the fast loop of [`decode`]. For a symbol starting with body bytes b0, b1,
/// `lead[b0]` holds where its entry is in `syms` (bits 8-31; for a one-byte symbol the entry
/// itself, for a two-byte symbol the entry of b0 0) and 0xff in its low byte when the symbol
/// is two bytes long (else 0): the entry is `syms[(lead >> 8) + (b1 & lead)]`. An entry is
/// `len` (bits 0-4) bytes from `src` (bits 8-31) in the source buffer, or [`CAPITAL_NEXT`],
/// or [`SLOW`] for [`Header::step`] (long words, errors). The source buffer holds the
/// dictionary, each byte value once (literals and escaped bytes), the dictionary again with
/// each word's first letter in upper case (at `upper`) and 16 bytes more, so that any
/// symbol can be copied as 16 bytes.
struct Fast {
    lead: [u32; 256],
    syms: Vec<u32>,
    src: Vec<u8>,
    upper: usize,
    zero_is_literal: bool,
}

const SLOW: u32 = 0x40;
/// A capital marker, then a two-byte code: a three-byte symbol, `syms` gives the first two.
const CAPITAL_NEXT: u32 = 0x80;
/// How much longer than the decoded length the output buffer of the fast loop is.
const FAST_SLACK: usize = 48;

impl Fast {
    /// The entry of the symbol whose lead is `lead` and second byte `b1`.
    #[inline(always)]
    fn sym(&self, lead: u32, b1: u8) -> u32 {
        let at = (lead >> 8) as usize + usize::from(b1 & lead as u8);
        self.syms.get(at).copied().unwrap_or(SLOW)
    }

    /// Decodes from `body[i]` into `out` from `o` while the symbols are simple; returns the
    /// new `i` and `o` at the first symbol that is not, or at the last body byte. `out` is
    /// [`FAST_SLACK`] bytes longer than the `len` to decode.
    fn run(
        &self,
        body: &[u8],
        mut i: usize,
        out: &mut [u8],
        mut o: usize,
        len: usize,
    ) -> (usize, usize) {
        loop {
            // Two symbols at a time: where the second starts depends on the first byte only,
            // and both bytes it may start at are looked up at once, so that the position
            // after both is known before either symbol is.
            if let Some(w) = body.get(i..i + 4).and_then(<[u8]>::first_chunk::<4>) {
                let w = u32::from_le_bytes(*w);
                let [b0, b1, b2, _] = w.to_le_bytes();
                let lead0 = self.lead[usize::from(b0)];
                // Runs of zeros (free space, padding) eight bytes at a time.
                if w & 0xffff == 0 && self.zero_is_literal {
                    if let (Some(z), Some(dst)) = (
                        body.get(i..i + 8).and_then(<[u8]>::first_chunk::<8>),
                        out.get_mut(o..o + 8),
                    ) {
                        let zeros = match u64::from_le_bytes(*z) {
                            0 => 8,
                            z => (z.trailing_zeros() / 8) as usize,
                        };
                        if zeros <= len - o {
                            dst.fill(0);
                            o += zeros;
                            i += zeros;
                            continue;
                        }
                    }
                }
                let (lead_a, lead_b) = (self.lead[usize::from(b1)], self.lead[usize::from(b2)]);
                // Masks rather than a branch (unpredictable) or a select of the byte to look
                // up (a third load in a row).
                let two = lead0 & 1;
                let lead1 = lead_a ^ ((lead_a ^ lead_b) & two.wrapping_neg());
                let s0 = self.sym(lead0, b1);
                let s1 = self.sym(lead1, (w >> (16 + 8 * two)) as u8);
                let n0 = (s0 & 31) as usize;
                let n1 = (s1 & 31) as usize;
                if (s0 | s1) & (SLOW | CAPITAL_NEXT) == 0 && n0 + n1 <= len - o {
                    let (f0, f1) = ((s0 >> 8) as usize, (s1 >> 8) as usize);
                    if let (Some(dst), Some(src0), Some(src1)) = (
                        out.get_mut(o..o + FAST_SLACK),
                        self.src.get(f0..f0 + 16),
                        self.src.get(f1..f1 + 16),
                    ) {
                        dst[..16].copy_from_slice(src0);
                        dst[n0..n0 + 16].copy_from_slice(src1);
                        o += n0 + n1;
                        i += 2 + (two + (lead1 & 1)) as usize;
                        continue;
                    }
                }
            }
            // One symbol.
            let Some(&[b0, b1]) = body.get(i..i + 2).and_then(<[u8]>::first_chunk::<2>) else {
                break;
            };
            let lead = self.lead[usize::from(b0)];
            let mut s = self.sym(lead, b1);
            let mut next = i + 1 + (lead & 1) as usize;
            if s & (SLOW | CAPITAL_NEXT) != 0 {
                if s & SLOW != 0 {
                    break;
                }
                // A capital marker, then a two-byte code: the code's word, upper-cased.
                let Some(&b2) = body.get(i + 2) else {
                    break;
                };
                s = self.sym(self.lead[usize::from(b1)], b2);
                if s & SLOW != 0 || s & 31 == 0 {
                    break;
                }
                s += (self.upper as u32) << 8;
                next = i + 3;
            }
            let n = (s & 31) as usize;
            let from = (s >> 8) as usize;
            let (true, Some(dst), Some(src)) = (
                n <= len - o,
                out.get_mut(o..o + 16),
                self.src.get(from..from + 16),
            ) else {
                break;
            };
            dst.copy_from_slice(src);
            o += n;
            i = next;
        }
        (i, o)
    }
}

/// Reverses [`encode`]. `max_len` caps the decoded length the header may claim.
pub fn decode(coded: &[u8], max_len: usize) -> Result<Vec<u8>, String> {
    decode_with(coded, max_len, true)
}

/// [`decode`], with the fast loop or (for tests, which compare the two) without it.
fn decode_with(coded: &[u8], max_len: usize, fast_loop: bool) -> Result<Vec<u8>, String> {
    let mut r = Cursor { b: coded, at: 0 };
    let len = u64::from_le_bytes(r.take(8)?.try_into().map_err(|_| "length")?);
    let len = usize::try_from(len).map_err(|_| "decoded length too large")?;
    if len > max_len {
        return Err(format!(
            "decoded length {len} is above the {max_len}-byte limit"
        ));
    }
    let mut kind = [LIT; 256];
    let mut first = [0usize; 256];
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
        first[usize::from(b)] = i;
    }
    let n2 = usize::from(r.u8()?);
    let prefixes = r.take(n2)?;
    for (i, &b) in prefixes.iter().enumerate() {
        if kind[usize::from(b)] != LIT {
            return Err(format!("prefix byte {b:#04x} given twice"));
        }
        kind[usize::from(b)] = PREFIX;
        first[usize::from(b)] = n1 + i * 256;
    }
    let dict_len = u32::from_le_bytes(r.take(4)?.try_into().map_err(|_| "dictionary")?);
    let dict = r.take(dict_len as usize)?;
    if dict.last().is_some_and(|&b| b != 0) {
        return Err("dictionary does not end with a zero byte".into());
    }
    let count = dict.iter().filter(|&&b| b == 0).count();
    if count > n1 + n2 * 256 {
        return Err(format!("{count} words for {} codes", n1 + n2 * 256));
    }
    let mut words = Vec::with_capacity(count);
    let mut start = 0;
    for (i, &b) in dict.iter().enumerate() {
        if b == 0 {
            words.push((start, i - start));
            start = i + 1;
        }
    }
    let h = Header {
        len,
        kind,
        first,
        dict,
        words,
    };
    let body = &coded[r.at..];
    // Room after the output for the fixed-size copies of the fast loop.
    let mut out = vec![0u8; len + FAST_SLACK];
    let mut o = 0;
    let mut i = 0;
    // The fast loop needs tables of 256 entries for each prefix (and the escape and the
    // capital marker): only worth building for a body several times that long.
    let src_len = 2 * dict.len() + 256 + 16;
    if fast_loop && body.len() >= (n2 + 3) * 64 && src_len < 1 << 24 {
        let mut src = Vec::with_capacity(src_len);
        src.extend_from_slice(dict);
        let bytes_at = src.len();
        src.extend(0..=255u8);
        let upper = src.len();
        src.extend_from_slice(dict);
        for &(at, n) in &h.words {
            if n > 0 {
                src[upper + at].make_ascii_uppercase();
            }
        }
        src.resize(src_len, 0);
        // Words longer than 16 bytes go the slow way; so do empty words after a capital.
        let word = |w: usize, cap: bool| match h.words.get(w) {
            Some(&(at, n)) if n <= 16 && (!cap || n > 0) => {
                ((at + if cap { upper } else { 0 }) as u32) << 8 | n as u32
            }
            _ => SLOW,
        };
        let byte = |b: usize| ((bytes_at + b) as u32) << 8 | 1;
        // Entries 0-255: the symbols of one byte, by that byte.
        let mut syms: Vec<u32> = Vec::with_capacity(256 * (n2 + 3));
        let mut lead = [0u32; 256];
        for b in 0..256 {
            lead[b] = (b as u32) << 8;
            syms.push(match kind[b] {
                LIT => byte(b),
                ONE_CODE => word(first[b], false),
                _ => SLOW,
            });
        }
        let mut row = |b: u8, syms: &mut Vec<u32>, f: &dyn Fn(usize) -> u32| {
            lead[usize::from(b)] = (syms.len() as u32) << 8 | 0xff;
            syms.extend((0..256).map(f));
        };
        row(escape, &mut syms, &byte);
        row(capital, &mut syms, &|b1| match kind[b1] {
            ONE_CODE => word(first[b1], true),
            PREFIX => CAPITAL_NEXT,
            _ => SLOW,
        });
        for &p in prefixes {
            let w0 = first[usize::from(p)];
            row(p, &mut syms, &|b1| word(w0 + b1, false));
        }
        let fast = Fast {
            lead,
            syms,
            src,
            upper,
            zero_is_literal: kind[0] == LIT,
        };
        while i + 1 < body.len() {
            (i, o) = fast.run(body, i, &mut out, o, len);
            if i + 1 < body.len() {
                (i, o) = h.step(body, i, &mut out, o)?;
            }
        }
    }
    while i < body.len() {
        (i, o) = h.step(body, i, &mut out, o)?;
    }
    if o != len {
        return Err(format!("decodes to {o} bytes, expected {len}"));
    }
    out.truncate(len);
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

    #[test]
    fn fast_and_careful_decoding_agree_on_damage() {
        let data = awkward(100_000);
        let coded = encode(&data).expect("coded");
        let body = coded.len() - 2000;
        let mut x: u64 = 5;
        for _ in 0..3000 {
            let mut bad = coded.clone();
            for _ in 0..1 + x % 3 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                // Mostly the body, sometimes the header and dictionary.
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
            let cap = data.len() + (x % 3) as usize;
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
}
