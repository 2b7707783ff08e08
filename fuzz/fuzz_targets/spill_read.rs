//! Arbitrary bytes read back as a spill file: every change comes out or the reader stops with
//! an error naming the offset, never a panic, never an allocation beyond its record cap.
//!
//! Byte 0: bit 0 set = the rest is the file body after a valid header built here (method from
//! bits 1-2: none, pglz, lz4, zstd), so mutations reach the records without first having to
//! guess a header checksum; bit 0 clear = the rest is the whole file.
#![no_main]

use std::io::Cursor;

use codec::{Method, Spec};
use libfuzzer_sys::fuzz_target;
use logical::spill::{file_header, SpillReader};
use logical::AssembleError;

/// Largest raw record the reader accepts here.
const CAP: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let mut file = Vec::new();
    if flags & 1 != 0 {
        let method = [Method::None, Method::Pglz, Method::Lz4, Method::Zstd]
            [usize::from((flags >> 1) & 3)];
        let spec = Spec {
            method,
            level: None,
            long: None,
            workers: None,
        };
        file.extend_from_slice(&file_header(&spec, 7));
    }
    file.extend_from_slice(rest);
    let len = file.len() as u64;
    let reader = match SpillReader::new(Cursor::new(file), "fuzz.spill") {
        Ok(r) => r.with_max_record(CAP),
        Err(e) => {
            assert!(matches!(e, AssembleError::Corrupt { offset: 0, .. }), "{e}");
            return;
        }
    };
    let mut reader = reader;
    let mut buf = Vec::new();
    loop {
        match reader.next_change(&mut buf) {
            Ok(true) => assert!(buf.len() <= CAP),
            Ok(false) => {
                assert_eq!(reader.offset(), len, "a clean end is the end of the input");
                break;
            }
            Err(AssembleError::Corrupt { offset, reason, .. }) => {
                assert!(offset < len, "offset {offset} past {len}: {reason}");
                break;
            }
            Err(e) => panic!("only Corrupt is possible on memory input: {e}"),
        }
    }
});
