// SPDX-License-Identifier: GPL-2.0

//! The RDMA device, `mlx4_bf<N>`, through libibverbs and libmlx4: a
//! context, its PD, registered memory, a CQ and RC QPs whose send queue
//! this process fills itself (mlx4dv's layout), as libmlx4 would. The calls
//! are `verbs/verbs_shim.c`'s (flat: no libibverbs structure is mirrored
//! here); each object borrows the one it was made on, so they go in the
//! order the verbs want. The objects, one file each: `cq` (completions,
//! polled or awaited on a channel), `mr` (registered memory of the
//! process's own), `qp` (RC QPs: the send queue as mlx4dv lays it out,
//! libmlx4's posts, receives).

use std::{
    ffi::{c_char, c_int, c_void, CStr, CString},
    io,
    marker::PhantomData,
    os::fd::RawFd,
    ptr::{self, NonNull},
};

mod cq;
mod mr;
mod qp;

pub use cq::{Cq, Wc, WC_RECV, WC_RECV_RDMA_WITH_IMM};
pub use mr::Mr;
pub use qp::{Qp, QpSize};

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
        pub fn hv_create_cq(
            ctx: *mut Opaque,
            cqe: c_int,
            events: c_int,
            cq: *mut *mut Opaque,
            event_fd: *mut c_int,
        ) -> c_int;
        pub fn hv_destroy_cq(cq: *mut Opaque) -> c_int;
        pub fn hv_poll_wc(cq: *mut Opaque, wc: *mut super::Wc) -> c_int;
        pub fn hv_req_notify(cq: *mut Opaque) -> c_int;
        pub fn hv_take_event(cq: *mut Opaque) -> c_int;
        pub fn hv_create_rc_qp(
            pd: *mut Opaque,
            send_cq: *mut Opaque,
            recv_cq: *mut Opaque,
            send_wr: u32,
            recv_wr: u32,
            max_inline: u32,
            qp: *mut *mut Opaque,
            sq: *mut Sq,
        ) -> c_int;
        pub fn hv_connect(qp: *mut Opaque, dest_qpn: u32, dlid: u16) -> c_int;
        pub fn hv_set_bf_post(qp: *mut Opaque, how: c_int) -> c_int;
        pub fn hv_post_write(qp: *mut Opaque, w: *const Write) -> c_int;
        pub fn hv_post_recv(qp: *mut Opaque, wr_id: u64, addr: u64, len: u32, lkey: u32) -> c_int;
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

impl Drop for Pd<'_> {
    fn drop(&mut self) {
        // SAFETY: its regions and QPs borrowed it and are gone.
        unsafe { ffi::hv_dealloc_pd(self.pd.as_ptr()) };
    }
}
