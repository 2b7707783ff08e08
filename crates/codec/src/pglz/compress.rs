//! The pglz encoder: a decision-for-decision port of `pglz_compress` and `pglz_find_match`
//! (`src/common/pg_lzcompress.c`, identical in PostgreSQL 13 to 18) so that the output is
//! byte-identical to what a server writes.
//!
//! Faithfulness notes, each matching the C code:
//! - The hash table has 512..8192 lists depending on the input length, and hashes the next
//!   four bytes as C `char`s (signed on x86-64, see [`HashByte`]).
//! - History entries are numbered 1..=4096 (0 = invalid), recycled round-robin; each hash
//!   list is doubly linked, newest first. A recycled entry is unlinked from its old list.
//! - A candidate search stops at offset `>= 0x0fff` or a 273-byte match; `good_match`
//!   shrinks by `good_drop` percent per candidate, only when another candidate follows.
//! - Once a 16-byte match is known, a candidate must equal it for that whole length
//!   (C `memcmp`) before it is extended.
//! - Every consumed input byte, literal or matched, enters the history.

use super::strategy::Strategy;
use super::{HISTORY_SIZE, MAX_HISTORY_LISTS, MAX_MATCH};

/// How input bytes are widened before hashing: the C code hashes plain `char`.
///
/// This only changes which hash list a position lands in, hence which match is found
/// first; any choice decodes identically. Pick the one of the server that wrote the WAL.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum HashByte {
    /// `char` is signed (x86-64, i386 and most other gcc/clang targets): bytes >= 0x80 are
    /// sign-extended to negative `int`s before shifting.
    #[default]
    Signed,
    /// `char` is unsigned (aarch64 Linux, ppc64, s390x).
    Unsigned,
}

/// Marks "no entry" in `next`/`prev`/list heads (`INVALID_ENTRY` in `pg_lzcompress.c`).
const INVALID: u16 = 0;

/// One `PGLZ_HistEntry`; `prev == INVALID` means "head of its list" (the C `NULL`).
#[derive(Clone, Copy, Default)]
struct HistEntry {
    next: u16,
    prev: u16,
    hindex: u16,
    pos: usize,
}

/// Reusable pglz encoder state (the C code's static `hist_start`/`hist_entries` arrays).
///
/// Keep one per thread and call [`Compressor::compress_into`] for every page: nothing is
/// allocated after the first call once `out` has grown.
#[derive(Clone)]
pub struct Compressor {
    hist_start: Box<[u16; MAX_HISTORY_LISTS]>,
    entries: Box<[HistEntry; HISTORY_SIZE + 1]>,
    hash_byte: HashByte,
}

impl Default for Compressor {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Compressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compressor")
            .field("hash_byte", &self.hash_byte)
            .finish_non_exhaustive()
    }
}

/// Per-call state: the input, hashing parameters and the round-robin history cursor.
struct Run<'a> {
    src: &'a [u8],
    mask: i32,
    signed: bool,
    hist_next: u16,
    hist_recycle: bool,
}

impl Run<'_> {
    /// `pglz_hist_idx`: hash of the 4 bytes at `pos`, or of the one byte when fewer remain.
    #[inline]
    fn hist_idx(&self, pos: usize) -> usize {
        let s = &self.src[pos..];
        let b = |i: usize| -> i32 {
            if self.signed {
                i32::from(s[i] as i8)
            } else {
                i32::from(s[i])
            }
        };
        let h = if s.len() < 4 {
            b(0)
        } else {
            (b(0) << 6) ^ (b(1) << 4) ^ (b(2) << 2) ^ b(3)
        };
        // `mask` is below 8192, so the masked value is non-negative and fits.
        (h & self.mask) as usize
    }
}

impl Compressor {
    /// A compressor hashing like x86-64 PostgreSQL ([`HashByte::Signed`]).
    pub fn new() -> Self {
        Self::with_hash_byte(HashByte::Signed)
    }

    /// A compressor hashing bytes as the given `char` signedness.
    pub fn with_hash_byte(hash_byte: HashByte) -> Self {
        Compressor {
            hist_start: Box::new([INVALID; MAX_HISTORY_LISTS]),
            entries: Box::new([HistEntry::default(); HISTORY_SIZE + 1]),
            hash_byte,
        }
    }

    /// The byte signedness this compressor hashes with.
    pub fn hash_byte(&self) -> HashByte {
        self.hash_byte
    }

    /// Compresses `src` into `out` (cleared first) as `pglz_compress` would.
    ///
    /// Returns `false`, leaving `out` empty, where PostgreSQL returns -1: the strategy
    /// refuses the input size, the output would not be smaller than the strategy demands,
    /// or no match was found within `first_success_by` output bytes.
    pub fn compress_into(&mut self, src: &[u8], strategy: &Strategy, out: &mut Vec<u8>) -> bool {
        out.clear();
        let ok = self.run(src, strategy, out);
        if !ok {
            out.clear();
        }
        ok
    }

    fn run(&mut self, src: &[u8], strategy: &Strategy, out: &mut Vec<u8>) -> bool {
        // slen is an int32 in C.
        let Ok(slen) = i32::try_from(src.len()) else {
            return false;
        };
        if strategy.match_size_good <= 0
            || slen < strategy.min_input_size
            || slen > strategy.max_input_size
        {
            return false;
        }
        let good_match = strategy.match_size_good.clamp(17, MAX_MATCH as i32);
        let good_drop = strategy.match_size_drop.clamp(0, 100);
        let need_rate = strategy.min_comp_rate.clamp(0, 99);
        let result_max: i64 = if slen > i32::MAX / 100 {
            i64::from(slen / 100) * i64::from(100 - need_rate)
        } else {
            i64::from(slen * (100 - need_rate) / 100)
        };
        let hashsz: usize = match slen {
            0..128 => 512,
            128..256 => 1024,
            256..512 => 2048,
            512..1024 => 4096,
            _ => 8192,
        };
        self.hist_start[..hashsz].fill(INVALID);
        let mut run = Run {
            src,
            mask: hashsz as i32 - 1,
            signed: self.hash_byte == HashByte::Signed,
            hist_next: 1,
            hist_recycle: false,
        };

        out.reserve(src.len() + 4);
        // Control byte state; `ctrlp == None` is the C code's `ctrl_dummy`.
        let mut ctrlp: Option<usize> = None;
        let mut ctrlb: u8 = 0;
        let mut ctrl: u8 = 0;
        let mut found_match = false;
        let mut dp = 0usize;

        while dp < src.len() {
            let written = out.len() as i64;
            if written >= result_max {
                return false;
            }
            if !found_match && written >= i64::from(strategy.first_success_by) {
                return false;
            }
            // pglz_out_ctrl: start a new control byte once 8 items used the current one.
            if ctrl == 0 {
                if let Some(p) = ctrlp {
                    out[p] = ctrlb;
                }
                ctrlp = Some(out.len());
                out.push(0);
                ctrlb = 0;
                ctrl = 1;
            }
            if let Some((len, off)) = self.find_match(&run, dp, good_match, good_drop) {
                // pglz_out_tag
                ctrlb |= ctrl;
                ctrl <<= 1;
                let hi = ((off & 0xf00) >> 4) as u8;
                if len > 17 {
                    out.extend_from_slice(&[hi | 0x0f, (off & 0xff) as u8, (len - 18) as u8]);
                } else {
                    out.extend_from_slice(&[hi | (len - 3) as u8, (off & 0xff) as u8]);
                }
                for _ in 0..len {
                    self.hist_add(&mut run, dp);
                    dp += 1;
                }
                found_match = true;
            } else {
                // pglz_out_literal
                out.push(src[dp]);
                ctrl <<= 1;
                self.hist_add(&mut run, dp);
                dp += 1;
            }
        }
        if let Some(p) = ctrlp {
            out[p] = ctrlb;
        }
        (out.len() as i64) < result_max
    }

    /// `pglz_hist_add`: enters position `pos` at the head of its hash list.
    #[inline]
    fn hist_add(&mut self, run: &mut Run<'_>, pos: usize) {
        let hindex = run.hist_idx(pos);
        let hn = run.hist_next;
        if run.hist_recycle {
            // Unlink the entry being reused from its old list. Entry 0 may be scribbled on
            // through `next`, exactly as in C; it is never read as a real entry.
            let old = self.entries[usize::from(hn)];
            if old.prev == INVALID {
                self.hist_start[usize::from(old.hindex)] = old.next;
            } else {
                self.entries[usize::from(old.prev)].next = old.next;
            }
            self.entries[usize::from(old.next)].prev = old.prev;
        }
        let head = self.hist_start[hindex];
        self.entries[usize::from(hn)] = HistEntry {
            next: head,
            prev: INVALID,
            hindex: hindex as u16,
            pos,
        };
        self.entries[usize::from(head)].prev = hn;
        self.hist_start[hindex] = hn;
        run.hist_next += 1;
        if usize::from(run.hist_next) > HISTORY_SIZE {
            run.hist_next = 1;
            run.hist_recycle = true;
        }
    }

    /// `pglz_find_match`: best (length, offset) among the history candidates for `input`,
    /// if it is longer than 2 bytes.
    #[inline]
    fn find_match(
        &self,
        run: &Run<'_>,
        input: usize,
        mut good_match: i32,
        good_drop: i32,
    ) -> Option<(usize, usize)> {
        let src = run.src;
        let end = src.len();
        let mut len = 0usize;
        let mut off = 0usize;
        let mut hent = self.hist_start[run.hist_idx(input)];
        while hent != INVALID {
            let hp = self.entries[usize::from(hent)].pos;
            let thisoff = input - hp;
            if thisoff >= 0x0fff {
                break;
            }
            let mut thislen = 0usize;
            if len >= 16 {
                // C memcmp()s `len` bytes even when fewer remain (reading past the input);
                // in that case the candidate cannot beat `len` whatever those bytes are,
                // so treating it as a miss gives the same decision.
                if input + len <= end && src[input..input + len] == src[hp..hp + len] {
                    thislen = len;
                    while input + thislen < end
                        && src[input + thislen] == src[hp + thislen]
                        && thislen < MAX_MATCH
                    {
                        thislen += 1;
                    }
                }
            } else {
                while input + thislen < end
                    && src[input + thislen] == src[hp + thislen]
                    && thislen < MAX_MATCH
                {
                    thislen += 1;
                }
            }
            if thislen > len {
                len = thislen;
                off = thisoff;
            }
            hent = self.entries[usize::from(hent)].next;
            if hent != INVALID {
                if len as i32 >= good_match {
                    break;
                }
                good_match -= good_match * good_drop / 100;
            }
        }
        (len > 2).then_some((len, off))
    }
}

/// Compresses `src` with a fresh x86-64-style [`Compressor`]; `None` is PostgreSQL's -1.
///
/// For many inputs, keep a [`Compressor`] and use [`Compressor::compress_into`].
pub fn compress(src: &[u8], strategy: &Strategy) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    Compressor::new()
        .compress_into(src, strategy, &mut out)
        .then_some(out)
}
