// SPDX-License-Identifier: GPL-2.0

//! The architecture's MMIO primitives behind the two writers and the
//! BlueFlame mapping: the only place where x86 and s390 differ in how bytes
//! reach BAR2.
//!
//! - x86: `memcpy_toio()` and `ioremap_wc()` are exported functions
//!   (`kernel::bindings`); a store block is a run of 64-bit stores
//!   (`__iowrite64_copy()`'s, inline: `copy.rs`), a single store
//!   `memcpy_toio()`.
//! - s390: those three are macros or static inlines over the zPCI
//!   primitives (`arch/s390/include/asm/io.h`, `pci_io.h`), invisible to
//!   Rust. A store block is one `zpci_write_block()` (PCISTB), a single
//!   store one `zpci_store()` (PCISTG), exactly what `zpci_memcpy_toio()`
//!   does for each piece of its split; the "write-combining" copy is
//!   `__iowrite64_copy()` there, i.e. `zpci_memcpy_toio()` itself. Without
//!   MIO the page protection of a mapping is not used (every access is a
//!   PCI load/store instruction on the function handle), so the BlueFlame
//!   area is mapped with `ioremap()`.
//!
//! The kernel crate has no wrapper for any of them in 7.2.

pub(crate) use arch::{copy64, map_wc};
use arch::{store_block, store_single};

use crate::store_block::{plan, whole_blocks, Piece, MAX_BLOCK};
use kernel::prelude::*;

/// `src` (whole 64-bit words, 8-byte aligned) to `to` split as s390's
/// `zpci_memcpy_toio()` splits it (`store_block::plan`), each piece one
/// store block or single store, `after_each()` after each; returns the
/// number of store blocks. The BlueFlame writer's pieces (a barrier after
/// each) and s390's `__iowrite64_copy()` (none).
///
/// # Safety
///
/// `to..to + src.len()` lies inside a live MMIO mapping, 8-byte aligned.
#[inline(always)]
pub(crate) unsafe fn write_pieces(
    to: *mut c_void,
    src: &[u8],
    after_each: impl Fn(),
) -> Result<u32> {
    let mut blocks = 0;
    if whole_blocks(src.as_ptr() as usize, to as usize, src.len()) {
        // The plan's pieces, without planning: 128-byte blocks in order.
        for (i, block) in src.chunks(MAX_BLOCK).enumerate() {
            // SAFETY: By the caller's guarantee: inside the mapping, whole
            // aligned 64-bit words.
            unsafe { store_block(to.byte_add(i * MAX_BLOCK), block)? };
            after_each();
            blocks += 1;
        }
        return Ok(blocks);
    }
    for piece in plan(src.as_ptr() as usize, to as usize, src.len()) {
        let part = &src[piece.offset()..piece.offset() + piece.len()];
        // SAFETY: The piece lies inside `to..to + src.len()`.
        let at = unsafe { to.byte_add(piece.offset()) };
        match piece {
            // A block is 8-byte aligned on both sides (the plan's rule).
            // SAFETY: By the caller's guarantee, as above.
            Piece::Block { .. } => unsafe {
                store_block(at, part)?;
                blocks += 1;
            },
            // SAFETY: As above.
            Piece::Single { .. } => unsafe { store_single(at, part)? },
        }
        after_each();
    }
    Ok(blocks)
}

#[cfg(not(target_arch = "s390x"))]
mod arch {
    use kernel::{bindings, ffi::c_ulong, prelude::*};

    /// One store block: `src` (whole 64-bit words, 8-byte aligned on both
    /// sides) to `to` as 64-bit stores.
    ///
    /// # Safety
    ///
    /// `to..to + src.len()` lies inside a live MMIO mapping.
    #[inline]
    pub(crate) unsafe fn store_block(to: *mut c_void, src: &[u8]) -> Result {
        // `__iowrite64_copy()` inline: its loop costs twice as many
        // instructions per word as `copy::qwords`, the same stores.
        // SAFETY: By the caller's guarantee; `src` is a valid slice of
        // whole 64-bit words, 8-byte aligned (the plan's rule).
        unsafe { crate::sys::copy::qwords(to.cast(), src.as_ptr().cast(), src.len() / 8) };
        Ok(())
    }

    /// One single store of 1, 2, 4 or 8 bytes.
    ///
    /// # Safety
    ///
    /// As [`store_block`].
    #[inline]
    pub(crate) unsafe fn store_single(to: *mut c_void, src: &[u8]) -> Result {
        // SAFETY: As above.
        unsafe { bindings::memcpy_toio(to, src.as_ptr().cast(), src.len()) };
        Ok(())
    }

    /// `__iowrite64_copy()`: whole 64-bit words in ascending order.
    ///
    /// # Safety
    ///
    /// As [`store_block`].
    #[inline]
    pub(crate) unsafe fn copy64(to: *mut c_void, src: &[u8]) -> Result {
        // SAFETY: As above.
        unsafe { store_block(to, src) }
    }

    /// `ioremap_wc()`.
    ///
    /// # Safety
    ///
    /// `phys..phys + len` is MMIO the caller requested.
    pub(crate) unsafe fn map_wc(phys: bindings::resource_size_t, len: usize) -> *mut c_void {
        // SAFETY: By the caller's guarantee.
        unsafe { bindings::ioremap_wc(phys, len as c_ulong) }
    }
}

#[cfg(target_arch = "s390x")]
mod arch {
    use kernel::{bindings, ffi::c_ulong, prelude::*};

    fn rc(rc: i32) -> Result {
        if rc == 0 {
            Ok(())
        } else {
            Err(EIO)
        }
    }

    /// One store block (PCISTB): `src` (at most 128 bytes, 8-byte aligned
    /// on both sides, not crossing a 4 KiB boundary of the source) to `to`.
    ///
    /// # Safety
    ///
    /// `to..to + src.len()` lies inside a live zPCI mapping.
    #[inline]
    pub(crate) unsafe fn store_block(to: *mut c_void, src: &[u8]) -> Result {
        // SAFETY: By the caller's guarantee; `src` is a valid slice.
        rc(unsafe { bindings::zpci_write_block(to, src.as_ptr().cast(), src.len() as c_ulong) })
    }

    /// One single store (PCISTG) of 1, 2, 4 or 8 bytes, as
    /// `zpci_write_single()`: the bytes as one big-endian value.
    ///
    /// # Safety
    ///
    /// As [`store_block`].
    #[inline]
    pub(crate) unsafe fn store_single(to: *mut c_void, src: &[u8]) -> Result {
        let mut val = [0u8; 8];
        val[8 - src.len()..].copy_from_slice(src);
        let val = u64::from_be_bytes(val);
        // SAFETY: As above.
        rc(unsafe { bindings::zpci_store(to, val, src.len() as c_ulong) })
    }

    /// `__iowrite64_copy()`, which is `zpci_memcpy_toio()` on s390: the
    /// kernel's split, each piece one PCISTB or PCISTG.
    ///
    /// # Safety
    ///
    /// As [`store_block`].
    pub(crate) unsafe fn copy64(to: *mut c_void, src: &[u8]) -> Result {
        // SAFETY: By the caller's guarantee.
        unsafe { super::write_pieces(to, src, || ()) }.map(drop)
    }

    /// No write combining without MIO: `ioremap()`.
    ///
    /// # Safety
    ///
    /// `phys..phys + len` is MMIO the caller requested.
    pub(crate) unsafe fn map_wc(phys: bindings::resource_size_t, len: usize) -> *mut c_void {
        // SAFETY: By the caller's guarantee.
        unsafe { bindings::ioremap(phys, len as c_ulong) }
    }
}
