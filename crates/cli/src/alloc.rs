//! The global allocator: the system's, with transparent huge pages asked for on large
//! buffers.
//!
//! `archive push` and `get` handle a 16 MB segment as several whole-segment buffers (the
//! file, its streams, the rebuilt copy), each touched once. On 4 KiB pages every first
//! touch is a page fault: measured with `perf stat`, faults were about a fifth of the CPU
//! time of a push or get of a pgbench segment, and huge pages removed most of them (push
//! 283 -> 218 ms of CPU, get 91 -> 67 ms). Many kernels, Debian's among them, give huge
//! pages only to memory that asks for them (`/sys/kernel/mm/transparent_hugepage/enabled`
//! = `madvise`), so buffers of [`HUGE_MIN`] bytes or more ask with `madvise(MADV_HUGEPAGE)`.
//! The advice only changes how the kernel backs the memory, never its contents; where it
//! is refused or THP is off, nothing changes.

use std::alloc::{GlobalAlloc, Layout, System};

/// Size of a transparent huge page on x86-64 and aarch64 (4 KiB base pages).
const HUGE_PAGE: usize = 2 << 20;
/// Buffers at least this large get the advice: they hold at least one whole huge page.
const HUGE_MIN: usize = 4 << 20;

/// [`System`], plus `madvise(MADV_HUGEPAGE)` on the whole huge pages of large blocks.
pub struct HugePageAlloc;

#[cfg(target_os = "linux")]
fn advise(ptr: *mut u8, len: usize) {
    let start = (ptr as usize).next_multiple_of(HUGE_PAGE);
    let end = (ptr as usize + len) / HUGE_PAGE * HUGE_PAGE;
    if end > start {
        #[allow(unsafe_code)]
        // SAFETY: [start, end) lies inside the block the system allocator just returned,
        // which this process owns; MADV_HUGEPAGE only sets a flag on the mapping and never
        // changes memory contents. A failure (an old kernel, THP compiled out) is harmless.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn advise(_ptr: *mut u8, _len: usize) {}

#[allow(unsafe_code)]
// SAFETY: every call is forwarded to `System` with the caller's arguments and its result
// returned unchanged; `advise` only adds a hint on memory `System` returned.
unsafe impl GlobalAlloc for HugePageAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() && layout.size() >= HUGE_MIN {
            advise(p, layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() && layout.size() >= HUGE_MIN {
            advise(p, layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() && new_size >= HUGE_MIN {
            advise(p, new_size);
        }
        p
    }
}
