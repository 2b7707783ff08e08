//! Large, short-lived buffers in memory the kernel may back with huge pages.
//!
//! `archive push` and `archive get` run once per segment, each in a fresh process, so every
//! byte of a large buffer they fill is fresh memory, which the kernel maps and zeroes one
//! 4 KiB page at a time, a fault each. Measured on the 2-vCPU virtual machine of
//! docs/BENCHMARKS.md, reading a 16 MiB segment into a fresh vector costs 17 to 29 ms of CPU;
//! into memory advised for transparent huge pages (`MADV_HUGEPAGE`), which faults once per
//! 2 MiB, 10 ms. The advice is a hint: with huge pages off (`never`) or none to spare, the
//! memory is ordinary pages, and only the speed differs.
//!
//! Where THP `defrag` is `madvise` (the usual default), a fault in advised memory may compact
//! memory to find a huge page. Measured with the page cache filling all but 3.6 GB of the
//! machine's 24 GB, pushes kept their gain (pgbench 96 -> 79.5 ms of CPU, text 199 -> 185.5),
//! with 13 compaction stalls over 32 pushes and no direct reclaim.
//!
//! The memory is an anonymous mapping made through `memmap2`'s safe interface. No file is
//! ever mapped: a mapped file that shrinks under its reader kills the process with SIGBUS,
//! and an archived segment is read while PostgreSQL may still rename or recycle its
//! neighbours.

use std::io::{self, Read};
use std::ops::Deref;
use std::path::Path;

use memmap2::{Advice, MmapMut};

/// Below this a buffer is an ordinary vector: one huge page would be more to zero than it
/// holds.
const HUGE_MIN: usize = 2 << 20;

/// A byte buffer of a capacity fixed when it is made: an anonymous mapping advised for huge
/// pages when that capacity is large, else a vector. Writing past the capacity moves the
/// bytes to a vector, so a wrong guess costs a copy, never an error.
#[derive(Debug)]
pub enum Buf {
    /// A small buffer, or one that outgrew its mapping.
    Vec(Vec<u8>),
    /// `len` bytes written at the start of `map`.
    Map {
        /// The mapping (its length is the capacity).
        map: MmapMut,
        /// Bytes written.
        len: usize,
    },
}

impl Default for Buf {
    fn default() -> Buf {
        Buf::Vec(Vec::new())
    }
}

impl Buf {
    /// An empty buffer with room for `cap` bytes: [`Buf::mapped`] from 2 MiB up, else a
    /// vector.
    pub fn with_capacity(cap: usize) -> Buf {
        if cap >= HUGE_MIN {
            Buf::mapped(cap)
        } else {
            Buf::Vec(Vec::with_capacity(cap))
        }
    }

    /// An empty buffer in a mapping of `cap` bytes (at least 1) advised for huge pages; a
    /// vector if the mapping cannot be made.
    pub fn mapped(cap: usize) -> Buf {
        match MmapMut::map_anon(cap.max(1)) {
            Ok(map) => {
                // A hint; refused (no THP in this kernel), the mapping is ordinary pages.
                #[cfg(target_os = "linux")]
                let _ = map.advise(Advice::HugePage);
                Buf::Map { map, len: 0 }
            }
            Err(_) => Buf::Vec(Vec::with_capacity(cap)),
        }
    }

    /// Appends `bytes`.
    pub fn extend_from_slice(&mut self, bytes: &[u8]) {
        match self {
            Buf::Vec(v) => v.extend_from_slice(bytes),
            Buf::Map { map, len } => {
                let end = *len + bytes.len();
                if end <= map.len() {
                    map[*len..end].copy_from_slice(bytes);
                    *len = end;
                } else {
                    let mut v = Vec::with_capacity(end.max(map.len().saturating_mul(2)));
                    v.extend_from_slice(&map[..*len]);
                    v.extend_from_slice(bytes);
                    *self = Buf::Vec(v);
                }
            }
        }
    }

    /// The bytes written.
    pub fn as_slice(&self) -> &[u8] {
        match self {
            Buf::Vec(v) => v,
            Buf::Map { map, len } => &map[..*len],
        }
    }

    /// A buffer of `len` zero bytes: a mapping advised for huge pages from 2 MiB up (mapped
    /// memory reads as zeros until written, so nothing is written here), else a vector.
    pub fn zeroed(len: usize) -> Buf {
        if len >= HUGE_MIN {
            if let Buf::Map { map, .. } = Buf::mapped(len) {
                return Buf::Map { map, len };
            }
        }
        Buf::Vec(vec![0; len])
    }

    /// The bytes as a vector: the buffer itself if it is one, else a copy.
    pub fn into_vec(self) -> Vec<u8> {
        match self {
            Buf::Vec(v) => v,
            Buf::Map { map, len } => map[..len].to_vec(),
        }
    }

    /// Shortens the buffer to `len` bytes (nothing when it is that short already).
    pub fn truncate(&mut self, len: usize) {
        match self {
            Buf::Vec(v) => v.truncate(len),
            Buf::Map { len: n, .. } => *n = (*n).min(len),
        }
    }

    /// The room left before the capacity, to be filled and then claimed with [`Buf::filled`].
    fn spare(&mut self) -> &mut [u8] {
        match self {
            Buf::Vec(_) => &mut [],
            Buf::Map { map, len } => &mut map[*len..],
        }
    }

    /// Claims `n` bytes of [`Buf::spare`] as written.
    fn filled(&mut self, n: usize) {
        if let Buf::Map { map, len } = self {
            *len = (*len + n).min(map.len());
        }
    }
}

impl Deref for Buf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl std::ops::DerefMut for Buf {
    fn deref_mut(&mut self) -> &mut [u8] {
        match self {
            Buf::Vec(v) => v,
            Buf::Map { map, len } => &mut map[..*len],
        }
    }
}

impl AsRef<[u8]> for Buf {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl PartialEq for Buf {
    fn eq(&self, other: &Buf) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for Buf {}

impl Clone for Buf {
    fn clone(&self) -> Buf {
        let mut b = Buf::with_capacity(self.len());
        b.extend_from_slice(self);
        b
    }
}

impl From<Vec<u8>> for Buf {
    fn from(v: Vec<u8>) -> Buf {
        Buf::Vec(v)
    }
}

/// The whole content of the file at `path`, as [`std::fs::read`] gives it; a large file is
/// read into memory advised for huge pages. A file that grows while it is read is read to
/// its end all the same.
pub fn read_file(path: &Path) -> io::Result<Buf> {
    let mut file = std::fs::File::open(path)?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut buf = match usize::try_from(size) {
        Ok(size) if size >= HUGE_MIN => Buf::with_capacity(size),
        _ => Buf::default(),
    };
    loop {
        let spare = buf.spare();
        if spare.is_empty() {
            break;
        }
        match file.read(spare) {
            Ok(0) => return Ok(buf),
            Ok(n) => buf.filled(n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    // Full (or an ordinary vector from the start): whatever is left, the usual way.
    let mut rest = Vec::new();
    file.read_to_end(&mut rest)?;
    buf.extend_from_slice(&rest);
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + i / 4093) as u8).collect()
    }

    #[test]
    fn reads_files_of_every_size_the_same_as_fs_read() {
        let dir = tempfile::tempdir().unwrap();
        for n in [0, 1, 4096, HUGE_MIN - 1, HUGE_MIN, HUGE_MIN + 1, 16 << 20] {
            let path = dir.path().join(format!("f{n}"));
            std::fs::write(&path, pattern(n)).unwrap();
            let buf = read_file(&path).unwrap();
            assert_eq!(
                buf.as_slice(),
                std::fs::read(&path).unwrap().as_slice(),
                "{n}"
            );
            assert_eq!(matches!(buf, Buf::Map { .. }), n >= HUGE_MIN, "{n}");
        }
    }

    #[test]
    fn a_mapped_buffer_that_outgrows_its_capacity_keeps_every_byte() {
        let data = pattern(3 * HUGE_MIN + 17);
        let mut buf = Buf::with_capacity(HUGE_MIN);
        assert!(matches!(buf, Buf::Map { .. }));
        for chunk in data.chunks(100_003) {
            buf.extend_from_slice(chunk);
        }
        assert_eq!(buf.as_slice(), data.as_slice());
        assert!(matches!(buf, Buf::Vec(_)));
        assert_eq!(buf.clone(), buf);
        buf.truncate(5);
        assert_eq!(&buf[..], &data[..5]);
    }

    #[test]
    fn a_mapped_buffer_truncates_and_changes_in_place() {
        let mut buf = Buf::with_capacity(HUGE_MIN);
        buf.extend_from_slice(&pattern(1000));
        buf[3] ^= 0xff;
        buf.truncate(10);
        buf.truncate(20);
        let mut want = pattern(10);
        want[3] ^= 0xff;
        assert_eq!(buf.as_slice(), want.as_slice());
        assert!(matches!(buf, Buf::Map { .. }));
    }

    #[test]
    fn zeroed_buffers_are_zeros_of_the_length_asked() {
        for n in [0, 1, HUGE_MIN - 1, HUGE_MIN, 5 * HUGE_MIN + 3] {
            let mut buf = Buf::zeroed(n);
            assert_eq!(buf.len(), n);
            assert!(buf.iter().all(|&b| b == 0), "{n}");
            assert_eq!(matches!(buf, Buf::Map { .. }), n >= HUGE_MIN, "{n}");
            if n > 0 {
                buf[n - 1] = 7;
            }
            let v = buf.into_vec();
            assert_eq!(v.len(), n);
            assert_eq!(v.last().copied(), (n > 0).then_some(7));
        }
    }

    #[test]
    fn a_missing_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_file(&dir.path().join("absent")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }
}
