// SPDX-License-Identifier: GPL-2.0

//! A QP whose send queue this process owns (`abi::QP_F_USER_SEND`), posted
//! to as rdma-core's mlx4 provider does: the WQE into the mapped send queue,
//! then to the context's BlueFlame page (or the doorbell in its UAR page),
//! with no system call on x86 and `s390_pci_mmio_write()` on s390, where user
//! space cannot store to a BAR. Send completions arrive in the QP's own CQ.

use std::{
    io,
    sync::atomic::{fence, AtomicU32, Ordering},
};

use anyhow::{anyhow, bail, Context, Result};
use mlx4_bf_core::{abi, wqe, wqe_build};

use crate::{
    cq::CqRing,
    device::{Device, Mapping},
    rdma_write::set_signaled,
};

/// UAR + 0x14: the send doorbell.
const UAR_SEND_DOORBELL: usize = 0x14;

/// How this process writes the BAR pages, for reports.
pub const BAR_WRITES: &str = if cfg!(target_arch = "s390x") {
    "s390_pci_mmio_write() to"
} else {
    "stores to"
};

/// How a WQE reaches the adapter.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum UserPath {
    BlueFlame,
    Doorbell,
}

pub struct UserQp {
    pub qp: abi::QpInfo,
    pub send: abi::QpSendInfo,
    sq: Mapping,
    /// Its CQ: its send completions go there.
    cq: CqRing,
    bf: Mapping,
    uar: Mapping,
    /// WQEs posted and completed (not wrapped), CQEs consumed.
    head: u32,
    tail: u32,
    /// Offset of the next BlueFlame buffer in the page.
    bf_half: u32,
}

impl UserQp {
    /// Creates the QP and maps its queues and the context's two pages.
    pub fn create(dev: &Device) -> Result<Self> {
        let (qp, send) = dev
            .create_user_qp()
            .context("CREATE_QP with MLX4_BF_QP_F_USER_SEND")?;
        if !send.sq_entries.is_power_of_two() {
            bail!("the driver reports a send queue that is not a power of two");
        }
        let sq_bytes = send.sq_entries as usize * send.sq_stride as usize;
        Ok(UserQp {
            sq: dev
                .map(send.sq_offset, sq_bytes, true)
                .context("mmap of the send queue")?,
            cq: CqRing::map(dev, &qp)?,
            bf: dev
                .map(abi::MMAP_BF_PAGE, 4096, true)
                .context("mmap of the BlueFlame page")?,
            uar: dev
                .map(abi::MMAP_UAR_PAGE, 4096, true)
                .context("mmap of the UAR page")?,
            qp,
            send,
            head: 0,
            tail: 0,
            bf_half: 0,
        })
    }

    /// WQEs posted whose completion has not been consumed.
    pub fn outstanding(&self) -> u32 {
        self.head.wrapping_sub(self.tail)
    }

    /// Posts `wqe` (built without owner bit, counter or `bf_qpn`) by `path`.
    /// `-ENOSPC` while the send queue is full: consume completions first.
    pub fn post(&mut self, wqe: &[u8], path: UserPath) -> io::Result<()> {
        let stride = self.send.sq_stride as usize;
        let bf_ok = wqe.len() <= self.send.bf_buf_size as usize;
        let mut buf = [0u8; wqe::MAX_WQE_LEN.next_multiple_of(64)];
        if wqe.len() < 16
            || wqe.len() > stride.min(wqe::MAX_WQE_LEN)
            || (path == UserPath::BlueFlame && !bf_ok)
        {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        if self.outstanding() >= self.send.sq_entries {
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        let len = wqe.len();
        let burst = wqe::bf_burst_len(len);
        buf[..len].copy_from_slice(wqe);
        set_signaled(&mut buf);
        let entries = self.send.sq_entries;
        match path {
            UserPath::BlueFlame => {
                wqe::stamp_blueflame(&mut buf[..len], self.qp.qpn, self.head, entries)
            }
            UserPath::Doorbell => wqe::stamp_doorbell(&mut buf[..len], self.head, entries),
        }
        let slot = (self.head & (entries - 1)) as usize * stride;
        // SAFETY: the slot lies in the send-queue mapping (slot < entries,
        // len <= stride); the adapter reads it only once the owner bit,
        // stored last below, says it is valid.
        unsafe {
            let dst = self.sq.as_ptr().add(slot);
            std::ptr::copy_nonoverlapping(buf[4..].as_ptr(), dst.add(4), len - 4);
            fence(Ordering::Release);
            AtomicU32::from_ptr(dst.cast()).store(
                u32::from_ne_bytes(buf[..4].try_into().unwrap_or_default()),
                Ordering::Relaxed,
            );
        }
        // The WQE in memory before the adapter hears of it.
        fence(Ordering::SeqCst);
        match path {
            UserPath::BlueFlame => {
                let off = (self.send.bf_reg_offset + self.bf_half) as usize;
                // SAFETY: `off + burst` <= the register (burst <= bf_buf_size,
                // checked above), inside the BlueFlame page mapping.
                unsafe { mmio_write(self.bf.as_ptr().add(off), &buf[..burst])? };
                self.bf_half ^= self.send.bf_buf_size;
            }
            UserPath::Doorbell => {
                let db = wqe_build::doorbell_bytes(self.qp.qpn);
                // SAFETY: the send doorbell lies in the UAR page mapping.
                unsafe { mmio_write(self.uar.as_ptr().add(UAR_SEND_DOORBELL), &db)? };
            }
        }
        self.head = self.head.wrapping_add(1);
        Ok(())
    }

    /// Consumes the send completions that arrived; the first error CQE
    /// fails (the QP is then in ERR).
    pub fn reap(&mut self) -> Result<u32> {
        let mut n = 0;
        while self.tail != self.head && self.cq.ready() {
            let cqe = self.cq.read();
            self.cq.consume();
            self.tail = self.tail.wrapping_add(1);
            if cqe.is_error() {
                bail!("send completion with error: {cqe:?}");
            }
            n += 1;
        }
        Ok(n)
    }

    /// Posts `wqe` by `path` after consuming the completions that arrived,
    /// waiting while the send queue is full.
    pub fn post_waiting(&mut self, wqe: &[u8], path: UserPath) -> Result<()> {
        loop {
            self.reap()?;
            match self.post(wqe, path) {
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => std::thread::yield_now(),
                r => return r.map_err(|e| anyhow!("user-space post: {e}")),
            }
        }
    }
}

/// Writes `bytes` to the mapped BAR at `dst`: 8-byte stores on x86 (the
/// write-combining buffer flushed with `sfence`), one 4-byte store for a
/// doorbell.
///
/// # Safety
///
/// `dst .. dst + bytes.len()` lies in a live writable mapping of the BAR.
#[cfg(not(target_arch = "s390x"))]
unsafe fn mmio_write(dst: *mut u8, bytes: &[u8]) -> io::Result<()> {
    if bytes.len() == 4 {
        // SAFETY: by the caller's guarantee; the doorbell is 4-byte aligned.
        unsafe {
            dst.cast::<u32>()
                .write_volatile(u32::from_ne_bytes(bytes.try_into().unwrap_or_default()))
        };
    } else {
        for (i, q) in bytes.chunks_exact(8).enumerate() {
            // SAFETY: by the caller's guarantee; 8-byte aligned offsets.
            unsafe {
                dst.add(i * 8)
                    .cast::<u64>()
                    .write_volatile(u64::from_ne_bytes(q.try_into().unwrap_or_default()))
            };
        }
    }
    fence(Ordering::SeqCst);
    Ok(())
}

/// s390 without MIO: `s390_pci_mmio_write()` looks the PFN up in this
/// process's mapping and writes through the kernel's `zpci_memcpy_toio()`
/// (store blocks, or one PCISTG for a doorbell).
///
/// # Safety
///
/// `dst .. dst + bytes.len()` lies in a live writable mapping of the BAR.
#[cfg(target_arch = "s390x")]
unsafe fn mmio_write(dst: *mut u8, bytes: &[u8]) -> io::Result<()> {
    // SAFETY: the kernel checks `dst` against this process's mappings and
    // reads `bytes.len()` bytes from `bytes`.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_s390_pci_mmio_write,
            dst as libc::c_ulong,
            bytes.as_ptr(),
            bytes.len(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
