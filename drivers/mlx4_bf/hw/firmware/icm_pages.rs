// SPDX-License-Identifier: GPL-2.0

//! Host memory the adapter keeps for itself: the firmware area (MAP_FA),
//! the auxiliary ICM (MAP_ICM_AUX) and the ICM tables (MAP_ICM).
//!
//! mlx4_core allocates it in chunks of up to 256 KiB
//! (`MLX4_ICM_ALLOC_SIZE`, `core/icm.c:mlx4_alloc_icm`), smaller ones when
//! memory is fragmented; so does this. Chunks are powers of two, so each is
//! one naturally aligned MAP_* entry. They are coherent DMA memory: only
//! the adapter reads or writes them, and they are mapped for it once, by
//! the IOMMU on zPCI. Dropping a `IcmPages` frees them: only once the
//! adapter has given them back (UNMAP_*) or been reset.

use kernel::{
    device::{Bound, Device},
    dma::{attrs::DMA_ATTR_NO_WARN, Coherent},
    prelude::*,
};

use crate::icm::map_cmd::DmaChunk;

/// The largest chunk tried first (`MLX4_ICM_ALLOC_SIZE`).
const MAX_CHUNK: usize = 256 << 10;
const PAGE: usize = 4096;

pub(crate) struct IcmPages {
    chunks: KVec<Coherent<[u8]>>,
}

impl IcmPages {
    /// At least `bytes` (rounded up to 4 KiB pages), zeroed.
    pub(crate) fn alloc(dev: &Device<Bound>, bytes: u64) -> Result<Self> {
        let mut left = usize::try_from(bytes.div_ceil(PAGE as u64)).map_err(|_| ENOMEM)? * PAGE;
        let mut chunks = KVec::new();
        let mut size = MAX_CHUNK;
        while left > 0 {
            while size > left {
                size /= 2;
            }
            match Coherent::<u8>::zeroed_slice_with_attrs(dev, size, GFP_KERNEL, DMA_ATTR_NO_WARN) {
                Ok(chunk) => {
                    chunks.push(chunk, GFP_KERNEL)?;
                    left -= size;
                }
                // Fragmented: smaller chunks, down to one page.
                Err(_) if size > PAGE => size /= 2,
                Err(e) => return Err(e),
            }
        }
        Ok(IcmPages { chunks })
    }

    /// Bytes held.
    pub(crate) fn bytes(&self) -> u64 {
        self.chunks.iter().map(|c| c.size() as u64).sum()
    }

    /// Writes `bytes` at byte `off` (inside, not crossing a chunk). The
    /// adapter reads them only when a later command tells it to.
    pub(crate) fn write(&self, off: u64, bytes: &[u8]) -> Result {
        let mut base = 0u64;
        for c in self.chunks.iter() {
            let size = c.size() as u64;
            if off >= base && off + bytes.len() as u64 <= base + size {
                let at = (off - base) as usize;
                // SAFETY: `at + bytes.len()` lies inside the chunk (checked
                // above). The adapter reads this memory only during a
                // command that names it, and its writers own disjoint
                // ranges (MTT entries handed out once).
                unsafe {
                    core::ptr::copy_nonoverlapping(
                        bytes.as_ptr(),
                        c.as_mut_ptr().cast::<u8>().add(at),
                        bytes.len(),
                    )
                };
                return Ok(());
            }
            base += size;
        }
        Err(EINVAL)
    }

    /// The chunks as the MAP_* commands name them.
    pub(crate) fn dma_chunks(&self) -> Result<KVec<DmaChunk>> {
        let mut out = KVec::with_capacity(self.chunks.len(), GFP_KERNEL)?;
        for c in self.chunks.iter() {
            out.push(
                DmaChunk {
                    dma_addr: c.dma_handle(),
                    len: c.size() as u64,
                },
                GFP_KERNEL,
            )?;
        }
        Ok(out)
    }
}
