// SPDX-License-Identifier: GPL-2.0

//! RC QPs: made on a PD with their CQs, connected, their send queue in
//! this process's memory as mlx4dv lays it out (for WQEs the helper builds
//! and hands to QP_POST), libmlx4's own posts, and receive WQEs.

use std::{io, marker::PhantomData, ptr, ptr::NonNull};

use mlx4_bf_core::{abi, wqe};

use super::{check, ffi, Cq, Mr, Pd};

/// What a QP is made to hold.
#[derive(Clone, Copy, Debug)]
pub struct QpSize {
    pub send_wr: u32,
    pub recv_wr: u32,
    /// Inline bytes a send WQE has room for.
    pub max_inline: u32,
}

impl Pd<'_> {
    /// An RC QP on this PD with `cq` for both queues: `send_wr` send WQEs
    /// of room for `max_inline` inline bytes, one receive WQE.
    pub fn create_rc_qp<'p>(
        &'p self,
        cq: &'p Cq<'_>,
        send_wr: u32,
        max_inline: u32,
    ) -> io::Result<Qp<'p>> {
        self.create_rc_qp_with(
            (cq, cq),
            QpSize {
                send_wr,
                recv_wr: 1,
                max_inline,
            },
        )
    }

    /// An RC QP on this PD completing sends and receives on `cqs`
    /// (send, receive), of `size`.
    pub fn create_rc_qp_with<'p>(
        &'p self,
        (send_cq, recv_cq): (&'p Cq<'_>, &'p Cq<'_>),
        size: QpSize,
    ) -> io::Result<Qp<'p>> {
        let mut qp = ptr::null_mut();
        let mut sq = ffi::Sq {
            buf: ptr::null_mut(),
            wqe_cnt: 0,
            wqe_shift: 0,
            qpn: 0,
        };
        // SAFETY: PD and CQs live, and outlive the QP ('p).
        check(unsafe {
            ffi::hv_create_rc_qp(
                self.pd.as_ptr(),
                send_cq.cq.as_ptr(),
                recv_cq.cq.as_ptr(),
                size.send_wr,
                size.recv_wr,
                size.max_inline,
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
        if !dst.checked_add(len).is_some_and(|end| end <= mr.len()) {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        self.post_write_to(mr, src, (mr.addr() + dst as u64, mr.rkey), len, inline)
    }

    /// The same to `raddr` of the peer's region `rkey`, which the peer
    /// checks: EINVAL only if the source range leaves `mr`.
    pub fn post_write_to(
        &self,
        mr: &Mr<'_>,
        src: usize,
        (raddr, rkey): (u64, u32),
        len: usize,
        inline: bool,
    ) -> io::Result<()> {
        let len32 = u32::try_from(len).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        if !src.checked_add(len).is_some_and(|end| end <= mr.len()) {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let w = ffi::Write {
            laddr: mr.addr() + src as u64,
            raddr,
            lkey: mr.lkey,
            rkey,
            len: len32,
            inline_data: inline.into(),
        };
        // SAFETY: the QP lives; the source range lies within the
        // registered region's memory, which lives across the call
        // (libmlx4 reads an inline payload from it during the call); the
        // destination is the adapter's to write, in this process only
        // into its own registered regions, which it reads through copies.
        check(unsafe { ffi::hv_post_write(self.qp.as_ptr(), &w) })
    }

    /// A receive WQE tagged `wr_id` for `len` bytes at offset `off` of
    /// `mr` (none: `len` 0, what an RDMA write with immediate consumes).
    /// EINVAL if the range leaves the region.
    pub fn post_recv(&self, wr_id: u64, mr: &Mr<'_>, off: usize, len: usize) -> io::Result<()> {
        let inside = off.checked_add(len).is_some_and(|end| end <= mr.len());
        let len32 = u32::try_from(len).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        if !inside {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        // SAFETY: the QP lives; the range lies within the registered
        // region, which the adapter writes and this process reads only
        // through copies.
        check(unsafe {
            ffi::hv_post_recv(
                self.qp.as_ptr(),
                wr_id,
                mr.addr() + off as u64,
                len32,
                mr.lkey,
            )
        })
    }

    /// Send WQEs that may be outstanding at once: the queue less the spare
    /// WQEs libmlx4 keeps free ahead of the adapter's prefetch
    /// (`(2048 >> wqe_shift) + 1`, its `sq_spare_wqes`).
    pub fn send_window(&self) -> u32 {
        let spare = (2048 >> self.sq.wqe_shift) + 1;
        self.sq.wqe_cnt.saturating_sub(spare).max(1)
    }

    /// The largest WQE the send queue holds and QP_POST takes.
    pub fn max_wqe(&self) -> usize {
        (1usize << self.sq.wqe_shift).min(abi::QP_POST_MAX_WQE)
    }

    /// Stamps `wqe` for send-queue slot `head` as libmlx4 stamps a
    /// BlueFlame WQE (owner bit, counter, `bf_qpn`) and puts it there.
    /// The stamps are ORed in: `wqe` must be a fresh copy of what was built.
    pub fn stage_blueflame(&self, head: u32, wqe: &mut [u8]) {
        wqe::stamp_blueflame(wqe, self.qpn, head, self.sq.wqe_cnt);
        self.put_wqe(head, wqe);
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
