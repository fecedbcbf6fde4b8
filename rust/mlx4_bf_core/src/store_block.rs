// SPDX-License-Identifier: GPL-2.0

//! Plans a copy to MMIO the way s390's `zpci_memcpy_toio` splits it
//! (`arch/s390/include/asm/pci_io.h`): pieces of at most 128 bytes that never
//! cross a 4 KiB boundary of the **memory** operand (the source: the kernel
//! passes its arguments to `zpci_get_max_io_size(dst_iomem, src_mem, ...)`,
//! whose boundary test applies to the second); a piece whose source,
//! destination and size are all 8-byte aligned is one store block (PCISTB),
//! anything else a single store (PCISTG) of the largest power of two of at
//! most 8 bytes that the alignment allows.

/// Largest store block (`ZPCI_BOUNDARY_SIZE` is 4 KiB, the block limit 128 B).
pub const MAX_BLOCK: usize = 128;
const BOUNDARY: usize = 4096;

/// One piece of a planned copy, at `offset` from the start of the copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Piece {
    /// A store block (PCISTB) of `len` bytes, 8-byte aligned.
    Block { offset: usize, len: usize },
    /// A single store (PCISTG) of 1, 2, 4 or 8 bytes.
    Single { offset: usize, len: usize },
}

#[allow(
    clippy::len_without_is_empty,
    reason = "the plan holds no piece of 0 bytes (property-tested below)"
)]
impl Piece {
    pub fn offset(&self) -> usize {
        match *self {
            Piece::Block { offset, .. } | Piece::Single { offset, .. } => offset,
        }
    }

    pub fn len(&self) -> usize {
        match *self {
            Piece::Block { len, .. } | Piece::Single { len, .. } => len,
        }
    }
}

/// `zpci_get_max_io_size()` as `zpci_memcpy_toio()` calls it: the
/// boundary is the memory source's.
fn max_io_size(src: usize, dst: usize, len: usize) -> usize {
    let size = len.min(BOUNDARY - (src & (BOUNDARY - 1))).min(MAX_BLOCK);
    if (src | dst | size) & 7 == 0 {
        size
    } else if size >= 8 {
        8
    } else {
        1 << size.ilog2()
    }
}

/// Iterator over the pieces of a copy of `len` bytes from `src` to `dst`
/// (addresses; only their low bits matter).
#[derive(Clone, Debug)]
pub struct Plan {
    src: usize,
    dst: usize,
    done: usize,
    len: usize,
}

/// Plans copying `len` bytes from `src` to MMIO address `dst`.
pub fn plan(src: usize, dst: usize, len: usize) -> Plan {
    Plan {
        src,
        dst,
        done: 0,
        len,
    }
}

impl Iterator for Plan {
    type Item = Piece;

    fn next(&mut self) -> Option<Piece> {
        let left = self.len - self.done;
        if left == 0 {
            return None;
        }
        let (src, dst, offset) = (self.src + self.done, self.dst + self.done, self.done);
        let len = max_io_size(src, dst, left);
        let piece = if len > 8 {
            Piece::Block { offset, len }
        } else {
            Piece::Single { offset, len }
        };
        self.done += piece.len();
        Some(piece)
    }
}

/// Whether the plan of a copy is nothing but store blocks of `MAX_BLOCK`
/// bytes in order, the last one possibly shorter: so for a BlueFlame burst
/// (whole 64-byte chunks) from an 8-byte aligned buffer that does not cross
/// a 4 KiB boundary. The writer's fast path, which then skips the plan
/// (property-tested against it).
#[inline]
pub fn whole_blocks(src: usize, dst: usize, len: usize) -> bool {
    len != 0
        && len.is_multiple_of(64)
        && (src | dst) & 7 == 0
        && (src & (BOUNDARY - 1)) + len <= BOUNDARY
}

/// Number of store blocks (PCISTB) a copy takes.
pub fn block_count(src: usize, dst: usize, len: usize) -> usize {
    plan(src, dst, len)
        .filter(|p| matches!(p, Piece::Block { .. }))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(src: usize, dst: usize, len: usize) -> [Option<Piece>; 4] {
        let mut out = [None; 4];
        for (slot, p) in out.iter_mut().zip(plan(src, dst, len)) {
            *slot = Some(p);
        }
        out
    }

    /// The size table of the design notes: BF burst -> store blocks.
    #[test]
    fn bf_bursts_take_the_blocks_of_the_table() {
        let bf = 0x40_1000; // a BlueFlame page, first half
        for (burst, blocks) in [
            (64, [64, 0]),
            (128, [128, 0]),
            (192, [128, 64]),
            (256, [128, 128]),
        ] {
            for half in [0, 256] {
                let got = pieces(0x1000, bf + half, burst);
                assert_eq!(
                    got[0],
                    Some(Piece::Block {
                        offset: 0,
                        len: blocks[0]
                    })
                );
                let second = (blocks[1] != 0).then_some(Piece::Block {
                    offset: 128,
                    len: blocks[1],
                });
                assert_eq!(got[1], second, "burst {burst} half {half}");
                assert_eq!(got[2], None);
            }
        }
        assert_eq!(block_count(0, bf, 64), 1);
        assert_eq!(block_count(0, bf, 128), 1);
        assert_eq!(block_count(0, bf, 192), 2);
        assert_eq!(block_count(0, bf, 256), 2);
    }

    /// The kernel's split: a source crossing 4 KiB splits the burst there,
    /// wherever the MMIO destination lies.
    #[test]
    fn a_source_crossing_4k_splits_at_the_crossing() {
        let bf = 0x40_1000;
        let got = pieces(4096 - 64, bf, 256);
        assert_eq!(got[0], Some(Piece::Block { offset: 0, len: 64 }));
        assert_eq!(
            got[1],
            Some(Piece::Block {
                offset: 64,
                len: 128
            })
        );
        assert_eq!(
            got[2],
            Some(Piece::Block {
                offset: 192,
                len: 64
            })
        );
        let got = pieces(0x2000 - 32, bf + 256, 128);
        assert_eq!(got[0], Some(Piece::Block { offset: 0, len: 32 }));
        assert_eq!(
            got[1],
            Some(Piece::Block {
                offset: 32,
                len: 96
            })
        );
        assert_eq!(block_count(4096 - 64, bf, 64), 1);
        assert_eq!(
            block_count(4096 - 8, bf, 64),
            1,
            "8 bytes are a single store"
        );
        // The destination's 4 KiB boundary does not split.
        let got = pieces(0x1000, 0x2000 - 64, 128);
        assert_eq!(
            got[0],
            Some(Piece::Block {
                offset: 0,
                len: 128
            })
        );
    }

    #[test]
    fn never_crosses_a_4k_boundary() {
        for src in (0..8192).step_by(8) {
            for p in plan(src, 0, 300) {
                let start = src + p.offset();
                assert_eq!(start / 4096, (start + p.len() - 1) / 4096);
                assert!(p.len() <= MAX_BLOCK);
            }
        }
    }

    #[test]
    fn misaligned_copies_use_single_stores() {
        let got = pieces(1, 0x1000, 4);
        assert_eq!(got[0], Some(Piece::Single { offset: 0, len: 4 }));
        let got = pieces(4, 0x1000, 12);
        assert_eq!(got[0], Some(Piece::Single { offset: 0, len: 8 }));
        assert_eq!(got[1], Some(Piece::Single { offset: 8, len: 4 }));
        let got = pieces(0, 0x1000, 7);
        assert_eq!(got[0], Some(Piece::Single { offset: 0, len: 4 }));
        assert_eq!(got[1], Some(Piece::Single { offset: 4, len: 2 }));
        assert_eq!(got[2], Some(Piece::Single { offset: 6, len: 1 }));
        // An aligned 8-byte piece is a single store, not a block.
        let got = pieces(0, 0x1000, 8);
        assert_eq!(got[0], Some(Piece::Single { offset: 0, len: 8 }));
    }

    #[test]
    fn pieces_cover_the_copy_exactly() {
        for len in 0..300 {
            for src in [0, 8, 4088, 4090] {
                let mut next = 0;
                for p in plan(src, 16, len) {
                    assert_eq!(p.offset(), next);
                    assert_ne!(p.len(), 0);
                    next += p.len();
                }
                assert_eq!(next, len);
            }
        }
    }
}
