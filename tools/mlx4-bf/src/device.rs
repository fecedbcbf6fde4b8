// SPDX-License-Identifier: GPL-2.0

//! The driver's ioctl, from user space: one call header plus attributes, as
//! `uapi/mlx4_bf.h` defines them (mirrored in `mlx4_bf_core::abi`).

use std::{
    fs::{File, OpenOptions},
    io,
    os::fd::{AsRawFd, RawFd},
    path::Path,
    ptr::NonNull,
};

use anyhow::{anyhow, Result};
use mlx4_bf_core::abi::{self, Attr, IoctlHdr, MAX_ATTRS};

#[repr(C)]
struct Call {
    hdr: IoctlHdr,
    attrs: [Attr; MAX_ATTRS],
}

impl Call {
    fn new(object_id: u16, method_id: u16) -> Self {
        Call {
            hdr: IoctlHdr {
                length: size_of::<IoctlHdr>() as u16,
                object_id,
                method_id,
                ..Default::default()
            },
            attrs: [Attr::default(); MAX_ATTRS],
        }
    }

    fn attr(mut self, attr_id: u16, len: usize, data: u64) -> Self {
        self.attrs[usize::from(self.hdr.num_attrs)] = Attr {
            attr_id,
            len: len as u16,
            data,
            ..Default::default()
        };
        self.hdr.num_attrs += 1;
        self.hdr.length += size_of::<Attr>() as u16;
        self
    }

    fn inline_u32(self, attr_id: u16, value: u32) -> Self {
        let mut data = [0u8; 8];
        data[..4].copy_from_slice(&value.to_ne_bytes());
        self.attr(attr_id, 4, u64::from_ne_bytes(data))
    }

    fn inline_u64(self, attr_id: u16, value: u64) -> Self {
        self.attr(attr_id, 8, value)
    }

    fn output<T>(self, attr_id: u16, out: &mut T) -> Self {
        self.attr(attr_id, size_of::<T>(), out as *mut T as u64)
    }
}

/// An open context of `/dev/mlx4_bf<N>`.
pub struct Device {
    file: File,
}

impl Device {
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        Ok(Device { file })
    }

    /// The same context through a second file descriptor (`dup()`): it
    /// names the same open file, so the driver sees the same context, and
    /// keeps it open as long as either lives.
    pub fn try_clone(&self) -> io::Result<Self> {
        Ok(Device {
            file: self.file.try_clone()?,
        })
    }

    /// The file descriptor, for `mmap()` and `poll()`.
    pub fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    fn call(&self, mut call: Call) -> io::Result<()> {
        // SAFETY: `call` is a valid header followed by `num_attrs` attributes
        // whose pointers refer to live buffers of the stated lengths.
        let rc = unsafe { libc::ioctl(self.file.as_raw_fd(), abi::IOCTL as _, &mut call) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    pub fn query_device(&self) -> io::Result<abi::DeviceInfo> {
        let mut info = abi::DeviceInfo::default();
        self.call(
            Call::new(abi::OBJECT_DEVICE, abi::METHOD_QUERY_DEVICE)
                .output(abi::ATTR_DEVICE_INFO, &mut info),
        )?;
        Ok(info)
    }

    pub fn query_context(&self) -> io::Result<abi::ContextInfo> {
        let mut info = abi::ContextInfo::default();
        self.call(
            Call::new(abi::OBJECT_CONTEXT, abi::METHOD_QUERY_CONTEXT)
                .output(abi::ATTR_CONTEXT_INFO, &mut info),
        )?;
        Ok(info)
    }

    /// The ioctl round trip alone: QUERY_CONTEXT without outputs does nothing.
    pub fn noop(&self) -> io::Result<()> {
        self.call(Call::new(abi::OBJECT_CONTEXT, abi::METHOD_QUERY_CONTEXT))
    }

    /// Device and context counters.
    pub fn query_stats(&self) -> io::Result<(abi::Stats, abi::Stats)> {
        let (mut dev, mut ctx) = (abi::Stats::default(), abi::Stats::default());
        self.call(
            Call::new(abi::OBJECT_DEVICE, abi::METHOD_QUERY_STATS)
                .output(abi::ATTR_DEVICE_STATS, &mut dev)
                .output(abi::ATTR_CONTEXT_STATS, &mut ctx),
        )?;
        Ok((dev, ctx))
    }

    pub fn create_qp(&self) -> io::Result<abi::QpInfo> {
        let mut qp = abi::QpInfo::default();
        self.call(
            Call::new(abi::OBJECT_QP, abi::METHOD_CREATE_QP).output(abi::ATTR_QP_INFO, &mut qp),
        )?;
        Ok(qp)
    }

    /// CREATE_QP of a QP whose send queue user space owns
    /// (`abi::QP_F_USER_SEND`; the context's QPs are all of that kind then).
    pub fn create_user_qp(&self) -> io::Result<(abi::QpInfo, abi::QpSendInfo)> {
        let mut qp = abi::QpInfo::default();
        let mut send = abi::QpSendInfo::default();
        self.call(
            Call::new(abi::OBJECT_QP, abi::METHOD_CREATE_QP)
                .inline_u32(abi::ATTR_QP_FLAGS, abi::QP_F_USER_SEND)
                .output(abi::ATTR_QP_INFO, &mut qp)
                .output(abi::ATTR_QP_SEND_INFO, &mut send),
        )?;
        Ok((qp, send))
    }

    pub fn post_send(
        &self,
        qp: &abi::QpInfo,
        wqe: &[u8],
        flags: u32,
    ) -> io::Result<abi::PostResult> {
        let mut result = abi::PostResult::default();
        let mut call = Call::new(abi::OBJECT_QP, abi::METHOD_POST_SEND)
            .inline_u32(abi::ATTR_QP_HANDLE, qp.qp_handle)
            .attr(abi::ATTR_WQE, wqe.len(), wqe.as_ptr() as u64);
        if flags != 0 {
            call = call.inline_u32(abi::ATTR_POST_FLAGS, flags);
        }
        self.call(call.output(abi::ATTR_POST_RESULT, &mut result))?;
        Ok(result)
    }

    /// POST_SEND of a WQE staged in the QP's WQE page (`page`, mapped from
    /// `qp.wqe_offset`), without the optional result: the cheapest post.
    pub fn post_send_staged(
        &self,
        qp: &abi::QpInfo,
        page: &Mapping,
        wqe: &[u8],
        flags: u32,
    ) -> io::Result<()> {
        if wqe.len() > page.len() {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        // SAFETY: the page is a writable mapping of at least `wqe.len()`
        // bytes (checked above) that only this thread writes.
        unsafe { std::ptr::copy_nonoverlapping(wqe.as_ptr(), page.as_ptr(), wqe.len()) };
        let mut call = Call::new(abi::OBJECT_QP, abi::METHOD_POST_SEND)
            .inline_u32(abi::ATTR_QP_HANDLE, qp.qp_handle)
            .inline_u32(abi::ATTR_WQE_LEN, wqe.len() as u32);
        if flags != 0 {
            call = call.inline_u32(abi::ATTR_POST_FLAGS, flags);
        }
        self.call(call)
    }

    /// Hands `count` more receive buffers to the adapter (POST_RECV).
    pub fn post_recv(&self, qp: &abi::QpInfo, count: u32) -> io::Result<()> {
        self.call(
            Call::new(abi::OBJECT_QP, abi::METHOD_POST_RECV)
                .inline_u32(abi::ATTR_QP_HANDLE, qp.qp_handle)
                .inline_u32(abi::ATTR_RECV_COUNT, count),
        )
    }

    /// Connects the QP to `remote_qpn` (CONNECT_QP).
    pub fn connect_qp(&self, qp: &abi::QpInfo, remote_qpn: u32) -> io::Result<()> {
        self.call(
            Call::new(abi::OBJECT_QP, abi::METHOD_CONNECT_QP)
                .inline_u32(abi::ATTR_QP_HANDLE, qp.qp_handle)
                .inline_u32(abi::ATTR_REMOTE_QPN, remote_qpn),
        )
    }

    /// Asks for one completion event of the QP's receive CQ (ARM_CQ).
    pub fn arm_cq(&self, qp: &abi::QpInfo, flags: u32) -> io::Result<()> {
        let mut call = Call::new(abi::OBJECT_QP, abi::METHOD_ARM_CQ)
            .inline_u32(abi::ATTR_QP_HANDLE, qp.qp_handle);
        if flags != 0 {
            call = call.inline_u32(abi::ATTR_ARM_FLAGS, flags);
        }
        self.call(call)
    }

    /// Registers `[addr, addr + len)` of this process as a memory region of
    /// the context (REG_MR); `access` is `abi::ACCESS_*` (0: local reads
    /// only, the attribute left out).
    pub fn reg_mr(&self, addr: u64, len: u64, access: u32) -> io::Result<abi::MrInfo> {
        let mut info = abi::MrInfo::default();
        let mut call = Call::new(abi::OBJECT_MR, abi::METHOD_REG_MR)
            .inline_u64(abi::ATTR_MR_ADDR, addr)
            .inline_u64(abi::ATTR_MR_LENGTH, len);
        if access != 0 {
            call = call.inline_u32(abi::ATTR_MR_ACCESS, access);
        }
        self.call(call.output(abi::ATTR_MR_INFO, &mut info))?;
        Ok(info)
    }

    /// Deregisters a memory region (DEREG_MR): `-EBUSY` while the context
    /// has sends outstanding.
    pub fn dereg_mr(&self, mr_handle: u32) -> io::Result<()> {
        self.call(
            Call::new(abi::OBJECT_MR, abi::METHOD_DEREG_MR)
                .inline_u32(abi::ATTR_MR_HANDLE, mr_handle),
        )
    }

    /// Maps `len` bytes of the device file at `offset` (shared).
    pub fn map(&self, offset: u64, len: usize, writable: bool) -> io::Result<Mapping> {
        Mapping::new(self.fd(), offset, len, writable)
    }
}

/// Opens the device node, saying what to do about the usual failures.
pub fn open(path: &Path) -> Result<Device> {
    Device::open(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => anyhow!(
            "{} does not exist: is mlx4_bf loaded and an adapter bound?",
            path.display()
        ),
        io::ErrorKind::PermissionDenied => anyhow!(
            "cannot open {}: permission denied (the device is root's, mode 0600)",
            path.display()
        ),
        _ if e.raw_os_error() == Some(libc::EBUSY) => {
            anyhow!("cannot open {}: all UARs are in use", path.display())
        }
        _ => anyhow!("cannot open {}: {e}", path.display()),
    })
}

/// A shared mapping of a file, unmapped on drop.
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; every access through it goes
// through raw pointers with the ordering its user chooses.
unsafe impl Send for Mapping {}

impl Mapping {
    pub fn new(fd: RawFd, offset: u64, len: usize, writable: bool) -> io::Result<Self> {
        if len == 0 {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let prot = if writable {
            libc::PROT_READ | libc::PROT_WRITE
        } else {
            libc::PROT_READ
        };
        let off = libc::off_t::try_from(offset)
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: a fresh mapping chosen by the kernel; nothing else is
        // touched.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd, off) };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping {
            ptr: NonNull::new(p.cast())
                .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?,
            len,
        })
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in new(), unmapped once.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}
