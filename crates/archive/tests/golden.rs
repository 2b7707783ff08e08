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

#[test]
fn the_golden_container_is_what_push_writes_and_decodes_to_its_input() {
    let (name, input) = golden_input();
    let spec: Spec = METHOD.parse().expect("spec");
    let packed = pack(&name, &input, &spec).expect("pack");
    let input_sha = hex::encode(Sha256::digest(&input));
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
    assert_eq!(hex::encode(Sha256::digest(&out)), INPUT_SHA256);
    assert!(out == input);
}

/// The golden container with its word-coded part's coding changed by `damage`, recompressed
/// and with that part's checksum and lengths made right again, so that only the word decoder
/// can find the damage.
fn with_damaged_words(golden: &[u8], damage: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    use archive::container::Header;
    let (mut header, hlen) = Header::parse(golden)
        .expect("golden header")
        .expect("whole header");
    let mut payload = Vec::new();
    let mut off = hlen;
    for p in header.parts.iter_mut() {
        let stored = &golden[off..off + p.stored_len as usize];
        off += p.stored_len as usize;
        if !p.words {
            payload.extend_from_slice(stored);
            continue;
        }
        let mut coded = Vec::new();
        codec::block::decompress(header.spec.method, stored, p.raw_len as usize, &mut coded)
            .expect("the word-coded part decompresses");
        damage(&mut coded);
        let mut block = Vec::new();
        codec::BlockCompressor::new(&header.spec)
            .expect("compressor")
            .compress(&coded, &mut block)
            .expect("compress");
        p.raw_len = coded.len() as u64;
        p.stored_len = block.len() as u64;
        p.crc32c = crc32c::crc32c(&block);
        payload.extend_from_slice(&block);
        return [header.encode(), payload, golden[off..].to_vec()].concat();
    }
    panic!("the golden container has no word-coded part")
}

#[test]
fn damaged_word_coding_in_a_container_is_an_error_never_other_bytes() {
    let golden = std::fs::read(golden_path()).expect("golden file");
    // Unchanged, the rebuilt container decodes: the rebuilding itself is right.
    let same = with_damaged_words(&golden, |_| {});
    assert!(archive::decode(&same).is_ok());
    let coded_len = {
        let mut n = 0;
        with_damaged_words(&golden, |c| n = c.len());
        n
    };
    let (mut refused, mut same) = (0, 0);
    // Every byte of the header and the start of the dictionary, then every 37th.
    for at in (0..coded_len.min(400)).chain((400..coded_len).step_by(37)) {
        for bit in [0x01u8, 0x20, 0x80] {
            let bad = with_damaged_words(&golden, |c| c[at] ^= bit);
            // A changed literal decodes to other bytes, which the digest check refuses; a
            // changed code, length or dictionary is the word decoder's error. What decodes
            // is the original (a change to a word no code uses changes nothing).
            match archive::decode(&bad) {
                Ok((_, out)) => {
                    assert_eq!(
                        hex::encode(Sha256::digest(&out)),
                        INPUT_SHA256,
                        "byte {at} ^ {bit:#x}"
                    );
                    same += 1;
                }
                Err(_) => refused += 1,
            }
        }
    }
    eprintln!("{refused} damaged codings refused, {same} decoded to the same bytes");
    assert!(refused > same * 4, "{refused} refused, {same} the same");
    // Cut short and lengthened.
    for cut in [1, 2, 7, coded_len / 2] {
        let bad = with_damaged_words(&golden, |c| c.truncate(c.len() - cut));
        assert!(archive::decode(&bad).is_err(), "cut by {cut}");
    }
    let bad = with_damaged_words(&golden, |c| c.extend_from_slice(b"more"));
    assert!(archive::decode(&bad).is_err(), "lengthened");
}
