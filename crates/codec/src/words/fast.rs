//! The decoder's fast loop: one table lookup per symbol and fixed-size copies, two symbols
//! at a time; anything unusual (long words, damage, the end of the output) goes back to
//! [`Header::step`].

use super::header::{Header, LIT, ONE_CODE, PREFIX};

/// Tables for the fast loop of [`super::decode`]. For a symbol starting with body bytes b0, b1,
/// `lead[b0]` holds where its entry is in `syms` (bits 8-31; for a one-byte symbol the entry
/// itself, for a two-byte symbol the entry of b0 0) and 0xff in its low byte when the symbol
/// is two bytes long (else 0): the entry is `syms[(lead >> 8) + (b1 & lead)]`. An entry is
/// `len` (bits 0-4) bytes from `src` (bits 8-31) in the source buffer, or [`CAPITAL_NEXT`],
/// or [`SLOW`] for [`Header::step`] (long words, errors). The source buffer holds the
/// dictionary, each byte value once (literals and escaped bytes), the dictionary again with
/// each word's first letter in upper case (at `upper`) and 16 bytes more, so that any
/// symbol can be copied as 16 bytes.
pub(super) struct Fast {
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
pub(super) const FAST_SLACK: usize = 48;

impl Fast {
    /// The tables for the body of `h`, `body_len` bytes long, or `None` when building them
    /// would not pay: they hold 256 entries for each prefix (and the escape and the capital
    /// marker), only worth it for a body several times that long.
    pub(super) fn new(h: &Header<'_>, body_len: usize) -> Option<Fast> {
        let dict = h.dict;
        let src_len = 2 * dict.len() + 256 + 16;
        if body_len < (h.prefixes.len() + 3) * 64 || src_len >= 1 << 24 {
            return None;
        }
        let mut src = Vec::with_capacity(src_len);
        src.extend_from_slice(dict);
        let bytes_at = src.len();
        src.extend(0..=255u8);
        let upper = src.len();
        src.extend_from_slice(dict);
        for &(at, n) in &h.words {
            if n > 0 {
                if let Some(first) = src.get_mut(upper + at) {
                    first.make_ascii_uppercase();
                }
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
        let (kind, first) = (&h.kind, &h.first);
        // Entries 0-255: the symbols of one byte, by that byte.
        let mut syms: Vec<u32> = Vec::with_capacity(256 * (h.prefixes.len() + 3));
        let mut lead = [0u32; 256];
        for (b, l) in lead.iter_mut().enumerate() {
            *l = (b as u32) << 8;
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
        row(h.escape, &mut syms, &byte);
        row(h.capital, &mut syms, &|b1| match kind[b1] {
            ONE_CODE => word(first[b1], true),
            PREFIX => CAPITAL_NEXT,
            _ => SLOW,
        });
        for &p in h.prefixes {
            let w0 = first[usize::from(p)];
            row(p, &mut syms, &|b1| word(w0 + b1, false));
        }
        Some(Fast {
            lead,
            syms,
            src,
            upper,
            zero_is_literal: kind[0] == LIT,
        })
    }

    /// The entry of the symbol whose lead is `lead` and second byte `b1`.
    #[inline(always)]
    fn sym(&self, lead: u32, b1: u8) -> u32 {
        let at = (lead >> 8) as usize + usize::from(b1 & lead as u8);
        self.syms.get(at).copied().unwrap_or(SLOW)
    }

    /// Decodes from `body[i]` into `out` from `o` while the symbols are simple; returns the
    /// new `i` and `o` at the first symbol that is not, or at the last body byte. `out` is
    /// [`FAST_SLACK`] bytes longer than the `len` to decode.
    pub(super) fn run(
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
