// SPDX-License-Identifier: GPL-2.0

//! Registered memory of the process's own: page-aligned, zeroed, read and
//! written only through bounds-checked copies (the adapter writes it too).

use std::{ffi::c_int, io, marker::PhantomData, ptr, ptr::NonNull};

use super::{check, ffi, Pd};

impl Pd<'_> {
    /// Registers `len` bytes of page-aligned memory of its own, zeroed,
    /// with `access` (`IBV_ACCESS_*`).
    pub fn reg_mr(&self, len: usize, access: u32) -> io::Result<Mr<'_>> {
        let buf = PageBuf::new(len)?;
        let (mut mr, mut lkey, mut rkey) = (ptr::null_mut(), 0, 0);
        let access = c_int::try_from(access).map_err(|_| io::ErrorKind::InvalidInput)?;
        // SAFETY: the PD lives; `buf` is `len` bytes this process owns,
        // kept until the region is deregistered (Mr's field order).
        check(unsafe {
            ffi::hv_reg_mr(
                self.pd.as_ptr(),
                buf.ptr.as_ptr().cast(),
                len,
                access,
                &mut mr,
                &mut lkey,
                &mut rkey,
            )
        })?;
        Ok(Mr {
            mr: NonNull::new(mr).ok_or(io::ErrorKind::Other)?,
            lkey,
            rkey,
            buf,
            _pd: PhantomData,
        })
    }
}

/// Page-aligned, zeroed memory of this process (a private anonymous map).
struct PageBuf {
    ptr: NonNull<u8>,
    len: usize,
}

impl PageBuf {
    fn new(len: usize) -> io::Result<Self> {
        // SAFETY: a new anonymous mapping; nothing else is touched.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len.max(1),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(PageBuf {
            ptr: NonNull::new(p.cast()).ok_or(io::ErrorKind::Other)?,
            len: len.max(1),
        })
    }
}

impl Drop for PageBuf {
    fn drop(&mut self) {
        // SAFETY: the mapping new() made, unmapped once.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// A registered region over memory of its own.
pub struct Mr<'p> {
    mr: NonNull<ffi::Opaque>,
    pub lkey: u32,
    pub rkey: u32,
    /// Dropped after `Drop::drop` deregistered the region.
    buf: PageBuf,
    _pd: PhantomData<&'p Pd<'p>>,
}

impl Mr<'_> {
    pub fn addr(&self) -> u64 {
        self.buf.ptr.as_ptr() as u64
    }

    pub fn len(&self) -> usize {
        self.buf.len
    }

    /// The region's bytes. The adapter may write them (a remote write): a
    /// copy is read with volatile loads.
    pub fn read(&self, off: usize, out: &mut [u8]) {
        assert!(off
            .checked_add(out.len())
            .is_some_and(|end| end <= self.buf.len));
        for (i, b) in out.iter_mut().enumerate() {
            // SAFETY: in bounds (above); the mapping lives.
            *b = unsafe { self.buf.ptr.as_ptr().add(off + i).read_volatile() };
        }
    }

    pub fn write(&self, off: usize, data: &[u8]) {
        assert!(off
            .checked_add(data.len())
            .is_some_and(|end| end <= self.buf.len));
        // SAFETY: in bounds (above); the mapping lives.
        unsafe {
            ptr::copy_nonoverlapping(data.as_ptr(), self.buf.ptr.as_ptr().add(off), data.len())
        };
    }
}

impl Drop for Mr<'_> {
    fn drop(&mut self) {
        // SAFETY: the region is registered; its memory goes after it.
        unsafe { ffi::hv_dereg_mr(self.mr.as_ptr()) };
    }
}
