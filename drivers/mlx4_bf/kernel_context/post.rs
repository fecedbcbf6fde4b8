// SPDX-License-Identifier: GPL-2.0

//! The kernel ping's sends, in the phases Documentation/mlx4_bf.rst names:
//! copy in, check regions, make room, stamp, place, commit. Each phase is a
//! function of its own, inlined into [`KernelContext::post_send`], so a post is
//! one frame. Everything that can fail happens before the commit; the
//! commit writes the send queue and BAR2 in one RCU section.

use super::{KernelContext, State};
use crate::{
    adapter::{Placement, Posted, Resources},
    geometry::{QP_BUF_BYTES, SQ_ENTRIES, SQ_STRIDE},
    hw::queues::qp,
    layout, region,
    reject::Reject,
    wqe::{self, Path, WqeInfo},
};
use kernel::prelude::*;

/// One send of the kernel ping's.
pub(crate) struct SendRequest<'a> {
    pub(crate) handle: u32,
    /// `MLX4_BF_POST_F_*`, at most one of them.
    pub(crate) flags: u32,
    /// The WQE the kernel built: its gathers may name the reserved lkey,
    /// DMA addresses of the kernel's own memory.
    pub(crate) wqe: &'a [u8],
}

impl KernelContext {
    /// Posts one send WQE.
    #[inline(always)]
    pub(crate) fn post_send(&self, req: SendRequest<'_>) -> Result {
        let SendRequest { handle, flags, wqe } = req;
        if wqe.is_empty() || wqe.len() > wqe::MAX_WQE_LEN || wqe.len() % 16 != 0 {
            return Err(self.reject(Reject::Length, EINVAL));
        }
        let mut guard = self.state.lock();
        let state = &mut *guard;
        let qp_index = self
            .find_qp(state, handle)
            .map_err(|e| self.reject(Reject::Qp, e))?;
        let len = self.copy_in(state, wqe);
        let info = self.check_gathers(state, len)?;
        self.scan_recv(state, qp_index)?;
        self.make_room(self.firmware(), state, qp_index)?;
        let len = info.size16 as usize * 16;
        self.check_remote(state, qp_index, &info)?;
        let path = wqe::choose_path(&info, flags, self.adapter.caps().bf_buf_size())
            .map_err(|r| self.reject(r, EINVAL))?;
        let head = self.stamp(state, qp_index, len, path)?;
        let place = self.place(state, len, path)?;
        self.commit(state, qp_index, len, place, head)
    }

    /// Copy in: the WQE into the kernel context's WQE buffer; returns its length.
    #[inline(always)]
    fn copy_in(&self, state: &mut State, wqe: &[u8]) -> usize {
        crate::sys::copy::words(&mut state.wqe.0[..wqe.len()], wqe);
        wqe.len()
    }

    /// Check regions, local: the WQE is well formed, and every gather names
    /// one of this kernel context's regions and stays inside it; an RDMA read's
    /// segments, where its data lands, name regions registered with
    /// LOCAL_WRITE. The reserved lkey, which makes an address a DMA address
    /// (the kernel's receive and send buffers), names none of them; the
    /// kernel's own WQEs may use it.
    #[inline(always)]
    fn check_gathers(&self, state: &State, len: usize) -> Result<WqeInfo> {
        let buf = &state.wqe.0[..len];
        let info = wqe::validate(buf, wqe::MAX_WQE_LEN).map_err(|r| self.reject(r, EINVAL))?;
        if info.gather_segs != 0 {
            let lkey = self.firmware().dev_cap.reserved_lkey;
            region::check_gathers(buf, &info, |k| match state.mrs.find(k) {
                Some(m) => Some((m.start, m.len, m.perm)),
                None if k == lkey => Some((0, u64::MAX, region::KERNEL_DMA_PERM)),
                None => None,
            })
            .map_err(|r| self.reject(r, EACCES))?;
        }
        Ok(info)
    }

    /// Check regions, remote: an RDMA write lands in a region of the peer's
    /// context that takes remote writes, all of it; an RDMA read reads one
    /// that allows remote reads. A peer in this kernel context (a QP connected to
    /// itself, say) is checked without the adapter's locks.
    #[inline(always)]
    fn check_remote(&self, state: &State, qp_index: usize, info: &WqeInfo) -> Result {
        if !region::is_rdma(info.opcode) {
            return Ok(());
        }
        let qp = state.qps[qp_index].as_ref().ok_or(ENOENT)?;
        let buf = &state.wqe.0[..info.size16 as usize * 16];
        let checked = if qp.peer_local {
            region::check_rdma(buf, info, |rkey| {
                state.mrs.find(rkey).map(|m| (m.start, m.len, m.perm))
            })
        } else {
            region::check_rdma(buf, info, |rkey| {
                self.adapter.remote_region(qp.remote_qpn, rkey)
            })
        };
        checked.map_err(|r| self.reject(r, EACCES))
    }

    /// Stamp: CQ_UPDATE (the kernel needs every CQE to reuse a slot), and
    /// what only the kernel may set for `path`: the owner bit and WQE
    /// counter, and on the BlueFlame path the QPN. Returns the send-queue
    /// head the WQE takes.
    #[inline(always)]
    fn stamp(&self, state: &mut State, qp_index: usize, len: usize, path: Path) -> Result<u32> {
        let head = state.qps[qp_index].as_ref().ok_or(ENOENT)?.head;
        let qpn = state.qps[qp_index].as_ref().ok_or(ENOENT)?.qpn;
        let buf = &mut state.wqe.0[..len];
        qp::stamp_cq_update(buf)?;
        match path {
            Path::BlueFlame => wqe::stamp_blueflame(buf, qpn, head, SQ_ENTRIES),
            Path::Doorbell => wqe::stamp_doorbell(buf, head, SQ_ENTRIES),
        }
        Ok(head)
    }

    /// Place: where the WQE goes in BAR2 (the adapter's rule, shared with
    /// the RDMA provider's method).
    #[inline(always)]
    fn place(&self, state: &mut State, len: usize, path: Path) -> Result<Placement> {
        let (place, _) =
            self.adapter
                .place((self.uar_index, state.bf_half), path, &mut state.wqe.0, len)?;
        Ok(place)
    }

    /// Commit: the WQE into send-queue slot `head`, then the burst or the
    /// doorbell (the adapter's write, in one RCU read-side section with the
    /// posting gate). Nothing fails once the WQE is in its slot.
    #[inline(always)]
    fn commit(
        &self,
        state: &mut State,
        qp_index: usize,
        len: usize,
        place: Placement,
        head: u32,
    ) -> Result {
        let State {
            qps, bf_half, wqe, ..
        } = state;
        let qp = qps[qp_index].as_mut().ok_or(ENOENT)?;
        if place.blueflame().is_some() {
            *bf_half = layout::next_bf_half(*bf_half, self.adapter.caps().bf_buf_size());
        }
        let posted = self.adapter.write_wqe(&place, qp.qpn, &wqe.0, |hw| {
            write_sq_slot(hw, qp.slot, head, &wqe.0[..len]);
        })?;
        match posted {
            Posted::BlueFlame { bytes, blocks } => self.stats.blueflame(bytes, blocks),
            Posted::Doorbell => self.stats.doorbell(len),
        }
        qp.head = qp.head.wrapping_add(1);
        Ok(())
    }
}

/// Copies a stamped WQE (8-byte aligned: the WQE buffer) into send-queue
/// slot `head` of the QP in buffer `slot`, the control segment's first word
/// last, so the adapter never sees a valid owner bit on a partial WQE
/// (`copy.rs`). The caller holds the QP's `&mut`, borrowed from its
/// context's locked state: nobody else writes there.
#[inline(always)]
fn write_sq_slot(hw: &Resources, slot: usize, head: u32, wqe_bytes: &[u8]) {
    let base = slot * QP_BUF_BYTES + (head & (SQ_ENTRIES - 1)) as usize * SQ_STRIDE;
    let len = wqe_bytes.len();
    if len < 16 || len % 8 != 0 || len > SQ_STRIDE || base + SQ_STRIDE > hw.qp_pool.size() {
        return;
    }
    let src = wqe_bytes.as_ptr();
    if !(src as usize).is_multiple_of(8) {
        return;
    }
    // SAFETY: `base + SQ_STRIDE` lies inside the pool and `16 <= len <=
    // SQ_STRIDE`, a multiple of 8 (checked above); the slot is 1 KiB
    // aligned in the page-aligned pool. It belongs to the caller's QP, and
    // is free (its last WQE completed): the device ignores it until the
    // first word gives it the pass's owner bit. `src` has `len` bytes,
    // 8-byte aligned (checked).
    unsafe {
        let dst = hw.qp_pool.as_mut_ptr().cast::<u8>().add(base);
        crate::sys::copy::qwords(dst.add(8).cast(), src.add(8).cast(), len / 8 - 1);
        let v = src.add(4).cast::<u32>().read_unaligned();
        core::ptr::write_volatile(dst.add(4).cast::<u32>(), v);
        crate::sys::barrier::wmb();
        let v = src.cast::<u32>().read_unaligned();
        core::ptr::write_volatile(dst.cast::<u32>(), v);
    }
}
