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
//!
//! The middle-sized buffers (32 KiB to 4 MiB: the rebuilt segment's chunks, the buffers
//! streams are decompressed into, zstd's windows) are too small for that advice, and
//! together they are about 10 MB of fresh memory in a `get`: some 2 500 faults of 4 KiB,
//! and as many pages unmapped again when they are freed. A one-file command (`archive push`
//! and `get`, one process per file) turns on the [arena](use_arena) instead: those blocks
//! are then carved, in order, out of one region backed by huge pages, and are never given
//! back before the process ends. Measured on a pgbench segment, the faults of a `get` went
//! from about 3 050 to 1 200 and its CPU time down by about 3 ms (5 %). The arena is
//! bounded ([`ARENA_LEN`]): once it is used up, blocks come from the system as before.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Size of a transparent huge page on x86-64 and aarch64 (4 KiB base pages).
const HUGE_PAGE: usize = 2 << 20;
/// Buffers at least this large get the advice: they hold at least one whole huge page.
const HUGE_MIN: usize = 4 << 20;

/// Blocks of at least this many bytes, and fewer than [`HUGE_MIN`], come from the arena
/// while it is on.
const ARENA_MIN: usize = 32 << 10;
/// Address space the arena reserves. Only pages that are written take memory.
const ARENA_LEN: usize = 256 << 20;
/// Alignment of every arena block (a cache line; more when the layout asks).
const ARENA_ALIGN: usize = 64;

/// The arena is `[ARENA_START, ARENA_END)`, handed out from `ARENA_NEXT` on; all zero while off.
static ARENA_START: AtomicUsize = AtomicUsize::new(0);
static ARENA_NEXT: AtomicUsize = AtomicUsize::new(0);
static ARENA_END: AtomicUsize = AtomicUsize::new(0);

/// Turns the arena on, for a process that handles one file and ends: middle-sized blocks
/// are then never reused, so it must not be called by a long-running command. Calling it
/// again, or where the region cannot be mapped, changes nothing.
#[cfg(target_os = "linux")]
pub fn use_arena() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(map_arena);
}

#[cfg(target_os = "linux")]
fn map_arena() {
    let len = ARENA_LEN + HUGE_PAGE;
    #[allow(unsafe_code)]
    // SAFETY: a fresh private anonymous mapping, at an address the kernel chooses; nothing
    // else refers to it. MAP_NORESERVE: untouched pages take no memory.
    let region = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if region == libc::MAP_FAILED {
        return;
    }
    let start = (region as usize).next_multiple_of(HUGE_PAGE);
    advise(start as *mut u8, ARENA_LEN);
    ARENA_NEXT.store(start, Ordering::Relaxed);
    ARENA_END.store(start + ARENA_LEN, Ordering::Relaxed);
    // Published last: whoever sees the start also sees the bounds.
    ARENA_START.store(start, Ordering::Release);
}

#[cfg(not(target_os = "linux"))]
pub fn use_arena() {}

/// Whether a block of `size` bytes is the arena's kind.
fn arena_sized(size: usize) -> bool {
    (ARENA_MIN..HUGE_MIN).contains(&size)
}

/// A fresh arena block for `layout`, or null when the arena is off or used up. The block
/// was never handed out before, so it still holds the zeros the kernel mapped.
fn arena_alloc(layout: Layout) -> *mut u8 {
    if ARENA_START.load(Ordering::Acquire) == 0 {
        return std::ptr::null_mut();
    }
    let end = ARENA_END.load(Ordering::Relaxed);
    let align = layout.align().max(ARENA_ALIGN);
    let mut next = ARENA_NEXT.load(Ordering::Relaxed);
    loop {
        let Some(at) = next.checked_next_multiple_of(align) else {
            return std::ptr::null_mut();
        };
        let Some(stop) = at.checked_add(layout.size()).filter(|&s| s <= end) else {
            return std::ptr::null_mut();
        };
        match ARENA_NEXT.compare_exchange_weak(next, stop, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return at as *mut u8,
            Err(seen) => next = seen,
        }
    }
}

/// Grows or shrinks the arena block `ptr` of `old` bytes in place when it is the last one
/// handed out and the arena has room; false otherwise.
fn arena_resize(ptr: *mut u8, old: usize, new: usize) -> bool {
    let stop = ptr as usize + old;
    let Some(new_stop) = (ptr as usize).checked_add(new) else {
        return false;
    };
    if new_stop > ARENA_END.load(Ordering::Relaxed) {
        return false;
    }
    // Bytes given back by a shrink are not handed out again: they may hold data, and
    // `alloc_zeroed` relies on arena blocks never having been written.
    new <= old
        || ARENA_NEXT
            .compare_exchange(stop, new_stop, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
}

/// Whether `ptr` lies in the arena.
fn in_arena(ptr: *mut u8) -> bool {
    let start = ARENA_START.load(Ordering::Acquire);
    start != 0 && (start..ARENA_END.load(Ordering::Relaxed)).contains(&(ptr as usize))
}

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
// SAFETY: a block is either the system's, and every call on it is forwarded to `System`
// with the caller's arguments, or the arena's: a range of the arena's mapping that no other
// block overlaps (the bump pointer only moves forward, atomically), aligned as the layout
// asks, zero until written (a range is handed out once), and never unmapped, so that
// freeing it is a no-op. `advise` only adds a hint on memory this process owns.
unsafe impl GlobalAlloc for HugePageAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if arena_sized(layout.size()) {
            let p = arena_alloc(layout);
            if !p.is_null() {
                return p;
            }
        }
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() && layout.size() >= HUGE_MIN {
            advise(p, layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if arena_sized(layout.size()) {
            let p = arena_alloc(layout);
            if !p.is_null() {
                return p;
            }
        }
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() && layout.size() >= HUGE_MIN {
            advise(p, layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if in_arena(ptr) {
            return;
        }
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if in_arena(ptr) {
            if arena_resize(ptr, layout.size(), new_size) {
                return ptr;
            }
            // SAFETY: the caller guarantees `new_size` is valid with the layout's alignment.
            let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
            // SAFETY: `new` has a non-zero size (realloc's contract).
            let p = unsafe { self.alloc(new) };
            if !p.is_null() {
                // SAFETY: both blocks are live, distinct (the arena never hands a range out
                // twice) and at least this long.
                unsafe { std::ptr::copy_nonoverlapping(ptr, p, layout.size().min(new_size)) };
            }
            return p;
        }
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() && new_size >= HUGE_MIN {
            advise(p, new_size);
        }
        p
    }
}
