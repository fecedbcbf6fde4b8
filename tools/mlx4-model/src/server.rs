//! The thin shell: vfio-user glue around the pure [`Device`]. Guest memory
//! arrives as DMA_MAP messages with memfd descriptors (mapped here), MSI-X
//! vectors as eventfds (signalled here); region accesses go to the device.

use crate::device::Device;
use crate::guest_memory::{DmaError, GuestMemory};
use crate::irq::Irq;
use crate::layout::{BAR0_SIZE, MSIX_VECTORS};
use crate::pci::CONFIG_SIZE;
use serde_json::json;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex, MutexGuard};
use vfio_bindings::bindings::vfio::{
    vfio_region_info, VFIO_IRQ_INFO_EVENTFD, VFIO_IRQ_SET_ACTION_TRIGGER,
    VFIO_IRQ_SET_ACTION_TYPE_MASK, VFIO_IRQ_SET_DATA_EVENTFD, VFIO_IRQ_SET_DATA_NONE,
    VFIO_IRQ_SET_DATA_TYPE_MASK, VFIO_PCI_BAR0_REGION_INDEX, VFIO_PCI_BAR2_REGION_INDEX,
    VFIO_PCI_CONFIG_REGION_INDEX, VFIO_PCI_INTX_IRQ_INDEX, VFIO_PCI_MSIX_IRQ_INDEX,
    VFIO_PCI_NUM_IRQS, VFIO_PCI_NUM_REGIONS, VFIO_REGION_INFO_FLAG_READ,
    VFIO_REGION_INFO_FLAG_WRITE,
};
use vfio_user::{DmaMapFlags, DmaUnmapFlags, IrqInfo, ServerBackend, ServerRegion};

/// One DMA_MAP'd range of guest memory, mmapped from its descriptor.
struct Mapping {
    size: u64,
    /// Host address of IOVA `iova` (None: mapped without a descriptor).
    host: Option<*mut u8>,
    /// What to munmap.
    base: *mut libc::c_void,
    map_len: usize,
    writable: bool,
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if self.host.is_some() {
            // SAFETY: `base`/`map_len` are exactly what mmap returned for this
            // mapping, and nothing refers to it after the drop.
            unsafe { libc::munmap(self.base, self.map_len) };
        }
    }
}

/// Guest memory as the client mapped it, keyed by IOVA.
#[derive(Default)]
pub struct DmaMaps {
    maps: BTreeMap<u64, Mapping>,
}

// SAFETY: the raw pointers are private mmaps owned by this value; the
// device (and so this value) is only used under the server's mutex.
unsafe impl Send for DmaMaps {}

impl DmaMaps {
    pub fn map(
        &mut self,
        iova: u64,
        size: u64,
        fd_offset: u64,
        fd: Option<&File>,
        flags: DmaMapFlags,
    ) -> io::Result<()> {
        if size == 0 || iova.checked_add(size).is_none() {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        self.unmap(iova, size);
        let writable = flags.contains(DmaMapFlags::WRITE);
        let mut m = Mapping {
            size,
            host: None,
            base: std::ptr::null_mut(),
            map_len: 0,
            writable,
        };
        if let Some(fd) = fd {
            // SAFETY: sysconf has no preconditions.
            let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
            let delta = fd_offset % page;
            let map_len = usize::try_from(size + delta)
                .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
            let mut prot = libc::PROT_READ;
            if writable {
                prot |= libc::PROT_WRITE;
            }
            // SAFETY: a fresh shared mapping of the client's descriptor at an
            // address the kernel chooses; it aliases no Rust object.
            let base = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    map_len,
                    prot,
                    libc::MAP_SHARED,
                    fd.as_raw_fd(),
                    (fd_offset - delta) as libc::off_t,
                )
            };
            if base == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            m.base = base;
            m.map_len = map_len;
            // SAFETY: `delta` < page <= map_len, inside the new mapping.
            m.host = Some(unsafe { base.cast::<u8>().add(delta as usize) });
        }
        self.maps.insert(iova, m);
        Ok(())
    }

    /// Drops every mapping that overlaps [iova, iova + size).
    pub fn unmap(&mut self, iova: u64, size: u64) {
        let end = iova.saturating_add(size);
        self.maps
            .retain(|&start, m| start.saturating_add(m.size) <= iova || start >= end);
    }

    pub fn clear(&mut self) {
        self.maps.clear();
    }

    /// Splits [addr, addr + len) over the mappings: (host pointer, length)
    /// per piece, or the error for the first unreachable byte.
    fn pieces(
        &self,
        addr: u64,
        len: usize,
        write: bool,
    ) -> Result<Vec<(*mut u8, usize)>, DmaError> {
        let end = addr
            .checked_add(len as u64)
            .ok_or(DmaError::Overflow { addr, len })?;
        let mut out = Vec::new();
        let mut cur = addr;
        while cur < end {
            let (&start, m) = self
                .maps
                .range(..=cur)
                .next_back()
                .filter(|(&s, m)| cur < s + m.size)
                .ok_or(DmaError::Unmapped { addr, len })?;
            let host = m.host.ok_or(DmaError::NoFd { addr: cur })?;
            if write && !m.writable {
                return Err(DmaError::ReadOnly { addr: cur });
            }
            let n = (start + m.size).min(end) - cur;
            // SAFETY: cur - start < m.size, so the offset stays inside the
            // mapping established in `map`.
            out.push((unsafe { host.add((cur - start) as usize) }, n as usize));
            cur += n;
        }
        Ok(out)
    }
}

impl GuestMemory for DmaMaps {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        let mut done = 0;
        for (p, n) in self.pieces(addr, buf.len(), false)? {
            // SAFETY: `pieces` bounds [p, p + n) inside a live mapping; guest
            // memory may change under us, which only changes the bytes read.
            unsafe { std::ptr::copy_nonoverlapping(p, buf[done..].as_mut_ptr(), n) };
            done += n;
        }
        Ok(())
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), DmaError> {
        let mut done = 0;
        for (p, n) in self.pieces(addr, data.len(), true)? {
            // SAFETY: as in `read`; the mapping is writable (checked).
            unsafe { std::ptr::copy_nonoverlapping(data[done..].as_ptr(), p, n) };
            done += n;
        }
        Ok(())
    }
}

/// MSI-X vectors as the client's eventfds.
#[derive(Default)]
pub struct EventfdIrq {
    msix: [Option<File>; MSIX_VECTORS],
}

impl EventfdIrq {
    pub fn set(&mut self, start: usize, fds: Vec<Option<File>>) -> io::Result<()> {
        if start + fds.len() > MSIX_VECTORS {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        for (slot, fd) in self.msix[start..].iter_mut().zip(fds) {
            *slot = fd;
        }
        Ok(())
    }

    pub fn clear(&mut self) {
        self.msix = Default::default();
    }
}

impl Irq for EventfdIrq {
    fn raise(&mut self, vector: u16) -> bool {
        match self.msix.get(usize::from(vector)).and_then(Option::as_ref) {
            // An eventfd counts up on an 8-byte write of the increment.
            Some(mut f) => f.write_all(&1u64.to_ne_bytes()).is_ok(),
            None => false,
        }
    }
}

pub type Model = Device<DmaMaps, EventfdIrq>;

/// `ServerBackend` over the shared model (the signal thread writes the
/// summary through the same mutex).
pub struct Backend {
    model: Arc<Mutex<Model>>,
}

impl Backend {
    pub fn new(model: Arc<Mutex<Model>>) -> Self {
        Backend { model }
    }

    fn dev(&self) -> MutexGuard<'_, Model> {
        self.model.lock().unwrap_or_else(|e| e.into_inner())
    }
}

// Guest accesses always succeed at this level: protocol errors are the
// device's business, and an error reply to a posted write would confuse
// the client.
impl ServerBackend for Backend {
    fn region_read(&mut self, region: u32, offset: u64, data: &mut [u8]) -> io::Result<()> {
        let mut dev = self.dev();
        if region == VFIO_PCI_CONFIG_REGION_INDEX {
            dev.config_read(offset, data);
        } else {
            dev.mmio_read(region, offset, data);
        }
        Ok(())
    }

    fn region_write(&mut self, region: u32, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut dev = self.dev();
        if region == VFIO_PCI_CONFIG_REGION_INDEX {
            dev.config_write(offset, data);
        } else {
            dev.mmio_write(region, offset, data);
        }
        Ok(())
    }

    fn dma_map(
        &mut self,
        flags: DmaMapFlags,
        offset: u64,
        address: u64,
        size: u64,
        fd: Option<File>,
    ) -> io::Result<()> {
        let mut dev = self.dev();
        let r = dev.mem_mut().map(address, size, offset, fd.as_ref(), flags);
        dev.record("dma_map", || {
            json!({"iova": address, "size": size, "fd_offset": offset,
                   "fd": fd.is_some(), "flags": flags.bits(), "ok": r.is_ok()})
        });
        r
    }

    fn dma_unmap(&mut self, flags: DmaUnmapFlags, address: u64, size: u64) -> io::Result<()> {
        let mut dev = self.dev();
        if flags.contains(DmaUnmapFlags::UNMAP_ALL) {
            dev.mem_mut().clear();
        } else {
            dev.mem_mut().unmap(address, size);
        }
        dev.record(
            "dma_unmap",
            || json!({"iova": address, "size": size, "flags": flags.bits()}),
        );
        Ok(())
    }

    fn reset(&mut self) -> io::Result<()> {
        self.dev().reset("vfio_user");
        Ok(())
    }

    fn set_irqs(
        &mut self,
        index: u32,
        flags: u32,
        start: u32,
        count: u32,
        fds: Vec<File>,
    ) -> io::Result<()> {
        let mut dev = self.dev();
        dev.record("irq_setup", || {
            json!({"index": index, "flags": flags, "start": start, "count": count,
                   "fds": fds.len()})
        });
        if index != VFIO_PCI_MSIX_IRQ_INDEX {
            // INTx (and nothing else) is offered but never raised.
            return Ok(());
        }
        let data = flags & VFIO_IRQ_SET_DATA_TYPE_MASK;
        let action = flags & VFIO_IRQ_SET_ACTION_TYPE_MASK;
        if action != VFIO_IRQ_SET_ACTION_TRIGGER {
            return Ok(());
        }
        let irq = dev.irq_mut();
        match data {
            VFIO_IRQ_SET_DATA_NONE if count == 0 => irq.clear(),
            VFIO_IRQ_SET_DATA_EVENTFD if fds.len() == count as usize => {
                irq.set(start as usize, fds.into_iter().map(Some).collect())?
            }
            // The client sends runs of "no eventfd" (-1) without descriptors.
            VFIO_IRQ_SET_DATA_EVENTFD if fds.is_empty() => {
                irq.set(start as usize, (0..count).map(|_| None).collect())?
            }
            _ => return Err(io::Error::from_raw_os_error(libc::EINVAL)),
        }
        Ok(())
    }
}

/// Region descriptions: config space, BAR0, BAR2; nothing mappable (sparse
/// mmap would stop the client from posting writes).
/// The timer clock's thread (`datapath::rnr`): ticks the device with the
/// wall time since it started, every `TICK_NS`, or sooner when an RNR
/// retry is due sooner. It takes the device's mutex for a tick only: a
/// look at the held QPs when no retry waits.
pub fn spawn_timer(model: Arc<Mutex<Model>>) -> io::Result<std::thread::JoinHandle<()>> {
    use crate::datapath::rnr::TICK_NS;
    use std::time::{Duration, Instant};
    let start = Instant::now();
    std::thread::Builder::new()
        .name("mlx4-model-timer".into())
        .spawn(move || loop {
            let now = start.elapsed().as_nanos() as u64;
            let next = model.lock().unwrap_or_else(|e| e.into_inner()).tick(now);
            let wait = next.map_or(TICK_NS, |due| due.saturating_sub(now).clamp(1, TICK_NS));
            std::thread::sleep(Duration::from_nanos(wait));
        })
}

pub fn regions(bar2_size: u64) -> Vec<ServerRegion> {
    (0..VFIO_PCI_NUM_REGIONS)
        .map(|index| {
            let size = match index {
                VFIO_PCI_CONFIG_REGION_INDEX => CONFIG_SIZE as u64,
                VFIO_PCI_BAR0_REGION_INDEX => BAR0_SIZE,
                VFIO_PCI_BAR2_REGION_INDEX => bar2_size,
                _ => 0,
            };
            let flags = if size != 0 {
                VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_WRITE
            } else {
                0
            };
            ServerRegion {
                region_info: vfio_region_info {
                    argsz: std::mem::size_of::<vfio_region_info>() as u32,
                    index,
                    size,
                    flags,
                    ..Default::default()
                },
                sparse_areas: Vec::new(),
                mmap_fd: None,
            }
        })
        .collect()
}

/// INTx (pin A, never raised) and 8 MSI-X vectors; no MSI.
pub fn irqs() -> Vec<IrqInfo> {
    (0..VFIO_PCI_NUM_IRQS)
        .map(|index| {
            let count = match index {
                VFIO_PCI_INTX_IRQ_INDEX => 1,
                VFIO_PCI_MSIX_IRQ_INDEX => MSIX_VECTORS as u32,
                _ => 0,
            };
            IrqInfo {
                index,
                flags: if count != 0 { VFIO_IRQ_INFO_EVENTFD } else { 0 },
                count,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn memfd(len: u64) -> File {
        let f = tempfile_in_shm();
        f.set_len(len).unwrap();
        f
    }

    fn tempfile_in_shm() -> File {
        let name = std::ffi::CString::new("mlx4-model-test").unwrap();
        // SAFETY: memfd_create with a valid C string; the fd is ours.
        let fd = unsafe { libc::memfd_create(name.as_ptr(), 0) };
        assert!(fd >= 0);
        // SAFETY: fd is a fresh descriptor nobody else owns.
        unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) }
    }

    #[test]
    fn dma_maps_read_write_bounds() {
        let f = memfd(0x4000);
        let mut m = DmaMaps::default();
        m.map(0x10_0000, 0x2000, 0x1000, Some(&f), DmaMapFlags::READ_WRITE)
            .unwrap();
        m.map(0x10_2000, 0x1000, 0x3000, Some(&f), DmaMapFlags::READ)
            .unwrap();
        m.write(0x10_1ff8, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        let mut b = [0u8; 8];
        m.read(0x10_1ff8, &mut b).unwrap();
        assert_eq!(b, [1, 2, 3, 4, 5, 6, 7, 8]);
        // Spans both maps; the second is read-only.
        m.read(0x10_1ffc, &mut b).unwrap();
        assert!(matches!(
            m.write(0x10_1ffc, &b),
            Err(DmaError::ReadOnly { .. })
        ));
        assert!(matches!(
            m.read(0x10_2ffc, &mut b),
            Err(DmaError::Unmapped { .. })
        ));
        assert!(matches!(
            m.read(u64::MAX - 2, &mut b),
            Err(DmaError::Overflow { .. })
        ));
        // fd offset = guest-physical address: byte 0x1ff8 of the map is at
        // fd offset 0x2ff8.
        let mut raw = vec![0u8; 0x4000];
        (&f).read_exact(&mut raw).unwrap();
        assert_eq!(raw[0x2ff8], 1);
        m.map(0x20_0000, 0x1000, 0, None, DmaMapFlags::READ_WRITE)
            .unwrap();
        assert!(matches!(
            m.read(0x20_0000, &mut b),
            Err(DmaError::NoFd { .. })
        ));
        m.unmap(0x10_0000, 0x1000);
        assert!(m.read(0x10_1ff8, &mut b).is_err());
    }

    #[test]
    fn eventfd_irq() {
        let mut irq = EventfdIrq::default();
        assert!(!irq.raise(1));
        // SAFETY: plain eventfd creation.
        let fd = unsafe { libc::eventfd(0, 0) };
        assert!(fd >= 0);
        // SAFETY: fresh descriptor, owned by the File from here on.
        let f: File = unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) };
        let mut reader = f.try_clone().unwrap();
        irq.set(1, vec![Some(f)]).unwrap();
        assert!(irq.raise(1));
        assert!(irq.raise(1));
        let mut b = [0u8; 8];
        reader.read_exact(&mut b).unwrap();
        assert_eq!(u64::from_ne_bytes(b), 2);
        assert!(irq.set(7, vec![None, None]).is_err());
    }
}
