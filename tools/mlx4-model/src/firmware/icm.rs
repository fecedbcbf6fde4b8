//! The ICM address space: which 4 KiB ICM virtual pages
//! MAP_ICM backed with which host DMA pages, as mlx4 hands them over
//! (`core/icm.c:mlx4_MAP_ICM`, `mlx4_UNMAP_ICM`). Each MAP_ICM entry maps a
//! run of 2^order contiguous pages; UNMAP_ICM may cover runs mapped by
//! several commands, or part of one (`core/icm.c:mlx4_table_put` unmaps
//! per 256 KiB chunk).

use std::collections::BTreeMap;

pub const ICM_PAGE: u64 = 4096;

/// A run of ICM pages backed by contiguous DMA memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    dma: u64,
    pages: u64,
}

#[derive(Debug, Default, Clone)]
pub struct IcmMap {
    /// ICM virtual address of a run's first page -> the run.
    runs: BTreeMap<u64, Run>,
}

/// A new run overlaps pages already mapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overlap;

impl IcmMap {
    /// Maps `pages` pages from ICM `virt` to DMA `dma` (both page
    /// aligned). Refused if any page is already mapped: mlx4 maps each
    /// chunk once (`core/icm.c:mlx4_table_get` counts references).
    pub fn map(&mut self, virt: u64, dma: u64, pages: u64) -> Result<(), Overlap> {
        let end = virt + pages * ICM_PAGE;
        if let Some((&v, r)) = self.runs.range(..end).next_back() {
            if v + r.pages * ICM_PAGE > virt {
                return Err(Overlap);
            }
        }
        self.runs.insert(virt, Run { dma, pages });
        Ok(())
    }

    /// Unmaps `pages` pages from `virt`, splitting runs that stick out;
    /// returns how many of them were mapped.
    pub fn unmap(&mut self, virt: u64, pages: u64) -> u64 {
        let end = virt.saturating_add(pages.saturating_mul(ICM_PAGE));
        let first = match self.runs.range(..=virt).next_back() {
            Some((&v, r)) if v + r.pages * ICM_PAGE > virt => v,
            _ => virt,
        };
        let hit: Vec<u64> = self.runs.range(first..end).map(|(&v, _)| v).collect();
        let mut unmapped = 0;
        for v in hit {
            let r = self.runs.remove(&v).expect("listed");
            let r_end = v + r.pages * ICM_PAGE;
            if v < virt {
                let pages = (virt - v) / ICM_PAGE;
                self.runs.insert(v, Run { dma: r.dma, pages });
            }
            if r_end > end {
                let skip = end - v;
                self.runs.insert(
                    end,
                    Run {
                        dma: r.dma + skip,
                        pages: (r_end - end) / ICM_PAGE,
                    },
                );
            }
            unmapped += (r_end.min(end) - v.max(virt)) / ICM_PAGE;
        }
        unmapped
    }

    /// The DMA address ICM `virt` is backed by, if its page is mapped.
    pub fn translate(&self, virt: u64) -> Option<u64> {
        let (&v, r) = self.runs.range(..=virt).next_back()?;
        (virt < v + r.pages * ICM_PAGE).then(|| r.dma + (virt - v))
    }

    /// Pages mapped in all.
    pub fn pages(&self) -> u64 {
        self.runs.values().map(|r| r.pages).sum()
    }

    pub fn clear(&mut self) {
        self.runs.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_translate_overlap() {
        let mut m = IcmMap::default();
        m.map(0x10000, 0x200000, 4).unwrap();
        assert_eq!(m.translate(0x10000), Some(0x200000));
        assert_eq!(m.translate(0x13fff), Some(0x203fff));
        assert_eq!(m.translate(0x14000), None);
        assert_eq!(m.translate(0xffff), None);
        assert_eq!(m.map(0x13000, 0x0, 1), Err(Overlap));
        assert_eq!(m.map(0xf000, 0x0, 2), Err(Overlap));
        m.map(0xf000, 0x5000, 1).unwrap();
        m.map(0x14000, 0x9000, 1).unwrap();
        assert_eq!(m.pages(), 6);
    }

    #[test]
    fn unmap_splits_and_spans_runs() {
        let mut m = IcmMap::default();
        m.map(0, 0x100000, 8).unwrap();
        m.map(0x8000, 0x300000, 8).unwrap();
        // The middle of the first run to the middle of the second.
        assert_eq!(m.unmap(0x2000, 8), 8);
        assert_eq!(m.translate(0x1fff), Some(0x101fff));
        assert_eq!(m.translate(0x2000), None);
        assert_eq!(m.translate(0x9fff), None);
        assert_eq!(m.translate(0xa000), Some(0x302000));
        assert_eq!(m.pages(), 8);
        // Pages never mapped count as nothing.
        assert_eq!(m.unmap(0x100000, 4), 0);
        assert_eq!(m.unmap(0, 1 << 20), 8);
        assert_eq!(m.pages(), 0);
    }
}
