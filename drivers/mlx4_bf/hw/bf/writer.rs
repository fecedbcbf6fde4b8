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

use kernel::{
    io::{Io, Mmio},
    prelude::*,
};

use crate::{
    abi,
    hw::bf::bar2::{BfMapping, BfSlot},
    store_block,
    sys::{barrier::wmb, mmio},
};

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Writer {
    StoreBlock,
    WriteCombining,
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

    /// The store blocks [`Writer::write`] of `len` bytes from `src` to
    /// `slot` will issue (0 for WC). Where a piece starts depends only on
    /// the addresses modulo 8 (and the source's 4 KiB boundaries), and the
    /// BlueFlame area is page aligned: the slot's offset stands for the
    /// destination.
    pub(crate) fn blocks(self, src: &[u8], slot: BfSlot) -> u32 {
        match self {
            Writer::StoreBlock => {
                store_block::block_count(src.as_ptr() as usize, slot.offset(), slot.len()) as u32
            }
            Writer::WriteCombining => 0,
        }
    }

    /// Writes the first `slot.len()` bytes of `wqe` (8-byte aligned, a
    /// multiple of 64 bytes long) to `slot` of `bf`, the BlueFlame area of
    /// the `Caps` the slot was made for; returns the number of store blocks
    /// issued (0 for WC).
    pub(crate) fn write(self, bf: &Mmio, slot: BfSlot, wqe: &[u8]) -> Result<u32> {
        let burst = wqe.get(..slot.len()).ok_or(EINVAL)?;
        debug_assert!(slot.offset() + slot.len() <= bf.maxsize());
        let dst = (bf.addr() + slot.offset()) as *mut c_void;
        // The WQE's stores to the send queue before the burst: the adapter
        // may fall back to reading it there (`writel()`'s barrier, mlx4_en's
        // wmb() before `mlx4_bf_copy()`).
        wmb();
        match self {
            // SAFETY: `slot` lies inside the BlueFlame area of its `Caps`
            // (`BfSlot`'s invariant), which is what `bf` maps (`Bar2`'s),
            // and is 8-byte aligned like `burst`'s whole words.
            Writer::StoreBlock => unsafe { mmio::write_pieces(dst, burst, wmb) },
            Writer::WriteCombining => {
                // SAFETY: As above.
                unsafe { mmio::copy64(dst, burst)? };
                wmb();
                Ok(0)
            }
        }
    }
}
