//! Reading streams back for the join: whole, or from a [`Feed`] as they are decompressed.

use codec::cursor::Cursor;

use super::{FeedError, SplitError, Stream};

/// Where a stream's bytes come from while [`super::join_sources`] reads it back.
pub enum Source<'a> {
    /// The whole stream, at hand.
    Bytes(&'a [u8]),
    /// Read as it is decompressed, and the stream's length.
    Feed(Box<dyn Feed + 'a>, usize),
}

/// The reading end of a stream being decompressed, for [`Source::Feed`]: buffers of it in
/// order. A buffer's bytes start at an offset; what comes before is room for the reader to
/// put the unread end of the previous buffer in front of them, so that a read across two
/// buffers copies only that end.
pub trait Feed {
    /// The next buffer and the offset at which its bytes start, or `None` at the end.
    fn next(&mut self) -> Result<Option<(Vec<u8>, usize)>, FeedError>;
    /// Gives back a buffer whose bytes have all been read, to be filled again.
    fn recycle(&mut self, buf: Vec<u8>);
}

/// A stream being read back.
pub(super) struct Reader<'a> {
    src: Src<'a>,
    pub(super) stream: Stream,
    /// The stream's length.
    pub(super) total: usize,
    /// Bytes not taken yet.
    left: usize,
}

enum Src<'a> {
    Bytes {
        bytes: &'a [u8],
        pos: usize,
    },
    /// `buf[pos..filled]` is decompressed and not taken yet.
    /// `buf[pos..]` is decompressed and not taken yet.
    Feed {
        feed: Box<dyn Feed + 'a>,
        buf: Vec<u8>,
        pos: usize,
    },
}

impl<'a> Reader<'a> {
    pub(super) fn new(source: Source<'a>, stream: Stream) -> Reader<'a> {
        let (src, total) = match source {
            Source::Bytes(bytes) => (Src::Bytes { bytes, pos: 0 }, bytes.len()),
            Source::Feed(feed, total) => (
                Src::Feed {
                    feed,
                    buf: Vec::new(),
                    pos: 0,
                },
                total,
            ),
        };
        Reader {
            src,
            stream,
            total,
            left: total,
        }
    }

    /// The next `n` bytes (at most what is left), without taking them.
    pub(super) fn peek(&mut self, n: usize) -> Result<&[u8], SplitError> {
        let n = n.min(self.left);
        let (stream, total, offset) = (self.stream, self.total, self.total - self.left);
        match &mut self.src {
            Src::Bytes { bytes, pos } => Cursor::at(bytes, *pos)
                .take(n)
                .map_err(|source| SplitError::StreamShort { stream, source }),
            Src::Feed { feed, buf, pos } => {
                while buf.len() - *pos < n {
                    let read = offset + (buf.len() - *pos);
                    let next = feed.next().map_err(|source| SplitError::Feed {
                        stream,
                        offset: read,
                        source,
                    })?;
                    let Some((mut next, start)) = next else {
                        return Err(SplitError::FeedShort {
                            stream,
                            offset: read,
                            total,
                        });
                    };
                    // The unread end of this buffer goes in front of the next one's bytes:
                    // into its free room when it fits, else both are copied together.
                    let left = buf.len() - *pos;
                    if left <= start {
                        next[start - left..start].copy_from_slice(&buf[*pos..]);
                        *pos = start - left;
                        let old = std::mem::replace(buf, next);
                        feed.recycle(old);
                    } else {
                        // A long read: this buffer grows to hold it (once moved to the front,
                        // every later buffer is appended).
                        buf.drain(..*pos);
                        *pos = 0;
                        buf.reserve(n.saturating_sub(buf.len()));
                        buf.extend_from_slice(&next[start..]);
                        feed.recycle(next);
                    }
                }
                Ok(&buf[*pos..*pos + n])
            }
        }
    }

    pub(super) fn take(&mut self, n: usize) -> Result<&[u8], SplitError> {
        if self.left < n {
            return Err(SplitError::StreamShort {
                stream: self.stream,
                source: codec::ShortRead {
                    offset: self.total - self.left,
                    needed: n,
                    remaining: self.left,
                },
            });
        }
        self.peek(n)?;
        self.left -= n;
        let (src, pos) = match &mut self.src {
            Src::Bytes { bytes, pos } => (*bytes, pos),
            Src::Feed { buf, pos, .. } => (buf.as_slice(), pos),
        };
        let s = &src[*pos..*pos + n];
        *pos += n;
        Ok(s)
    }

    /// The next `N` bytes as an array (a fixed-width column value).
    pub(super) fn array<const N: usize>(&mut self) -> Result<[u8; N], SplitError> {
        let stream = self.stream;
        Cursor::new(self.take(N)?)
            .array()
            .map_err(|source| SplitError::StreamShort { stream, source })
    }

    pub(super) fn left(&self) -> usize {
        self.left
    }
}
