//! The word coding's bytes on real WAL must never change: containers already written hold
//! them. The text-holding streams (block data, main data, images) of the 35 PostgreSQL 18
//! segments of `crates/wal/testdata` are word-coded, and the SHA-256 over each stream kind's
//! coded outputs (declined ones marked) is compared with the value recorded when the coder
//! moved from `archive` to `codec` (synthetic inputs: `crates/codec/tests/words_golden.rs`).

use archive::pack::records_split;
use archive::walsplit::Stream;
use codec::words::{decode, encode};
use sha2::{Digest, Sha256};

mod fixture;
use fixture::segments;

/// The recorded digests and number of coded (not declined) streams, per stream kind.
const EXPECTED: &[(&str, usize, &str)] = &[
    (
        "block data",
        0,
        "cf89716ed6b929d757806e0f27eb7bee6f50629133b0ebad468c428c5571c28f",
    ),
    (
        "main data",
        0,
        "cf89716ed6b929d757806e0f27eb7bee6f50629133b0ebad468c428c5571c28f",
    ),
    (
        "page images",
        1,
        "a66eaed38675fceb262ed3793ee95a59185cd3cd5e2a37509cd442b7992f1014",
    ),
];

#[test]
fn coded_wal_streams_never_change() {
    let segments = segments();
    let mut got = Vec::new();
    for s in [Stream::BlockData, Stream::MainData, Stream::Images] {
        let mut h = Sha256::new();
        let mut coded_count = 0;
        for (name, data) in &segments {
            let Some((_, split, _)) = records_split(data) else {
                h.update(b"unsplit");
                continue;
            };
            let raw = &split.streams[s as usize];
            match encode(raw) {
                None => h.update(b"declined"),
                Some(coded) => {
                    let back = decode(&coded, raw.len()).expect("decodes");
                    assert!(back == *raw, "{name} {}", s.name());
                    coded_count += 1;
                    h.update((coded.len() as u64).to_le_bytes());
                    h.update(&coded);
                }
            }
        }
        got.push((s.name(), coded_count, format!("{:x}", h.finalize())));
    }
    for (name, n, digest) in &got {
        println!("(\"{name}\", {n}, \"{digest}\"),");
    }
    let expected: Vec<(&str, usize, String)> = EXPECTED
        .iter()
        .map(|(s, n, d)| (*s, *n, (*d).to_owned()))
        .collect();
    assert_eq!(got, expected);
}
