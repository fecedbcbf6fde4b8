// SPDX-License-Identifier: GPL-2.0

//! UAR index allocator, round-robin like mlx4's bitmap
//! (`mlx4_bitmap_alloc()` with `last`): a freed index is handed out again only
//! after every other free index, so a stale mapping of a closed context is
//! unlikely to hit the page of its next owner. Index 0, and the pages the
//! kernel keeps for its EQ doorbells, are never handed out.

/// Most UARs an allocator can track.
pub const MAX_UARS: usize = 8192;
const WORDS: usize = MAX_UARS / 64;

#[derive(Clone, Debug)]
pub struct UarAllocator {
    used: [u64; WORDS],
    num_uars: u32,
    /// Indices below it are never handed out.
    reserved: u32,
    last: u32,
    in_use: u32,
}

impl UarAllocator {
    /// An allocator of indices `reserved..num_uars` (`num_uars <= MAX_UARS`;
    /// larger values are clamped): the pages below `reserved` (at least UAR
    /// 0) are the kernel's, e.g. its EQ doorbells.
    pub const fn with_reserved(num_uars: u32, reserved: u32) -> Self {
        let num_uars = if num_uars as usize > MAX_UARS {
            MAX_UARS as u32
        } else {
            num_uars
        };
        let mut used = [0u64; WORDS];
        let reserved = if reserved == 0 { 1 } else { reserved };
        let mut i = 0;
        while i < reserved && (i as usize) < MAX_UARS {
            used[i as usize / 64] |= 1 << (i % 64);
            i += 1;
        }
        UarAllocator {
            used,
            num_uars,
            reserved,
            // The first index handed out is `reserved`.
            last: reserved - 1,
            in_use: 0,
        }
    }

    fn is_used(&self, i: u32) -> bool {
        self.used[i as usize / 64] & (1 << (i % 64)) != 0
    }

    /// Takes the next free index after the last one handed out.
    pub fn alloc(&mut self) -> Option<u32> {
        for step in 1..=self.num_uars {
            let i = (self.last + step) % self.num_uars;
            if !self.is_used(i) {
                self.used[i as usize / 64] |= 1 << (i % 64);
                self.last = i;
                self.in_use += 1;
                return Some(i);
            }
        }
        None
    }

    /// Returns `index`; false if it was not allocated.
    pub fn free(&mut self, index: u32) -> bool {
        if index < self.reserved || index >= self.num_uars || !self.is_used(index) {
            return false;
        }
        self.used[index as usize / 64] &= !(1 << (index % 64));
        self.in_use -= 1;
        true
    }

    /// Indices currently handed out.
    pub fn in_use(&self) -> u32 {
        self.in_use
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_hands_out_uar_0_and_exhausts_cleanly() {
        let mut a = UarAllocator::with_reserved(4, 1);
        assert_eq!(a.alloc(), Some(1));
        assert_eq!(a.alloc(), Some(2));
        assert_eq!(a.alloc(), Some(3));
        assert_eq!(a.alloc(), None);
        assert_eq!(a.in_use(), 3);
        assert!(a.free(2));
        assert!(!a.free(2));
        assert!(!a.free(0));
        assert_eq!(a.alloc(), Some(2));
    }

    #[test]
    fn reuse_is_delayed_round_robin() {
        let mut a = UarAllocator::with_reserved(8, 1);
        let first = a.alloc().unwrap();
        assert!(a.free(first));
        // The freed index comes back only after all the others.
        let next: [u32; 7] = core::array::from_fn(|_| a.alloc().unwrap());
        assert_eq!(next, [2, 3, 4, 5, 6, 7, 1]);
    }

    #[test]
    fn reserved_pages_are_never_handed_out() {
        // EQ 4's doorbell is in UAR 1: contexts start at 2.
        let mut a = UarAllocator::with_reserved(5, 2);
        assert_eq!(
            [a.alloc(), a.alloc(), a.alloc()],
            [Some(2), Some(3), Some(4)]
        );
        assert_eq!(a.alloc(), None);
        assert!(!a.free(1) && !a.free(0));
        assert!(a.free(3));
        assert_eq!(a.alloc(), Some(3));
    }
}
