//! Hands the bundled SQLite's memory to mimalloc.
//!
//! SQLite allocates from the C library's `malloc` unless told otherwise. On the store's
//! one writer that was an eighth of its thread's time in a million-claim rebuild:
//! glibc's free-list upkeep (`_int_malloc`, `_int_free`, `malloc_consolidate`,
//! `unlink_chunk`) for the copy SQLite makes of every bound text and blob, and a global
//! mutex around each call for SQLite's memory statistics. The rest of the service
//! already allocates from mimalloc (the binary's global allocator) for the same reason.
//! [`install`] points SQLite at mimalloc and turns its memory statistics off (nothing
//! reads them); it must run before SQLite's first connection. `claims replay` calls it
//! first thing; the service does not, as its peak memory rose by 20 MiB with it at a
//! million claims (docs/decisions.md, "Rebuilding from the topics").
//!
//! The service keeps SQLite on the C library's allocator, and [`trim_c_heap`] hands the
//! pages glibc holds free in its arenas back to the system; the service calls it once a
//! second.
//!
//! Written here rather than taken from a crate: none on crates.io configures SQLite's
//! allocator, and the SQLite interface for it (`SQLITE_CONFIG_MALLOC`) is seven
//! functions that forward to mimalloc's. This is the one crate of the workspace that
//! calls C, so `malloc_trim` is called here too.

#![allow(unsafe_code)]

use std::ffi::{c_int, c_void};
use std::sync::OnceLock;

use libmimalloc_sys as mi;
use libsqlite3_sys as sqlite;

/// Why SQLite kept its own allocator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotInstalled {
    /// SQLite's result code: `SQLITE_MISUSE` (21) when SQLite was already in use.
    pub code: c_int,
}

impl std::fmt::Display for NotInstalled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SQLite kept its own allocator (sqlite3_config answered {}); it was in use already",
            self.code
        )
    }
}

impl std::error::Error for NotInstalled {}

/// Hands the pages the C library's allocator holds free back to the system, in every
/// one of its arenas (glibc's `malloc_trim(0)`); answers whether any were. The service
/// keeps SQLite on the C library's allocator (see [`install`] for why), which gives
/// each thread that runs SQLite's statements an arena of its own and returns only the
/// free memory at an arena's top by itself: under a million-claim load the arenas held
/// some 40 MiB free, a readers' arena 6 to 8 MiB for 1 to 2 MiB in use. Elsewhere than
/// glibc it does nothing.
pub fn trim_c_heap() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: `malloc_trim` takes no pointers and locks each arena while it trims,
        // so it may run beside allocations on other threads.
        unsafe { libc::malloc_trim(0) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// Points SQLite's allocations at mimalloc and turns its memory statistics off, once
/// per process; later calls answer what the first did. SQLite takes its configuration
/// only before its first use (any connection opened), and answers `SQLITE_MISUSE`
/// after it, in which case it keeps allocating as before: slower, not wrong.
pub fn install() -> Result<(), NotInstalled> {
    static INSTALLED: OnceLock<Result<(), NotInstalled>> = OnceLock::new();
    *INSTALLED.get_or_init(|| {
        let methods = sqlite::sqlite3_mem_methods {
            xMalloc: Some(x_malloc),
            xFree: Some(x_free),
            xRealloc: Some(x_realloc),
            xSize: Some(x_size),
            xRoundup: Some(x_roundup),
            xInit: Some(x_init),
            xShutdown: Some(x_shutdown),
            pAppData: std::ptr::null_mut(),
        };
        // SAFETY: both options are documented to take these arguments (a pointer to the
        // methods, which SQLite copies before returning; an int), and SQLite refuses
        // them with SQLITE_MISUSE, changing nothing, once it is in use.
        let codes = unsafe {
            [
                sqlite::sqlite3_config(
                    sqlite::SQLITE_CONFIG_MALLOC,
                    &methods as *const sqlite::sqlite3_mem_methods,
                ),
                sqlite::sqlite3_config(sqlite::SQLITE_CONFIG_MEMSTATUS, 0 as c_int),
            ]
        };
        match codes.into_iter().find(|c| *c != sqlite::SQLITE_OK) {
            None => Ok(()),
            Some(code) => Err(NotInstalled { code }),
        }
    })
}

/// SQLite passes sizes as a positive `int`; anything else gets no memory.
fn size(n: c_int) -> Option<usize> {
    usize::try_from(n).ok().filter(|n| *n > 0)
}

unsafe extern "C" fn x_malloc(n: c_int) -> *mut c_void {
    match size(n) {
        // SAFETY: mimalloc's malloc takes any size; it answers null when out of memory,
        // which SQLite handles (SQLITE_NOMEM). Its blocks are 16-byte aligned, more than
        // the 8 SQLite asks.
        Some(n) => unsafe { mi::mi_malloc(n) },
        None => std::ptr::null_mut(),
    }
}

unsafe extern "C" fn x_free(p: *mut c_void) {
    // SAFETY: SQLite frees only what `x_malloc` or `x_realloc` gave it (or null, which
    // mimalloc ignores).
    unsafe { mi::mi_free(p) }
}

unsafe extern "C" fn x_realloc(p: *mut c_void, n: c_int) -> *mut c_void {
    match size(n) {
        // SAFETY: `p` is a block of ours (SQLite's contract); on failure mimalloc leaves
        // it as it was and answers null, as SQLite expects of realloc.
        Some(n) => unsafe { mi::mi_realloc(p, n) },
        None => std::ptr::null_mut(),
    }
}

unsafe extern "C" fn x_size(p: *mut c_void) -> c_int {
    // SAFETY: `p` is null or a block of ours; mimalloc answers 0 for null.
    let usable = unsafe { mi::mi_usable_size(p) };
    c_int::try_from(usable).unwrap_or(c_int::MAX)
}

unsafe extern "C" fn x_roundup(n: c_int) -> c_int {
    // The size mimalloc would give a request of `n` bytes: SQLite uses all of it.
    let good = size(n).map_or(0, |n| {
        // SAFETY: a pure computation on a size.
        unsafe { mi::mi_good_size(n) }
    });
    c_int::try_from(good).unwrap_or(n)
}

unsafe extern "C" fn x_init(_: *mut c_void) -> c_int {
    sqlite::SQLITE_OK
}

unsafe extern "C" fn x_shutdown(_: *mut c_void) {}

#[cfg(test)]
mod tests {
    use super::*;

    fn resident_bytes() -> usize {
        let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
        let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
        pages * 4096
    }

    /// Pages freed in the middle of a C heap, under a block still in use at its top
    /// (which the allocator would otherwise hand back by itself), leave the process's
    /// resident memory when trimmed.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn trimming_hands_the_c_heaps_free_pages_back() {
        const BLOCKS: usize = 4096;
        const SIZE: usize = 4096;
        // SAFETY: blocks from `malloc`, each written within its size and freed once.
        let (before, after) = unsafe {
            let blocks: Vec<*mut c_void> = (0..BLOCKS)
                .map(|_| {
                    let b = libc::malloc(SIZE);
                    assert!(!b.is_null());
                    std::ptr::write_bytes(b.cast::<u8>(), 1, SIZE);
                    b
                })
                .collect();
            let top = libc::malloc(SIZE);
            std::ptr::write_bytes(top.cast::<u8>(), 1, SIZE);
            for b in blocks {
                libc::free(b);
            }
            let before = resident_bytes();
            assert!(trim_c_heap(), "some pages were handed back");
            let after = resident_bytes();
            libc::free(top);
            (before, after)
        };
        assert!(
            before.saturating_sub(after) >= BLOCKS * SIZE / 2,
            "resident {before} bytes before the trim, {after} after"
        );
    }

    /// SQLite allocates from mimalloc once installed: a block SQLite hands out is one
    /// mimalloc knows the size of, and SQLite's own size of it is mimalloc's.
    #[test]
    fn sqlite_allocates_from_mimalloc_once_installed() {
        install().unwrap();
        // SAFETY: SQLite's documented allocation functions, on a block it gave.
        unsafe {
            let p = sqlite::sqlite3_malloc(1000);
            assert!(!p.is_null());
            assert!(mi::mi_is_in_heap_region(p), "the block is not mimalloc's");
            assert_eq!(sqlite::sqlite3_msize(p) as usize, mi::mi_usable_size(p));
            let q = sqlite::sqlite3_realloc(p, 100_000);
            assert!(!q.is_null() && mi::mi_is_in_heap_region(q));
            sqlite::sqlite3_free(q);
        }
        assert_eq!(
            install(),
            Ok(()),
            "a second call answers what the first did"
        );
    }
}
