// SPDX-License-Identifier: GPL-2.0

//! A shared mapping of a file: the analyzer's window on the device model's
//! diagnostic block (sysfs `resource0`).

use std::{io, os::fd::RawFd, ptr::NonNull};

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
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in new(), unmapped once.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}
