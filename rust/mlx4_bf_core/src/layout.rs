// SPDX-License-Identifier: GPL-2.0

//! BAR2 layout of an mlx4 adapter and the device capabilities derived from it.
//!
//! ```text
//! BAR2 + 0                          UAR page 0 (reserved for the kernel)
//! BAR2 + i * 4K                     UAR page i, send doorbell at +0x14
//! BAR2 + (num_uars + i) * 4K        BlueFlame page of UAR i: one BF register
//!                                   of bf_reg_size bytes = two buffers
//! ```

/// UAR and BlueFlame pages are 4 KiB on every architecture (mlx4 programs the
/// adapter with 4 KiB UAR pages; `MLX4_UAR_PAGE_SHIFT`).
pub const PAGE_SIZE: u64 = 4096;
/// Offset of the send doorbell register in a UAR page (`MLX4_SEND_DOORBELL`).
pub const SEND_DOORBELL: u64 = 0x14;
/// The validated capabilities of one adapter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caps {
    pub num_uars: u32,
    pub bf_reg_size: u32,
    pub bar2_len: u64,
}

/// Why a set of capabilities does not fit the adapter's BAR2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapsError {
    /// BAR2 is not a multiple of the page size or too small for two pages.
    Bar2Len,
    /// Fewer than two UARs (UAR 0 is the kernel's), or not a power of two.
    NumUars,
    /// `num_uars` UAR pages plus as many BlueFlame pages exceed BAR2.
    DoesNotFit,
    /// The BF register is not a power of two in 128..=PAGE_SIZE.
    BfRegSize,
}

impl Caps {
    /// Capabilities for a BAR2 of `bar2_len` bytes with the device's
    /// `num_uars` UAR pages and `bf_reg_size`-byte BlueFlame registers.
    pub fn new(bar2_len: u64, num_uars: u32, bf_reg_size: u32) -> Result<Self, CapsError> {
        if bar2_len < 2 * PAGE_SIZE || !bar2_len.is_multiple_of(PAGE_SIZE) {
            return Err(CapsError::Bar2Len);
        }
        if num_uars < 2 || !num_uars.is_power_of_two() {
            return Err(CapsError::NumUars);
        }
        if 2 * u64::from(num_uars) * PAGE_SIZE > bar2_len {
            return Err(CapsError::DoesNotFit);
        }
        if !bf_reg_size.is_power_of_two() || !(128..=PAGE_SIZE as u32).contains(&bf_reg_size) {
            return Err(CapsError::BfRegSize);
        }
        Ok(Caps {
            num_uars,
            bf_reg_size,
            bar2_len,
        })
    }

    /// One of the two BlueFlame buffers: the most a BlueFlame WQE may take.
    pub fn bf_buf_size(&self) -> u32 {
        self.bf_reg_size / 2
    }

    /// Offset in BAR2 of the UAR page `uar_index`.
    pub fn uar_offset(&self, uar_index: u32) -> u64 {
        u64::from(uar_index) * PAGE_SIZE
    }

    /// Offset in BAR2 of the send doorbell register of UAR `uar_index`.
    pub fn doorbell_offset(&self, uar_index: u32) -> u64 {
        self.uar_offset(uar_index) + SEND_DOORBELL
    }

    /// Offset in BAR2 of the BlueFlame page of UAR `uar_index`: the page with
    /// the *same index* in the BlueFlame area. Without `+ uar_index` every
    /// context shares one BF page and the adapter falls back to DMA.
    pub fn bf_page_offset(&self, uar_index: u32) -> u64 {
        (u64::from(self.num_uars) + u64::from(uar_index)) * PAGE_SIZE
    }

    /// Offset and length of the whole BlueFlame area in BAR2.
    pub fn bf_area(&self) -> (u64, u64) {
        let start = u64::from(self.num_uars) * PAGE_SIZE;
        (start, start)
    }
}

/// The BlueFlame buffer that follows `offset` (0 or `bf_buf_size`): posts on
/// one UAR alternate between the register's two halves (`offset ^= buf_size`).
pub fn next_bf_half(offset: u32, bf_buf_size: u32) -> u32 {
    offset ^ bf_buf_size
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn bf_area_follows_the_uar_area() {
        let caps = Caps::new(8 * MIB, 1024, 512).unwrap();
        assert_eq!(caps.bf_buf_size(), 256);
        assert_eq!(caps.bf_area(), (4 * MIB, 4 * MIB));
        let caps = Caps::new(8 * MIB, 16, 1024).unwrap();
        assert_eq!(caps.bf_buf_size(), 512);
        assert_eq!(caps.bf_area(), (64 * 1024, 64 * 1024));
    }

    #[test]
    fn bf_page_includes_the_uar_index() {
        let caps = Caps::new(8 * MIB, 1024, 512).unwrap();
        assert_eq!(caps.bf_page_offset(0), 4 * MIB);
        assert_eq!(caps.bf_page_offset(1), 4 * MIB + 4096);
        assert_eq!(caps.bf_page_offset(7), 4 * MIB + 7 * 4096);
        assert_ne!(caps.bf_page_offset(1), caps.bf_page_offset(2));
        assert_eq!(caps.uar_offset(3), 3 * 4096);
        assert_eq!(caps.doorbell_offset(3), 3 * 4096 + 0x14);
    }

    #[test]
    fn capabilities_must_fit_bar2() {
        assert_eq!(Caps::new(8 * MIB, 2048, 512), Err(CapsError::DoesNotFit));
        assert_eq!(Caps::new(8 * MIB, 0, 512), Err(CapsError::NumUars));
        assert_eq!(Caps::new(8 * MIB, 1, 512), Err(CapsError::NumUars));
        assert_eq!(Caps::new(8 * MIB, 24, 512), Err(CapsError::NumUars));
        assert_eq!(Caps::new(8 * MIB, 16, 384), Err(CapsError::BfRegSize));
        assert_eq!(Caps::new(8 * MIB, 16, 8192), Err(CapsError::BfRegSize));
        assert_eq!(Caps::new(4096, 2, 512), Err(CapsError::Bar2Len));
        assert_eq!(Caps::new(8 * MIB + 1, 2, 512), Err(CapsError::Bar2Len));
        assert!(Caps::new(8 * MIB, 16, 1024).is_ok());
    }

    #[test]
    fn halves_alternate() {
        assert_eq!(next_bf_half(0, 256), 256);
        assert_eq!(next_bf_half(256, 256), 0);
    }
}
