// SPDX-License-Identifier: GPL-2.0

//! The page lists of MAP_FA, MAP_ICM_AUX and MAP_ICM, as
//! `core/fw.c:mlx4_map_cmd()` builds them.
//!
//! Each 16-byte entry is `{be64 ICM virtual address, be64 dma | (lg - 12)}`;
//! MAP_FA and MAP_ICM_AUX (virt = -1 in mainline) leave the first qword
//! untouched, i.e. zero. A mailbox holds `MLX4_MAILBOX_SIZE / 16` = 256
//! entries and the command's in_modifier is the entry count.
//!
//! A DMA chunk (one scatterlist entry in mainline) is cut into equal
//! naturally aligned pieces of 2^lg bytes, lg being the lowest set bit of
//! `address | length` ("find the least significant 1 in the address or
//! size"); lg below 12 (a chunk not 4 KiB aligned) is refused with -EINVAL.
//! So any 4 KiB-aligned chunk of whole 4 KiB pages is accepted; a chunk that
//! is itself a naturally aligned power of two becomes a single entry.

use super::ICM_PAGE_SHIFT;

/// Bytes of a command mailbox (`MLX4_MAILBOX_SIZE`, `include/linux/mlx4/cmd.h`).
pub const MAILBOX_SIZE: usize = 4096;
/// Bytes of one page-list entry.
pub const MAP_ENTRY_SIZE: usize = 16;
/// Entries per MAP_* command (`MLX4_MAILBOX_SIZE / 16`).
pub const MAX_ENTRIES_PER_MAILBOX: usize = MAILBOX_SIZE / MAP_ENTRY_SIZE;

/// One physically contiguous piece of host memory given to the device
/// (mainline: `mlx4_icm_addr()` / `mlx4_icm_size()` of one sg entry).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaChunk {
    pub dma_addr: u64,
    /// Bytes.
    pub len: u64,
}

/// Why a chunk cannot be mapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapError {
    /// Address or length not a multiple of 4 KiB, or length 0
    /// ("Got FW area not aligned to 4096").
    Unaligned(DmaChunk),
}

/// One page-list entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapEntry {
    /// ICM virtual address (MAP_ICM only).
    pub virt: Option<u64>,
    pub dma_addr: u64,
    /// log2 of the bytes this entry maps, >= 12.
    pub log_size: u8,
}

impl MapEntry {
    /// The 16 bytes of this entry in the mailbox.
    pub fn encode(&self) -> [u8; MAP_ENTRY_SIZE] {
        let mut out = [0u8; MAP_ENTRY_SIZE];
        out[..8].copy_from_slice(&self.virt.unwrap_or(0).to_be_bytes());
        let pa = self.dma_addr | u64::from(self.log_size - ICM_PAGE_SHIFT);
        out[8..].copy_from_slice(&pa.to_be_bytes());
        out
    }
}

/// log2 of the entry size `mlx4_map_cmd()` uses for `chunk`:
/// `ffs(addr | size) - 1`, refused below 12.
pub fn entry_log_size(chunk: DmaChunk) -> Result<u8, MapError> {
    let bits = chunk.dma_addr | chunk.len;
    if chunk.len == 0 || bits.trailing_zeros() < u32::from(ICM_PAGE_SHIFT) {
        return Err(MapError::Unaligned(chunk));
    }
    Ok(bits.trailing_zeros() as u8)
}

/// Checks every chunk up front. mainline finds a bad chunk only when it gets
/// there, after earlier mailboxes were already posted.
pub fn check_chunks(chunks: &[DmaChunk]) -> Result<(), MapError> {
    for &chunk in chunks {
        entry_log_size(chunk)?;
    }
    Ok(())
}

/// Number of entries (and so of mailboxes, 256 entries each) a chunk list
/// takes.
pub fn count_entries(chunks: &[DmaChunk]) -> Result<usize, MapError> {
    let mut n = 0usize;
    for &chunk in chunks {
        n += (chunk.len >> entry_log_size(chunk)?) as usize;
    }
    Ok(n)
}

/// The entries of a chunk list in order; for MAP_ICM the virtual address
/// advances by each entry's size from `virt`.
#[derive(Clone, Debug)]
pub struct MapEntries<'a> {
    chunks: &'a [DmaChunk],
    /// Next entry within `chunks[0]`.
    piece: u64,
    virt: Option<u64>,
}

impl<'a> MapEntries<'a> {
    /// Entries for MAP_FA and MAP_ICM_AUX (no virtual address).
    pub fn without_virt(chunks: &'a [DmaChunk]) -> Self {
        MapEntries {
            chunks,
            piece: 0,
            virt: None,
        }
    }

    /// Entries for MAP_ICM of `chunks` at ICM address `virt`.
    pub fn at_virt(chunks: &'a [DmaChunk], virt: u64) -> Self {
        MapEntries {
            chunks,
            piece: 0,
            virt: Some(virt),
        }
    }
}

impl Iterator for MapEntries<'_> {
    type Item = Result<MapEntry, MapError>;

    fn next(&mut self) -> Option<Self::Item> {
        let (&chunk, rest) = self.chunks.split_first()?;
        let lg = match entry_log_size(chunk) {
            Ok(lg) => lg,
            Err(e) => {
                // Stop after reporting the bad chunk once.
                self.chunks = &[];
                return Some(Err(e));
            }
        };
        let entry = MapEntry {
            virt: self.virt,
            dma_addr: chunk.dma_addr + (self.piece << lg),
            log_size: lg,
        };
        self.virt = self.virt.map(|v| v + (1u64 << lg));
        self.piece += 1;
        if self.piece == chunk.len >> lg {
            self.chunks = rest;
            self.piece = 0;
        }
        Some(Ok(entry))
    }
}

/// Writes the next batch of up to 256 entries into `mailbox` and returns
/// the count, the in_modifier of the MAP_* command; 0 means the list is
/// done (mainline posts nothing for an empty list, e.g. fw_pages = 0).
/// Bytes past the last entry are left as they are: the device reads only
/// in_modifier entries. On an error the batch must not be posted; calling
/// [`check_chunks`] first avoids a half-mapped list.
pub fn fill_mailbox(
    entries: &mut MapEntries<'_>,
    mailbox: &mut [u8; MAILBOX_SIZE],
) -> Result<usize, MapError> {
    let mut n = 0;
    while n < MAX_ENTRIES_PER_MAILBOX {
        let Some(entry) = entries.next() else { break };
        let at = n * MAP_ENTRY_SIZE;
        mailbox[at..at + MAP_ENTRY_SIZE].copy_from_slice(&entry?.encode());
        n += 1;
    }
    Ok(n)
}

/// The in_modifier of UNMAP_ICM for `len` bytes at some ICM address (the
/// in_param): a count of 4 KiB pages (`core/icm.c:mlx4_UNMAP_ICM`).
pub fn unmap_icm_pages(len: u64) -> u32 {
    (len >> ICM_PAGE_SHIFT) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn qword(b: &[u8], at: usize) -> u64 {
        u64::from_be_bytes(b[at..at + 8].try_into().unwrap())
    }

    #[test]
    fn entry_bytes() {
        let e = MapEntry {
            virt: Some(0x1_0004_0000),
            dma_addr: 0x2_0000_0000,
            log_size: 18,
        };
        assert_eq!(e.encode(), [0, 0, 0, 1, 0, 4, 0, 0, 0, 0, 0, 2, 0, 0, 0, 6]);
        let fa = MapEntry { virt: None, ..e };
        assert_eq!(qword(&fa.encode(), 0), 0);
    }

    #[test]
    fn one_entry_size_per_chunk_from_its_lowest_set_bit() {
        // 12 KiB at 4 KiB: three 4 KiB entries, as mainline.
        let c = DmaChunk {
            dma_addr: 0x1000,
            len: 0x3000,
        };
        assert_eq!(entry_log_size(c), Ok(12));
        assert_eq!(count_entries(&[c]), Ok(3));
        // 256 KiB at a 1 MiB boundary: one entry.
        let c = DmaChunk {
            dma_addr: 0x10_0000,
            len: 0x4_0000,
        };
        assert_eq!(entry_log_size(c), Ok(18));
        // 512 KiB at a 256 KiB boundary: two 256 KiB entries.
        let c = DmaChunk {
            dma_addr: 0x4_0000,
            len: 0x8_0000,
        };
        let entries: [_; 2] = core::array::from_fn({
            let mut it = MapEntries::at_virt(core::slice::from_ref(&c), 0x80_0000);
            move |_| it.next().unwrap().unwrap()
        });
        assert_eq!(entries[1].dma_addr, 0x8_0000);
        assert_eq!(entries[1].virt, Some(0x84_0000));
    }

    #[test]
    fn unaligned_chunks_are_refused() {
        for c in [
            DmaChunk {
                dma_addr: 0x800,
                len: 0x1000,
            },
            DmaChunk {
                dma_addr: 0x1000,
                len: 0x1800,
            },
            DmaChunk {
                dma_addr: 0x1000,
                len: 0,
            },
        ] {
            assert_eq!(check_chunks(&[c]), Err(MapError::Unaligned(c)));
            let mut it = MapEntries::without_virt(core::slice::from_ref(&c));
            let mut mailbox = [0u8; MAILBOX_SIZE];
            assert_eq!(
                fill_mailbox(&mut it, &mut mailbox),
                Err(MapError::Unaligned(c))
            );
            assert_eq!(fill_mailbox(&mut it, &mut mailbox), Ok(0));
        }
    }

    #[test]
    fn empty_list_posts_nothing() {
        let mut mailbox = [0u8; MAILBOX_SIZE];
        assert_eq!(
            fill_mailbox(&mut MapEntries::without_virt(&[]), &mut mailbox),
            Ok(0)
        );
        assert_eq!(unmap_icm_pages(TABLE_CHUNK), 64);
    }

    const TABLE_CHUNK: u64 = 1 << 18;

    fn chunks() -> impl Strategy<Value = [DmaChunk; 6]> {
        prop::array::uniform6((1u64..1 << 24, 1u64..700, 0u32..8)).prop_map(|a| {
            a.map(|(page, pages, align)| DmaChunk {
                dma_addr: (page << align) << 12,
                len: pages << 12,
            })
        })
    }

    proptest! {
        #[test]
        fn mailboxes_cover_each_chunk_in_aligned_pieces(
            chunks in chunks(),
            virt_page in prop::option::of(0u64..1 << 30),
        ) {
            let virt0 = virt_page.map(|p| p << 12);
            let mut it = match virt0 {
                Some(v) => MapEntries::at_virt(&chunks, v),
                None => MapEntries::without_virt(&chunks),
            };
            let mut mailbox = [0u8; MAILBOX_SIZE];
            let (mut chunk, mut offset, mut virt, mut total) = (0usize, 0u64, virt0.unwrap_or(0), 0);
            loop {
                let n = fill_mailbox(&mut it, &mut mailbox).unwrap();
                if n == 0 {
                    break;
                }
                prop_assert!(n <= MAX_ENTRIES_PER_MAILBOX);
                total += n;
                for e in mailbox[..n * MAP_ENTRY_SIZE].chunks(MAP_ENTRY_SIZE) {
                    let c = chunks[chunk];
                    let lg = entry_log_size(c).unwrap();
                    let pa = qword(e, 8);
                    prop_assert_eq!(pa & 0xfff, u64::from(lg - 12));
                    prop_assert_eq!(pa & !0xfff, c.dma_addr + offset);
                    prop_assert_eq!((pa & !0xfff) % (1 << lg), 0);
                    prop_assert_eq!(qword(e, 0), if virt0.is_some() { virt } else { 0 });
                    virt += 1 << lg;
                    offset += 1 << lg;
                    if offset == c.len {
                        chunk += 1;
                        offset = 0;
                    }
                }
            }
            prop_assert_eq!(chunk, chunks.len());
            prop_assert_eq!(Ok(total), count_entries(&chunks));
        }

        #[test]
        fn lg_is_the_largest_aligned_power_dividing_address_and_length(
            page in 0u64..1 << 30,
            pages in 1u64..1 << 12,
        ) {
            let c = DmaChunk { dma_addr: page << 12, len: pages << 12 };
            let lg = entry_log_size(c).unwrap();
            prop_assert_eq!(c.dma_addr % (1 << lg), 0);
            prop_assert_eq!(c.len % (1 << lg), 0);
            prop_assert!((c.dma_addr | c.len) & (1 << lg) != 0);
        }
    }
}
