//! A counting global allocator for tests that bound memory: live heap bytes and their peak.
//!
//! A test binary installs it and measures a stretch of work:
//!
//! ```
//! #[global_allocator]
//! static ALLOC: memcount::Counting = memcount::Counting;
//!
//! fn main() {
//!     let (held, peak) = memcount::peak_of(|| vec![7u8; 1 << 20]);
//!     assert!(peak >= held.len(), "{peak}");
//! }
//! ```
//!
//! Without it installed there is nothing to measure, and saying so beats a bound that
//! always holds:
//!
//! ```should_panic
//! let (_, _peak) = memcount::peak_of(|| vec![7u8; 1 << 20]);
//! ```
//!
//! The counters are process-wide, so a binary whose tests measure runs them one at a time
//! ([`exclusive`]) and allocates nothing else meanwhile. It has no dependencies, so crates
//! low in the tree (codec, wal) can dev-depend on it without building the test harness.
#![deny(missing_docs)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// Allocations seen, to tell whether this allocator is the binary's at all.
static CALLS: AtomicUsize = AtomicUsize::new(0);
static EXCLUSIVE: Mutex<()> = Mutex::new(());

/// The system allocator with counters of live bytes and their peak; install it with
/// `#[global_allocator]` in the test binary.
pub struct Counting;

fn grow(by: usize) {
    let now = LIVE.fetch_add(by, Ordering::SeqCst) + by;
    PEAK.fetch_max(now, Ordering::SeqCst);
}

// Measuring allocations needs a GlobalAlloc, whose methods are unsafe by definition.
// SAFETY: every call is forwarded to System with the caller's own pointer, layout and size,
// unchanged, so System's guarantees are the ones the caller gets; the counters are atomics.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            CALLS.fetch_add(1, Ordering::SeqCst);
            grow(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::SeqCst);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            CALLS.fetch_add(1, Ordering::SeqCst);
            if new_size >= layout.size() {
                grow(new_size - layout.size());
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Ordering::SeqCst);
            }
        }
        p
    }
}

/// Holds off the binary's other measuring tests while the guard lives: the peak is
/// process-wide, and another test's allocations would be counted in it.
pub fn exclusive() -> MutexGuard<'static, ()> {
    EXCLUSIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Live heap bytes at the peak of `f`, above what was live before it.
///
/// Panics when [`Counting`] is not the binary's global allocator: a peak of nothing
/// would let every bound pass.
pub fn peak_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let calls = CALLS.load(Ordering::SeqCst);
    drop(std::hint::black_box(vec![0u8; 1]));
    assert!(
        CALLS.load(Ordering::SeqCst) > calls,
        "memcount::Counting is not this binary's #[global_allocator]: nothing is counted"
    );
    let before = LIVE.load(Ordering::SeqCst);
    PEAK.store(before, Ordering::SeqCst);
    let out = f();
    (out, PEAK.load(Ordering::SeqCst).saturating_sub(before))
}

#[cfg(test)]
mod tests {
    #[global_allocator]
    static ALLOC: super::Counting = super::Counting;

    #[test]
    fn the_peak_counts_what_was_freed_before_the_end() {
        let _one = super::exclusive();
        let ((), peak) = super::peak_of(|| drop(std::hint::black_box(vec![1u8; 3 << 20])));
        assert!(peak >= 3 << 20, "{peak}");
    }

    #[test]
    fn growth_in_place_is_counted_once() {
        let _one = super::exclusive();
        let (v, peak) = super::peak_of(|| {
            let mut v = std::hint::black_box(Vec::<u8>::with_capacity(1 << 20));
            v.reserve_exact(2 << 20);
            v
        });
        assert!(v.capacity() >= 2 << 20);
        // What it grew to, not old and new together: a realloc is not a second allocation.
        assert!(
            peak >= v.capacity() && peak < v.capacity() + (1 << 19),
            "{peak} for {}",
            v.capacity()
        );
    }
}
