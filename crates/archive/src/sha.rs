//! SHA-256 that can stop and resume at a checkpoint, so that `get` can check the hash of a
//! restored segment on two threads (containers of format 4, which record no BLAKE3 digest).
//!
//! SHA-256 runs its compression function over the message's 64-byte blocks in order, from a
//! fixed initial state; the digest is the state after the last, padded, block. The state
//! after the first `k` bytes (a multiple of 64) is the *checkpoint*. Push records it with the
//! digest; get then hashes bytes `0..k` from the initial state and checks that it reaches the
//! checkpoint, and, at the same time, bytes `k..` from the checkpoint and checks that it
//! reaches the digest. Both hold exactly when the SHA-256 of the whole restored file is the
//! recorded one, since both halves together are the same computation the one-thread hash
//! does.

use sha2::digest::block_buffer::{BlockBuffer, Eager};
use sha2::digest::generic_array::typenum::U64;

/// Files at least this large get a checkpoint: below it one thread hashes fast enough.
pub const CHECKPOINT_MIN_SIZE: u64 = 4 << 20;

/// The state after the first `offset` bytes of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checkpoint {
    /// Bytes hashed (a multiple of 64, at most the file's size).
    pub offset: u64,
    /// The eight state words, big-endian, as a digest is written.
    pub state: [u8; 32],
}

/// Where a file of `size` bytes is checkpointed: the 64-byte boundary at or below its middle,
/// for files of [`CHECKPOINT_MIN_SIZE`] bytes and more.
pub fn checkpoint_offset(size: u64) -> Option<u64> {
    (size >= CHECKPOINT_MIN_SIZE).then(|| size / 2 / 64 * 64)
}

/// SHA-256 of `data`, and its checkpoint when [`checkpoint_offset`] gives one.
pub fn digest(data: &[u8]) -> ([u8; 32], Option<Checkpoint>) {
    let mut chain = Chain::new();
    let checkpoint = checkpoint_offset(data.len() as u64).map(|offset| {
        chain.update(&data[..offset as usize]);
        chain.checkpoint().expect("the offset is a multiple of 64")
    });
    let done = checkpoint.map_or(0, |c| c.offset as usize);
    chain.update(&data[done..]);
    (chain.finalize(), checkpoint)
}

/// The SHA-256 initial state (FIPS 180-4, 5.3.3).
const INITIAL: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

/// A SHA-256 computation that can be started from a [`Checkpoint`] and can report one.
#[derive(Clone)]
pub struct Chain {
    state: [u32; 8],
    /// A partial block (whole blocks go to the compression function in place).
    buf: BlockBuffer<U64, Eager>,
    /// Bytes hashed, the checkpoint's included.
    len: u64,
}

impl Default for Chain {
    fn default() -> Self {
        Chain::new()
    }
}

impl Chain {
    /// A computation from the start of a file.
    pub fn new() -> Chain {
        Chain {
            state: INITIAL,
            buf: BlockBuffer::default(),
            len: 0,
        }
    }

    /// A computation that goes on from `checkpoint`.
    pub fn resume(checkpoint: &Checkpoint) -> Chain {
        let mut state = [0u32; 8];
        for (w, b) in state.iter_mut().zip(checkpoint.state.chunks_exact(4)) {
            *w = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        }
        Chain {
            state,
            buf: BlockBuffer::default(),
            len: checkpoint.offset,
        }
    }

    /// Hashes `data` next.
    pub fn update(&mut self, data: &[u8]) {
        self.len += data.len() as u64;
        let state = &mut self.state;
        self.buf
            .digest_blocks(data, |blocks| sha2::compress256(state, blocks));
    }

    /// The checkpoint here, if the bytes hashed so far are a whole number of blocks.
    pub fn checkpoint(&self) -> Option<Checkpoint> {
        (self.buf.get_pos() == 0).then(|| Checkpoint {
            offset: self.len,
            state: words_be(&self.state),
        })
    }

    /// The digest of everything hashed.
    pub fn finalize(mut self) -> [u8; 32] {
        let bits = self.len.wrapping_mul(8);
        let state = &mut self.state;
        self.buf.len64_padding_be(bits, |block| {
            sha2::compress256(state, std::slice::from_ref(block))
        });
        words_be(&self.state)
    }
}

fn words_be(state: &[u32; 8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (o, w) in out.chunks_exact_mut(4).zip(state) {
        o.copy_from_slice(&w.to_be_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    #[test]
    fn chain_matches_sha256_for_every_length_and_split() {
        let data: Vec<u8> = (0..3000u32).map(|i| (i * 31 % 253) as u8).collect();
        for len in (0..200).chain([447, 448, 511, 512, 1000, 2999, 3000]) {
            let whole: [u8; 32] = Sha256::digest(&data[..len]).into();
            for cut in [0, 1, 55, 56, 63, 64, 65, 128, len / 2, len] {
                let cut = cut.min(len);
                let mut c = Chain::new();
                c.update(&data[..cut]);
                c.update(&data[cut..len]);
                assert_eq!(c.finalize(), whole, "len {len} cut {cut}");
            }
        }
    }

    #[test]
    fn resuming_from_a_checkpoint_gives_the_same_digest() {
        let data: Vec<u8> = (0..(5u32 << 20) + 77)
            .map(|i| (i ^ (i >> 9)) as u8)
            .collect();
        let (d, cp) = digest(&data);
        let whole: [u8; 32] = Sha256::digest(&data).into();
        assert_eq!(d, whole);
        let cp = cp.expect("a checkpoint for 5 MB");
        assert_eq!(cp.offset % 64, 0);
        assert!(cp.offset <= data.len() as u64 / 2 && cp.offset + 64 > data.len() as u64 / 2);
        // First half from the start reaches the checkpoint; second half from it, the digest.
        let mut first = Chain::new();
        for piece in data[..cp.offset as usize].chunks(100_003) {
            first.update(piece);
        }
        assert_eq!(first.checkpoint(), Some(cp));
        let mut second = Chain::resume(&cp);
        for piece in data[cp.offset as usize..].chunks(65_537) {
            second.update(piece);
        }
        assert_eq!(second.finalize(), whole);
        // One changed byte in either half is caught by that half's check.
        let mut bad = data.clone();
        bad[10] ^= 1;
        let mut first = Chain::new();
        first.update(&bad[..cp.offset as usize]);
        assert_ne!(first.checkpoint(), Some(cp));
        let last = bad.len() - 1;
        bad[last] ^= 1;
        let mut second = Chain::resume(&cp);
        second.update(&bad[cp.offset as usize..]);
        assert_ne!(second.finalize(), whole);
        // Small files get none.
        assert_eq!(digest(&data[..(1 << 20)]).1, None);
    }
}
