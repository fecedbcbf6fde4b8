// SPDX-License-Identifier: GPL-2.0

//! The post's copies of a WQE: from a send queue in user memory (which user
//! space may be writing), into the send queue (DMA memory) and to the BlueFlame
//! register (MMIO). Whole 64-bit words, never a merged or split access, which
//! MMIO and memory others write at the same time need: on x86 one `rep
//! movsq` (what `memcpy_toio()` does there with `movsl`; a `memcpy` would be
//! `rep movsb`, a store per byte), elsewhere one volatile load and store per
//! word, four words per loop round. Under `-icount` every iteration of a
//! `rep` counts as an instruction (Documentation/performance.rst); on the
//! CPU the whole string is one.

#[cfg(not(target_arch = "x86_64"))]
use core::ptr::{read_volatile, write_volatile};

/// Copies `n` 64-bit words from `src` to `dst`, in ascending order; other
/// observers may see a fast string's stores in any order, so a word that
/// must land last is stored on its own after a barrier (`write_sq_slot()`).
///
/// # Safety
///
/// `src..src + n` is readable and `dst..dst + n` writable, both 8-byte
/// aligned (MMIO included: a volatile store there is `__raw_writeq()`), and
/// the two do not overlap.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) unsafe fn qwords(dst: *mut u64, src: *const u64, n: usize) {
    // SAFETY: By the caller's guarantee both ranges are valid for `n` words;
    // the kernel runs with the direction flag clear, so `movsq` ascends and
    // leaves it clear. The asm touches memory only through `rdi`/`rsi`.
    unsafe {
        core::arch::asm!(
            "rep movsq",
            inout("rcx") n => _,
            inout("rdi") dst => _,
            inout("rsi") src => _,
            options(nostack, preserves_flags),
        )
    };
}

/// Copies `n` 64-bit words from `src` to `dst`, in ascending order.
///
/// # Safety
///
/// As the x86 version.
#[cfg(not(target_arch = "x86_64"))]
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

/// Copies `src` into `dst` (as long): by whole words (`qwords`) when both
/// are 8-byte aligned and a multiple of 8 long, as a WQE built in an
/// aligned buffer is; else as `copy_from_slice()`.
#[inline(always)]
pub(crate) fn words(dst: &mut [u8], src: &[u8]) {
    let aligned = |p: *const u8| (p as usize).is_multiple_of(8);
    if dst.len() == src.len()
        && src.len() % 8 == 0
        && aligned(dst.as_ptr())
        && aligned(src.as_ptr())
    {
        // SAFETY: Both slices are valid for their `len / 8` words, 8-byte
        // aligned (checked), and cannot overlap (one is borrowed mutably).
        unsafe { qwords(dst.as_mut_ptr().cast(), src.as_ptr().cast(), src.len() / 8) };
    } else {
        dst.copy_from_slice(src);
    }
}

/// Zeroes `b` (8-byte aligned, a multiple of 8 bytes long: the BlueFlame
/// padding) with 8-byte stores; volatile, so they do not become a `memset`
/// (one instruction per byte under `-icount`).
#[inline(always)]
pub(crate) fn zero_words(b: &mut [u8]) {
    let p = b.as_mut_ptr().cast::<u64>();
    if !(p as usize).is_multiple_of(8) {
        b.fill(0);
        return;
    }
    for i in 0..b.len() / 8 {
        // SAFETY: Word `i` lies inside `b` (`i < len / 8`), which is 8-byte
        // aligned (checked above).
        unsafe { core::ptr::write_volatile(p.add(i), 0) };
    }
}
