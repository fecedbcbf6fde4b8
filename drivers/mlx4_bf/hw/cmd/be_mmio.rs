// SPDX-License-Identifier: GPL-2.0

//! mlx4's registers are big-endian (`__raw_writel((__force u32)
//! cpu_to_be32(..))` in `mlx4_cmd_post()`, `ioread32be()` for the HCR
//! status); the kernel crate's `Mmio` accessors are `readl()`/`writel()`,
//! little-endian. [`BeMmio`] is the same region seen big-endian, so the
//! kernel crate's `register!` types describe mlx4's registers as the PRM
//! draws them (`regs.rs`). The byte swap is written here and nowhere else.

use kernel::io::{Io, IoCapable, IoKnownSize, Mmio};

/// `mmio`, read and written as big-endian 32-bit registers.
pub(crate) struct BeMmio<'a, const SIZE: usize = 0>(&'a Mmio<SIZE>);

impl<'a, const SIZE: usize> BeMmio<'a, SIZE> {
    pub(crate) fn new(mmio: &'a Mmio<SIZE>) -> Self {
        BeMmio(mmio)
    }
}

impl<const SIZE: usize> Io for BeMmio<'_, SIZE> {
    fn addr(&self) -> usize {
        self.0.addr()
    }

    fn maxsize(&self) -> usize {
        self.0.maxsize()
    }
}

impl<const SIZE: usize> IoKnownSize for BeMmio<'_, SIZE> {
    const MIN_SIZE: usize = SIZE;
}

impl<const SIZE: usize> IoCapable<u32> for BeMmio<'_, SIZE> {
    // `readl()` is `le32_to_cpu(__raw_readl())`: swapped, it is
    // `be32_to_cpu(__raw_readl())`, i.e. `ioread32be()`, on either byte order.
    unsafe fn io_read(&self, address: usize) -> u32 {
        // SAFETY: The same region and the same contract: `address` and the
        // next 3 bytes lie inside it (the caller's guarantee).
        unsafe { IoCapable::<u32>::io_read(self.0, address) }.swap_bytes()
    }

    unsafe fn io_write(&self, value: u32, address: usize) {
        // SAFETY: As above.
        unsafe { IoCapable::<u32>::io_write(self.0, value.swap_bytes(), address) }
    }
}

/// Two big-endian dwords in one 64-bit store, high first, as
/// `mlx4_write64()` rings a CQ doorbell: `writeq()` of the swapped value.
#[cfg(CONFIG_64BIT)]
impl<const SIZE: usize> IoCapable<u64> for BeMmio<'_, SIZE> {
    unsafe fn io_read(&self, address: usize) -> u64 {
        // SAFETY: As for `u32`.
        unsafe { IoCapable::<u64>::io_read(self.0, address) }.swap_bytes()
    }

    unsafe fn io_write(&self, value: u64, address: usize) {
        // SAFETY: As for `u32`.
        unsafe { IoCapable::<u64>::io_write(self.0, value.swap_bytes(), address) }
    }
}
