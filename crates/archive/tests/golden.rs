//! The golden container: an accidental change to the container format, or to any coder whose
//! bytes it stores (walsplit's streams, the word coder, the zstd block), fails here.
//!
//! The input is the first WAL segment of `crates/wal/testdata` (PostgreSQL 18, 1 MB) cut
//! after its first records past [`CUT`] bytes and zero-filled from there, as a segment looks
//! after a switch: it takes the WAL records transform, seven streams (the page images one
//! word-coded) and a zero tail, and its container is 7.6 KB. `crates/archive/testdata/golden-segment.pgcz` is that container as
//! [`pack`] wrote it with [`METHOD`].
//!
//! The test (a) packs the input today and asserts the bytes are identical to the golden file,
//! and (b) decodes the golden file and asserts it gives the input back, whose SHA-256 is
//! [`INPUT_SHA256`].
//!
//! To regenerate the golden file after a deliberate format change (then update
//! docs/ARCHIVE-FORMAT.md and say why in the commit):
//!
//! ```text
//! PGCOMPRESS_BLESS=1 cargo test -p archive --test golden
//! ```
//!
//! (or `scripts/bless-golden.sh`), and put the SHA-256 the test prints in [`INPUT_SHA256`]
//! if the input changed.

use std::path::{Path, PathBuf};

use archive::container::{PartKind, Role, Transform};
use archive::pack::pack;
use codec::Spec;
use sha2::{Digest, Sha256};
use wal::{DecoderOptions, Lsn, Next, WalDecoder};

/// The method the golden container is packed with.
const METHOD: &str = "zstd:level=3";

/// Valid WAL kept at the start of the segment: records up to the first record end at or
/// past this offset.
const CUT: u64 = 24 << 10;

/// SHA-256 of the golden input (the cut segment).
const INPUT_SHA256: &str = "cd0a518ec4ee8d3d28a8f0db76f1e95582269d30147e910a2fa93a7f1ef5a242";

fn golden_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/golden-segment.pgcz")
}

mod fixture;

/// The first segment of the fixture, its name, and its bytes.
fn first_segment() -> (String, Vec<u8>) {
    fixture::segments().swap_remove(0)
}

/// The golden input: the first segment with everything after the end of the first record
/// that ends at or past [`CUT`] set to zero.
fn golden_input() -> (String, Vec<u8>) {
    let (name, mut data) = first_segment();
    let start = u64::from_le_bytes(data[8..16].try_into().expect("xlp_pageaddr"));
    let tli = u32::from_le_bytes(data[4..8].try_into().expect("xlp_tli"));
    let mut dec = WalDecoder::new(
        Lsn(start),
        DecoderOptions {
            tli,
            ..DecoderOptions::default()
        },
    );
    dec.feed(&data);
    dec.finish_input();
    let end = loop {
        match dec.next_record() {
            Next::Record(r) => {
                let end = r.next_lsn.0 - start;
                if end >= CUT {
                    break end as usize;
                }
            }
            other => panic!("segment ends before {CUT} bytes of records: {other:?}"),
        }
    };
    data[end..].fill(0);
    (name, data)
}

fn hex(bytes: &[u8]) -> String {
    archive::container::hex(bytes)
}

#[test]
fn the_golden_container_is_what_push_writes_and_decodes_to_its_input() {
    let (name, input) = golden_input();
    let spec: Spec = METHOD.parse().expect("spec");
    let packed = pack(&name, &input, &spec).expect("pack");
    let input_sha = hex(&Sha256::digest(&input));
    if std::env::var_os("PGCOMPRESS_BLESS").is_some() {
        std::fs::write(golden_path(), &packed.bytes).expect("write golden file");
        eprintln!(
            "blessed {} ({} bytes); input SHA-256 {input_sha}; parts {:?}",
            golden_path().display(),
            packed.bytes.len(),
            packed
                .header
                .parts
                .iter()
                .map(|p| (p.role.name(), p.words, p.raw_len, p.stored_len))
                .collect::<Vec<_>>()
        );
    }
    let golden = std::fs::read(golden_path()).expect("golden file (PGCOMPRESS_BLESS=1 makes it)");
    // The golden file covers the transform and the coders it is there to guard.
    let Transform::WalRecords(..) = packed.header.transform else {
        panic!(
            "not the WAL records transform: {:?}",
            packed.header.transform
        );
    };
    assert!(packed
        .header
        .parts
        .iter()
        .any(|p| p.role == Role::ZeroTail && p.kind == PartKind::Zeros));
    assert!(
        packed.header.parts.iter().any(|p| p.words),
        "no word-coded part: the golden file no longer guards the word coder"
    );
    assert_eq!(input_sha, INPUT_SHA256, "the golden input changed");
    // (a) Today's encoder writes the golden bytes.
    assert!(
        packed.bytes == golden,
        "push no longer writes the golden container ({} bytes now, {} golden): the \
         format or a coder changed; if on purpose, see this file's doc to regenerate it",
        packed.bytes.len(),
        golden.len()
    );
    // (b) Today's decoder gives the golden container's input back.
    let (header, out) = archive::decode(&golden).expect("decode the golden container");
    assert_eq!(header.name, name);
    assert_eq!(hex(&Sha256::digest(&out)), INPUT_SHA256);
    assert!(out == input);
}
