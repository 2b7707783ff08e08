//! Shared helpers of the wal integration tests: the PostgreSQL 18 fixture, unpacked
//! once per test binary, and a small seeded RNG so every run sees the same cases.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Name of the fixture: 35 segments of 1 MB written by PostgreSQL 18.3 (see
/// testdata/README.md).
pub const FIXTURE: &str = "pg18-small-1mb";

/// Path of a file in `crates/wal/testdata`.
pub fn testdata(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(name)
}

struct Unpacked {
    // Held so the directory lives as long as the test binary.
    _dir: tempfile::TempDir,
    segments: PathBuf,
}

/// The directory holding the fixture's segment files, unpacked on first use.
pub fn fixture_dir() -> &'static Path {
    static DIR: OnceLock<Unpacked> = OnceLock::new();
    &DIR.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let file =
            std::fs::File::open(testdata(&format!("{FIXTURE}.tar.zst"))).expect("fixture tar.zst");
        let zst = zstd::Decoder::new(file).expect("zstd decoder");
        tar::Archive::new(zst).unpack(dir.path()).expect("unpack");
        let segments = dir.path().join(FIXTURE);
        Unpacked {
            _dir: dir,
            segments,
        }
    })
    .segments
}

/// The fixture's segment files, in stream order.
pub fn segment_paths() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixture_dir())
        .expect("read fixture dir")
        .map(|e| e.expect("dir entry").path())
        .collect();
    files.sort();
    files
}

/// The fixture's segments' bytes, in stream order (35 MB, read once per binary).
pub fn segments() -> &'static [Vec<u8>] {
    static SEGS: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    SEGS.get_or_init(|| {
        segment_paths()
            .iter()
            .map(|p| std::fs::read(p).expect("read segment"))
            .collect()
    })
}

/// SplitMix64: tiny, seedable, and good enough to pick offsets and chunk sizes.
pub struct Rng(u64);

impl Rng {
    /// A generator whose sequence depends only on `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `lo..hi` (`hi > lo`).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo)
    }

    /// An index below `n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        self.range(0, n as u64) as usize
    }

    /// Fills `buf` with random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}
