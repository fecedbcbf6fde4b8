//! The model's view of guest memory: DMA reads and writes that can fail.
//! Every address the guest names goes through this trait, so an address the
//! model cannot reach is an error, never a host access out of bounds.

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DmaError {
    #[error("{len} bytes at {addr:#x} are not (completely) mapped")]
    Unmapped { addr: u64, len: usize },
    #[error("{len} bytes at {addr:#x} wrap the address space")]
    Overflow { addr: u64, len: usize },
    #[error("{addr:#x} is mapped without a file descriptor")]
    NoFd { addr: u64 },
    #[error("{addr:#x} is mapped read-only")]
    ReadOnly { addr: u64 },
}

pub trait GuestMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError>;
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), DmaError>;
}

/// Plain RAM ranges for tests. It refuses (and counts) every access that is
/// not entirely inside one range.
#[derive(Debug, Default)]
pub struct FakeMemory {
    ranges: BTreeMap<u64, Vec<u8>>,
    refused: std::cell::Cell<u64>,
}

impl FakeMemory {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_range(base: u64, len: usize) -> Self {
        let mut m = Self::new();
        m.add_range(base, len);
        m
    }

    pub fn add_range(&mut self, base: u64, len: usize) {
        self.ranges.insert(base, vec![0; len]);
    }

    /// Accesses refused so far (each is a `dma_unmapped` in the model).
    pub fn refused(&self) -> u64 {
        self.refused.get()
    }

    fn locate(&self, addr: u64, len: usize) -> Option<(u64, usize)> {
        let end = addr.checked_add(len as u64)?;
        let (&base, buf) = self.ranges.range(..=addr).next_back()?;
        let off = (addr - base) as usize;
        (end <= base + buf.len() as u64).then_some((base, off))
    }

    fn refuse(&self, addr: u64, len: usize) -> DmaError {
        self.refused.set(self.refused.get() + 1);
        DmaError::Unmapped { addr, len }
    }

    /// Test access to the backing bytes (panics outside: test code only).
    pub fn bytes(&self, addr: u64, len: usize) -> &[u8] {
        let (base, off) = self
            .locate(addr, len)
            .expect("test read outside fake memory");
        &self.ranges[&base][off..off + len]
    }

    pub fn bytes_mut(&mut self, addr: u64, len: usize) -> &mut [u8] {
        let (base, off) = self
            .locate(addr, len)
            .expect("test write outside fake memory");
        &mut self.ranges.get_mut(&base).expect("located")[off..off + len]
    }
}

impl GuestMemory for FakeMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        match self.locate(addr, buf.len()) {
            Some((base, off)) => {
                buf.copy_from_slice(&self.ranges[&base][off..off + buf.len()]);
                Ok(())
            }
            None => Err(self.refuse(addr, buf.len())),
        }
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), DmaError> {
        match self.locate(addr, data.len()) {
            Some((base, off)) => {
                let r = self.ranges.get_mut(&base).expect("located");
                r[off..off + data.len()].copy_from_slice(data);
                Ok(())
            }
            None => Err(self.refuse(addr, data.len())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_memory_bounds() {
        let mut m = FakeMemory::with_range(0x1000, 0x100);
        let mut b = [0u8; 16];
        assert!(m.read(0x1000, &mut b).is_ok());
        assert!(m.read(0x10f8, &mut b).is_err());
        assert!(m.read(0xff8, &mut b).is_err());
        assert!(m.read(u64::MAX - 4, &mut b).is_err());
        assert!(m.write(0x10f0, &b).is_ok());
        assert_eq!(m.refused(), 3);
    }
}
