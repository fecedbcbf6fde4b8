// SPDX-License-Identifier: GPL-2.0

//! POST_SEND, in the phases Documentation/mlx4_bf.rst names: copy in,
//! check regions, make room, stamp, place, commit. Each phase is a function
//! of its own, inlined into [`Context::post_send`], so a post is still one
//! frame (what `make bench` counts). Everything that can fail happens before
//! the commit; the commit writes the send queue and BAR2 in one RCU section.

use super::{Context, State};
use crate::{
    abi::{self, Reject},
    adapter::{Placement, Posted, Resources},
    geometry::{QP_BUF_BYTES, SEND_BUFS_BYTES, SQ_ENTRIES, SQ_STRIDE},
    hw::memory::user_area::{self, QP_AREA_BYTES},
    hw::queues::qp,
    layout, region,
    wqe::{self, Path, WqeInfo},
};
use kernel::{prelude::*, uaccess::UserSliceReader};

/// Where a post's WQE comes from.
pub(crate) enum WqeSource<'a> {
    /// Copied in from user memory, all of it.
    User(UserSliceReader),
    /// This many bytes staged in the QP's WQE page of the area.
    Staged(usize),
    /// Built by the kernel (the kernel ping): its gathers may name the
    /// reserved lkey, DMA addresses of the kernel's own memory.
    Kernel(&'a [u8]),
}

/// One POST_SEND, its attributes read.
pub(crate) struct SendRequest<'a> {
    pub(crate) handle: u32,
    /// `MLX4_BF_POST_F_*`, at most one of them.
    pub(crate) flags: u32,
    pub(crate) wqe: WqeSource<'a>,
    /// A message for the kernel's send buffer of the WQE's slot.
    pub(crate) payload: Option<UserSliceReader>,
}

impl Context {
    /// Posts one send WQE. `report`, if given, tells the process what was
    /// done; it runs before the device sees the WQE, so a failed report
    /// posted nothing.
    #[inline(always)]
    pub(crate) fn post_send(
        &self,
        req: SendRequest<'_>,
        report: Option<impl FnOnce(&abi::PostResult) -> Result>,
    ) -> Result {
        let SendRequest {
            handle,
            flags,
            wqe,
            payload,
        } = req;
        let kernel = matches!(wqe, WqeSource::Kernel(_));
        self.check_lengths(&wqe, payload.as_ref())?;
        let mut guard = self.state.lock();
        let state = &mut *guard;
        let qp_index = self
            .find_qp(state, handle)
            .map_err(|e| self.reject(Reject::Qp, e))?;
        if self.user_posted() {
            // User space owns the send queues of this context's QPs.
            return Err(self.reject(Reject::Qp, EINVAL));
        }
        let len = self.copy_in(state, qp_index, wqe)?;
        let mut info = self.check_gathers(state, len, kernel)?;
        self.scan_recv(state, qp_index)?;
        self.make_room(self.firmware(), state, qp_index)?;
        let payload_len = match payload {
            Some(p) => {
                let n = p.len();
                info = self.take_payload(state, qp_index, &info, p)?;
                n
            }
            None => 0,
        };
        let len = info.size16 as usize * 16;
        self.check_remote(state, qp_index, &info)?;
        let path = wqe::choose_path(&info, flags, self.adapter.caps().bf_buf_size())
            .map_err(|r| self.reject(r, EINVAL))?;
        let head = self.stamp(state, qp_index, len, path)?;
        let (place, mut result) = self.place(state, len, path, head)?;
        // Copying the result out is the one step that could fail after the
        // device saw the WQE: it goes first, so a failed call posted nothing.
        if let Some(report) = report {
            result.store_blocks = self.adapter.store_blocks(&state.wqe.0, &place);
            report(&result)?;
        }
        self.commit(state, qp_index, len, payload_len, place)
    }

    /// Lengths the WQE and the payload may have, before any lock is taken.
    #[inline(always)]
    fn check_lengths(&self, wqe: &WqeSource<'_>, payload: Option<&UserSliceReader>) -> Result {
        let (len, whole) = match wqe {
            WqeSource::User(r) => (r.len(), false),
            WqeSource::Staged(n) => (*n, true),
            WqeSource::Kernel(b) => (b.len(), true),
        };
        let bad_wqe = len == 0 || len > wqe::MAX_WQE_LEN || (whole && len % 16 != 0);
        let bad_payload = payload.is_some_and(|p| p.is_empty() || p.len() > abi::MAX_PAYLOAD);
        if bad_wqe || bad_payload {
            return Err(self.reject(Reject::Length, EINVAL));
        }
        Ok(())
    }

    /// Copy in: the WQE into the context's WQE buffer; returns its length.
    #[inline(always)]
    fn copy_in(&self, state: &mut State, qp_index: usize, wqe: WqeSource<'_>) -> Result<usize> {
        match wqe {
            WqeSource::User(mut w) => {
                let len = w.len();
                w.read_slice(&mut state.wqe.0[..len])
                    .map_err(|e| self.reject(Reject::Fault, e))?;
                Ok(len)
            }
            WqeSource::Staged(len) => {
                let at = qp_index * QP_AREA_BYTES + user_area::WQE_OFFSET;
                self.user_area(state)?
                    .read_qwords(at, &mut state.wqe.0[..len])?;
                Ok(len)
            }
            WqeSource::Kernel(b) => {
                crate::sys::copy::words(&mut state.wqe.0[..b.len()], b);
                Ok(b.len())
            }
        }
    }

    /// Check regions, local: the WQE is well formed, and every gather names
    /// one of this context's regions and stays inside it; an RDMA read's
    /// segments, where its data lands, name regions registered with
    /// LOCAL_WRITE. The reserved lkey, which makes an address a DMA address
    /// (the kernel's receive and send buffers), names none of them; only
    /// the kernel's own WQEs may use it.
    #[inline(always)]
    fn check_gathers(&self, state: &State, len: usize, kernel: bool) -> Result<WqeInfo> {
        let buf = &state.wqe.0[..len];
        let info = wqe::validate(buf, wqe::MAX_WQE_LEN).map_err(|r| self.reject(r, EINVAL))?;
        if info.gather_segs != 0 {
            let lkey = self.firmware().dev_cap.reserved_lkey;
            region::check_gathers(buf, &info, |k| match state.mrs.find(k) {
                Some(m) => Some((m.start, m.len, m.perm)),
                None if kernel && k == lkey => Some((0, u64::MAX, region::KERNEL_DMA_PERM)),
                None => None,
            })
            .map_err(|r| self.reject(r, EACCES))?;
        }
        Ok(info)
    }

    /// A POST_SEND's PAYLOAD: the message into the kernel's buffer of the
    /// QP's next send-queue slot (free: make room found its last WQE
    /// completed), named by a data segment the kernel appends. Returns the
    /// longer WQE's info.
    #[inline(never)]
    fn take_payload(
        &self,
        state: &mut State,
        qp_index: usize,
        info: &WqeInfo,
        mut msg: UserSliceReader,
    ) -> Result<WqeInfo> {
        let State {
            qps, wqe, payload, ..
        } = state;
        let qp = qps[qp_index].as_ref().ok_or(ENOENT)?;
        let n = msg.len();
        msg.read_slice(&mut payload[..n])
            .map_err(|e| self.reject(Reject::Fault, e))?;
        let at = send_buf_offset(qp.slot, qp.head);
        let dma = self.hw()?.send_pool.dma_handle() + at as u64;
        let lkey = self.firmware().dev_cap.reserved_lkey;
        let len = info.size16 as usize * 16;
        wqe::append_kernel_gather(&mut wqe.0, len, info, (dma, lkey, n as u32))
            .map_err(|r| self.reject(r, EINVAL))
    }

    /// Check regions, remote: an RDMA write lands in a region of the peer's
    /// context that takes remote writes, all of it; an RDMA read reads one
    /// that allows remote reads. A peer in this context (a QP connected to
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
    /// the RDMA provider's method), and the send-queue index it reports.
    #[inline(always)]
    fn place(
        &self,
        state: &mut State,
        len: usize,
        path: Path,
        head: u32,
    ) -> Result<(Placement, abi::PostResult)> {
        let (place, mut result) =
            self.adapter
                .place((self.uar_index, state.bf_half), path, &mut state.wqe.0, len)?;
        result.wqe_index = head & (SQ_ENTRIES - 1);
        Ok((place, result))
    }

    /// Commit: the payload and the WQE into the send queue, then the
    /// burst or the doorbell (the adapter's write, in one RCU read-side
    /// section with the posting gate). Nothing fails once the WQE is in its
    /// slot.
    #[inline(always)]
    fn commit(
        &self,
        state: &mut State,
        qp_index: usize,
        len: usize,
        payload_len: usize,
        place: Placement,
    ) -> Result {
        let State {
            qps,
            bf_half,
            wqe,
            payload,
            ..
        } = state;
        let qp = qps[qp_index].as_mut().ok_or(ENOENT)?;
        if place.blueflame().is_some() {
            *bf_half = layout::next_bf_half(*bf_half, self.adapter.caps().bf_buf_size());
        }
        let posted = self.adapter.write_wqe(&place, qp.qpn, &wqe.0, |hw| {
            if payload_len != 0 {
                write_send_buf(
                    hw,
                    send_buf_offset(qp.slot, qp.head),
                    &payload[..payload_len],
                );
            }
            write_sq_slot(hw, qp.slot, qp.head, &wqe.0[..len]);
        })?;
        match posted {
            Posted::BlueFlame { bytes, blocks } => self.stats.blueflame(bytes, blocks),
            Posted::Doorbell => self.stats.doorbell(len),
        }
        qp.head = qp.head.wrapping_add(1);
        Ok(())
    }
}

/// Offset in `Resources::send_pool` of the kernel send buffer of send-queue
/// slot `head` of the QP in buffer `slot`.
fn send_buf_offset(slot: usize, head: u32) -> usize {
    slot * SEND_BUFS_BYTES + (head & (SQ_ENTRIES - 1)) as usize * abi::MAX_PAYLOAD
}

/// Copies a message into the kernel send buffer at `off`. The caller holds
/// its context's lock and the QP's `&mut`: nobody else writes there.
fn write_send_buf(hw: &Resources, off: usize, msg: &[u8]) {
    if off + abi::MAX_PAYLOAD > hw.send_pool.size() || msg.len() > abi::MAX_PAYLOAD {
        return;
    }
    // SAFETY: Inside the pool (checked above); the buffer belongs to the
    // next send-queue slot of a QP exclusively borrowed by the caller (so
    // its context's lock is held), whose last WQE completed, so the device
    // does not read it until the WQE naming it is posted after this copy.
    unsafe {
        core::ptr::copy_nonoverlapping(
            msg.as_ptr(),
            hw.send_pool.as_mut_ptr().cast::<u8>().add(off),
            msg.len(),
        )
    };
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
