//! The encoder: whether a stream is worth coding, and its coded form.

use super::dict::{Dict, Plan};
use super::scan::histogram;
use super::{ONE, PREFIXES, RESERVED};

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

/// Whether `data` (of at least [`QUICK_MIN`] bytes) is clearly not worth coding, judged on
/// [`QUICK_BLOCKS`] blocks spread over it: its estimated gain is below
/// [`QUICK_GAIN_PERMILLE`], well under what coding needs.
pub(super) fn declined_early(data: &[u8]) -> bool {
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

/// How much of a stream [`declines_on_start`] needs to judge it.
pub const JUDGED_LEN: usize = QUICK_MIN;

/// Whether a stream that begins with `start` is clearly not worth coding, judged on `start`
/// alone the way [`encode`] first judges a whole stream; `false` when `start` is shorter than
/// [`JUDGED_LEN`]. For a writer that has to choose before it has seen the whole stream.
pub fn declines_on_start(start: &[u8]) -> bool {
    declined_early(start)
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
