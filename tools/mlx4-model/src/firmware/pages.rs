//! The page-list mailbox of MAP_FA, MAP_ICM_AUX and MAP_ICM
//! (`core/fw.c:mlx4_map_cmd`): in_mod entries of 16 bytes, at most 256 per
//! mailbox; qword 0 the ICM virtual address (MAP_ICM only), qword 1 the DMA
//! address of a run aligned to its size ORed with log2(size) - 12.

use crate::bytes::be64;
use crate::command::CmdError;

pub const ENTRY_SIZE: usize = 16;
pub const MAX_ENTRIES: u32 = 4096 / ENTRY_SIZE as u32;
/// The largest run the model takes (2^18 pages, 1 GiB); mlx4's runs are
/// scatterlist entries of at most a few MiB (`core/icm.c:mlx4_alloc_icm`).
pub const MAX_ORDER: u32 = 18;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRun {
    /// ICM virtual address (MAP_ICM), 0 otherwise.
    pub virt: u64,
    pub dma: u64,
    /// log2 of the run's 4 KiB pages.
    pub order: u32,
}

impl PageRun {
    pub fn pages(&self) -> u64 {
        1 << self.order
    }
}

/// Mailbox bytes a list of `n` entries takes; BAD_PARAM for none or more
/// than a mailbox holds.
pub fn list_len(n: u32) -> Result<usize, CmdError> {
    if n == 0 || n > MAX_ENTRIES {
        return Err(CmdError::BadParam);
    }
    Ok(n as usize * ENTRY_SIZE)
}

/// Decodes the entries; `with_virt` for MAP_ICM (qword 0 must then be page
/// aligned; MAP_FA and MAP_ICM_AUX leave it unused). A DMA address not
/// aligned to its run's size is BAD_PARAM: mlx4 picks the order from the
/// alignment (`ffs(addr | size)`).
pub fn parse(b: &[u8], with_virt: bool) -> Result<Vec<PageRun>, CmdError> {
    b.chunks_exact(ENTRY_SIZE)
        .map(|e| {
            let q1 = be64(e, 8);
            let order = (q1 & 0xfff) as u32;
            let dma = q1 & !0xfff;
            if order > MAX_ORDER || dma & ((4096u64 << order) - 1) != 0 {
                return Err(CmdError::BadParam);
            }
            let virt = if with_virt { be64(e, 0) } else { 0 };
            if virt & 0xfff != 0 {
                return Err(CmdError::BadParam);
            }
            Ok(PageRun { virt, dma, order })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::put_be64;

    #[test]
    fn entries_alignment_and_counts() {
        let mut b = vec![0u8; 32];
        put_be64(&mut b, 0, 0x4000);
        put_be64(&mut b, 8, 0x20_0000 | 9); // 2 MiB
        put_be64(&mut b, 16, 0xdead_0800); // ignored without virt
        put_be64(&mut b, 24, 0x1000);
        let runs = parse(&b, false).unwrap();
        assert_eq!(
            runs[0],
            PageRun {
                virt: 0,
                dma: 0x20_0000,
                order: 9
            }
        );
        assert_eq!(runs[1].pages(), 1);
        assert_eq!(parse(&b[..16], true).unwrap()[0].virt, 0x4000);
        assert_eq!(parse(&b, true), Err(CmdError::BadParam), "virt not aligned");
        put_be64(&mut b, 8, 0x10_0000 | 9); // 1 MiB aligned only
        assert_eq!(parse(&b, false), Err(CmdError::BadParam));
        assert_eq!(list_len(0), Err(CmdError::BadParam));
        assert_eq!(list_len(257), Err(CmdError::BadParam));
        assert_eq!(list_len(256), Ok(4096));
    }
}
