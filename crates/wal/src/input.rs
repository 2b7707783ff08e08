//! The decoder's input: a queue of chunks, shared without copying where possible.
//!
//! Every access the decoder makes (a page header, a record header, a record that
//! fits in its page, a continuation piece) lies within one WAL page. So if no page
//! straddles two chunks, every access is a plain slice of one chunk. The invariant
//! is kept by accepting a shared chunk (an mmap'd segment, say) only at a position
//! and length aligned to 64 KiB, the largest `XLOG_BLCKSZ`; anything else is copied
//! into an owned chunk that is always last and only ever trimmed to a page start.

use std::collections::VecDeque;

/// Alignment that makes a chunk boundary a page boundary for every WAL page size.
const SHARE_ALIGN: u64 = 64 * 1024;

enum Data {
    /// Copied input; the last chunk, grown by small feeds.
    Owned(Vec<u8>),
    /// A whole buffer handed over by the caller, given back once consumed.
    Whole(Vec<u8>),
}

impl Data {
    #[inline]
    fn bytes(&self) -> &[u8] {
        match self {
            Data::Owned(v) | Data::Whole(v) => v,
        }
    }
}

struct Chunk {
    lsn: u64,
    data: Data,
}

impl Chunk {
    fn end(&self) -> u64 {
        self.lsn + self.data.bytes().len() as u64
    }
}

/// See the module documentation.
pub(crate) struct Input {
    chunks: VecDeque<Chunk>,
    end: u64,
    released: Vec<Vec<u8>>,
}

impl Input {
    pub(crate) fn new(start: u64) -> Input {
        Input {
            chunks: VecDeque::new(),
            end: start,
            released: Vec::new(),
        }
    }

    /// Position just past the last byte fed.
    pub(crate) fn end(&self) -> u64 {
        self.end
    }

    /// Appends a copy of `b`.
    pub(crate) fn push_slice(&mut self, b: &[u8]) {
        if b.is_empty() {
            return;
        }
        match self.chunks.back_mut() {
            Some(Chunk {
                data: Data::Owned(v),
                ..
            }) => v.extend_from_slice(b),
            _ => self.chunks.push_back(Chunk {
                lsn: self.end,
                data: Data::Owned(b.to_vec()),
            }),
        }
        self.end += b.len() as u64;
    }

    /// Appends `data` without copying when that keeps every page within one chunk.
    pub(crate) fn push_whole(&mut self, data: Vec<u8>) {
        let len = data.len() as u64;
        let owned_last = matches!(
            self.chunks.back(),
            Some(Chunk {
                data: Data::Owned(_),
                ..
            })
        );
        if owned_last || self.end % SHARE_ALIGN != 0 || len % SHARE_ALIGN != 0 || len == 0 {
            self.push_slice(&data);
            self.released.push(data);
            return;
        }
        self.chunks.push_back(Chunk {
            lsn: self.end,
            data: Data::Whole(data),
        });
        self.end += len;
    }

    /// A buffer given with [`Input::push_whole`] that is no longer needed.
    pub(crate) fn take_released(&mut self) -> Option<Vec<u8>> {
        self.released.pop()
    }

    /// The bytes `[lsn, lsn + len)`, if they have been fed and lie in one chunk.
    pub(crate) fn get(&self, lsn: u64, len: usize) -> Option<&[u8]> {
        let want_end = lsn.checked_add(len as u64)?;
        // Newest first: the decoder reads near the end of what it was fed.
        for c in self.chunks.iter().rev() {
            if c.lsn <= lsn {
                if want_end > c.end() {
                    return None;
                }
                let from = (lsn - c.lsn) as usize;
                return Some(&c.data.bytes()[from..from + len]);
            }
        }
        None
    }

    /// Releases input before `keep_from`, a page start no later access precedes.
    pub(crate) fn release_before(&mut self, keep_from: u64) {
        while self.chunks.front().is_some_and(|c| c.end() <= keep_from) {
            if let Some(Chunk {
                data: Data::Whole(v),
                ..
            }) = self.chunks.pop_front()
            {
                self.released.push(v);
            }
        }
        if let Some(Chunk {
            lsn,
            data: Data::Owned(v),
        }) = self.chunks.front_mut()
        {
            let drop = keep_from.saturating_sub(*lsn) as usize;
            // Trim only when it pays: a large consumed prefix.
            if drop > 0 && drop >= v.len() / 2 {
                v.drain(..drop);
                *lsn += drop as u64;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_chunks_are_kept_apart_and_small_feeds_coalesce() {
        let mut i = Input::new(0);
        i.push_whole(vec![1u8; 65536]);
        i.push_slice(&[2, 3]);
        i.push_slice(&[4]);
        assert_eq!(i.get(65535, 1), Some(&[1u8][..]));
        assert_eq!(i.get(65536, 3), Some(&[2u8, 3, 4][..]));
        assert_eq!(i.get(65535, 2), None, "spans two chunks");
        // A shared chunk after an owned one is copied, so it cannot straddle.
        i.push_whole(vec![5u8; 65536]);
        assert_eq!(i.get(65538, 2), Some(&[4u8, 5][..]));
        i.release_before(65536 + 8192);
        assert_eq!(i.get(65535, 1), None);
        assert_eq!(i.get(65536 + 65536, 1), Some(&[5u8][..]));
    }
}
