//! A length read from input must not size an allocation before the bytes exist
//! (STYLE.md): a record header claiming ~1 GiB must cost no more memory than the bytes
//! actually fed. Its own test binary, so the counting allocator sees only this test.

mod common;

use wal::{DecoderOptions, Lsn, Next, Stop, WalDecoder};

#[global_allocator]
static ALLOC: memcount::Counting = memcount::Counting;

#[test]
fn huge_record_length_costs_only_the_bytes_fed() {
    let _one_at_a_time = memcount::exclusive();
    // Segment 000000010000000000000007's first page: a 40-byte long header, then the
    // 0x1E4-byte tail of a record begun in the previous segment, then the first record.
    let first_page = common::segments()[0][..8192].to_vec();
    let first_rec = 40 + ((0x1E4 + 7) & !7);
    let start = Lsn(0x70_0000);
    // Unchanged, that is where the first record is read.
    let mut dec = WalDecoder::new(start, DecoderOptions::default());
    dec.feed(&common::segments()[0]);
    match dec.next_record() {
        Next::Record(r) => assert_eq!(r.lsn.0, start.0 + first_rec as u64),
        other => panic!("expected the first record, got {other:?}"),
    }
    drop(dec);
    for claimed in [0x3FFF_FFFFu32, 0x1000_0000, 0xFFFF_FFFF] {
        let mut page = first_page.clone();
        page[first_rec..first_rec + 4].copy_from_slice(&claimed.to_le_bytes());
        let ((stop, fed), used) = memcount::peak_of(|| {
            let mut dec = WalDecoder::new(start, DecoderOptions::default());
            dec.feed(&page);
            // 4 MiB of blank pages after it: far less than the record claims.
            let blank = vec![0u8; 8192];
            let mut fed = page.len();
            loop {
                match dec.next_record() {
                    Next::Record(r) => panic!("record from a corrupt length at {}", r.lsn),
                    Next::NeedInput if fed < (4 << 20) => {
                        dec.feed(&blank);
                        fed += blank.len();
                    }
                    Next::NeedInput => dec.finish_input(),
                    Next::Stopped(s) => break (s, fed),
                }
            }
        });
        // The input buffer may double while growing: allow 3x what was fed, and not a
        // byte more for the claimed length (which would be 256 MiB or more).
        assert!(
            used <= 3 * fed + (1 << 20),
            "claimed {claimed:#x}: peak {used} bytes for {fed} fed"
        );
        // Over MaxAllocSize is refused at once; otherwise the next page is blank.
        match stop {
            Stop::Invalid(e) => assert!(e.lsn.0 >= start.0 + first_rec as u64, "{e}"),
            other => panic!("expected invalid WAL, got {other:?}"),
        }
    }
}

#[test]
fn random_stream_after_a_valid_page_stays_bounded() {
    let _one_at_a_time = memcount::exclusive();
    let mut rng = common::Rng::new(0x3E3);
    let page = common::segments()[0][..8192].to_vec();
    let (fed, used) = memcount::peak_of(|| {
        let mut dec = WalDecoder::new(Lsn(0x70_0000), DecoderOptions::default());
        dec.feed(&page);
        let mut junk = vec![0u8; 64 << 10];
        let mut fed = page.len();
        loop {
            match dec.next_record() {
                Next::Record(_) => {}
                Next::NeedInput if fed < (8 << 20) => {
                    rng.fill(&mut junk);
                    dec.feed(&junk);
                    fed += junk.len();
                }
                Next::NeedInput => dec.finish_input(),
                Next::Stopped(_) => break fed,
            }
        }
    });
    assert!(
        used <= 3 * fed + (1 << 20),
        "peak {used} bytes for {fed} fed"
    );
}
