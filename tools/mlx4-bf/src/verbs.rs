// SPDX-License-Identifier: GPL-2.0

//! The RDMA device, `mlx4_bf<N>`, through libibverbs and libmlx4: a
//! context, its PD, registered memory, a CQ and RC QPs whose send queue
//! this process fills itself (mlx4dv's layout), as libmlx4 would. The calls
//! are `verbs/verbs_shim.c`'s (flat: no libibverbs structure is mirrored
//! here); each object borrows the one it was made on, so they go in the
//! order the verbs want. Only with `cfg(verbs)` (build.rs).

use std::{
    ffi::{c_char, c_int, c_void, CStr, CString},
    io,
    marker::PhantomData,
    os::fd::RawFd,
    ptr::{self, NonNull},
};

mod ffi {
    use super::*;

    #[repr(C)]
    pub struct Opaque {
        _private: [u8; 0],
    }

    #[repr(C)]
    pub struct Sq {
        pub buf: *mut u8,
        pub wqe_cnt: u32,
        pub wqe_shift: u32,
        pub qpn: u32,
    }

    /// `struct hv_write`.
    #[repr(C)]
    pub struct Write {
        pub laddr: u64,
        pub raddr: u64,
        pub lkey: u32,
        pub rkey: u32,
        pub len: u32,
        pub inline_data: u32,
    }

    extern "C" {
        pub fn hv_open(name: *const c_char, ctx: *mut *mut Opaque) -> c_int;
        pub fn hv_close(ctx: *mut Opaque) -> c_int;
        pub fn hv_cmd_fd(ctx: *mut Opaque) -> c_int;
        pub fn hv_facts(ctx: *mut Opaque, f: *mut super::Facts) -> c_int;
        pub fn hv_alloc_pd(ctx: *mut Opaque, pd: *mut *mut Opaque) -> c_int;
        pub fn hv_dealloc_pd(pd: *mut Opaque) -> c_int;
        pub fn hv_reg_mr(
            pd: *mut Opaque,
            addr: *mut c_void,
            len: usize,
            access: c_int,
            mr: *mut *mut Opaque,
            lkey: *mut u32,
            rkey: *mut u32,
        ) -> c_int;
        pub fn hv_dereg_mr(mr: *mut Opaque) -> c_int;
        pub fn hv_create_cq(ctx: *mut Opaque, cqe: c_int, cq: *mut *mut Opaque) -> c_int;
        pub fn hv_destroy_cq(cq: *mut Opaque) -> c_int;
        pub fn hv_poll_one(cq: *mut Opaque, status: *mut u32) -> c_int;
        pub fn hv_create_rc_qp(
            pd: *mut Opaque,
            cq: *mut Opaque,
            send_wr: u32,
            recv_wr: u32,
            max_inline: u32,
            qp: *mut *mut Opaque,
            sq: *mut Sq,
        ) -> c_int;
        pub fn hv_connect(qp: *mut Opaque, dest_qpn: u32, dlid: u16) -> c_int;
        pub fn hv_set_bf_post(qp: *mut Opaque, how: c_int) -> c_int;
        pub fn hv_post_write(qp: *mut Opaque, w: *const Write) -> c_int;
        pub fn hv_destroy_qp(qp: *mut Opaque) -> c_int;
    }
}

/// 0 or an errno, as an `io::Result`.
fn check(err: c_int) -> io::Result<()> {
    match err {
        0 => Ok(()),
        e => Err(io::Error::from_raw_os_error(e.abs())),
    }
}

/// What `ibv_query_device()` and `ibv_query_port()` (port 1) say
/// (`struct hv_facts`).
#[repr(C)]
pub struct Facts {
    fw_ver: [c_char; 64],
    pub max_mr_size: u64,
    pub max_qp: u32,
    pub max_qp_wr: u32,
    pub max_cq: u32,
    pub max_cqe: u32,
    pub max_mr: u32,
    pub max_pd: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub lid: u16,
    /// `enum ibv_port_state`: 4 is ACTIVE.
    pub port_state: u8,
    pub active_mtu: u8,
}

impl Facts {
    pub fn fw_ver(&self) -> String {
        // SAFETY: hv_facts() leaves fw_ver NUL-terminated (zeroed first).
        unsafe { CStr::from_ptr(self.fw_ver.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    }
}

/// An open verbs context (`ibv_open_device()`).
pub struct Context {
    ctx: NonNull<ffi::Opaque>,
}

impl Context {
    /// Opens the RDMA device called `name` (`mlx4_bf0`).
    pub fn open(name: &str) -> io::Result<Self> {
        let name = CString::new(name).map_err(|_| io::ErrorKind::InvalidInput)?;
        let mut ctx = ptr::null_mut();
        // SAFETY: `name` is a C string; `ctx` is written on success.
        check(unsafe { ffi::hv_open(name.as_ptr(), &mut ctx) })?;
        Ok(Context {
            ctx: NonNull::new(ctx).ok_or(io::ErrorKind::NotFound)?,
        })
    }

    /// The context's command file, on which the QP_POST method is called.
    pub fn cmd_fd(&self) -> RawFd {
        // SAFETY: the context is open.
        unsafe { ffi::hv_cmd_fd(self.ctx.as_ptr()) }
    }

    pub fn facts(&self) -> io::Result<Facts> {
        // SAFETY: all integers (and a C string of zeros): zero is valid.
        let mut f: Facts = unsafe { core::mem::zeroed() };
        // SAFETY: the context is open; `f` is written whole on success.
        check(unsafe { ffi::hv_facts(self.ctx.as_ptr(), &mut f) })?;
        Ok(f)
    }

    pub fn alloc_pd(&self) -> io::Result<Pd<'_>> {
        let mut pd = ptr::null_mut();
        // SAFETY: the context is open.
        check(unsafe { ffi::hv_alloc_pd(self.ctx.as_ptr(), &mut pd) })?;
        Ok(Pd {
            pd: NonNull::new(pd).ok_or(io::ErrorKind::Other)?,
            _ctx: PhantomData,
        })
    }

    /// A CQ of at least `entries` entries, polled by this process.
    pub fn create_cq(&self, entries: u32) -> io::Result<Cq<'_>> {
        let mut cq = ptr::null_mut();
        let entries = c_int::try_from(entries).map_err(|_| io::ErrorKind::InvalidInput)?;
        // SAFETY: the context is open.
        check(unsafe { ffi::hv_create_cq(self.ctx.as_ptr(), entries, &mut cq) })?;
        Ok(Cq {
            cq: NonNull::new(cq).ok_or(io::ErrorKind::Other)?,
            _ctx: PhantomData,
        })
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: every object made on it borrowed it and is gone.
        unsafe { ffi::hv_close(self.ctx.as_ptr()) };
    }
}

/// A protection domain.
pub struct Pd<'c> {
    pd: NonNull<ffi::Opaque>,
    _ctx: PhantomData<&'c Context>,
}

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

    /// An RC QP on this PD with `cq` for both queues: `send_wr` send WQEs
    /// of room for `max_inline` inline bytes.
    pub fn create_rc_qp<'p>(
        &'p self,
        cq: &'p Cq<'_>,
        send_wr: u32,
        max_inline: u32,
    ) -> io::Result<Qp<'p>> {
        let mut qp = ptr::null_mut();
        let mut sq = ffi::Sq {
            buf: ptr::null_mut(),
            wqe_cnt: 0,
            wqe_shift: 0,
            qpn: 0,
        };
        // SAFETY: PD and CQ live, and outlive the QP ('p).
        check(unsafe {
            ffi::hv_create_rc_qp(
                self.pd.as_ptr(),
                cq.cq.as_ptr(),
                send_wr,
                1,
                max_inline,
                &mut qp,
                &mut sq,
            )
        })?;
        let qp = NonNull::new(qp).ok_or(io::ErrorKind::Other)?;
        let buf = NonNull::new(sq.buf).ok_or(io::ErrorKind::Other)?;
        Ok(Qp {
            qp,
            sq: SendQueue {
                buf,
                wqe_cnt: sq.wqe_cnt,
                wqe_shift: sq.wqe_shift,
            },
            qpn: sq.qpn,
            _pd: PhantomData,
        })
    }
}

impl Drop for Pd<'_> {
    fn drop(&mut self) {
        // SAFETY: its regions and QPs borrowed it and are gone.
        unsafe { ffi::hv_dealloc_pd(self.pd.as_ptr()) };
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

/// A completion queue; its completions polled through libmlx4.
pub struct Cq<'c> {
    cq: NonNull<ffi::Opaque>,
    _ctx: PhantomData<&'c Context>,
}

/// One work completion: `ibv_wc`'s status (`IBV_WC_SUCCESS`: 0).
#[derive(Clone, Copy, Debug)]
pub struct Completion {
    pub status: u32,
}

impl Cq<'_> {
    /// The next completion, if one is there.
    pub fn poll(&self) -> io::Result<Option<Completion>> {
        let mut status = 0;
        // SAFETY: the CQ lives; `status` is written when 1 is returned.
        match unsafe { ffi::hv_poll_one(self.cq.as_ptr(), &mut status) } {
            1 => Ok(Some(Completion { status })),
            0 => Ok(None),
            e => Err(io::Error::from_raw_os_error(-e)),
        }
    }
}

impl Drop for Cq<'_> {
    fn drop(&mut self) {
        // SAFETY: its QPs borrowed it and are gone.
        unsafe { ffi::hv_destroy_cq(self.cq.as_ptr()) };
    }
}

/// A QP's send queue in this process's memory (mlx4dv_qp).
pub struct SendQueue {
    buf: NonNull<u8>,
    pub wqe_cnt: u32,
    pub wqe_shift: u32,
}

/// An RC QP.
pub struct Qp<'p> {
    qp: NonNull<ffi::Opaque>,
    pub sq: SendQueue,
    pub qpn: u32,
    _pd: PhantomData<&'p Pd<'p>>,
}

impl Qp<'_> {
    /// RESET to RTS, connected to `dest_qpn` at `dlid` (itself: its own
    /// number and the port's LID).
    pub fn connect(&self, dest_qpn: u32, dlid: u16) -> io::Result<()> {
        // SAFETY: the QP lives.
        check(unsafe { ffi::hv_connect(self.qp.as_ptr(), dest_qpn, dlid) })
    }

    /// How libmlx4 posts this QP's BlueFlame WQEs: by the process's own
    /// stores (`MLX4DV_QP_BF_POST_USER`), or through the kernel's QP_POST.
    pub fn set_bf_post(&self, kernel: bool) -> io::Result<()> {
        // SAFETY: the QP lives; no post runs on it concurrently (&self of
        // a QP this thread owns: `Qp` is not Sync).
        check(unsafe { ffi::hv_set_bf_post(self.qp.as_ptr(), if kernel { 2 } else { 1 }) })
    }

    /// `ibv_post_send()` of a signaled RDMA write of `len` bytes from
    /// offset `src` of `mr` to offset `dst` of it (the QP is connected to
    /// itself), inline if asked: libmlx4 builds and posts the WQE. EINVAL
    /// if either range leaves the region.
    pub fn post_write(
        &self,
        mr: &Mr<'_>,
        (src, dst): (usize, usize),
        len: usize,
        inline: bool,
    ) -> io::Result<()> {
        let within = |off: usize| off.checked_add(len).is_some_and(|end| end <= mr.len());
        let len32 = u32::try_from(len).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        if !within(src) || !within(dst) {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let w = ffi::Write {
            laddr: mr.addr() + src as u64,
            raddr: mr.addr() + dst as u64,
            lkey: mr.lkey,
            rkey: mr.rkey,
            len: len32,
            inline_data: inline.into(),
        };
        // SAFETY: the QP lives; both ranges lie within the registered
        // region's memory, which lives across the call (libmlx4 reads an
        // inline payload from it during the call; the adapter writes the
        // destination, which this process reads only through copies).
        check(unsafe { ffi::hv_post_write(self.qp.as_ptr(), &w) })
    }

    /// Copies `wqe` into send-queue slot `index` (modulo the queue).
    pub fn put_wqe(&self, index: u32, wqe: &[u8]) {
        let stride = 1usize << self.sq.wqe_shift;
        assert!(wqe.len() <= stride);
        let at = ((index & (self.sq.wqe_cnt - 1)) as usize) << self.sq.wqe_shift;
        // SAFETY: `at + stride` lies within the queue of wqe_cnt slots,
        // memory libmlx4 allocated for this QP, which lives.
        unsafe {
            let slot = self.sq.buf.as_ptr().add(at);
            ptr::write_bytes(slot, 0, stride);
            ptr::copy_nonoverlapping(wqe.as_ptr(), slot, wqe.len());
        }
    }
}

impl Drop for Qp<'_> {
    fn drop(&mut self) {
        // SAFETY: the QP lives; nothing borrows it.
        unsafe { ffi::hv_destroy_qp(self.qp.as_ptr()) };
    }
}
