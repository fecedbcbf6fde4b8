//! PCI configuration space of the function: 15b3:1003, class 0x020000,
//! BAR0 (64-bit, non-prefetchable) and BAR2 (64-bit, prefetchable), INTx pin
//! A and an MSI-X capability whose table and PBA live in BAR0. QEMU's
//! vfio-user client emulates BARs and MSI-X on top; the bytes here are what
//! it reads to learn the function, and writes are kept with their masks.

use crate::layout::{BAR0_SIZE, MSIX_PBA_OFF, MSIX_TABLE_OFF, MSIX_VECTORS};

pub const CONFIG_SIZE: usize = 256;
pub const VENDOR_ID: u16 = 0x15b3;
pub const DEVICE_ID: u16 = 0x1003;
pub const MSIX_CAP: usize = 0x40;
/// The command register and its Bus Master Enable bit: while it is clear
/// the function may issue no memory request, DMA nor MSI-X (`env`).
pub const COMMAND: usize = 0x04;
pub const COMMAND_MASTER: u8 = 1 << 2;

pub struct ConfigSpace {
    bytes: [u8; CONFIG_SIZE],
    wmask: [u8; CONFIG_SIZE],
}

impl ConfigSpace {
    pub fn new(bar2_size: u64) -> Self {
        let mut c = ConfigSpace {
            bytes: [0; CONFIG_SIZE],
            wmask: [0; CONFIG_SIZE],
        };
        c.put16(0x00, VENDOR_ID);
        c.put16(0x02, DEVICE_ID);
        // Command: memory, bus master, parity, SERR, INTx disable.
        c.wmask16(COMMAND, 0x0546);
        c.put16(0x06, 0x0010); // status: capability list
        c.put32(0x08, 0x0200_0000); // class 02 (network), subclass 00 (Ethernet), rev 0
        c.wmask[0x0c] = 0xff; // cache line size
        c.wmask[0x0d] = 0xff; // latency timer
        c.bar64(0x10, BAR0_SIZE, false);
        c.bar64(0x18, bar2_size, true);
        c.put16(0x2c, VENDOR_ID);
        c.put16(0x2e, 0x0006);
        c.bytes[0x34] = MSIX_CAP as u8;
        c.wmask[0x3c] = 0xff; // interrupt line
        c.bytes[0x3d] = 1; // INTx pin A
                           // MSI-X: id 0x11, end of list, table size N-1; enable and function mask
                           // writable; table and PBA in BAR0 (BIR 0).
        c.bytes[MSIX_CAP] = 0x11;
        c.put16(MSIX_CAP + 2, (MSIX_VECTORS - 1) as u16);
        c.wmask[MSIX_CAP + 3] = 0xc0;
        c.put32(MSIX_CAP + 4, MSIX_TABLE_OFF as u32);
        c.put32(MSIX_CAP + 8, MSIX_PBA_OFF as u32);
        c
    }

    fn put16(&mut self, off: usize, v: u16) {
        self.bytes[off..off + 2].copy_from_slice(&v.to_le_bytes());
    }

    fn put32(&mut self, off: usize, v: u32) {
        self.bytes[off..off + 4].copy_from_slice(&v.to_le_bytes());
    }

    fn wmask16(&mut self, off: usize, v: u16) {
        self.wmask[off..off + 2].copy_from_slice(&v.to_le_bytes());
    }

    fn bar64(&mut self, off: usize, size: u64, prefetchable: bool) {
        let flags: u32 = 0x4 | if prefetchable { 0x8 } else { 0 };
        self.put32(off, flags);
        let mask = !(size - 1);
        self.wmask[off..off + 4].copy_from_slice(&((mask as u32) & !0xf).to_le_bytes());
        self.wmask[off + 4..off + 8].copy_from_slice(&((mask >> 32) as u32).to_le_bytes());
    }

    /// Bytes outside the 256-byte space read as 0xff, like an absent register.
    pub fn read(&self, off: u64, data: &mut [u8]) {
        for (i, b) in data.iter_mut().enumerate() {
            *b = off
                .checked_add(i as u64)
                .and_then(|o| self.bytes.get(o as usize))
                .copied()
                .unwrap_or(0xff);
        }
    }

    pub fn write(&mut self, off: u64, data: &[u8]) {
        for (i, &v) in data.iter().enumerate() {
            let Some(o) = off.checked_add(i as u64).map(|o| o as usize) else {
                return;
            };
            if o < CONFIG_SIZE {
                let m = self.wmask[o];
                self.bytes[o] = (self.bytes[o] & !m) | (v & m);
            }
        }
    }

    pub fn msix_enabled(&self) -> bool {
        self.bytes[MSIX_CAP + 3] & 0x80 != 0
    }

    /// Bus Master Enable, as the guest last wrote it (clear after power-up,
    /// set by pci_set_master()).
    pub fn bus_master(&self) -> bool {
        self.bytes[COMMAND] & COMMAND_MASTER != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dword(c: &ConfigSpace, off: u64) -> u32 {
        let mut b = [0u8; 4];
        c.read(off, &mut b);
        u32::from_le_bytes(b)
    }

    #[test]
    fn identity_and_bar_sizing() {
        let mut c = ConfigSpace::new(8 << 20);
        assert_eq!(dword(&c, 0), 0x1003_15b3);
        assert_eq!(dword(&c, 8) >> 8, 0x020000);
        c.write(0x10, &[0xff; 8]);
        c.write(0x18, &[0xff; 8]);
        assert_eq!(dword(&c, 0x10), 0xfff0_0004);
        assert_eq!(dword(&c, 0x14), 0xffff_ffff);
        assert_eq!(dword(&c, 0x18), 0xff80_000c);
        assert_eq!(dword(&c, 0x00), 0x1003_15b3, "IDs are read-only");
        assert_eq!(dword(&c, 0x44), 0x7c000);
        assert_eq!(dword(&c, 0x48), 0x7d000);
        assert!(!c.msix_enabled());
        c.write(0x42, &[0xff, 0xff]);
        assert!(c.msix_enabled());
        assert!(!c.bus_master());
        c.write(0x04, &[0x06, 0x00]);
        assert!(c.bus_master());
        c.write(0x04, &[0x02]);
        assert!(!c.bus_master());
        assert_eq!(
            dword(&c, 0x40) & 0x07ff_0000,
            7 << 16,
            "table size read-only"
        );
    }
}
