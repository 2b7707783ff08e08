//! Where the bytes of a file being packed come from: memory, or the file itself, read through
//! a small window that is reused.
//!
//! A push reads its segment several times (its digests on one thread, the record split on the
//! other), each pass forward. Reading the 16 MB into one buffer would cost a page fault and a
//! zeroed page per 4 KiB of fresh memory, which is most of what a push costs on a machine whose
//! memory is not already touched; a window that stays in the CPU's cache costs a copy.

use std::borrow::Cow;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// How much of a file one read brings into a [`Reader`]'s window (more when a single range
/// asked for is larger).
pub const WINDOW: usize = 256 << 10;

/// The bytes of a file being packed.
#[derive(Debug, Clone, Copy)]
pub enum Input<'a> {
    /// The whole file, in memory.
    Bytes(&'a [u8]),
    /// An open file, and the length taken as its content (bytes past it are not read; a file
    /// shorter than that by the time it is read is an error).
    File(&'a File, usize),
}

impl<'a> Input<'a> {
    /// The content's length.
    pub fn len(&self) -> usize {
        match self {
            Input::Bytes(b) => b.len(),
            Input::File(_, len) => *len,
        }
    }

    /// Whether the content is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A reader of the content with a window of its own.
    pub fn reader(&self) -> Reader<'a> {
        Reader {
            input: *self,
            buf: Vec::new(),
            start: 0,
            small: Vec::new(),
        }
    }

    /// Calls `f` with the content in order, a window at a time.
    pub fn for_each_window(&self, mut f: impl FnMut(&[u8])) -> io::Result<()> {
        match self {
            Input::Bytes(b) => {
                b.chunks(WINDOW).for_each(f);
                Ok(())
            }
            Input::File(..) => {
                let mut r = self.reader();
                let mut at = 0;
                while at < self.len() {
                    let n = WINDOW.min(self.len() - at);
                    f(r.at(at, n)?);
                    at += n;
                }
                Ok(())
            }
        }
    }

    /// `len` bytes of the content from `off`: borrowed from memory, or read from the file in
    /// one read; an error if they are not all there.
    pub fn range(&self, off: usize, len: usize) -> io::Result<Cow<'a, [u8]>> {
        let total = self.len();
        if off.checked_add(len).is_none_or(|end| end > total) {
            return Err(short(off, len, total));
        }
        match *self {
            Input::Bytes(b) => Ok(Cow::Borrowed(&b[off..off + len])),
            Input::File(file, _) => {
                let mut out = vec![0; len];
                file.read_exact_at(&mut out, off as u64)
                    .map_err(|e| shrunk(e, total))?;
                Ok(Cow::Owned(out))
            }
        }
    }
}

/// Reads ranges of an [`Input`]: borrowed from memory, or from a window of the file that one
/// read fills forward from the first byte asked for outside it.
#[derive(Debug)]
pub struct Reader<'a> {
    input: Input<'a>,
    /// The window: the file's bytes `start..start + buf.len()`.
    buf: Vec<u8>,
    start: usize,
    /// What [`Reader::peek`] read last.
    small: Vec<u8>,
}

impl Reader<'_> {
    /// The content's length.
    pub fn len(&self) -> usize {
        self.input.len()
    }

    /// Whether the content is empty.
    pub fn is_empty(&self) -> bool {
        self.input.is_empty()
    }

    /// The content's bytes `off..off + len`; an error if they are not all there.
    pub fn at(&mut self, off: usize, len: usize) -> io::Result<&[u8]> {
        let end = off
            .checked_add(len)
            .filter(|&end| end <= self.input.len())
            .ok_or_else(|| short(off, len, self.input.len()))?;
        match self.input {
            Input::Bytes(b) => Ok(&b[off..end]),
            Input::File(file, total) => {
                let held = self.start..self.start + self.buf.len();
                if off < held.start || end > held.end {
                    let n = len.max(WINDOW).min(total - off);
                    // Grows only for a range larger than any before: the window is otherwise
                    // refilled where it is, not zeroed again.
                    if self.buf.len() < n {
                        self.buf.resize(n, 0);
                    }
                    self.buf.truncate(n);
                    if let Err(e) = file.read_exact_at(&mut self.buf, off as u64) {
                        // The window holds nothing whole now.
                        self.buf.clear();
                        return Err(shrunk(e, total));
                    }
                    self.start = off;
                }
                Ok(&self.buf[off - self.start..end - self.start])
            }
        }
    }
}

impl Reader<'_> {
    /// [`Reader::at`] for a range read alone, leaving the window where it is: for small
    /// reads far apart (every page's header), where filling a window for each would read
    /// the whole file.
    pub fn peek(&mut self, off: usize, len: usize) -> io::Result<&[u8]> {
        let held = self.start..self.start + self.buf.len();
        match self.input {
            Input::File(file, total) if off < held.start || off.saturating_add(len) > held.end => {
                if off.checked_add(len).is_none_or(|end| end > total) {
                    return Err(short(off, len, total));
                }
                self.small.resize(len, 0);
                file.read_exact_at(&mut self.small, off as u64)
                    .map_err(|e| shrunk(e, total))?;
                Ok(&self.small)
            }
            _ => self.at(off, len),
        }
    }
}

/// The error of a read that found the file shorter than its length when it was opened.
fn shrunk(e: io::Error, total: usize) -> io::Error {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        io::Error::new(
            e.kind(),
            format!("the file became shorter than its {total} bytes while it was read"),
        )
    } else {
        e
    }
}

fn short(off: usize, len: usize, total: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!("{len} bytes at offset {off} asked of a file of {total} bytes"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn content(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    #[test]
    fn a_file_reads_the_same_as_memory_at_any_range() {
        let data = content(3 * WINDOW + 1234);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, &data).unwrap();
        let file = File::open(&path).unwrap();
        let mem = Input::Bytes(&data);
        let disk = Input::File(&file, data.len());
        let (mut a, mut b) = (mem.reader(), disk.reader());
        // Forward, backward, across the window's end, larger than the window, at the end.
        for (off, len) in [
            (0, 10),
            (5, WINDOW),
            (WINDOW - 3, 8),
            (100, 20),
            (WINDOW + 17, 2 * WINDOW + 5),
            (data.len() - 1, 1),
            (0, data.len()),
            (data.len(), 0),
        ] {
            assert_eq!(
                a.at(off, len).unwrap(),
                b.at(off, len).unwrap(),
                "{off}+{len}"
            );
        }
        assert_eq!(a.peek(8192, 24).unwrap(), b.peek(8192, 24).unwrap());
        assert_eq!(
            b.peek(WINDOW + 20, 4).unwrap(),
            &data[WINDOW + 20..WINDOW + 24]
        );
        assert!(b.peek(data.len() - 2, 3).is_err());
        assert_eq!(*disk.range(9, 2 * WINDOW).unwrap(), data[9..9 + 2 * WINDOW]);
        assert_eq!(*mem.range(9, 2 * WINDOW).unwrap(), data[9..9 + 2 * WINDOW]);
        for input in [mem, disk] {
            assert!(input.range(data.len() - 1, 2).is_err());
            assert!(input.range(usize::MAX, 2).is_err());
        }
        let mut seen = Vec::new();
        disk.for_each_window(|w| seen.extend_from_slice(w)).unwrap();
        assert_eq!(seen, data);
    }

    #[test]
    fn a_range_past_the_end_is_an_error_not_a_panic() {
        let data = content(1000);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, &data).unwrap();
        let file = File::open(&path).unwrap();
        for input in [Input::Bytes(&data), Input::File(&file, 1000)] {
            let mut r = input.reader();
            assert!(r.at(999, 2).is_err());
            assert!(r.at(usize::MAX, 2).is_err());
        }
        // A file that became shorter than its stated length.
        let mut r = Input::File(&file, 2000).reader();
        let e = r.at(990, 20).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        assert!(e.to_string().contains("became shorter"), "{e}");
    }
}
