// SPDX-License-Identifier: GPL-2.0

//! Memory regions (ABI 3): a buffer of this process registered with the
//! context (REG_MR) on creation and deregistered (DEREG_MR) on drop.
//!
//! A gather segment names a region of its own context by lkey and a user
//! virtual address inside it; an RDMA write names, by rkey, a region the
//! connected peer's context registered with `ACCESS_REMOTE_WRITE`, and the
//! whole message must lie inside it. The adapter reads and writes the
//! region's pages by DMA, behind the compiler's back: its bytes are read
//! and written through raw pointers, only when a completion says the
//! adapter is done with them.

use std::{
    io,
    ptr::NonNull,
    thread,
    time::{Duration, Instant},
};

use anyhow::{anyhow, Error, Result};
use mlx4_bf_core::abi;

use crate::{device::Device, errors::errno_text};

/// Registered memory comes in whole pages.
pub const PAGE: usize = 4096;
/// How long DEREG_MR is retried while the context has sends outstanding
/// (`-EBUSY`: the driver reaps its send CQ on every try).
const DEREG_PATIENCE: Duration = Duration::from_secs(5);

/// `abi::ACCESS_*` as text: `LOCAL_WRITE|REMOTE_WRITE`, or `local read only`.
pub fn access_name(access: u32) -> String {
    let mut names = Vec::new();
    if access & abi::ACCESS_LOCAL_WRITE != 0 {
        names.push("LOCAL_WRITE".to_owned());
    }
    if access & abi::ACCESS_REMOTE_WRITE != 0 {
        names.push("REMOTE_WRITE".to_owned());
    }
    if access & abi::ACCESS_REMOTE_READ != 0 {
        names.push("REMOTE_READ".to_owned());
    }
    let rest = access & !abi::ACCESS_ALL;
    if rest != 0 {
        names.push(format!("{rest:#x}"));
    }
    if names.is_empty() {
        "local read only".into()
    } else {
        names.join("|")
    }
}

/// Why a region of `len` bytes cannot be asked for at all, from what
/// QUERY_DEVICE reports; `None` if REG_MR may be tried.
pub fn reg_refusal(info: &abi::DeviceInfo, len: usize) -> Option<String> {
    if info.abi_version < 3 {
        return Some(format!(
            "the driver speaks ABI version {}: memory regions (REG_MR) need version 3",
            info.abi_version
        ));
    }
    if info.max_mr_size != 0 && len as u64 > info.max_mr_size {
        return Some(format!(
            "{len} bytes is above the largest memory region the driver allows ({} bytes)",
            info.max_mr_size
        ));
    }
    if info.max_mr_pages != 0 && len.div_ceil(PAGE) as u64 > u64::from(info.max_mr_pages) {
        return Some(format!(
            "{len} bytes is {} pages, above the {} pages a context may register",
            len.div_ceil(PAGE),
            info.max_mr_pages
        ));
    }
    None
}

/// Anonymous private memory in whole pages, zeroed and faulted in (so the
/// driver pins the pages this process writes, not the shared zero page),
/// kept out of any child (MADV_DONTFORK, as libibverbs does); unmapped on
/// drop.
struct Pages {
    ptr: NonNull<u8>,
    len: usize,
}

impl Pages {
    fn new(len: usize) -> io::Result<Self> {
        let len = len.max(1).next_multiple_of(PAGE);
        // SAFETY: a fresh anonymous mapping chosen by the kernel.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let pages = Pages {
            ptr: NonNull::new(p.cast())
                .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?,
            len,
        };
        // SAFETY: the mapping just made, `len` bytes. Advisory: a failure
        // only means a fork() would share the pages copy-on-write.
        unsafe {
            libc::madvise(p, len, libc::MADV_DONTFORK);
            std::ptr::write_bytes(pages.ptr.as_ptr(), 0, len);
        }
        Ok(pages)
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        // SAFETY: the mapping made in new(), unmapped once.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// A registered memory region of one context.
pub struct Mr {
    /// The context, through its own descriptor (the same open file).
    dev: Device,
    pages: Pages,
    info: abi::MrInfo,
    access: u32,
    registered: bool,
}

// SAFETY: the region is plain memory; every access goes through raw
// pointers, at times its user orders with the adapter's completions.
unsafe impl Send for Mr {}

impl Mr {
    /// Registers a new zeroed buffer of at least `len` bytes (whole pages)
    /// with `dev`'s context, with `access` (`abi::ACCESS_*`). `info` is the
    /// device's QUERY_DEVICE answer, for its limits.
    pub fn register(dev: &Device, info: &abi::DeviceInfo, len: usize, access: u32) -> Result<Mr> {
        let len = len.max(1).next_multiple_of(PAGE);
        let asked = |why: String| anyhow!("REG_MR of {len} bytes ({}): {why}", access_name(access));
        if let Some(why) = reg_refusal(info, len) {
            return Err(asked(why));
        }
        let pages = Pages::new(len)
            .map_err(|e| asked(format!("cannot map the buffer: {}", errno_text(&e))))?;
        let dev = dev
            .try_clone()
            .map_err(|e| asked(format!("cannot dup the device file: {}", errno_text(&e))))?;
        let addr = pages.ptr.as_ptr() as u64;
        let mr = dev
            .reg_mr(addr, len as u64, access)
            .map_err(|e| reg_error(&e, len, addr, access, info))?;
        Ok(Mr {
            dev,
            pages,
            info: mr,
            access,
            registered: true,
        })
    }

    /// The user virtual address of the first byte: what a gather segment
    /// and the peer's remote address segment name.
    pub fn addr(&self) -> u64 {
        self.pages.ptr.as_ptr() as u64
    }

    pub fn len(&self) -> usize {
        self.pages.len
    }

    pub fn lkey(&self) -> u32 {
        self.info.lkey
    }

    pub fn rkey(&self) -> u32 {
        self.info.rkey
    }

    fn check(&self, off: usize, len: usize) {
        assert!(
            off.checked_add(len)
                .is_some_and(|end| end <= self.pages.len),
            "{len} bytes at {off} outside a {}-byte memory region",
            self.pages.len
        );
    }

    /// Copies `data` into the region at `off`. The adapter must not be
    /// reading those bytes (no post gathering them outstanding).
    pub fn write(&self, off: usize, data: &[u8]) {
        self.check(off, data.len());
        // SAFETY: inside the mapping (checked); the caller keeps the
        // adapter off these bytes meanwhile.
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                self.pages.ptr.as_ptr().add(off),
                data.len(),
            )
        };
    }

    /// `len` bytes of the region at `off`, as the adapter left them: call
    /// it after the completion that says the adapter wrote them (the
    /// receive CQE, read after an acquire fence) and before the next
    /// message may land there.
    pub fn bytes(&self, off: usize, len: usize) -> &[u8] {
        self.check(off, len);
        // SAFETY: inside the mapping (checked); the adapter is done with
        // these bytes until the caller lets the peer write again.
        unsafe { std::slice::from_raw_parts(self.pages.ptr.as_ptr().add(off), len) }
    }

    /// What this region is, for error messages.
    fn describe(&self) -> String {
        format!(
            "memory region lkey {:#x} ({} bytes at {:#x}, {})",
            self.info.lkey,
            self.pages.len,
            self.addr(),
            access_name(self.access)
        )
    }

    /// DEREG_MR, retried while the context has sends outstanding.
    fn dereg(&mut self) -> Result<()> {
        if !self.registered {
            return Ok(());
        }
        let start = Instant::now();
        let mut tries = 0u32;
        loop {
            match self.dev.dereg_mr(self.info.mr_handle) {
                Ok(()) => {
                    self.registered = false;
                    return Ok(());
                }
                Err(e)
                    if e.raw_os_error() == Some(libc::EBUSY)
                        && start.elapsed() < DEREG_PATIENCE =>
                {
                    tries += 1;
                    if tries < 100 {
                        thread::yield_now();
                    } else {
                        thread::sleep(Duration::from_millis(1));
                    }
                }
                Err(e) => {
                    let why = if e.raw_os_error() == Some(libc::EBUSY) {
                        format!(
                            "{}: the context still had sends outstanding after {:?} of retries",
                            errno_text(&e),
                            DEREG_PATIENCE
                        )
                    } else {
                        errno_text(&e)
                    };
                    return Err(anyhow!("DEREG_MR of {}: {why}", self.describe()));
                }
            }
        }
    }

    /// Deregisters the region now, with the error if that fails (dropping
    /// it does the same and drops the error: closing the device file
    /// deregisters whatever is left).
    pub fn close(mut self) -> Result<()> {
        self.dereg()
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // The pages go after the region (the driver unpins them); if DEREG_MR
        // failed they stay pinned until the file closes.
        let _ = self.dereg();
    }
}

/// REG_MR's errno, with what it means for this driver.
fn reg_error(e: &io::Error, len: usize, addr: u64, access: u32, info: &abi::DeviceInfo) -> Error {
    let hint = match e.raw_os_error() {
        Some(libc::ENOMEM | libc::ENOSPC | libc::EDQUOT) => format!(
            ": over the context's limits? ({} regions, {} pages of 4 KiB in all, {} bytes each)",
            info.max_mrs_per_context, info.max_mr_pages, info.max_mr_size
        ),
        Some(libc::EPROTONOSUPPORT | libc::EOPNOTSUPP) => format!(
            ": the driver does not know memory regions: it speaks an older ABI than this \
             helper (version {})",
            abi::ABI_VERSION
        ),
        Some(libc::ENODEV) => ": the adapter is gone".into(),
        _ => String::new(),
    };
    anyhow!(
        "REG_MR of {len} bytes at {addr:#x} ({}): {}{hint}",
        access_name(access),
        errno_text(e)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_flags_are_named() {
        assert_eq!(access_name(0), "local read only");
        assert_eq!(access_name(abi::ACCESS_LOCAL_WRITE), "LOCAL_WRITE");
        assert_eq!(
            access_name(abi::ACCESS_ALL),
            "LOCAL_WRITE|REMOTE_WRITE|REMOTE_READ"
        );
        assert_eq!(
            access_name(abi::ACCESS_REMOTE_WRITE | 8),
            "REMOTE_WRITE|0x8"
        );
    }

    #[test]
    fn regions_the_driver_cannot_have_are_refused_before_asking() {
        let mut info = abi::DeviceInfo {
            abi_version: 3,
            max_mrs_per_context: 16,
            max_mr_pages: 64,
            max_mr_size: 128 * 1024,
            ..Default::default()
        };
        assert_eq!(reg_refusal(&info, 128 * 1024), None);
        assert!(reg_refusal(&info, 128 * 1024 + 1)
            .unwrap()
            .contains("above the largest memory region the driver allows (131072 bytes)"));
        info.max_mr_pages = 8;
        assert!(reg_refusal(&info, 9 * PAGE)
            .unwrap()
            .contains("9 pages, above the 8 pages"));
        info.abi_version = 2;
        assert!(reg_refusal(&info, PAGE).unwrap().contains("need version 3"));
    }

    #[test]
    fn reg_errors_name_the_errno_and_what_was_asked() {
        let info = abi::DeviceInfo {
            abi_version: 3,
            max_mrs_per_context: 16,
            max_mr_pages: 64,
            max_mr_size: 1 << 20,
            ..Default::default()
        };
        let e = reg_error(
            &io::Error::from_raw_os_error(libc::ENOMEM),
            8192,
            0x7f00_0000_0000,
            abi::ACCESS_ALL,
            &info,
        );
        assert_eq!(
            e.to_string(),
            "REG_MR of 8192 bytes at 0x7f0000000000 (LOCAL_WRITE|REMOTE_WRITE|REMOTE_READ): ENOMEM \
             (Cannot allocate memory): over the context's limits? (16 regions, 64 pages of \
             4 KiB in all, 1048576 bytes each)"
        );
        let e = reg_error(
            &io::Error::from_raw_os_error(libc::EINVAL),
            4096,
            0x1000,
            0,
            &info,
        );
        assert_eq!(
            e.to_string(),
            "REG_MR of 4096 bytes at 0x1000 (local read only): EINVAL (Invalid argument)"
        );
    }

    #[test]
    fn pages_are_whole_zeroed_and_writable() {
        let p = Pages::new(100).unwrap();
        assert_eq!(p.len, PAGE);
        let s = unsafe { std::slice::from_raw_parts_mut(p.ptr.as_ptr(), p.len) };
        assert!(s.iter().all(|&b| b == 0));
        s[PAGE - 1] = 7;
        assert_eq!(Pages::new(PAGE + 1).unwrap().len, 2 * PAGE);
    }
}
