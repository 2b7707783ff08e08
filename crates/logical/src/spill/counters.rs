//! Byte and file counters of the spill store, shared by the store and the files it hands out with
//! committed transactions; the assembler reports them as its `SpillStats`.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters shared by the store and the files it handed out with committed transactions.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub raw_bytes: AtomicU64,
    pub disk_written_bytes: AtomicU64,
    pub disk_bytes: AtomicU64,
    pub spilled_txns: AtomicU64,
    pub files: AtomicU64,
}

impl Counters {
    pub(crate) fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn sub(c: &AtomicU64, n: u64) {
        // Saturating: the counters are reports, never a reason to fail.
        let _ = c.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
            Some(v.saturating_sub(n))
        });
    }

    pub(crate) fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
}
