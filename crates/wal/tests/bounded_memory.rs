//! A length read from input must not size an allocation before the bytes exist
//! (STYLE.md): a record header claiming ~1 GiB must cost no more memory than the bytes
//! actually fed. Its own test binary, so the counting allocator sees only this test.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use wal::{DecoderOptions, Lsn, Next, Stop, WalDecoder};

/// Counts live heap bytes and their peak.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// Measuring allocations needs a GlobalAlloc, whose methods are unsafe by definition.
// SAFETY: every call is forwarded to System with the caller's own pointer and layout, so
// System's guarantees are the ones the caller gets; the counters are plain atomics.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Tests here measure a process-wide peak: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Resets the peak to the current level and returns that level.
fn baseline() -> usize {
    let now = LIVE.load(Ordering::Relaxed);
    PEAK.store(now, Ordering::Relaxed);
    now
}

#[test]
fn huge_record_length_costs_only_the_bytes_fed() {
    let _one_at_a_time = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
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
        let base = baseline();
        let mut dec = WalDecoder::new(start, DecoderOptions::default());
        dec.feed(&page);
        // 4 MiB of blank pages after it: far less than the record claims.
        let blank = vec![0u8; 8192];
        let mut fed = page.len();
        let stop = loop {
            match dec.next_record() {
                Next::Record(r) => panic!("record from a corrupt length at {}", r.lsn),
                Next::NeedInput if fed < (4 << 20) => {
                    dec.feed(&blank);
                    fed += blank.len();
                }
                Next::NeedInput => dec.finish_input(),
                Next::Stopped(s) => break s,
            }
        };
        let used = PEAK.load(Ordering::Relaxed) - base;
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
    let _one_at_a_time = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut rng = common::Rng::new(0x3E3);
    let page = common::segments()[0][..8192].to_vec();
    let base = baseline();
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
            Next::Stopped(_) => break,
        }
    }
    let used = PEAK.load(Ordering::Relaxed) - base;
    assert!(
        used <= 3 * fed + (1 << 20),
        "peak {used} bytes for {fed} fed"
    );
}
