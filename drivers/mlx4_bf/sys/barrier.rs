// SPDX-License-Identifier: GPL-2.0

//! The memory barriers of the post, the queues and the command interface:
//! `wmb()`, `dma_wmb()` and `dma_rmb()`, which the 7.2 kernel crate does not
//! wrap. They are inline assembly, as the C macros are (x86's `sfence` and
//! compiler barriers, s390's `bcr 14,0`), so they cost what they cost in C.

/// `wmb()`: orders and flushes (on x86 also drains write-combining buffers)
/// all earlier stores before any later one.
#[inline(always)]
pub(crate) fn wmb() {
    // SAFETY: A store fence has no operands and no effect besides ordering.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        core::arch::asm!("sfence", options(nostack, preserves_flags))
    };
    // SAFETY: `bcr 14,0` is s390's serialization (fast-BCR) used by `wmb()`.
    #[cfg(target_arch = "s390x")]
    unsafe {
        core::arch::asm!("bcr 14,0", options(nostack))
    };
}

/// `dma_wmb()`: stores to DMA memory are ordered before later ones. x86
/// keeps stores in order (a compiler barrier is enough); s390 serializes.
#[inline(always)]
pub(crate) fn dma_wmb() {
    dma_rmb();
}

/// `dma_rmb()`: a load from DMA memory (an owner bit) is ordered before the
/// loads that follow it. x86 keeps loads in order (a compiler barrier is
/// enough); s390 serializes as `dma_rmb()` does there.
#[inline(always)]
pub(crate) fn dma_rmb() {
    #[cfg(not(target_arch = "s390x"))]
    core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
    // SAFETY: `bcr 14,0` is s390's serialization (fast-BCR) used by `mb()`.
    #[cfg(target_arch = "s390x")]
    unsafe {
        core::arch::asm!("bcr 14,0", options(nostack))
    };
}
