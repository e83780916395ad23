//! A hint to the CPU to start loading memory that is about to be read, so
//! that the cache misses of several independent lookups (the keys of a
//! pipeline's next commands) overlap instead of following one another.
//! Only a hint: it changes no value and no result, and may do nothing.

/// Starts loading the cache line holding `p` into the caches. Any address
/// is allowed, dangling or null included: a prefetch never faults.
#[inline(always)]
pub fn read<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: PREFETCHT0 (SSE, part of every x86_64 CPU) is only a
        // hint: it never faults, whatever the address (a bad one is
        // dropped), reads nothing into a register and writes nothing, so
        // no Rust value is accessed and no aliasing rule is involved.
        #[allow(unused_unsafe)]
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(p.cast::<i8>())
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// [`read`] for the first `len` bytes at `p` (at most `lines` cache
/// lines of 64 bytes).
#[inline]
pub fn read_bytes(p: *const u8, len: usize, lines: usize) {
    let mut off = 0;
    for _ in 0..lines {
        if off >= len {
            break;
        }
        read(p.wrapping_add(off));
        off += 64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefetching_any_address_changes_nothing() {
        let v = vec![7u8; 300];
        read_bytes(v.as_ptr(), v.len(), 8);
        read(std::ptr::null::<u64>());
        read(usize::MAX as *const u8);
        read_bytes(v.as_ptr(), 0, 4);
        assert!(v.iter().all(|&b| b == 7));
    }
}
