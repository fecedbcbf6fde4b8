// SPDX-License-Identifier: GPL-2.0

//! The two ways a BlueFlame burst is written to the adapter.
//!
//! - Store block (zPCI semantics): the burst is split exactly like s390's
//!   `zpci_memcpy_toio()` (see `store_block.rs`), each piece written as one
//!   store block or single store and followed by a write barrier, so each
//!   block reaches the device as one unit. On s390 each block is one PCISTB
//!   (`zpci_write_block()`), each single store one PCISTG; on x86 a block is
//!   a run of 64-bit stores (`mmio.rs`).
//! - Write combining (x86): the BlueFlame area is mapped WC and the burst is
//!   copied with `__iowrite64_copy()` between two write barriers, the
//!   sequence of mlx4_en's `mlx4_bf_copy()` (on s390 that copy is
//!   `zpci_memcpy_toio()`).
//!
//! The kernel crate has no wrapper for `wmb()` in 7.2; it is used here and
//! nowhere else.

use kernel::{
    io::{Io, Mmio},
    prelude::*,
};

use crate::{abi, hw::bar2::BfMapping, store_block, sys::mmio};

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Writer {
    StoreBlock,
    WriteCombining,
}

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

impl Writer {
    /// The writer named by its ABI value (`enum mlx4_bf_writer`).
    pub(crate) fn from_abi(value: u32) -> Option<Self> {
        match value {
            abi::WRITER_STORE_BLOCK => Some(Writer::StoreBlock),
            abi::WRITER_WRITE_COMBINING => Some(Writer::WriteCombining),
            _ => None,
        }
    }

    /// Its ABI value, as QUERY_DEVICE reports it.
    pub(crate) fn abi(self) -> u32 {
        match self {
            Writer::StoreBlock => abi::WRITER_STORE_BLOCK,
            Writer::WriteCombining => abi::WRITER_WRITE_COMBINING,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Writer::StoreBlock => "store-block",
            Writer::WriteCombining => "write-combining",
        }
    }

    /// The memory type the BlueFlame area needs for this writer.
    pub(crate) fn mapping(self) -> BfMapping {
        match self {
            Writer::StoreBlock => BfMapping::Uncached,
            Writer::WriteCombining => BfMapping::WriteCombining,
        }
    }

    /// Checks that [`Writer::write`] of `len` bytes to `area` at `offset`
    /// will succeed, so a post can report its result before it touches the
    /// device.
    #[inline]
    pub(crate) fn check(area: &Mmio, offset: usize, len: usize) -> Result {
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if end > area.maxsize() || !offset.is_multiple_of(8) || !len.is_multiple_of(8) {
            return Err(EINVAL);
        }
        Ok(())
    }

    /// The store blocks [`Writer::write`] of `burst` will issue (0 for WC).
    pub(crate) fn blocks(self, area: &Mmio, offset: usize, burst: &[u8]) -> u32 {
        match self {
            Writer::StoreBlock => {
                store_block::block_count(burst.as_ptr() as usize, area.addr() + offset, burst.len())
                    as u32
            }
            Writer::WriteCombining => 0,
        }
    }

    /// Writes `burst` (a multiple of 64 bytes, 8-byte aligned) to `area` at
    /// `offset`; returns the number of store blocks issued (0 for WC).
    pub(crate) fn write(self, area: &Mmio, offset: usize, burst: &[u8]) -> Result<u32> {
        Self::check(area, offset, burst.len())?;
        let dst = area.addr() + offset;
        match self {
            Writer::StoreBlock => {
                // The WQE's stores to the send queue before the burst: the
                // adapter may fall back to reading it there (`writel()`'s
                // barrier, mlx4_en's wmb() before `mlx4_bf_copy()`).
                wmb();
                let src = burst.as_ptr() as usize;
                if store_block::whole_blocks(src, dst, burst.len()) {
                    // The plan's pieces, without planning: 128-byte blocks.
                    let mut blocks = 0;
                    for (i, block) in burst.chunks(store_block::MAX_BLOCK).enumerate() {
                        let to = (dst + i * store_block::MAX_BLOCK) as *mut c_void;
                        // SAFETY: As below: inside `area`, whole 64-bit words.
                        unsafe { mmio::store_block(to, block)? };
                        wmb();
                        blocks += 1;
                    }
                    return Ok(blocks);
                }
                let mut blocks = 0;
                for piece in store_block::plan(src, dst, burst.len()) {
                    let src = &burst[piece.offset()..piece.offset() + piece.len()];
                    let to = (dst + piece.offset()) as *mut c_void;
                    match piece {
                        // A block is 8-byte aligned on both sides (the
                        // plan's rule).
                        // SAFETY: `dst + piece.offset()` and the length lie
                        // inside the mapped `area` (checked above); `src` is
                        // a valid slice of whole 64-bit words.
                        store_block::Piece::Block { .. } => unsafe {
                            mmio::store_block(to, src)?;
                            blocks += 1;
                        },
                        // SAFETY: As above.
                        store_block::Piece::Single { .. } => unsafe {
                            mmio::store_single(to, src)?
                        },
                    }
                    wmb();
                }
                Ok(blocks)
            }
            Writer::WriteCombining => {
                wmb();
                // SAFETY: As above; the length is a whole number of 64-bit words.
                unsafe { mmio::copy64(dst as *mut c_void, burst)? };
                wmb();
                Ok(0)
            }
        }
    }
}
