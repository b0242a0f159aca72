//! Memory settings for the `berth agent` and `berth server` processes, whose
//! idle footprints are goals of their own (issue 5: agent ≤ 30 MB RSS; issue 22:
//! server with its agent ≤ 40 MB). mimalloc's defaults (transparent huge pages
//! for its arenas, freed pages purged 1 s later and only when it is next
//! called) held 2 MB pages resident for a few hundred KB of live data each: an
//! idle server measured 103 MB with them and 61 MB without (issue 22). A user's
//! own `MIMALLOC_ALLOW_THP` / `MIMALLOC_PURGE_DELAY` win over these settings.

use std::ffi::{CStr, c_char, c_int};

/// mimalloc v3's `mi_option_purge_delay` (the index in its option enum;
/// libmimalloc-sys does not export it, and the test below pins it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// The agent's runtime needs few threads: it waits on the API server, containerd
/// and probes, and each worker costs a thread heap in mimalloc.
pub const AGENT_WORKER_THREADS: usize = 4;

// mimalloc reads its options and reserves its arena from a constructor of
// priority 101, before main; this one runs first. glibc passes constructors
// argc and argv.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[used]
#[unsafe(link_section = ".init_array.00099")]
static BEFORE_ALLOCATOR: extern "C" fn(c_int, *const *const c_char) = before_allocator;

extern "C" fn before_allocator(argc: c_int, argv: *const *const c_char) {
    if argc < 2 || argv.is_null() {
        return;
    }
    // SAFETY: glibc's argv holds argc NUL-terminated strings.
    let sub = unsafe { CStr::from_ptr(*argv.add(1)) };
    if matches!(sub.to_bytes(), b"agent" | b"server") {
        tune_allocator();
    }
}

/// Whether the environment sets `name` (libc's getenv: this runs before main).
fn env_set(name: &CStr) -> bool {
    // SAFETY: a NUL-terminated name; nothing changes the environment this early.
    !unsafe { libc::getenv(name.as_ptr()) }.is_null()
}

fn tune_allocator() {
    // mimalloc asks for transparent huge pages for its arena: an idle agent
    // had six 2 MB pages resident (12 of its 15 MB anonymous memory) for a few
    // hundred KB of live data in each. The flag holds for the whole process.
    if !env_set(c"MIMALLOC_ALLOW_THP") {
        // SAFETY: PR_SET_THP_DISABLE only sets a flag on this process.
        unsafe {
            libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
        }
    }
    // Freed pages go back to the OS at once instead of 1 s later: mimalloc
    // purges only when it is next called, which in an idle agent can be never.
    if !env_set(c"MIMALLOC_PURGE_DELAY") {
        // SAFETY: runs before any thread exists (the setter is not thread-safe).
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purge_delay_option_index_is_mimallocs() {
        // A mimalloc upgrade that reorders its options fails here: purge_delay
        // defaults to 1000 ms and sits three places before os_tag (100).
        assert_eq!(MI_OPTION_PURGE_DELAY + 3, libmimalloc_sys::mi_option_os_tag);
        // SAFETY: reads options; nothing sets them in this test binary.
        let (delay, tag) = unsafe {
            (
                libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY),
                libmimalloc_sys::mi_option_get(libmimalloc_sys::mi_option_os_tag),
            )
        };
        assert_eq!((delay, tag), (1000, 100));
    }
}
