// SPDX-License-Identifier: GPL-2.0

//! The post's copies of a WQE: from the QP's WQE page (memory user space may
//! be writing), into the send queue (DMA memory) and to the BlueFlame
//! register (MMIO). One 64-bit load and one 64-bit store per word, both
//! volatile, four words per loop round: never a `memcpy`, whose `rep movsb`
//! costs one instruction per byte under `-icount`
//! (Documentation/performance.rst), and never a merged or split access,
//! which MMIO and memory others write at the same time need.

use core::ptr::{read_volatile, write_volatile};

/// Copies `n` 64-bit words from `src` to `dst`, in ascending order.
///
/// # Safety
///
/// `src..src + n` is readable and `dst..dst + n` writable, both 8-byte
/// aligned (MMIO included: a volatile store there is `__raw_writeq()`), and
/// the two do not overlap.
#[inline(always)]
pub(crate) unsafe fn qwords(dst: *mut u64, src: *const u64, n: usize) {
    let mut i = 0;
    while i + 4 <= n {
        // SAFETY: Words `i..i + 4` lie inside both ranges (`i + 4 <= n`).
        unsafe {
            let (a, b) = (read_volatile(src.add(i)), read_volatile(src.add(i + 1)));
            let (c, d) = (read_volatile(src.add(i + 2)), read_volatile(src.add(i + 3)));
            write_volatile(dst.add(i), a);
            write_volatile(dst.add(i + 1), b);
            write_volatile(dst.add(i + 2), c);
            write_volatile(dst.add(i + 3), d);
        }
        i += 4;
    }
    while i < n {
        // SAFETY: Word `i < n` lies inside both ranges.
        unsafe { write_volatile(dst.add(i), read_volatile(src.add(i))) };
        i += 1;
    }
}
